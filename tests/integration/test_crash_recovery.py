"""Kill the stages at their worst moments (in a child process, like ``kill -9``), rerun,
and get exactly the result of a run that never crashed.

Only the crash needs a process of its own: the rerun is the stage run in this process on
the shared session (a fresh stage object, reading nothing but the tables and the state
folder the killed process left, as a new process would), which saves a JVM start each."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.demo.run import plan_rounds
from icetide.demo.workload import deliver, generate
from icetide.faults import KILLED_EXIT_CODE
from icetide.lake.progress import read_watermark
from icetide.lake.tables import current_snapshot_id
from icetide.merge import history
from icetide.merge.history import read_history_watermark
from tests.integration.events import SCHEMAS, SOURCES, mysql
from tests.integration.harness import REPO, Pipeline, assert_matches
from tests.integration.scd2 import history_differences, with_history


def killed(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == KILLED_EXIT_CODE, result.stdout + result.stderr


def test_merge_killed_before_and_after_its_commit_resumes_exactly(pipeline: Pipeline) -> None:
    spark = pipeline.session
    workload = generate(17, 400, tables=["customers", "products"])
    first, second = plan_rounds(workload, 2, 17, late_rate=0.1)
    refs = pipeline.refs("customers")

    deliver(first, pipeline.landing, seed=1, files=2)
    pipeline.stream()
    killed(pipeline.cli("merge", "--once", fault="merge.before_commit"))
    assert read_watermark(spark, refs.base) is None
    pipeline.merge()
    assert read_watermark(spark, refs.base) == current_snapshot_id(spark, refs.cdc)

    deliver(second, pipeline.landing, seed=2, files=2)
    pipeline.stream()
    killed(pipeline.cli("merge", "--once", fault="merge.after_commit"))
    # The table whose merge committed first did so with its watermark, before the kill.
    # The two merge at once (merge.parallel_tables=2), so either may be that table.
    committed = [
        name
        for name in ("customers", "products")
        if read_watermark(spark, pipeline.refs(name).base)
        == current_snapshot_id(spark, pipeline.refs(name).cdc)
    ]
    assert committed
    pipeline.merge()
    assert_matches(pipeline.compare(workload))


def test_merge_killed_between_truncate_and_merge_resumes_exactly(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    shop = Pipeline.custom(tmp_path, warehouse, "crash_truncate", SCHEMAS, SOURCES, spark)
    shop.land([mysql("c", 100, after={"id": 1, "name": "a", "qty": 1})])
    shop.stream()
    shop.merge()
    shop.land(
        [
            mysql("t", 200),
            mysql("c", 300, after={"id": 2, "name": "b", "qty": 2}),
            mysql("u", 310, before={"id": 2}, after={"id": 2, "name": "c", "qty": 3}),
        ]
    )
    shop.stream()
    killed(shop.cli("merge", "--once", fault="merge.after_truncate"))
    assert shop.base("items") == []  # truncated, not merged yet
    shop.merge()
    assert [(r["id"], r["name"]) for r in shop.base("items")] == [(2, "c")]


def test_ledger_killed_between_table_appends_writes_every_event_once(pipeline: Pipeline) -> None:
    workload = generate(29, 300)
    deliver(workload, pipeline.landing, seed=3, files=2, duplicate_rate=0.0, shuffle=False)
    killed(pipeline.cli("stream", "--once", fault="ledger.after_first_append"))
    pipeline.stream()
    spark = pipeline.session
    for table in pipeline.schemas:
        ledger = spark.table(pipeline.refs(table).cdc.sql)
        sent = sum(1 for e in workload.events if e.table == table)
        assert ledger.count() == sent
        assert ledger.select("_message_id").distinct().count() == sent
    pipeline.merge()
    assert_matches(pipeline.compare(workload))


def test_merge_killed_at_a_random_moment_resumes_exactly(pipeline: Pipeline) -> None:
    workload = generate(31, 500)
    deliver(workload, pipeline.landing, seed=4, files=2)
    pipeline.stream()
    child = subprocess.Popen(
        [sys.executable, "-m", "icetide.cli", "merge", "--once", "-c", str(pipeline.config_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert child.stdout is not None
    for line in child.stdout:  # kill once the first table has merged: mid-way
        if line.startswith("merge customers"):
            break
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    rerun = pipeline.merge()
    # The kill landed before the child was done: the rerun had tables left to merge.
    assert any(r.events for r in rerun), rerun
    assert_matches(pipeline.compare(workload))


@pytest.mark.long
def test_history_merge_killed_before_its_publish_and_after_its_commit_resumes_exactly(
    pipeline: Pipeline,
) -> None:
    """``history: scd2``, rounds delivered in order (so a merge takes the history's
    append): a child merge killed with the appended versions on the history's branch,
    not yet published to main; the next child, one round later, catches the history up
    from its own watermark and is killed once the history committed; the rerun here
    leaves both tables equal to the model."""
    spark = pipeline.session
    with_history(pipeline)
    workload = generate(37, 240, tables=["customers"])
    rounds = plan_rounds(workload, 3, 37, late_rate=0.0)
    history_table = pipeline.refs("customers").history

    def deliver_round(number: int) -> None:
        deliver(rounds[number], pipeline.landing, seed=number, files=2, duplicate_rate=0.0)
        pipeline.stream()

    def heads() -> dict[str, int]:
        refs = spark.sql(f"SELECT name, snapshot_id FROM {history_table.sql}.refs").collect()
        return {r["name"]: r["snapshot_id"] for r in refs}

    deliver_round(0)
    pipeline.merge()
    deliver_round(1)
    before = heads()["main"]
    killed(pipeline.cli("merge", "--once", fault=history.BEFORE_COMMIT))
    # Killed in the append: its commits on the branch, main where it was.
    left = heads()
    assert left["main"] == before
    assert any(name != "main" and head != before for name, head in left.items()), left
    deliver_round(2)
    killed(pipeline.cli("merge", "--once", fault=history.AFTER_COMMIT))
    assert read_history_watermark(spark, history_table) == (
        True,
        current_snapshot_id(spark, pipeline.refs("customers").cdc),
    )
    pipeline.merge()
    assert_matches(pipeline.compare(workload))
    assert history_differences(pipeline, workload) == []
