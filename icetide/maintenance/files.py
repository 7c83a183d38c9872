"""How many files and snapshots a table has: what maintenance is for, and reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from icetide.lake.tables import iceberg_table, metadata_snapshots
from icetide.schema.contract.names import TableName

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Iceberg's ``content`` column of the files metadata table.
_DATA, _POSITION_DELETES, _EQUALITY_DELETES = 0, 1, 2
# The totals every snapshot summary carries (Iceberg's SnapshotSummary).
_TOTAL_DATA, _TOTAL_DELETES = "total-data-files", "total-delete-files"


@dataclass(frozen=True)
class FileCounts:
    """The current snapshot's files, and the snapshots the table keeps."""

    data_files: int
    delete_files: int
    snapshots: int


def file_counts(spark: SparkSession, table: TableName) -> FileCounts:
    """Data and delete files of the current snapshot, and the snapshots retained.

    From the table's metadata: the totals Iceberg keeps in every snapshot's summary
    (``total-data-files``, ``total-delete-files``), not a Spark job over the ``files``
    table. Maintenance asks before and after each of its steps, and the observer for
    every table every few seconds, beside the merges (docs/operations.md). A summary
    without the totals (a snapshot some other writer committed without them) is
    counted from the ``files`` table instead.
    """
    current, snapshots = metadata_snapshots(spark, iceberg_table(spark, table))
    summary = next((s.summary for s in snapshots if s.snapshot_id == current), {})
    if current is not None and not {_TOTAL_DATA, _TOTAL_DELETES} <= summary.keys():
        return _counted(spark, table, len(snapshots))
    return FileCounts(
        data_files=int(summary.get(_TOTAL_DATA, 0)),
        delete_files=int(summary.get(_TOTAL_DELETES, 0)),
        snapshots=len(snapshots),
    )


def _counted(spark: SparkSession, table: TableName, snapshots: int) -> FileCounts:
    rows = spark.sql(
        f"SELECT content, count(*) AS n FROM {table.child('files')} GROUP BY content"
    ).collect()
    by_content = {int(r["content"]): int(r["n"]) for r in rows}
    return FileCounts(
        data_files=by_content.get(_DATA, 0),
        delete_files=by_content.get(_POSITION_DELETES, 0) + by_content.get(_EQUALITY_DELETES, 0),
        snapshots=snapshots,
    )


def data_files_per_partition(spark: SparkSession, table: TableName) -> dict[str, int]:
    """Data files of the current snapshot per partition (per bucket of a base table)."""
    rows = spark.sql(
        f"SELECT to_json(partition) AS p, count(*) AS n FROM {table.child('data_files')} "
        "GROUP BY to_json(partition)"
    ).collect()
    return {str(r["p"]): int(r["n"]) for r in rows}
