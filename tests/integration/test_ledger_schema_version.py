"""Ledger rows record the schema version they were written with; a ledger made before
that column existed gains it when the stage starts; a batch switching to a new version
records the switch once its rows are stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from icetide.config import load_table_schemas
from icetide.lake.tables import ensure_namespace
from icetide.schema.contract.builder import TableContract
from icetide.schema.contract.ledger import SCHEMA_VERSION
from icetide.schema.file import dump_schema_file
from icetide.schema.model import TableSchema
from tests.integration.events import ITEMS, mysql
from tests.integration.harness import Pipeline


def test_rows_carry_their_schema_version_and_an_older_ledger_gains_the_column(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    items = ITEMS.with_columns(ITEMS.columns, version=3)
    pipe = Pipeline.custom(
        tmp_path, warehouse, "ledger_version", {"items": items}, {"items": "shop.items"}, spark
    )
    ledger = pipe.refs("items").cdc
    # The ledger as icetide wrote it before rows recorded their version.
    ensure_namespace(spark, pipe.config.catalog.name, pipe.config.catalog.namespace)
    old = TableContract(items).ledger_ddl(ledger).replace(f",\n  {SCHEMA_VERSION} INT", "")
    assert SCHEMA_VERSION not in old
    spark.sql(old)

    pipe.land([mysql("c", 100, after={"id": 1, "name": "a", "qty": 1})])
    pipe.stream()

    rows = spark.table(ledger.sql).select(SCHEMA_VERSION).collect()
    assert [r[0] for r in rows] == [3]
    assert pipe.schemas["items"].version == 3


def test_a_batch_that_starts_projecting_a_version_records_it_once_its_rows_are_stored(
    tmp_path: Path, warehouse: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A column added with a default is acknowledged by the merge while the ledger's next
    batch is under way, and that batch holds an insert written before the change. The
    batch's switch to the new version (phase 2) is recorded only once its rows are
    stored: a merge in between must not fill the default yet (phase 3 fills the rows it
    sees, and the insert is not there yet), or the insert would keep NULL for good."""
    from icetide.events.position import binlog_position
    from icetide.lake.alter import set_properties
    from icetide.ledger.stage import LedgerStage
    from icetide.schema.contract import phases as p
    from icetide.schema.file import schema_from_dict

    def schema(version: int, *extra: dict[str, object]) -> TableSchema:
        columns = [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {"id": 2, "name": "v", "type": "string"},
            *extra,
        ]
        return schema_from_dict(
            {"table": "t", "version": version, "primary_key": ["id"], "columns": columns}
        )

    pipe = Pipeline.custom(
        tmp_path, warehouse, "switch_after", {"t": schema(1)}, {"t": "shop.t"}, spark
    )
    pipe.land([mysql("c", 10, after={"id": 1, "v": "a"}, table="t")])
    pipe.stream()
    pipe.merge()
    # tag NOT NULL DEFAULT 'x' added at binlog position 100, recorded as the detector does.
    tag = {"id": 3, "name": "tag", "type": "string", "nullable": False, "default": "x"}
    path = pipe.config.resolved_path(pipe.config.table("t").schema_file)
    dump_schema_file(schema(2, tag), path)
    pipe.schemas = load_table_schemas(pipe.config)
    at = binlog_position("mysql-bin.000003", 100).key
    positions = p.with_version_position(None, 2, at)
    props = {p.CHANGE_VERSION: "2", p.CHANGE_POSITION: str(at), p.VERSION_POSITIONS: positions}
    set_properties(spark, pipe.refs("t").cdc, props)
    LedgerStage(spark, pipe.pipeline).tick()  # phase 1 on the ledger
    pipe.merge()  # phase 1 on the base, and the merge's acknowledgement
    pipe.land(
        [
            mysql("c", 50, after={"id": 2, "v": "b"}, table="t"),  # before the change
            mysql("c", 150, after={"id": 3, "v": "c", "tag": "y"}, table="t"),
        ]
    )
    store, merged = LedgerStage._once, []

    def merge_meanwhile(self: LedgerStage, *args: Any, **kwargs: Any) -> Any:
        if not merged:  # the batch is projected, its rows not committed yet
            merged.append(pipe.merge())
        return store(self, *args, **kwargs)

    monkeypatch.setattr(LedgerStage, "_once", merge_meanwhile)
    pipe.stream()
    monkeypatch.undo()
    assert merged
    pipe.merge()
    assert {r["id"]: r["tag"] for r in pipe.base("t")} == {1: "x", 2: "x", 3: "y"}
    assert pipe.dead_letters(pipe.refs("t").dead_letters) == []


def test_a_tick_looks_again_only_at_a_table_whose_schema_moved(
    tmp_path: Path, warehouse: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between batches the tick takes a schema change as far as the ledger can; a table
    whose ledger already projects its whole current version is left alone (no catalog
    load) until its schema file names a newer one, and then taken through phase 1 and,
    once the merge acknowledges, phase 2."""
    import icetide.ledger.stage as stage_module
    from icetide.lake.alter import int_property, table_properties
    from icetide.ledger.stage import LedgerStage
    from icetide.schema.contract import ledger as c
    from icetide.schema.contract import phases as p
    from icetide.schema.types import Column, StringType

    items = ITEMS.with_columns(ITEMS.columns, version=1)
    pipe = Pipeline.custom(
        tmp_path, warehouse, "tick_settled", {"items": items}, {"items": "shop.items"}, spark
    )
    pipe.land([mysql("c", 100, after={"id": 1, "name": "a", "qty": 1})])
    pipe.stream()
    pipe.merge()
    looks: list[str] = []
    alter = stage_module.alter_ledger

    def counted(spark: SparkSession, pipeline: Any, table: str) -> TableSchema:
        looks.append(table)
        return alter(spark, pipeline, table)

    monkeypatch.setattr(stage_module, "alter_ledger", counted)
    stage = LedgerStage(spark, pipe.pipeline)
    ledger = pipe.refs("items").cdc

    def ledger_property(key: str) -> int | None:
        return int_property(table_properties(spark, ledger), key)

    assert stage.tick() and stage.tick()
    assert looks == ["items"]  # settled at version 1 by the first look

    grown = items.with_columns((*items.columns, Column(4, "note", StringType())), version=2)
    dump_schema_file(grown, pipe.config.resolved_path(pipe.config.table("items").schema_file))
    pipe.schemas = load_table_schemas(pipe.config)  # the merge's, below
    stage.tick()
    assert looks == ["items"] * 2
    assert ledger_property(c.SCHEMA_VERSION_PROPERTY) == 2  # phase 1 on the ledger
    assert ledger_property(p.PROJECTION_VERSION) == 1  # the merge has not acknowledged
    stage.tick()  # not settled: the merge may acknowledge at any round
    assert looks == ["items"] * 3
    pipe.merge()  # phase 1 on the base, and the acknowledgement
    stage.tick()
    assert ledger_property(p.PROJECTION_VERSION) == 2  # phase 2, with no new event
    stage.tick()
    assert looks == ["items"] * 4
