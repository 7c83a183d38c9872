"""How many files and snapshots a table has: what maintenance is for, and reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from icetide.schema.contract.names import TableName

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Iceberg's ``content`` column of the files metadata table.
_DATA, _POSITION_DELETES, _EQUALITY_DELETES = 0, 1, 2


@dataclass(frozen=True)
class FileCounts:
    """The current snapshot's files, and the snapshots the table keeps."""

    data_files: int
    delete_files: int
    data_bytes: int
    snapshots: int


def file_counts(spark: SparkSession, table: TableName) -> FileCounts:
    """Data and delete files of the current snapshot, and the snapshots retained."""
    rows = spark.sql(
        f"SELECT content, count(*) AS n, coalesce(sum(file_size_in_bytes), 0) AS bytes "
        f"FROM {table.child('files')} GROUP BY content"
    ).collect()
    by_content = {int(r["content"]): (int(r["n"]), int(r["bytes"])) for r in rows}
    snapshots = spark.sql(f"SELECT count(*) FROM {table.child('snapshots')}").first()
    return FileCounts(
        data_files=by_content.get(_DATA, (0, 0))[0],
        delete_files=by_content.get(_POSITION_DELETES, (0, 0))[0]
        + by_content.get(_EQUALITY_DELETES, (0, 0))[0],
        data_bytes=by_content.get(_DATA, (0, 0))[1],
        snapshots=int(snapshots[0]) if snapshots is not None else 0,
    )


def data_files_per_partition(spark: SparkSession, table: TableName) -> dict[str, int]:
    """Data files of the current snapshot per partition (per bucket of a base table)."""
    rows = spark.sql(
        f"SELECT to_json(partition) AS p, count(*) AS n FROM {table.child('data_files')} "
        "GROUP BY to_json(partition)"
    ).collect()
    return {str(r["p"]): int(r["n"]) for r in rows}
