"""What the observer reads to measure a table: after the first look, a merge's new
events' newest source time comes from the ledger's manifests (no Spark job), and equals
what a query over the ledger says."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.lake.progress import read_watermark
from icetide.observe import freshness
from icetide.observe.freshness import observe_table
from icetide.schema.contract import ledger as c
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
