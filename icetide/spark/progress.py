"""Stage progress read back from the tables' contract (snapshot summaries).

The merge keeps its watermark and the bootstrap its state in the base table's snapshot
summaries (:mod:`icetide.schema.contract.base`); the merge, the bootstrap and ``status``
all read them here, so none of them reaches into another stage's module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icetide.schema.contract.base import BOOTSTRAP_ID, BOOTSTRAP_STATE, WATERMARK_PROPERTY
from icetide.schema.contract.names import TableName
from icetide.spark.tables import latest_snapshot_property

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_watermark(spark: SparkSession, base: TableName) -> int | None:
    """The last ledger snapshot merged into ``base``; None before the first merge."""
    summary = latest_snapshot_property(spark, base, WATERMARK_PROPERTY)
    return int(summary[WATERMARK_PROPERTY]) if summary else None


def read_bootstrap_state(spark: SparkSession, base: TableName) -> tuple[str, str] | None:
    """``(bootstrap id, running|done)`` of the newest bootstrap of ``base``, or None."""
    summary = latest_snapshot_property(spark, base, BOOTSTRAP_STATE)
    if summary is None:
        return None
    return summary.get(BOOTSTRAP_ID, ""), summary[BOOTSTRAP_STATE]


def read_new_events(
    spark: SparkSession, ledger: TableName, start: int | None, end: int
) -> DataFrame:
    """Ledger rows appended after snapshot ``start`` up to and including ``end``."""
    reader = spark.read.format("iceberg")
    if start is None:
        reader = reader.option("snapshot-id", end)
    else:
        reader = reader.option("start-snapshot-id", start).option("end-snapshot-id", end)
    return reader.load(ledger.dotted)
