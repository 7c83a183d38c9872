"""Merge strategies: the same base table whichever way the batch meets it; the bucket join
reads the base in place; a merge writes at most one data file per touched bucket."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.demo.run import plan_rounds
from icetide.demo.workload import deliver, generate
from icetide.lake.tables import current_snapshot_id, iceberg_table
from icetide.merge import strategy as strategies
from icetide.merge.stage import MergeStage
from icetide.merge.strategy import spj_conf, stage_batch, staging_table
from icetide.pipeline import Pipeline as StagePipeline
from icetide.schema.contract.base import MERGE_STRATEGIES as STRATEGIES
from tests.integration.harness import Pipeline, assert_matches, with_merge_strategy

BUCKETS = 16
"""Few enough that each MERGE and staging write handles few files (64 made this test the
slowest of the suite), more than the last round's events can touch."""
LAST_ROUND = 12
"""Events in the last round: over three tables, far fewer than ``BUCKETS`` per table."""


def _rollback(spark: SparkSession, pipeline: Pipeline, snapshots: dict[str, int | None]) -> None:
    for table, snapshot in snapshots.items():
        base = pipeline.refs(table).base
        if snapshot is None:
            spark.sql(f"DROP TABLE IF EXISTS {base}")
        else:
            spark.sql(
                f"CALL {base.catalog}.system.rollback_to_snapshot("
                f"'{base.namespace}.{base.name}', {snapshot})"
            )


def test_every_strategy_merges_each_round_into_the_same_base(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    """Each round's batch is merged by every strategy from the same base snapshot (rolled
    back in between): the bases must be equal every round, and equal the model at the end.
    The last strategy also bin-packs small files every second merge (the next round's
    strategies start from its base), which must change no row either."""
    pipeline = Pipeline.create(tmp_path, warehouse, "strategies", spark=spark, buckets=BUCKETS)
    workload = generate(17, 700)
    # Two rounds of the bulk, late events held from the first into the second, then a
    # round of a few events, which leaves buckets untouched so that the pruned strategy
    # really restricts the base (asserted below).
    cut = len(workload.events) - LAST_ROUND
    rounds = [
        *plan_rounds(replace(workload, events=workload.events[:cut]), 2, 17, late_rate=0.1),
        replace(workload, events=workload.events[cut:]),
    ]
    pruned_rounds = compactions = replaced = 0
    last = STRATEGIES[-1]
    stages = {
        s: MergeStage(
            spark,
            StagePipeline(
                with_merge_strategy(pipeline.config, s, 2 if s == last else 0), pipeline.schemas
            ),
        )
        for s in STRATEGIES
    }
    for number, part in enumerate(rounds):
        deliver(part, pipeline.landing, seed=number, files=2, duplicate_rate=0.15)
        pipeline.stream()
        start = {
            t: current_snapshot_id(spark, pipeline.refs(t).base)
            if spark.catalog.tableExists(pipeline.refs(t).base.sql)
            else None
            for t in pipeline.schemas
        }
        results = {}
        for strategy in STRATEGIES:
            if strategy != STRATEGIES[0]:
                _rollback(spark, pipeline, start)
            merged = stages[strategy].run_once()
            compactions += sum(bool(r.compaction and r.compaction.rewritten) for r in merged)
            replaced += strategy == "delete_insert" and any(
                r.strategy == "delete_insert" for r in merged
            )
            if strategy == "bucket_join_pruned":
                pruned_rounds += any(
                    r.touched_buckets is not None and r.touched_buckets < BUCKETS for r in merged
                )
            # Compared in Spark by digest: a read of every row into Python per strategy
            # cost a fifth of this test.
            results[strategy] = pipeline.fingerprints()
        first = results[STRATEGIES[0]]
        for strategy, bases in results.items():
            for table in pipeline.schemas:
                assert bases[table] == first[table], (
                    f"round {number}: {strategy} differs on {table}: "
                    f"{bases[table]} != {first[table]} ({STRATEGIES[0]})"
                )
    assert pruned_rounds > 0, "no round left a bucket untouched: pruning was not exercised"
    assert compactions > 0, "no merge bin-packed its small files"
    # Rounds with late events are not in order: delete_insert falls back there.
    assert replaced > 0, "no round was merged by delete_insert"
    assert_matches(pipeline.compare(workload))


def _plan_tree(spark: SparkSession, sql: str) -> list[str]:
    text = spark.sql(f"EXPLAIN FORMATTED {sql}").collect()[0][0]
    tree = text.split("\n\n")[0]
    return [line for line in tree.splitlines() if line.strip()]


def _ancestors(tree: list[str], index: int) -> list[str]:
    """The plan nodes from ``tree[index]`` up to the root."""

    def depth(line: str) -> int:
        return len(line) - len(re.sub(r"^[\s:|+-]*", "", line))

    chain, level = [tree[index]], depth(tree[index])
    for line in reversed(tree[:index]):
        if depth(line) < level:
            chain.append(line)
            level = depth(line)
    return chain


def _bucket_join_setup(pipeline: Pipeline, spark: SparkSession) -> tuple[str, int]:
    """A base with rows in every bucket, and a staged batch touching two keys."""
    workload = generate(3, 300, tables=["customers"])
    deliver(workload, pipeline.landing, seed=1, files=1, duplicate_rate=0.0)
    pipeline.stream()
    pipeline.merge()
    contract = pipeline.pipeline.contract("customers")
    base = pipeline.refs("customers").base
    key = contract.target.primary_key[0]
    batch = (
        spark.table(base.sql)
        .limit(2)
        .selectExpr(
            f"`{key}`",
            "_icetide_position + 1 AS _position",
            "'u' AS _op",
            "_icetide_source_ts AS _source_ts",
            *[f"named_struct('v', `{c.name}`) AS _v{c.id}" for c in contract.target.value_columns],
        )
    )
    staging = staging_table(base)
    stage_batch(batch, contract, staging)
    return contract.bucket_merge_sql(base, staging), contract.settings.buckets


def test_the_bucket_join_reads_the_base_in_place(pipeline: Pipeline, spark: SparkSession) -> None:
    sql, _ = _bucket_join_setup(pipeline, spark)
    base = pipeline.refs("customers").base
    with spj_conf(spark):
        tree = _plan_tree(spark, sql)
    own_scan = re.compile(rf"BatchScan {re.escape(base.dotted)} \(\d+\)$")
    [scan] = [i for i, line in enumerate(tree) if own_scan.search(line)]
    path = _ancestors(tree, scan)
    joins = [i for i, line in enumerate(path) if "Join" in line]
    assert joins, "\n".join(tree)
    below_join = path[: joins[0]]
    assert not [line for line in below_join if "Exchange" in line], "\n".join(tree)


def test_overlapping_bucket_joins_leave_the_session_settings_as_they_found_them(
    spark: SparkSession,
) -> None:
    """Two tables' bucket joins overlap under ``merge.parallel_tables``: the settings stay
    while either runs, and afterwards are what they were before the first."""
    setting = "spark.sql.sources.v2.bucketing.enabled"
    before = spark.conf.get(setting, None)
    first, second = spj_conf(spark), spj_conf(spark)
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert spark.conf.get(setting) == "true", "the first to leave unset the other's settings"
    second.__exit__(None, None, None)
    assert spark.conf.get(setting, None) == before


def test_a_bucket_join_merge_writes_at_most_one_file_per_touched_bucket(
    pipeline: Pipeline, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The staging table's earlier batches are expired every second merge here (8 in use).
    monkeypatch.setattr(strategies, "STAGING_SNAPSHOTS", 2)
    workload = generate(8, 400, tables=["customers"])
    first, second = plan_rounds(workload, 2, 8, late_rate=0.0)
    config = with_merge_strategy(pipeline.config, "bucket_join")
    stage = MergeStage(spark, StagePipeline(config, pipeline.schemas))
    deliver(first, pipeline.landing, seed=1, files=3, duplicate_rate=0.0)
    pipeline.stream()
    stage.run_once()
    deliver(second, pipeline.landing, seed=2, files=3, duplicate_rate=0.0)
    pipeline.stream()
    stage.run_once()
    base = pipeline.refs("customers").base
    snapshot = current_snapshot_id(spark, base)
    per_bucket = spark.sql(
        f"SELECT data_file.partition AS p, data_file.content AS content, count(*) AS n "
        f"FROM {base.child('entries')} WHERE snapshot_id = {snapshot} AND status = 1 "
        "GROUP BY data_file.partition, data_file.content"
    ).collect()
    data = [r for r in per_bucket if r.content == 0]
    assert data, per_bucket  # the second round did write
    assert max(r.n for r in per_bucket) == 1, per_bucket
    # The staging table is kept: the second merge overwrote it and, at the second
    # snapshot, expired the first batch; a batch of another layout (a schema change)
    # replaces it.
    staging = iceberg_table(spark, staging_table(base))
    assert staging.currentSnapshot().operation() == "overwrite"
    assert len(list(staging.snapshots())) == 1
    key = pipeline.pipeline.contract("customers").target.primary_key[0]
    other = spark.range(3).select(F.col("id").alias(key), F.lit("x").alias("other"))
    stage_batch(other, pipeline.pipeline.contract("customers"), staging_table(base))
    assert spark.table(staging_table(base).sql).columns == [key, "other"]
