"""Ledger rows record the schema version they were written with; a ledger made before
that column existed gains it when the stage starts."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from icetide.lake.tables import ensure_namespace
from icetide.schema.contract.builder import TableContract
from icetide.schema.contract.ledger import SCHEMA_VERSION
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
