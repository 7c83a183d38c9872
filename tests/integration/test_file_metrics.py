"""Each ledger file's metrics, computed by the task that wrote it
(icetide/lake/file_metrics.py, ``file_metrics``), equal those Iceberg's Java code reads
from the same file's footer (``ParquetUtil.fileMetrics`` with the table's metrics
config), for columns of every type the ledger holds, edge values and several metrics
configurations; and a table whose metrics a task cannot compute as Java does is
committed with the footer's."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from icetide.lake import data_files
from icetide.lake.data_files import append_files, file_target
from icetide.lake.tables import iceberg_table
from icetide.schema.contract.names import TableName
from icetide.spark.jvm import jvm_class
from tests.integration.test_ledger_files import _metrics, committed_files

DDL = (
    "b BOOLEAN, i INT, l BIGINT, f FLOAT, d DOUBLE, d9 DECIMAL(9,2), d18 DECIMAL(18,4), "
    "d38 DECIMAL(38,10), dt DATE, ts TIMESTAMP, tn TIMESTAMP_NTZ, s STRING, s_max STRING, "
    "bin BINARY, none_set STRING, arr ARRAY<BIGINT>, m MAP<STRING, DOUBLE>, "
    "_after STRUCT<a: STRING, n: BIGINT, inner: STRUCT<x: DECIMAL(10,3), y: DATE>, "
    "tags: ARRAY<STRING>>, `dotted.name` STRING, _ingested_at TIMESTAMP"
)
LONG = "héllo wörld 𝄞, a text well past sixteen characters"
TOP = "\U0010ffff" * 20  # no upper bound of 16 characters exists above it
ROWS: list[dict[str, Any]] = [
    {
        "b": True,
        "i": -7,
        "l": 12345678901,
        "f": 1.5,
        "d": -1e300,
        "d9": Decimal("-12.34"),
        "d18": Decimal("99999999999999.9999"),
        "d38": Decimal("-1234567890123456789012345678.0123456789"),
        "dt": date(1969, 12, 31),
        "ts": datetime(1960, 1, 1, tzinfo=UTC),
        "tn": datetime(2024, 2, 29, 23, 59, 59, 999999),
        "s": LONG,
        "s_max": TOP,
        "bin": b"\xff" * 20,
        "arr": [1, None, 3],
        "m": {"a": 1.0, "b": math.nan},
        "_after": {
            "a": "x" * 40,
            "n": -5,
            "inner": {"x": Decimal("-1.500"), "y": date(2000, 1, 1)},
            "tags": ["t"],
        },
        "dotted.name": "q",
    },
    {
        "b": False,
        "i": 2**31 - 1,
        "l": -1,
        "f": math.nan,
        "d": math.nan,
        "d9": Decimal("0.00"),
        "d18": Decimal("-0.0001"),
        "d38": Decimal("0E-10"),
        "dt": date(2024, 2, 29),
        "ts": datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
        "tn": datetime(1900, 1, 1),
        "s": "",
        "s_max": "\U0010ffff" * 3 + "a" * 20,
        "bin": b"",
        "arr": [],
        "m": {},
        "_after": {"a": "ab", "n": None, "inner": None, "tags": []},
        "dotted.name": "r",
    },
    {
        "f": -0.0,
        "d": math.inf,
        "s": "abc",
        "bin": b"\x00\x01",
        "_after": None,
    },
    {"f": math.nan, "d": 2.5, "s": "zz" * 10, "s_max": "b"},
]
CONFIGS: dict[str, dict[str, str]] = {
    "default": {},
    "full": {"write.metadata.metrics.default": "full"},
    "counts-some-truncated": {
        "write.metadata.metrics.default": "counts",
        "write.metadata.metrics.column.s": "truncate(4)",
        "write.metadata.metrics.column._after.a": "full",
        "write.metadata.metrics.column.dotted.name": "full",
    },
    "none-some-full": {
        "write.metadata.metrics.default": "none",
        "write.metadata.metrics.column.l": "full",
        "write.metadata.metrics.column._after.n": "counts",
        "write.metadata.metrics.column._after.inner.y": "full",
        "write.metadata.metrics.column.arr.element": "full",
    },
}
DAY = date(2026, 12, 7)


@pytest.fixture
def table(spark: SparkSession) -> Iterator[TableName]:
    """A fresh table of every column type, partitioned as icetide's ledger is."""
    name = TableName("lake", f"metrics_{uuid.uuid4().hex[:8]}", "every_type")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{name.namespace}")
    spark.sql(f"CREATE TABLE {name.sql} ({DDL}) USING iceberg PARTITIONED BY (days(_ingested_at))")
    yield name
    spark.sql(f"DROP TABLE IF EXISTS {name.sql}")


def _write(loaded: Any, rows: list[dict[str, Any]]) -> tuple[Any, Any]:
    """``rows`` written by a task's file writer, in two row groups; its target and file."""
    target = file_target(loaded, "_ingested_at", DAY)
    assert target is not None
    stamped = [{**row, "_ingested_at": datetime(2026, 12, 7, 9, tzinfo=UTC)} for row in rows]
    arrow = pa.Table.from_pylist(stamped, schema=target.arrow_schema())
    writer = target.open()
    writer.write(arrow.slice(0, 2))
    writer.write(arrow.slice(2))
    return target, writer.close()


@pytest.mark.parametrize("config", list(CONFIGS))
def test_a_tasks_metrics_equal_javas_from_the_footer(
    spark: SparkSession, table: TableName, config: str
) -> None:
    for key, value in CONFIGS[config].items():
        spark.sql(f"ALTER TABLE {table.sql} SET TBLPROPERTIES ('{key}' = '{value}')")
    loaded = iceberg_table(spark, table)
    target, written = _write(loaded, ROWS)
    assert target.metrics == CONFIGS[config] and written.metrics is not None
    append_files(loaded, [written], target.partition, {"why": "test"})

    committed = committed_files(loaded)
    assert list(committed) == [written.path]
    ours = committed[written.path]
    source = loaded.io().newInputFile(written.path)
    metrics_config = jvm_class("org.apache.iceberg.MetricsConfig").forTable(loaded)
    javas = jvm_class("org.apache.iceberg.parquet.ParquetUtil").fileMetrics(source, metrics_config)
    assert _metrics(ours) == _metrics(javas)
    assert str(ours.partition()) == str(
        jvm_class("org.apache.iceberg.DataFiles").data(loaded.spec(), target.partition)
    )
    assert int(ours.fileSizeInBytes()) == written.size and int(ours.recordCount()) == len(ROWS)

    # What Java keeps, spelled out, so that the comparison above cannot pass on nothing.
    ids = {str(f.name()): int(f.fieldId()) for f in loaded.schema().columns()}
    after = loaded.schema().findField("_after.a").fieldId()
    found = _metrics(ours)
    if config == "default":
        assert ids["s_max"] in found["lowerBounds"] and ids["s_max"] not in found["upperBounds"]
        assert len(found["upperBounds"][ids["s"]]) <= 16 * 4 and after in found["upperBounds"]
        assert ids["dotted.name"] in found["upperBounds"]
    if config == "counts-some-truncated":
        assert set(found["lowerBounds"]) == {ids["s"], after, ids["dotted.name"]}
    if config == "none-some-full":
        assert ids["l"] in found["upperBounds"] and ids["s"] not in found["valueCounts"]


def test_a_sorted_table_is_committed_with_the_footers_metrics(
    spark: SparkSession, table: TableName
) -> None:
    spark.sql(f"ALTER TABLE {table.sql} WRITE ORDERED BY s")
    spark.sql(
        f"ALTER TABLE {table.sql} SET TBLPROPERTIES ('write.metadata.metrics.default' = 'none')"
    )
    loaded = iceberg_table(spark, table)
    target, written = _write(loaded, ROWS)
    # Java keeps the sort column's bounds although the default is none: the task
    # leaves the metrics to the driver, which reads them from the footer.
    assert target.metrics is None and written.metrics is None
    append_files(loaded, [written], target.partition, {})
    found = _metrics(committed_files(loaded)[written.path])
    s = int(loaded.schema().findField("s").fieldId())
    assert set(found["lowerBounds"]) == {s} and found["valueCounts"] == {s: len(ROWS)}


def test_a_file_whose_metrics_the_task_cannot_compute_is_committed_with_the_footers(
    spark: SparkSession, table: TableName, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*args: object) -> str:
        raise ValueError("Unexpected physical type")

    monkeypatch.setattr(data_files, "file_metrics", refused)
    loaded = iceberg_table(spark, table)
    target, written = _write(loaded, ROWS)
    assert target.metrics is not None and written.metrics is None
    append_files(loaded, [written], target.partition, {})
    source = loaded.io().newInputFile(written.path)
    metrics_config = jvm_class("org.apache.iceberg.MetricsConfig").forTable(loaded)
    javas = jvm_class("org.apache.iceberg.parquet.ParquetUtil").fileMetrics(source, metrics_config)
    assert _metrics(committed_files(loaded)[written.path]) == _metrics(javas)
