"""Stage progress read back from the tables' contract (snapshot summaries).

The merge keeps its watermark and the bootstrap its state in the base table's snapshot
summaries (:mod:`icetide.schema.contract.base`); the merge, the bootstrap and ``status``
all read them here, so none of them reaches into another stage's module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icetide.lake.tables import latest_snapshot_property, lineage_snapshots, lineage_summaries
from icetide.schema.contract.base import BOOTSTRAP_ID, BOOTSTRAP_STATE, WATERMARK_PROPERTY
from icetide.schema.contract.names import TableName

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


def read_merge_progress(spark: SparkSession, base: TableName, loaded: Any = None) -> MergeProgress:
    """:func:`read_watermark` and :func:`read_bootstrap_state` at once, from the table's
    metadata file (its snapshots and their summaries) rather than a Spark query over
    the metadata tables: no Spark job before every merge.

    The newest snapshot on the current lineage carrying each property wins, as in
    :func:`~icetide.lake.tables.latest_snapshot_property`. ``loaded``: ``base``'s
    Iceberg table, when the caller has loaded it.
    """
    watermark: int | None = None
    bootstrap: tuple[str, str] | None = None
    for summary in lineage_summaries(spark, base, loaded):
        if watermark is None and WATERMARK_PROPERTY in summary:
            watermark = int(summary[WATERMARK_PROPERTY])
        if bootstrap is None and BOOTSTRAP_STATE in summary:
            bootstrap = (summary.get(BOOTSTRAP_ID, ""), summary[BOOTSTRAP_STATE])
        if watermark is not None and bootstrap is not None:
            break
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


def events_after(spark: SparkSession, ledger: TableName, start: int | None, end: int) -> int:
    """How many rows :func:`read_new_events` reads, from the ledger's snapshot summaries:
    the ``added-records`` of every append after ``start`` up to ``end`` (an incremental
    read takes appends only), or ``end``'s ``total-records`` when ``start`` is None. No
    Spark job: ``status`` and the observer ask for every table, the observer every few
    seconds beside the merges. When ``start`` is not on ``end``'s lineage (expired), the
    rows are counted by reading them, which also says what is wrong.
    """
    lineage = list(lineage_snapshots(spark, ledger))
    ids = [s.snapshot_id for s in lineage]
    if end in ids:
        newest = ids.index(end)
        if start is None:
            total = lineage[newest].summary.get("total-records")
            if total is not None:
                return int(total)
        elif start in ids[newest:]:
            span = lineage[newest : ids.index(start)]
            appends = [s.summary for s in span if s.summary.get("operation") == "append"]
            # Iceberg leaves a figure of 0 out of a summary.
            return sum(int(summary.get("added-records", 0)) for summary in appends)
    return int(read_new_events(spark, ledger, start, end).count())
