"""Two merges of one table at once, a compaction beside a merge, and a catalog that
goes down mid-merge or while the ledger appends a batch, on the REST catalog with its
tables on the object store.

- The race is real and made certain: a child ``icetide merge --once`` (its own process
  and Spark) plans its batch, is held right there (``ICETIDE_PAUSE`` at
  ``merge.after_plan``), the test process merges a newer batch and commits, then the
  child goes on. Iceberg accepts the child's commit (its MERGE reads after the test's
  commit), so without the merge's own check its older batch, planned as in order and
  merged without the position guard, would put a deleted row back and older images
  over newer ones, and move the watermark back.
- The same race with ``delete_insert`` on both sides: the child is held once its
  batch is on its own branch, before main is fast-forwarded to it
  (``merge.before_commit``); the test process publishes a newer batch through its own
  branch meanwhile, so the child's fast-forward is refused, it writes its older batch
  again from main's new head, publishes, and only the race check makes the base exact.
- A compaction beside a merge: the child ``delete_insert`` merge is held at the same
  point while the test process runs ``icetide maintain``'s steps on the table; the
  rewrite commits on main under the child's branch, and the child's merge starts over
  from the compacted head instead of being lost or publishing over it.
- The outage stops the shared REST server while a merge runs (after its plan) and
  starts it again on the same port with the same catalog file once the merge has
  retried twice (pauses of 1 s and 2 s); longer outages follow the same backoff, which
  tests/unit/spark/test_retry.py checks for a 30 s outage and for the budget's end.
- The ledger's outage stops that server as a batch's append starts and starts it again
  once the append has failed twice; the append that then commits loses its answer (the
  failure Iceberg reports then, raised where the answer would have arrived), and its
  retry must find the batch in the table and not append it again. A second outage
  outlasts a short budget: the batch ends with the outage as one line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from icetide import faults
from icetide.devservers.objectstore import ObjectStoreServer
from icetide.devservers.rest_catalog import RestCatalogServer
from icetide.errors import CatalogUnavailableError
from icetide.faults import crash_point
from icetide.lake.branches import MAIN
from icetide.lake.progress import read_watermark
from icetide.lake.tables import (
    Snapshot,
    current_snapshot_id,
    iceberg_table,
    lineage_snapshots,
    metadata_snapshots,
)
from icetide.ledger import stage as ledger_stage
from icetide.ledger.stage import LedgerStage
from icetide.maintenance.run import maintain_table
from icetide.merge import stage as merge_stage
from icetide.merge.race import ATTEMPT_PROPERTY
from icetide.merge.stage import MergeStage
from icetide.merge.strategy import PROCESS_BRANCH
from icetide.schema.contract.base import POSITION, STRATEGY_PROPERTY, WATERMARK_PROPERTY
from icetide.schema.contract.ledger import BATCH_PROPERTY
from icetide.schema.contract.ledger import POSITION as LEDGER_POSITION
from icetide.schema.file import schema_from_dict
from icetide.spark.jars import ICEBERG_AWS_BUNDLE, Coordinate, default_jars_dir, fetched
from icetide.spark.retry import DEFAULT_POLICY, RetryPolicy
from tests.integration.harness import REPO, Pipeline
from tests.integration.lakehouse.test_catalogs import ITEMS, Lake, event, lake_pipeline

CHILD_TIMEOUT = 300.0
Event = tuple[str, int, str | None, int]
"""An event of ``inv.items``: op, key, name, binlog position (:func:`event`)."""


def lake_on(
    spark: SparkSession,
    object_store: ObjectStoreServer,
    rest_catalog: RestCatalogServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Lake:
    """``rest_catalog`` as docs/deploy.md configures a REST catalog (its ``${VAR}`` set)."""
    endpoint = object_store.endpoint
    for key, value in {
        "ICETIDE_S3_ENDPOINT": endpoint.url,
        "ICETIDE_S3_ACCESS_KEY": endpoint.access_key,
        "ICETIDE_S3_SECRET_KEY": endpoint.secret_key,
        "ICETIDE_CATALOG_URI": rest_catalog.url,
    }.items():
        monkeypatch.setenv(key, value)
    return Lake("rest", spark, rest_catalog.pyiceberg_properties(), object_store)


@pytest.fixture
def rest_lake(
    s3_spark: SparkSession,
    object_store: ObjectStoreServer,
    rest_catalog: RestCatalogServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Lake:
    """The run's REST catalog."""
    return lake_on(s3_spark, object_store, rest_catalog, monkeypatch)


@pytest.fixture
def own_catalog(object_store: ObjectStoreServer) -> Iterator[RestCatalogServer]:
    """A REST catalog server of the test's own, on the run's object store: the outage
    test stops and restarts it. (Not the run's shared one: Iceberg 1.10's server, once
    restarted over its existing SQLite store, answers concurrent commits with
    ``SQLITE_BUSY``, which would fail every later test that commits from two threads.)"""
    with RestCatalogServer(object_store.endpoint) as started:
        yield started


@pytest.fixture
def own_lake(
    s3_spark: SparkSession,
    object_store: ObjectStoreServer,
    own_catalog: RestCatalogServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Lake:
    """The test's own REST catalog (:func:`own_catalog`), as :func:`rest_lake`."""
    return lake_on(s3_spark, object_store, own_catalog, monkeypatch)


def items(p: Pipeline) -> list[tuple[Any, ...]]:
    refs = p.refs("items")
    return [(r["id"], r["name"], r["qty"]) for r in p.rows(refs.base, order="id")]


def expected(events: Sequence[Event]) -> list[tuple[Any, ...]]:
    """The mirror after ``events`` (op, key, name, position), applied in position order."""
    rows: dict[int, tuple[Any, ...]] = {}
    for op, key, name, _ in sorted(events, key=lambda e: e[3]):
        if op == "d":
            rows.pop(key, None)
        else:
            rows[key] = (key, name, key * 10)
    return [rows[k] for k in sorted(rows)]


def land(p: Pipeline, events: Sequence[Event]) -> int:
    """Land ``events``, run the ledger over them; the ledger's new snapshot id."""
    p.land([event(*e) for e in events])
    p.stream()
    ledger = current_snapshot_id(p.session, p.refs("items").cdc)
    assert ledger is not None
    return ledger


def main_heads(p: Pipeline) -> list[Snapshot]:
    """The base snapshots main has pointed at (its snapshot log), oldest first: what a
    reader or the next merge could find there. A ``delete_insert`` branch's first commit
    is on main's lineage too, but main never pointed at it (the fast-forward passes it)."""
    loaded = iceberg_table(p.session, p.refs("items").base)
    _, listed = metadata_snapshots(p.session, loaded)
    by_id = {s.snapshot_id: s for s in listed}
    return [by_id[int(entry.snapshotId())] for entry in loaded.history()]


def assert_no_watermark_ahead_of_its_data(p: Pipeline) -> None:
    """Every snapshot main pointed at that records a watermark holds, for every key the
    ledger had by then, the row of that key's last event by then or of a later one (or
    no row, when that event or a later one is a delete)."""
    spark, refs = p.session, p.refs("items")
    ledger_rows = [
        (r["id"], r["_op"], Decimal(r[LEDGER_POSITION]))
        for r in spark.table(refs.cdc.sql).select("id", "_op", LEDGER_POSITION).collect()
    ]
    checked = 0
    for snapshot in main_heads(p):
        mark = snapshot.summary.get(WATERMARK_PROPERTY)
        if mark is None:
            continue
        by_then = spark.read.format("iceberg").option("snapshot-id", mark).load(refs.cdc.dotted)
        last: dict[int, Decimal] = {}
        for r in by_then.select("id", LEDGER_POSITION).collect():
            last[r["id"]] = max(last.get(r["id"], Decimal(-1)), Decimal(r[LEDGER_POSITION]))
        base = (
            spark.read.format("iceberg")
            .option("snapshot-id", snapshot.snapshot_id)
            .load(refs.base.dotted)
        )
        held = {r["id"]: Decimal(r[POSITION]) for r in base.select("id", POSITION).collect()}
        for key, position in last.items():
            if key in held:
                assert held[key] >= position, (snapshot, key, held[key], position)
            else:
                deletes = [pos for k, op, pos in ledger_rows if k == key and op == "d"]
                assert any(pos >= position for pos in deletes), (snapshot, key, position)
        checked += 1
    assert checked >= 3


def assert_nothing_left_on_a_branch(p: Pipeline) -> None:
    """The base's only branch besides main is this process's (it keeps its branch for
    its next merge), on main's lineage: no commit was left unpublished, and the child
    ``icetide merge --once`` removed its own branch before it ended."""
    base = p.refs("items").base
    loaded = iceberg_table(p.session, base)
    on_main = {s.snapshot_id for s in lineage_snapshots(p.session, base, loaded)}
    refs = loaded.refs()
    others = sorted(str(name) for name in refs.keySet() if name != MAIN)
    assert others in ([], [PROCESS_BRANCH]), others
    for name in others:
        assert int(refs.get(name).snapshotId()) in on_main, name


def aws_bundle() -> list[str]:
    jars = fetched(default_jars_dir(), Coordinate.parse(ICEBERG_AWS_BUNDLE))
    assert jars, f"{ICEBERG_AWS_BUNDLE} is not fetched: run `icetide jars fetch --dev`"
    return [str(jar) for jar in jars]


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Path]:
    """The folder of an ``ICETIDE_PAUSE`` hold (icetide/faults.py); released on the way out."""
    folder = tmp_path / "hold"
    folder.mkdir()
    yield folder
    (folder / "paused").unlink(missing_ok=True)


def wait_for(path: Path, child: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + CHILD_TIMEOUT
    while not path.exists():
        if child.poll() is not None:
            output = child.stdout.read() if child.stdout else ""
            pytest.fail(f"icetide merge exited ({child.returncode}) before its hold:\n{output}")
        assert time.monotonic() < deadline, "icetide merge never reached its hold"
        time.sleep(0.1)


@contextmanager
def merge_held_at(p: Pipeline, held: Path, point: str) -> Iterator[subprocess.Popen[str]]:
    """A child ``icetide merge --once`` of ``p``'s config, held at ``point`` (its first
    pass there) when this yields; killed on the way out if it is still running."""
    (held / "armed").touch()
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("ICETIDE_FAULT", "ICETIDE_PAUSE")},
        "ICETIDE_PAUSE": f"{point}:{held}",
        "PYTHONPATH": str(REPO),
    }
    command = [sys.executable, "-m", "icetide.cli", "merge", "--once", "-c", str(p.config_path)]
    child = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        wait_for(held / "paused", child)
        yield child
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def released(held: Path, child: subprocess.Popen[str]) -> str:
    """Let the held child go on; its output once it has exited."""
    (held / "paused").unlink()
    output, _ = child.communicate(timeout=CHILD_TIMEOUT)
    return output


def child_spark() -> dict[str, Any]:
    """The ``spark`` section of a config a child process runs: small, with the jars the
    object store needs (its JVM takes the tests' flags, conftest.JVM_OPTIONS)."""
    return {"master": "local[2]", "shuffle_partitions": 4, "extra_jars": aws_bundle()}


@pytest.mark.parametrize(
    ("strategy", "point"),
    [(None, "merge.after_plan"), ("delete_insert", "merge.before_commit")],
    ids=["merge", "delete_insert"],
)
def test_a_merge_racing_another_merge_of_the_table_leaves_the_base_exact(
    tmp_path: Path, rest_lake: Lake, held: Path, strategy: str | None, point: str
) -> None:
    settings = {"merge": {"strategy": strategy}} if strategy else None
    p = lake_pipeline(
        tmp_path, rest_lake, schema_from_dict(ITEMS), "inv.items", settings, spark=child_spark()
    )
    first = [("c", k, f"n{k}", k) for k in range(1, 9)]
    land(p, first)
    p.merge()
    # Batch A: every event newer than the base, so a merge plans it in order (no guard).
    batch_a = [("u", 1, "a1", 20), ("c", 9, "a9", 21), ("u", 2, "a2", 22), ("d", 3, None, 23)]
    land(p, batch_a)

    # Held after planning batch A from the first watermark; with delete_insert, once
    # batch A is on the child's branch, before main is fast-forwarded to it.
    with merge_held_at(p, held, point) as child:
        # Batch B, merged and committed by this process while the child holds:
        # 9 deleted, 1 and 2 changed again, 10 new.
        batch_b = [("d", 9, None, 30), ("u", 1, "b1", 31), ("u", 2, "b2", 32), ("c", 10, "b10", 33)]
        newest = land(p, batch_b)
        [ours] = p.merge()
        assert ours.strategy == (strategy or "shuffle"), ours.render()
        assert read_watermark(p.session, p.refs("items").base) == newest
        output = released(held, child)
    assert child.returncode == 0, output
    assert items(p) == expected(first + batch_a + batch_b), output
    assert read_watermark(p.session, p.refs("items").base) == newest
    assert_no_watermark_ahead_of_its_data(p)
    assert_nothing_left_on_a_branch(p)
    assert "another merge of the same table committed while this one ran" in output, output
    assert "merging it again from a fresh read" in output, output
    if strategy == "delete_insert":  # its fast-forward was refused first
        assert "writing the batch again from main's new head (attempt 2 of 3)" in output, output
    assert "Traceback" not in output, output


def test_a_compaction_while_a_merge_writes_its_branch_leaves_the_base_exact(
    tmp_path: Path, rest_lake: Lake, held: Path
) -> None:
    settings = {"merge": {"strategy": "delete_insert"}}
    p = lake_pipeline(
        tmp_path, rest_lake, schema_from_dict(ITEMS), "inv.items", settings, spark=child_spark()
    )
    base = p.refs("items").base
    first = [("c", k, f"n{k}", k) for k in range(1, 9)]
    land(p, first)
    p.merge()  # the base had no snapshot to branch from: auto's strategy
    # Keys deleted and appended: position deletes and a second file in the buckets, so
    # the compaction below rewrites the files the child's branch deletes from.
    batch_a = [("u", 1, "a1", 20), ("u", 2, "a2", 21), ("d", 3, None, 22), ("c", 9, "a9", 23)]
    land(p, batch_a)
    [merged] = p.merge()
    assert merged.strategy == "delete_insert", merged.render()
    batch_c: list[Event] = [
        ("u", 1, "c1", 30),
        ("d", 2, None, 31),
        ("u", 4, "c4", 32),
        ("c", 10, "c10", 33),
    ]
    newest = land(p, batch_c)

    with merge_held_at(p, held, "merge.before_commit") as child:
        maintained = maintain_table(p.session, p.pipeline, "items")
        compacted = current_snapshot_id(p.session, base)
        assert compacted is not None
        output = released(held, child)
    part = maintained.part("base")
    assert maintained.outcome == "ok" and part is not None, maintained.render()
    assert part.rewritten_data_files > 0 and part.conflicts_retried == 0, maintained.render()
    assert child.returncode == 0, output
    assert "Traceback" not in output, output
    assert "merge: removed this process's branch from 1 table(s)" in output, output
    restarted = "merge items: cannot publish branch icetide_merge_"
    assert restarted in output and "main moved meanwhile" in output, output
    assert "writing the batch again from main's new head (attempt 2 of 3)" in output, output
    assert "another merge of the same table" not in output, output  # a rewrite is no merge
    assert items(p) == expected(first + batch_a + batch_c), output
    assert read_watermark(p.session, base) == newest
    # The child's merge is on main, written again on top of the compaction; its first
    # write, on the head from before the compaction, was never published.
    loaded = iceberg_table(p.session, base)
    lineage = list(lineage_snapshots(p.session, base, loaded))
    on_main = [s.snapshot_id for s in lineage]
    head = lineage[0]
    assert head.summary[STRATEGY_PROPERTY].startswith("delete_insert: "), head
    attempt = head.summary[ATTEMPT_PROPERTY]
    _, listed = metadata_snapshots(p.session, loaded)
    mine = [s for s in listed if s.summary.get(ATTEMPT_PROPERTY) == attempt]
    published = [s.snapshot_id for s in mine if s.snapshot_id in on_main]
    assert published and len(mine) > len(published), (mine, on_main)
    assert on_main.index(compacted) > max(on_main.index(s) for s in published)
    assert_no_watermark_ahead_of_its_data(p)
    assert_nothing_left_on_a_branch(p)


def test_a_catalog_outage_mid_merge_is_retried_and_the_merge_completes_exactly(
    tmp_path: Path,
    own_lake: Lake,
    own_catalog: RestCatalogServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rest_catalog = own_catalog
    p = lake_pipeline(tmp_path, own_lake, schema_from_dict(ITEMS), "inv.items")
    first = [("c", k, f"n{k}", k) for k in range(1, 7)]
    land(p, first)
    p.merge()
    batch = [("u", 1, "x1", 10), ("d", 2, None, 11), ("c", 7, "n7", 12), ("u", 7, "y7", 13)]
    newest = land(p, batch)

    port = rest_catalog.port
    lines: list[str] = []
    stopped: list[float] = []

    def outage(point: str) -> None:
        if point == "merge.after_plan" and not stopped:  # the first attempt's plan only
            stopped.append(time.monotonic())
            rest_catalog.halt()
        crash_point(point)

    def log(line: str) -> None:
        lines.append(line)
        if "retry 2 in" in line:  # after two failed attempts, the catalog comes back
            rest_catalog.start()

    monkeypatch.setattr(merge_stage, "crash_point", outage)
    try:
        [result] = MergeStage(p.session, p.reporting(log)).run_once()
    finally:
        if not rest_catalog.running:
            rest_catalog.start()
    assert rest_catalog.port == port and stopped
    retries = [line for line in lines if "not reachable" in line]
    assert len(retries) == 2, lines
    assert retries[0].endswith("retry 1 in 1s") and retries[1].endswith("retry 2 in 2s")
    assert "merge of items: the Iceberg catalog or its storage is not reachable" in retries[0]
    assert result.events == len(batch), result.render()
    assert items(p) == expected(first + batch)
    assert read_watermark(p.session, p.refs("items").base) == newest


def ledger_through_an_outage(
    p: Pipeline,
    catalog: RestCatalogServer,
    monkeypatch: pytest.MonkeyPatch,
    *,
    answer_lost: bool = False,
    back_after: int | None = 2,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> tuple[LedgerStage, list[str]]:
    """Run the ledger over what is landed, stopping ``catalog`` as the first append
    starts and starting it again once the append has failed ``back_after`` times (None:
    not); ``answer_lost``: the first commit after that lands and fails as a commit whose
    answer never came does. The stage (its :attr:`~LedgerStage.failure` set when a batch
    failed) and its lines."""
    lines: list[str] = []
    stopped: list[str] = []
    real = faults.crash_point

    def outage(name: str) -> None:
        if name == "ledger.before_append" and not stopped:
            stopped.append(name)
            catalog.halt()
        if name == "ledger.after_first_append" and answer_lost and len(stopped) == 1:
            stopped.append(name)
            raise CatalogUnavailableError(
                "the Iceberg catalog or its storage is not reachable: "
                "CommitStateUnknownException: the answer to the commit was lost"
            )
        real(name)

    def log(line: str) -> None:
        lines.append(line)
        if f"retry {back_after} in" in line:  # the catalog comes back
            catalog.start()

    monkeypatch.setattr(ledger_stage, "crash_point", outage)
    stage = LedgerStage(p.session, p.reporting(log), policy=policy)
    try:
        stage.start(once=True).awaitTermination()
    except StreamingQueryException:
        if stage.failure is None:
            raise
    finally:
        monkeypatch.setattr(ledger_stage, "crash_point", real)
        if not catalog.running and back_after is not None:
            catalog.start()
    assert len(stopped) == 1 + answer_lost, lines
    return stage, lines


def test_a_catalog_outage_mid_ledger_batch_is_retried_and_every_event_stored_once(
    tmp_path: Path,
    own_lake: Lake,
    own_catalog: RestCatalogServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p = lake_pipeline(tmp_path, own_lake, schema_from_dict(ITEMS), "inv.items")
    events = [("c", k, f"n{k}", k) for k in range(1, 7)] + [("u", 1, "x1", 10), ("d", 2, None, 11)]

    # The catalog stops before the append's commit (nothing lands) and is back after two
    # failed attempts; the third commits, and its answer is lost: the fourth finds the
    # batch in the table and does not append it again.
    p.land([event(*e) for e in events])
    stage, lines = ledger_through_an_outage(p, own_catalog, monkeypatch, answer_lost=True)
    retries = [line for line in lines if "not reachable" in line]
    assert stage.failure is None and len(retries) == 3, lines
    assert retries[0].startswith(
        "ledger batch 0: append to items_cdc: the Iceberg catalog or its storage is not reachable: "
    )
    assert [line.rsplit("; ", 1)[1] for line in retries] == [
        "retry 1 in 1s",
        "retry 2 in 2s",
        "retry 3 in 4s",
    ]
    spark, ledger = p.session, p.refs("items").cdc
    stored = sorted((r["id"], r["_op"]) for r in spark.table(ledger.sql).collect())
    assert stored == sorted((key, op) for op, key, _, _ in events)
    assert any("ledger batch 0:" in line and "already has it, skipped" in line for line in lines)
    appends = [s.summary.get(BATCH_PROPERTY) for s in lineage_snapshots(spark, ledger)]
    assert [b for b in appends if b is not None] == ["0"]

    # An outage past the budget ends the batch with one line, kept for the command.
    p.land([event("c", 8, "n8", 20)])
    short = RetryPolicy(outage_first=0.5, outage_budget=1)
    stage, lines = ledger_through_an_outage(
        p, own_catalog, monkeypatch, back_after=None, policy=short
    )
    assert isinstance(stage.failure, CatalogUnavailableError), lines
    assert stage.failure.message.startswith(
        "ledger batch 1: append to items_cdc: the Iceberg catalog or its storage is not reachable: "
    )
    assert "\n" not in stage.failure.message and "\tat " not in stage.failure.message
    assert [line for line in lines if "not reachable" in line][-1].endswith("retry 1 in 0.5s")
