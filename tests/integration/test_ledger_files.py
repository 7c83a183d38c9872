"""The ledger's files written by Python tasks (icetide/ledger/table_files.py): the merge's
figures computed there equal Spark's over the same rows, for every key type the base can
be bucketed by, and what the tasks write reads the same through PyIceberg as through
Spark."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, cast

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from icetide.demo.workload import deliver, generate
from icetide.lake.data_files import file_target
from icetide.lake.file_metrics import (
    HADOOP_INPUT_FILE,
    SHADED_PARQUET,
    FooterMetrics,
    class_loadable,
)
from icetide.lake.ledger_figures import (
    FIGURES_PROPERTY,
    arrow_bucket,
    arrow_figures,
    combine_figures,
    figure_aggregates,
    figures_json,
)
from icetide.lake.tables import iceberg_table, latest_snapshot_property
from icetide.ledger.stage import LedgerStage
from icetide.schema.contract import ledger as c
from icetide.schema.model import TableSchema
from icetide.spark.jvm import jvm_class
from tests.integration.harness import Pipeline

KEY_TYPES = {
    "INT": (1, 7, -5),
    "BIGINT": (12345678901, -1, 0),
    "STRING": ("héllo", "", "z"),
    "DECIMAL(10,2)": (Decimal("12.34"), Decimal("-0.01"), Decimal("0.00")),
    "DECIMAL(30,4)": (Decimal("123456789012345678.1234"), Decimal("0.0000"), Decimal("-1.5")),
    "DATE": (
        datetime(2024, 2, 29).date(),
        datetime(1969, 12, 31).date(),
        datetime(2000, 1, 1).date(),
    ),
    "TIMESTAMP": (
        datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
        datetime(1960, 1, 1, tzinfo=UTC),
        datetime(2030, 6, 1, tzinfo=UTC),
    ),
    "BINARY": (b"\x01\x02\xff", b"", b"k"),
}


@pytest.mark.parametrize("key_type", list(KEY_TYPES))
def test_figures_from_arrow_equal_sparks_for_every_key_type(
    spark: SparkSession, key_type: str
) -> None:
    a, b, z = KEY_TYPES[key_type]
    # Inserts, an update, a key change (b → a), a key change with TOAST placeholders,
    # an update whose old key is NULL (not a key change), a delete, a truncate, a NULL
    # key; positions out of order, as a batch's events may arrive.
    rows = [
        (a, "c", None, [], 5),
        (b, "u", (b,), [], 3),
        (a, "u", (b,), [], 9),
        (z, "u", (a,), ["big"], 11),
        (z, "u", (None,), ["other"], 4),
        (b, "d", (b,), None, 8),
        (None, "t", None, [], 10),
        (None, "c", None, None, 2),
    ]
    ddl = (
        f"k {key_type}, {c.OP} STRING, {c.BEFORE} STRUCT<k: {key_type}>, "
        f"{c.UNAVAILABLE} ARRAY<STRING>, {c.POSITION} DECIMAL(38,0)"
    )
    frame = spark.createDataFrame(
        [(k, op, before, gaps, Decimal(p)) for k, op, before, gaps, p in rows], ddl
    )
    schema = cast(TableSchema, type("Keys", (), {"primary_key": ("k",)})())
    sparks = frame.agg(*figure_aggregates(schema, "lake", 16)).first()
    assert sparks is not None
    arrow = pa.Table.from_batches(frame._collect_as_arrow())  # type: ignore[attr-defined]
    kind = iceberg_table_type(spark, key_type)
    # Two tasks' parts, combined: the driver's sum of each task's figures.
    halves = [arrow.slice(0, 4), arrow.slice(4)]
    parts = [arrow_figures(h, ["k"], arrow_bucket(16, kind)) for h in halves]
    mine = combine_figures(parts)
    assert figures_json(mine, 3, 16, 0) == figures_json(sparks, 3, 16, 0)
    figures = json.loads(figures_json(mine, 3, 16, 0))
    assert figures["key_changes"] == 2 and figures["moves"] == 1, figures
    assert figures["tombstones"] == 4 and figures["truncate"] == "10", figures
    assert len(figures["touched"]) >= 2, figures


def iceberg_table_type(spark: SparkSession, key_type: str) -> Any:
    """PyIceberg's type of a column Spark creates as ``key_type`` in an Iceberg table."""
    from pyiceberg.schema import Schema

    name = f"lake.figures.k_{abs(hash(key_type))}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.figures")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} (k {key_type}) USING iceberg")
    table = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(  # type: ignore[union-attr]
        spark._jsparkSession, name
    )
    parser = spark._jvm.org.apache.iceberg.SchemaParser  # type: ignore[union-attr]
    return Schema.model_validate_json(str(parser.toJson(table.schema()))).find_field("k").field_type


def test_the_ledgers_files_read_the_same_through_pyiceberg_and_carry_the_figures(
    pipeline: Pipeline, spark: SparkSession
) -> None:
    from pyiceberg.table import StaticTable

    stage = LedgerStage(spark, pipeline.pipeline)
    workload = generate(6, 400)
    deliver(workload, pipeline.landing, seed=6, files=2, duplicate_rate=0.0)
    stage.start(once=True).awaitTermination()
    for table in pipeline.config.tables:
        cdc = pipeline.refs(table.name).cdc
        loaded = iceberg_table(spark, cdc)
        # The files are where the table's location provider puts them, in its partition.
        target = file_target(loaded, c.INGESTED_AT, datetime.now(UTC).date())
        assert target is not None and target.partition is not None
        files = [r[0] for r in spark.sql(f"SELECT file_path FROM {cdc.sql}.files").collect()]
        assert files and all(f.startswith(target.folder) or target.folder in f for f in files)
        # PyIceberg, an independent reader, reads what Spark reads, column by column.
        metadata = str(loaded.operations().current().metadataFileLocation())
        theirs = StaticTable.from_metadata(metadata).scan().to_arrow()
        ours = spark.table(cdc.sql)
        assert (
            theirs.num_rows == ours.count() == sum(e.table == table.name for e in workload.events)
        )
        key = pipeline.pipeline.schema(table.name).primary_key[0]
        for column in (key, c.OP, c.POSITION, c.SCHEMA_VERSION):
            assert sorted(theirs.column(column).to_pylist(), key=repr) == sorted(
                (r[0] for r in ours.select(column).collect()), key=repr
            ), column
        # Each file's metrics as committed (computed by the task that wrote it), and as
        # FooterMetrics reads them (opening the footer with read options built once),
        # equal Iceberg's own fileMetrics of the file.
        assert target.metrics is not None  # the tasks computed them
        committed = {path: _metrics(f) for path, f in committed_files(loaded).items()}
        footers = FooterMetrics(loaded)
        assert class_loadable(f"{SHADED_PARQUET}.hadoop.ParquetFileReader")  # the fast path
        assert not class_loadable(f"{SHADED_PARQUET}.hadoop.NoSuchReader")
        for path in files:
            source = loaded.io().newInputFile(path)
            assert source.getClass().getName() == HADOOP_INPUT_FILE  # not the fallback
            theirs_metrics = jvm_class("org.apache.iceberg.parquet.ParquetUtil").fileMetrics(
                source, footers.config
            )
            ours_metrics = _metrics(footers.read(path))
            assert ours_metrics == _metrics(theirs_metrics) == committed[path]
            assert ours_metrics["rows"] > 0 and ours_metrics["upperBounds"]
        # The append's snapshot carries the merge's figures, equal to Spark's over the rows.
        summary = latest_snapshot_property(spark, cdc, FIGURES_PROPERTY)
        assert summary is not None
        recorded = json.loads(summary[FIGURES_PROPERTY])
        buckets = pipeline.config.table(table.name).buckets
        contract_schema = pipeline.pipeline.schema(table.name)
        sparks = ours.agg(*figure_aggregates(contract_schema, "lake", buckets)).first()
        expected = json.loads(
            figures_json(sparks, recorded["version"], buckets, recorded["ingested_at_us"])
        )
        assert recorded == expected


def committed_files(loaded: Any) -> dict[str, Any]:
    """Each file of ``loaded``'s current snapshot, as the table records it (its metrics
    included), by path; the table refreshed first."""
    loaded.refresh()
    tasks = loaded.newScan().includeColumnStats().planFiles().iterator()
    out = {}
    while tasks.hasNext():
        data_file = tasks.next().file()
        out[str(data_file.location())] = data_file
    return out


def _metrics(metrics: Any) -> dict[str, Any]:
    """An Iceberg ``Metrics`` as Python values (bounds as bytes), to compare two."""
    to_bytes = jvm_class("org.apache.iceberg.util.ByteBuffers").toByteArray
    out: dict[str, Any] = {"rows": int(metrics.recordCount())}
    for name in ("columnSizes", "valueCounts", "nullValueCounts", "nanValueCounts"):
        found = getattr(metrics, name)()
        out[name] = None if found is None else {int(k): int(v) for k, v in found.items()}
    for name in ("lowerBounds", "upperBounds"):
        found = getattr(metrics, name)()
        out[name] = (
            None if found is None else {int(k): bytes(to_bytes(v)) for k, v in found.items()}
        )
    return out
