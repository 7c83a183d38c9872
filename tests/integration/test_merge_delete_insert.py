"""``delete_insert``: an in-order batch deleted and appended on a branch of the base, main
fast-forwarded to it, so readers never see the keys deleted without their new rows.

(That it gives the same base as every other strategy, round by round with late events
in between, is test_merge_strategies.py's.)"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

from icetide.demo.run import plan_rounds
from icetide.demo.workload import Workload, deliver, generate
from icetide.lake.branches import start_branch
from icetide.lake.commit import append_with_properties
from icetide.lake.tables import iceberg_table
from icetide.merge import stage as merge_stage
from icetide.merge import strategy as strategies
from icetide.merge.stage import MergeResult, MergeStage
from icetide.merge.strategy import MERGE_BRANCH, PROCESS_BRANCH
from icetide.pipeline import Pipeline as StagePipeline
from icetide.schema.contract.base import (
    DELETE_ISOLATION,
    POSITION,
    STRATEGY_PROPERTY,
    WATERMARK_PROPERTY,
)
from icetide.schema.contract.ledger import POSITION_SQL
from icetide.spark.jvm import jvm_class
from tests.integration.harness import Pipeline, assert_matches, with_merge_strategy

TABLE = "customers"


def _two_rounds(
    pipeline: Pipeline, spark: SparkSession, between: Callable[[], None] = lambda: None
) -> tuple[Workload, MergeResult, int]:
    """Merge an in-order workload in two rounds with ``delete_insert`` configured
    (``between`` runs once the second round is in the ledger): the second merge's
    result and main's head before it."""
    workload = generate(8, 400, tables=[TABLE])
    first, second = plan_rounds(workload, 2, 8, late_rate=0.0)
    stage = MergeStage(
        spark,
        StagePipeline(with_merge_strategy(pipeline.config, "delete_insert"), pipeline.schemas),
    )
    deliver(first, pipeline.landing, seed=1, files=2, duplicate_rate=0.0)
    pipeline.stream()
    [opening] = [r for r in stage.run_once() if r.table == TABLE]
    # The base had no snapshot: nothing to branch from, so auto chose.
    assert opening.strategy == "shuffle", opening.render()
    assert "the base has no snapshot yet" in opening.reason
    head = iceberg_table(spark, pipeline.refs(TABLE).base).currentSnapshot().snapshotId()
    deliver(second, pipeline.landing, seed=2, files=2, duplicate_rate=0.0)
    pipeline.stream()
    between()
    [result] = [r for r in stage.run_once() if r.table == TABLE]
    return workload, result, int(head)


def test_main_moves_once_from_the_old_head_to_the_branchs_two_commits(
    pipeline: Pipeline, spark: SparkSession
) -> None:
    workload, result, before = _two_rounds(pipeline, spark)
    assert result.strategy == "delete_insert", result.render()
    assert result.in_order
    base = pipeline.refs(TABLE).base
    table = iceberg_table(spark, base)
    assert table.properties().get(DELETE_ISOLATION) == "snapshot"  # so both run at once
    # The two commits race, and the one that loses retries on the base's policy, read by
    # Iceberg's own names (a misspelt property would be ignored): a first wait of 5 ms,
    # and more waiting in all than Iceberg's defaults allow.
    names, props = jvm_class("org.apache.iceberg.TableProperties"), table.properties()
    first_wait = int(props.get(names.COMMIT_MIN_RETRY_WAIT_MS))
    retries = int(props.get(names.COMMIT_NUM_RETRIES))
    assert first_wait == 5 < names.COMMIT_MIN_RETRY_WAIT_MS_DEFAULT
    patience = first_wait * (2**retries - 1)
    assert patience > names.COMMIT_MIN_RETRY_WAIT_MS_DEFAULT * (
        2**names.COMMIT_NUM_RETRIES_DEFAULT - 1
    )
    head = table.currentSnapshot()
    parent = table.snapshot(head.parentId())
    # The branch wrote two snapshots, in whichever order the statements committed: the
    # DELETE of the batch's keys and the append; both carry the watermark, so main's new
    # head does ...
    assert int(parent.parentId()) == before
    [delete] = [s for s in (head, parent) if s.operation() == "delete"]
    [append] = [s for s in (head, parent) if s.operation() == "append"]
    assert int(delete.summary().get("added-delete-files") or 0) > 0
    assert int(delete.summary().get("added-data-files") or 0) == 0
    for snapshot in (delete, append):
        assert snapshot.summary().get(WATERMARK_PROPERTY) is not None
        assert "delete_insert" in snapshot.summary().get(STRATEGY_PROPERTY)
    # ... and main went from the old head straight to the branch's: the first of the two
    # was never main's head (main's history is the list of its heads).
    heads = [r.snapshot_id for r in spark.sql(f"SELECT * FROM {base.child('history')}").collect()]
    assert heads[-2:] == [before, int(head.snapshotId())], heads
    assert int(parent.snapshotId()) not in heads
    assert int(table.refs().get(PROCESS_BRANCH).snapshotId()) == int(head.snapshotId())
    # At most one file per bucket from each statement: the deletes, then the rows.
    for snapshot in (delete, append):
        per_bucket = spark.sql(
            f"SELECT data_file.partition AS p, count(*) AS n FROM {base.child('entries')} "
            f"WHERE snapshot_id = {int(snapshot.snapshotId())} AND status = 1 "
            "GROUP BY data_file.partition"
        ).collect()
        assert per_bucket and max(r.n for r in per_bucket) == 1, per_bucket
    # Delete files in Snappy, data files in Iceberg's default zstd (base_ddl).
    codecs = {
        (r.content, codec)
        for r in spark.sql(
            f"SELECT data_file.content AS content, data_file.file_path AS path "
            f"FROM {base.child('entries')} WHERE status = 1 "
            f"AND snapshot_id IN ({int(delete.snapshotId())}, {int(append.snapshotId())})"
        ).collect()
        for codec in parquet_codecs(r.path)
    }
    assert codecs == {(0, "ZSTD"), (1, "SNAPPY")}, codecs
    assert_matches(pipeline.compare(workload))


@pytest.mark.parametrize("isolation", ["snapshot", "serializable"])
def test_the_statements_run_at_once_only_where_deletes_check_what_they_read(
    pipeline: Pipeline, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, isolation: str
) -> None:
    """At once on a base whose DELETEs use snapshot isolation (every base icetide
    creates); one after the other on a base that refuses a DELETE when rows its
    condition could match were added meanwhile (a base created before 96d9a0a)."""
    base = pipeline.refs(TABLE).base
    at_once: list[int] = []
    real = strategies.once_started

    def counted(*args: Any) -> None:
        at_once.append(1)
        real(*args)

    def set_isolation() -> None:
        spark.sql(f"ALTER TABLE {base} SET TBLPROPERTIES ('{DELETE_ISOLATION}'='{isolation}')")

    monkeypatch.setattr(strategies, "once_started", counted)
    workload, result, before = _two_rounds(pipeline, spark, set_isolation)
    assert result.strategy == "delete_insert", result.render()
    assert len(at_once) == (1 if isolation == "snapshot" else 0)
    table = iceberg_table(spark, base)
    head = table.currentSnapshot()
    if isolation == "serializable":
        assert head.operation() == "append"
        assert table.snapshot(head.parentId()).operation() == "delete"
    assert_matches(pipeline.compare(workload))


def test_a_delete_that_commits_after_the_append_leaves_its_rows(
    pipeline: Pipeline, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The order in which the statements at once can go wrong: the append commits while
    the DELETE is still running. Forced here: the DELETE's keys are held in its first job
    until the append has committed. The DELETE then commits last, without refusal
    (snapshot isolation), and deletes none of the rows appended meanwhile (its scan was
    fixed when it was planned)."""
    committed = tmp_path / "append-committed"
    marker = str(committed)

    @F.udf(BooleanType())
    def after_the_append(_: object) -> bool:
        waited = 0.0
        while not os.path.exists(marker) and waited < 60:
            time.sleep(0.01)  # in a Spark worker: nothing else to wait on there
            waited += 0.01
        return True

    real_keys, real_append = merge_stage.changed_keys, strategies.append_with_properties

    def held_keys(events: DataFrame, schema: Any, key_changes: bool = True) -> DataFrame:
        keys = real_keys(events, schema, key_changes)
        return keys.where(after_the_append(F.col(keys.columns[0])))

    def append(*args: Any, **kwargs: Any) -> None:
        real_append(*args, **kwargs)
        committed.touch()

    monkeypatch.setattr(merge_stage, "changed_keys", held_keys)
    monkeypatch.setattr(strategies, "append_with_properties", append)
    workload, result, before = _two_rounds(pipeline, spark)
    assert result.strategy == "delete_insert", result.render()
    table = iceberg_table(spark, pipeline.refs(TABLE).base)
    head = table.currentSnapshot()
    assert head.operation() == "delete"  # it did commit after the append
    assert head.summary().get(WATERMARK_PROPERTY) is not None
    assert table.snapshot(head.parentId()).operation() == "append"
    assert_matches(pipeline.compare(workload))


def test_the_second_statement_starts_once_the_first_runs(spark: SparkSession) -> None:
    """``once_started`` holds the append until the DELETE's first job has started (it is
    planned then: what it scans is fixed), builds what the append needs while the DELETE
    is planned, and never runs the append after a DELETE that failed."""
    sc = spark.sparkContext
    second_began = threading.Event()
    seen: list[tuple[str, int]] = []

    def first() -> None:
        sc.setJobGroup("first-statement", "the statement that must be planned first")
        # Had the second not waited, it would begin while this one is still planning.
        second_began.wait(timeout=1)
        spark.range(200_000).selectExpr("sum(id)").collect()

    def meanwhile() -> str:
        seen.append(("meanwhile", len(sc.statusTracker().getJobIdsForGroup("first-statement"))))
        return "the rows"

    def second(rows: str) -> None:
        second_began.set()
        seen.append((rows, len(sc.statusTracker().getJobIdsForGroup("first-statement"))))

    strategies.once_started(spark, first, second, meanwhile)
    assert seen == [("meanwhile", 0), ("the rows", 1)], seen

    ran: list[int] = []

    def failing() -> None:
        raise RuntimeError("the DELETE could not be planned")

    with pytest.raises(RuntimeError, match="could not be planned"):
        strategies.once_started(spark, failing, ran.append, lambda: 1)
    assert ran == []

    finished: list[int] = []

    def unbuildable() -> int:
        raise ValueError("the rows could not be built")

    with pytest.raises(ValueError, match="could not be built"):
        strategies.once_started(spark, lambda: finished.append(1), ran.append, unbuildable)
    assert finished == [1] and ran == []  # the first had run to its end, the second never ran


def parquet_codecs(path: str) -> set[str]:
    """The compression codecs of a Parquet file's column chunks."""
    meta = pq.ParquetFile(path.removeprefix("file:")).metadata
    return {
        meta.row_group(g).column(i).compression
        for g in range(meta.num_row_groups)
        for i in range(meta.num_columns)
    }


def test_a_branch_left_by_a_crash_is_started_over(pipeline: Pipeline, spark: SparkSession) -> None:
    """What a crash before the publish leaves (the branch ahead of main, here with every
    row deleted) is not built on: the next merge starts the branch at main's head. The
    one shared branch of earlier versions is removed."""
    base = pipeline.refs(TABLE).base

    def crashed_attempt() -> None:
        table = iceberg_table(spark, base)
        for branch in (PROCESS_BRANCH, MERGE_BRANCH):
            start_branch(table, branch, int(table.currentSnapshot().snapshotId()))
            spark.sql(f"DELETE FROM {base.branch(branch)} WHERE true")

    workload, result, _ = _two_rounds(pipeline, spark, crashed_attempt)
    assert result.strategy == "delete_insert", result.render()
    assert_matches(pipeline.compare(workload))
    refs = {str(name) for name in iceberg_table(spark, base).refs().keySet()}
    assert refs == {"main", PROCESS_BRANCH}


def test_a_commit_to_main_meanwhile_starts_the_branch_over(
    pipeline: Pipeline, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer commits to main between the branch's writes and the publish: the
    fast-forward is refused, main keeps the other commit, and the batch is written again
    from main's new head."""
    base = pipeline.refs(TABLE).base
    calls: list[int] = []
    real_publish = strategies.publish

    def publish(table: Any, branch: str) -> None:
        calls.append(1)
        if len(calls) == 1:
            append_with_properties(spark.table(base.sql).limit(0), base, {"other": "writer"})
        real_publish(table, branch)

    monkeypatch.setattr(strategies, "publish", publish)
    workload, result, before = _two_rounds(pipeline, spark)
    assert result.strategy == "delete_insert", result.render()
    assert len(calls) == 2
    table = iceberg_table(spark, base)
    other = table.snapshot(table.snapshot(table.currentSnapshot().parentId()).parentId())
    assert other.summary().get("other") == "writer"
    assert int(other.parentId()) == before
    assert_matches(pipeline.compare(workload))


def test_a_batch_in_few_buckets_scans_only_their_files(
    pipeline: Pipeline, spark: SparkSession
) -> None:
    """The DELETE reads only the buckets the ledger's figures say the batch touches (a
    static filter; Spark's run-time pruning stays off while it runs, and is back after)."""
    workload = generate(8, 400, tables=[TABLE])
    first = replace(workload, events=workload.events[:-1])
    last = replace(workload, events=workload.events[-1:])  # one key: one bucket
    stage = MergeStage(
        spark,
        StagePipeline(with_merge_strategy(pipeline.config, "delete_insert"), pipeline.schemas),
    )
    deliver(first, pipeline.landing, seed=1, files=2, duplicate_rate=0.0)
    pipeline.stream()
    stage.merge_table(TABLE)
    base = pipeline.refs(TABLE).base
    filled = spark.sql(f"SELECT count(DISTINCT partition) FROM {base.child('files')}").first()
    assert filled is not None and filled[0] > 1
    deliver(last, pipeline.landing, seed=2, files=1, duplicate_rate=0.0)
    pipeline.stream()
    [dpp] = strategies.NO_RUNTIME_PRUNING  # the setting the DELETE changes
    before = spark.conf.get(dpp, None)
    sc = spark.sparkContext
    sc.setJobGroup("few-buckets", "the merge of one key")
    try:
        result = stage.merge_table(TABLE)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert result.strategy == "delete_insert", result.render()
    assert (result.touched_buckets, result.buckets) == (1, filled[0]), result.render()
    tracker = sc.statusTracker()
    stages = [
        tracker.getStageInfo(s)
        for j in tracker.getJobIdsForGroup("few-buckets")
        for s in tracker.getJobInfo(j).stageIds
    ]
    # One task per bucket read (the scan keeps each bucket's files together): the base's
    # scan ran as one task, on the one bucket the key falls in.
    assert stages and max(s.numTasks for s in stages if s is not None) == 1, [
        (s.name, s.numTasks) for s in stages if s is not None
    ]
    assert spark.conf.get(dpp, None) == before
    assert_matches(pipeline.compare(workload))


def test_a_truncates_delete_gives_a_base_without_a_snapshot_its_first(
    pipeline: Pipeline, spark: SparkSession
) -> None:
    """What ``plan_batch`` counts on when a first batch holds a truncate: Iceberg commits
    the truncate's DELETE on a base nothing was written to, so ``delete_insert`` finds a
    head to start its branch from (the plan does not block it for want of a snapshot)."""
    MergeStage(spark, pipeline.pipeline).ensure_base(TABLE)
    base = pipeline.refs(TABLE).base
    assert iceberg_table(spark, base).currentSnapshot() is None
    spark.sql(f"DELETE FROM {base} WHERE {POSITION} < CAST('5' AS {POSITION_SQL})")
    assert iceberg_table(spark, base).currentSnapshot() is not None
