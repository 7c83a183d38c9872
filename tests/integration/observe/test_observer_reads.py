"""What the observer reads to measure a table: after the first look, a merge's new
events' newest source time comes from the ledger's manifests (no Spark job), and equals
what a query over the ledger says."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.lake import tables as lake_tables
from icetide.lake.progress import read_watermark
from icetide.lake.tables import HeldTables
from icetide.observe import freshness
from icetide.observe.freshness import observe_table
from icetide.schema.contract import ledger as c
from icetide.schema.contract.names import TableName
from tests.integration.events import ITEMS, mysql
from tests.integration.harness import Pipeline

T0 = 1_700_000_000_000


def _at(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def test_newest_applied_after_a_merge_comes_from_the_files_appended_since(
    tmp_path: Path, warehouse: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipe = Pipeline.custom(
        tmp_path, warehouse, "observer_reads", {"items": ITEMS}, {"items": "shop.items"}, spark
    )
    config, refs = pipe.config, pipe.refs("items")

    def merged(*events: tuple[int, int, int]) -> None:
        pipe.land(
            [
                mysql("c", pos, after={"id": key, "name": "a", "qty": 1}, ts_ms=T0 + ms)
                for pos, key, ms in events
            ]
        )
        pipe.stream()
        pipe.merge()

    def queried() -> str:
        watermark = read_watermark(spark, refs.base)
        reader = spark.read.format("iceberg").option("snapshot-id", watermark)
        newest = reader.load(refs.cdc.dotted).agg(F.max(c.SOURCE_TS)).first()
        assert newest is not None
        return str(newest[0].replace(tzinfo=UTC).isoformat())

    merged((100, 1, 5_000), (110, 2, 9_000))
    assert observe_table(spark, config, "items").newest_applied == _at(T0 + 9_000)

    jobs: list[str] = []
    load = type(spark.read).load

    def counted(self: object, *args: object, **kwargs: object) -> object:
        jobs.append(str(args))
        return load(self, *args, **kwargs)  # type: ignore[arg-type]

    def looked() -> str | None:
        monkeypatch.setattr(type(spark.read), "load", counted)
        health = observe_table(spark, config, "items")
        monkeypatch.undo()
        assert jobs == []  # read from the manifests, no query of the ledger
        return health.newest_applied

    merged((200, 3, 20_000))
    merged((210, 4, 15_000))  # two merges, two ledger appends since the last look
    assert looked() == _at(T0 + 20_000) == queried()
    merged((300, 5, 12_000))  # a late source time: the newest stays
    assert looked() == _at(T0 + 20_000) == queried()

    # Unknown where the last answer's snapshot is not an ancestor: asked again by query.
    freshness._newest_seen[refs.cdc.sql] = (-1, None)
    merged((400, 6, 30_000))
    assert observe_table(spark, config, "items").newest_applied == _at(T0 + 30_000) == queried()


def test_a_look_with_held_tables_loads_none_again_and_sees_every_merge(
    tmp_path: Path, warehouse: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipe = Pipeline.custom(
        tmp_path, warehouse, "observer_held", {"items": ITEMS}, {"items": "shop.items"}, spark
    )
    config = pipe.config

    def merged(pos: int, key: int) -> None:
        pipe.land([mysql("c", pos, after={"id": key, "name": "a", "qty": 1}, ts_ms=T0 + pos)])
        pipe.stream()
        pipe.merge()

    held = HeldTables(spark)
    merged(100, 1)
    first = observe_table(spark, config, "items", held=held)
    merged(200, 2)
    loads: list[str] = []
    load = lake_tables._load

    def counted(spark: SparkSession, table: TableName) -> Any:
        loads.append(table.name)
        return load(spark, table)

    monkeypatch.setattr(lake_tables, "_load", counted)
    again = observe_table(spark, config, "items", held=held)
    assert loads == []  # the base, ledger and dead letters held from the first look
    anew = observe_table(spark, config, "items")
    assert len(loads) >= 2  # a look without held tables loads them
    figures = ("ledger_snapshot", "watermark", "lag_events", "newest_applied", "data_files")
    assert [getattr(again, f) for f in figures] == [getattr(anew, f) for f in figures]
    assert again.ledger_snapshot != first.ledger_snapshot
    assert again.newest_applied == _at(T0 + 200)
