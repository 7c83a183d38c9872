"""The merge figures the ledger records with each append (icetide/lake/ledger_figures.py):
recorded right, used instead of a Spark job, and a ledger append without them (an
older ledger, another writer) still merges right by computing them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.lake import tables
from icetide.lake.ledger_figures import FIGURES_PROPERTY
from icetide.lake.progress import read_new_events
from icetide.lake.tables import UpperBound, column_upper_bound, current_snapshot
from icetide.merge.stage import MergeResult
from icetide.merge.steps import changed_keys
from icetide.schema.contract import ledger as c
from icetide.schema.contract.base import POSITION
from tests.integration.events import SCHEMAS, SOURCES, mysql
from tests.integration.harness import Pipeline


def _job_marker(spark: SparkSession) -> int:
    """The id of a tiny job run now: Spark numbers every job (a streaming query's too)
    in one sequence, so two markers bound the jobs run between them."""
    spark.range(1).collect()
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def _merge_jobs(pipeline: Pipeline) -> tuple[int, MergeResult]:
    """The Spark jobs one merge of ``items`` ran (nothing else to merge), and its result."""
    before = _job_marker(pipeline.session)
    (result,) = [r for r in pipeline.merge() if r.table == "items"]
    return _job_marker(pipeline.session) - before - 1, result


def _items(pipeline: Pipeline) -> list[tuple[int, str]]:
    return [(r["id"], r["name"]) for r in pipeline.base("items")]


def test_the_merge_reads_the_ledgers_figures_and_computes_them_when_missing(
    tmp_path: Path, warehouse: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    shop = Pipeline.custom(tmp_path, warehouse, "merge_history", SCHEMAS, SOURCES, spark)
    cdc = shop.refs("items").cdc
    shop.land(
        [
            mysql("c", 100, after={"id": 1, "name": "a", "qty": 1}),
            mysql("c", 110, after={"id": 2, "name": "b", "qty": 1}),
            mysql("c", 120, after={"id": 3, "name": "c", "qty": 1}),
            mysql("d", 200, before={"id": 3, "name": "c", "qty": 1}),
        ]
    )
    shop.stream()
    snapshot = current_snapshot(spark, cdc)
    assert snapshot is not None
    figures = json.loads(snapshot.summary[FIGURES_PROPERTY])
    buckets = [
        r[0]
        for r in spark.sql(
            "SELECT DISTINCT lake.system.bucket(2, id) FROM VALUES (1), (2), (3) AS t(id) "
            "ORDER BY 1"
        ).collect()
    ]
    assert (figures["tombstones"], figures["truncate"], figures["moves"]) == (1, None, 0)
    assert (figures["touched"], figures["buckets"], figures["unavailable"]) == (buckets, 2, [])
    # Binlog positions: (file 3 * 10**13 + offset) * 10**6 + row.
    assert (figures["first"], figures["last_tombstone"]) == (
        str((3 * 10**13 + 100) * 10**6),
        str((3 * 10**13 + 200) * 10**6),
    )
    shop.merge()
    assert _items(shop) == [(1, "a"), (2, "b")]

    # An older insert of the deleted key: the figures say the history holds a delete,
    # so the merge still remembers it.
    shop.land(
        [
            mysql("c", 150, after={"id": 3, "name": "late", "qty": 9}),
            mysql(
                "u",
                300,
                before={"id": 1, "name": "a", "qty": 1},
                after={"id": 1, "name": "a2", "qty": 1},
            ),
        ]
    )
    shop.stream()
    with_figures, late_insert = _merge_jobs(shop)
    assert _items(shop) == [(1, "a2"), (2, "b")]
    assert not late_insert.in_order  # 150 is older than the remembered delete at 200

    # An update older than the row it updates (250 < 300): the base's newest position
    # (its file metrics) rules out the in-order path, and the guard drops it.
    a2, b = {"id": 1, "name": "a2", "qty": 1}, {"id": 2, "name": "b", "qty": 1}
    shop.land([mysql("u", 250, before=a2, after={**a2, "name": "late"})])
    shop.stream()
    guarded, late_update = _merge_jobs(shop)
    assert not late_update.in_order
    assert _items(shop) == [(1, "a2"), (2, "b")]

    # Every event newer than every row and remembered delete: no version guard and no
    # tombstone history, so fewer jobs than the same batch shape guarded.
    shop.land(
        [
            mysql("u", 3_000_000, before=b, after={**b, "name": "b3"}),
            mysql("c", 3_000_100, after={"id": 4, "name": "d", "qty": 1}),
        ]
    )
    shop.stream()
    in_order, result = _merge_jobs(shop)
    assert result.in_order and "in order" in result.render()
    assert _items(shop) == [(1, "a2"), (2, "b3"), (4, "d")]
    assert in_order < guarded, (in_order, guarded)

    # Rows appended without figures (as before they existed): the merge computes them.
    rows = spark.table(cdc.sql).where((F.col("id") == 2) & (F.col(c.OP) == "c"))
    moved = rows.select(
        *[
            (F.col(n) + F.lit(10**13)).cast(rows.schema[n].dataType).alias(n)
            if n == c.POSITION
            else F.concat(F.col(n), F.lit("-again")).alias(n)
            if n == c.MESSAGE_ID
            else F.lit("u").alias(n)
            if n == c.OP
            else F.col(n).withField("name", F.lit("b4")).alias(n)
            if n == c.AFTER
            else F.col(n)
            for n in rows.columns
        ]
    )
    moved.writeTo(cdc.sql).append()
    without_figures, _ = _merge_jobs(shop)
    assert _items(shop) == [(1, "a2"), (2, "b4"), (4, "d")]
    # The figures save the merge its up-front Spark job.
    assert without_figures > with_figures, (with_figures, without_figures)

    # The base's newest position, as the in-order check reads it: the files' bounds
    # through py4j, or (many files) one query of the files metadata table; both the
    # largest position the base holds.
    base = shop.refs("items").base
    newest = spark.table(base.sql).agg(F.max(POSITION)).first()
    assert newest is not None
    listed = column_upper_bound(spark, base, POSITION)
    monkeypatch.setattr(tables, "LISTED_FILES", 0)
    assert listed == column_upper_bound(spark, base, POSITION) == UpperBound(True, newest[0])


def _keys_plan(pipeline: Pipeline, key_changes: bool) -> str:
    """The physical plan of the DELETE's read of the keys of every ledger event, as run
    (adaptive execution adds the row/column transitions when it plans each stage)."""
    cdc = pipeline.refs("items").cdc
    snapshot = current_snapshot(pipeline.session, cdc)
    assert snapshot is not None
    events = read_new_events(pipeline.session, cdc, None, snapshot.snapshot_id)
    keys = changed_keys(events, pipeline.pipeline.schema("items"), key_changes)
    assert sorted(r[0] for r in keys.collect()) == [1]
    return str(keys._jdf.queryExecution().executedPlan().toString())


def test_the_ledger_counts_key_changes_and_a_batch_without_any_reads_its_keys_columnar(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    """Iceberg reads a scan column by column only when every column it reads is of a
    primitive type: the old key of a key change comes from the ``_before`` struct, so
    the DELETE's read of the batch's keys skips it when the figures count no key change."""
    shop = Pipeline.custom(tmp_path, warehouse, "merge_key_figures", SCHEMAS, SOURCES, spark)
    cdc = shop.refs("items").cdc

    def key_changes() -> int:
        snapshot = current_snapshot(spark, cdc)
        assert snapshot is not None
        return int(json.loads(snapshot.summary[FIGURES_PROPERTY])["key_changes"])

    shop.land(
        [
            mysql("c", 100, after={"id": 1, "name": "a", "qty": 1}),
            mysql(
                "u",
                110,
                before={"id": 1, "name": "a", "qty": 1},
                after={"id": 1, "name": "b", "qty": 2},
            ),
        ]
    )
    shop.stream()
    assert key_changes() == 0
    columnar, by_row = _keys_plan(shop, False), _keys_plan(shop, True)
    assert "ColumnarToRow" in columnar and c.BEFORE not in columnar, columnar
    assert "ColumnarToRow" not in by_row and c.BEFORE in by_row, by_row
    shop.merge()

    shop.land(
        [
            mysql(
                "u",
                200,
                before={"id": 1, "name": "b", "qty": 2},
                after={"id": 3, "name": "b", "qty": 2},
            ),
            mysql("c", 210, after={"id": 4, "name": "d", "qty": 1}),
        ]
    )
    shop.stream()
    assert key_changes() == 1
    shop.merge()
    assert _items(shop) == [(3, "b"), (4, "d")]
