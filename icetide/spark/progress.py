"""Stage progress read back from the tables' contract (snapshot summaries).

The merge keeps its watermark and the bootstrap its state in the base table's snapshot
summaries (:mod:`icetide.schema.contract.base`); the merge, the bootstrap and ``status``
all read them here, so none of them reaches into another stage's module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from icetide.schema.contract.base import BOOTSTRAP_ID, BOOTSTRAP_STATE, WATERMARK_PROPERTY
from icetide.schema.contract.names import TableName
from icetide.spark.sql import literal
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


@dataclass(frozen=True)
class MergeProgress:
    """What the merge stage needs to know of a base table before a batch, read at once."""

    watermark: int | None
    """The last ledger snapshot merged (None before the first merge)."""
    bootstrap: tuple[str, str] | None
    """``(bootstrap id, running|done)`` of the newest bootstrap, or None."""


def read_merge_progress(spark: SparkSession, base: TableName) -> MergeProgress:
    """:func:`read_watermark` and :func:`read_bootstrap_state` in one metadata query
    (one Spark job instead of two: they run before every merge)."""
    wm, state, bid = (literal(k) for k in (WATERMARK_PROPERTY, BOOTSTRAP_STATE, BOOTSTRAP_ID))
    order = "struct(h.made_current_at, s.committed_at)"
    row = spark.sql(
        f"SELECT max_by(s.summary[{wm}], {order}) FILTER (WHERE s.summary[{wm}] IS NOT NULL), "
        f"max_by(s.summary[{state}], {order}) FILTER (WHERE s.summary[{state}] IS NOT NULL), "
        f"max_by(coalesce(s.summary[{bid}], ''), {order}) "
        f"FILTER (WHERE s.summary[{state}] IS NOT NULL) "
        f"FROM {base.child('snapshots')} s JOIN {base.child('history')} h "
        "ON s.snapshot_id = h.snapshot_id WHERE h.is_current_ancestor"
    ).first()
    assert row is not None
    watermark = int(row[0]) if row[0] is not None else None
    bootstrap = (row[2], row[1]) if row[1] is not None else None
    return MergeProgress(watermark, bootstrap)


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
