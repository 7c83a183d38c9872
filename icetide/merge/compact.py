"""The small files merges leave in each bucket, bin-packed by the merge itself.

A merge-on-read merge adds (at most) one small data file per touched bucket; after many
merges a bucket is read from many files, and every read of the base pays per file
(measured: 20 merges of 0.1% made a full read 3.0× slower than a compacted one,
docs/merge-performance.md). So once ``compact_every`` merges have added data files
since the base's last rewrite, the merge bin-packs each bucket's *small* files (below a
quarter of an average bucket) into one. A bucket's large files stay as they are:
rewriting them would be a copy-on-write of the whole bucket every few merges. Iceberg
still rewrites a large file once a third of its rows are deleted (its delete-ratio
threshold), when reading past the deletes costs more than a rewrite.

It runs after the merge's own commit (the one with the watermark), as a commit of its
own that changes no row: a crash in between loses nothing, and a rewrite that loses a
race with ``icetide maintain`` is left to the next merge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from icetide.schema.contract.names import TableName
from icetide.spark.calls import options_map, procedure_call
from icetide.spark.sql import literal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SMALL_SHARE = 4
"""A data file below ``1 / SMALL_SHARE`` of an average bucket's bytes is small."""


@dataclass(frozen=True)
class Compaction:
    """What one small-file rewrite did."""

    rewritten: int
    """Data files replaced."""
    added: int
    """Data files written in their place."""


def merges_since_rewrite(summaries: Iterable[Mapping[str, str]]) -> int:
    """Commits that added data files since the last rewrite (``replace``), from the
    lineage's summaries newest first: each added at most one file per bucket.

    >>> merges_since_rewrite([{"operation": "overwrite", "added-data-files": "3"},
    ...                       {"operation": "overwrite", "added-data-files": "0"},
    ...                       {"operation": "replace"},
    ...                       {"operation": "append", "added-data-files": "9"}])
    1
    """
    count = 0
    for summary in summaries:
        if summary.get("operation") == "replace":
            break
        if int(summary.get("added-data-files", "0") or 0) > 0:
            count += 1
    return count


def small_file_bytes(summary: Mapping[str, str], buckets: int, target_file_size: int) -> int:
    """The size below which a data file counts as small: a ``SMALL_SHARE``-th of the
    average bucket (from the snapshot summary), and below the compaction target.

    >>> small_file_bytes({"total-files-size": "64000000"}, 16, 128 * 2**20)
    1000000
    """
    total = int(summary.get("total-files-size", "0") or 0)
    return max(1, min(total // (buckets * SMALL_SHARE), target_file_size * 3 // 4))


def rewrite_small_files_sql(table: TableName, *, small_bytes: int, target_file_size: int) -> str:
    """Bin-pack, per bucket, the data files below ``small_bytes`` (two or more of them).

    The new files take a new sequence number, so the position deletes that pointed at
    the replaced files apply to nothing and are dropped as dangling in the same commit
    (icetide writes no equality deletes; see maintenance's rewrite for the reasoning).

    >>> print(rewrite_small_files_sql(TableName("lake", "s", "t"), small_bytes=10,
    ...                               target_file_size=100))  # doctest: +NORMALIZE_WHITESPACE
    CALL `lake`.system.rewrite_data_files(table => '`s`.`t`', strategy => 'binpack',
    options => map('target-file-size-bytes', '100', 'min-file-size-bytes', '10',
    'min-input-files', '2', 'remove-dangling-deletes', 'true',
    'use-starting-sequence-number', 'false'))
    """
    options = {
        "target-file-size-bytes": str(target_file_size),
        "min-file-size-bytes": str(small_bytes),
        "min-input-files": "2",
        "remove-dangling-deletes": "true",
        "use-starting-sequence-number": "false",
    }
    return procedure_call(
        table, "rewrite_data_files", strategy=literal("binpack"), options=options_map(options)
    )


def compact_small_files(
    spark: SparkSession,
    table: TableName,
    summary: Mapping[str, str],
    buckets: int,
    target_file_size: int,
) -> Compaction:
    """Run :func:`rewrite_small_files_sql` on ``table`` (``summary``: its current
    snapshot's)."""
    small = small_file_bytes(summary, buckets, target_file_size)
    row = spark.sql(
        rewrite_small_files_sql(table, small_bytes=small, target_file_size=target_file_size)
    ).first()
    if row is None:
        return Compaction(0, 0)
    return Compaction(int(row["rewritten_data_files_count"]), int(row["added_data_files_count"]))
