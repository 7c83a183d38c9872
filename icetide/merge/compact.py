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

A packing merge is the slow one of its table (~6 s against ~3 s on the demo's tables;
docs/merge-performance.md, "Small bases bin-packed too"), so two habits keep it short,
both for freshness:

- one table packs per merge round (:class:`PackingTurns`): the tables of one run reach
  their ``compact_every``-th merge in the same round, and a round that packs them all
  holds back every event waiting for it;
- the delete files a packing leaves dangling (position deletes that no longer apply to
  any live data file: Iceberg's ``remove-dangling-deletes``, a separate action with its
  own queries and commit, about half of a packing's extra time) are removed on every
  ``DANGLING_EVERY``-th packing only, and only from a base that holds delete files (not
  a copy-on-write one). Until then they cost readers an entry each in the
  delete manifests, and are skipped at planning (their sequence number is older than
  every data file they could apply to).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from icetide.lake.calls import options_map, procedure_call
from icetide.schema.contract.base import WATERMARK_PROPERTY
from icetide.schema.contract.names import TableName
from icetide.schema.quoting import literal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SMALL_SHARE = 4
"""A data file below ``1 / SMALL_SHARE`` of an average bucket's bytes is small."""

DANGLING_EVERY = 4
"""Every how many packings one also removes the delete files left dangling."""


@dataclass(frozen=True)
class Compaction:
    """What a merge did about its base's small files."""

    rewritten: int
    """Data files replaced."""
    added: int
    """Data files written in their place."""
    dangling_removed: int = 0
    """Dangling delete files removed (only on every ``DANGLING_EVERY``-th packing)."""
    deferred: bool = False
    """The packing was due but another table of the round packed: this table packs at
    its next merge."""


class PackingTurn:
    """One merge round's single turn to pack small files.

    ``reserved``: the table that has waited longest for a turn, if any; only it may take
    this round's turn (else a table due at every merge would take every turn). With no
    reservation the first due table of the round takes it. Thread-safe: a round merges
    ``merge.parallel_tables`` tables at once.
    """

    def __init__(self, reserved: str | None = None) -> None:
        self.reserved = reserved
        self._lock = threading.Lock()
        self._taken = False

    def take(self, table: str) -> bool:
        """Whether ``table`` packs this round (at most one table does)."""
        with self._lock:
            if self._taken or self.reserved not in (None, table):
                return False
            self._taken = True
            return True

    @property
    def taken(self) -> bool:
        """Whether a table packed this round."""
        with self._lock:
            return self._taken


class PackingTurns:
    """Which table packs its small files in each merge round of one process: at most
    one a round, and a table that was due but lost the turn packs in a later round, the
    longest waiting first (kept in memory: after a restart a table packs at its next
    ``compact_every``-th merge instead)."""

    def __init__(self) -> None:
        self._owed: list[str] = []
        self._lock = threading.Lock()

    def open_round(self) -> PackingTurn:
        """The turn of a new round, reserved for the longest waiting table, if any."""
        with self._lock:
            return PackingTurn(self._owed[0] if self._owed else None)

    def due(self, table: str, since: int, every: int) -> bool:
        """Whether ``table`` should pack: every ``every``-th merge since its last rewrite
        (``since``; when a bucket had too few small files to rewrite, the next merges do
        not plan the same rewrite again), or later when it lost its turn. A waiting
        table rewritten meanwhile (by ``icetide maintain``) waits no more."""
        with self._lock:
            owed = table in self._owed
            if owed and since < every:
                self._owed.remove(table)
                owed = False
        return since >= every and (since % every == 0 or owed)

    def take(self, turn: PackingTurn | None, table: str) -> bool:
        """Whether due ``table`` packs now (always outside a round: ``turn`` None);
        else it waits for a later round."""
        granted = turn is None or turn.take(table)
        with self._lock:
            if granted and table in self._owed:
                self._owed.remove(table)
            elif not granted and table not in self._owed:
                self._owed.append(table)
        return granted

    def close_round(self, turn: PackingTurn) -> None:
        """After a round: a reserved turn no one took (the waiting table had no new
        events, or its merge failed) passes to the next waiting table, so an idle table
        holds no one back."""
        with self._lock:
            if turn.reserved is not None and not turn.taken and self._owed:
                self._owed.append(self._owed.pop(0))


def merges_since_rewrite(summaries: Iterable[Mapping[str, str]]) -> int:
    """Merges that added data files since the last rewrite (``replace``), from the
    lineage's summaries newest first: each added at most one file per bucket.

    A merge may commit twice (``delete_insert``: its DELETE, then its rows appended),
    both commits naming the same ledger snapshot (the watermark): they count once. On a
    copy-on-write base both add data files, and counted twice they made the count skip
    every multiple of ``compact_every`` once it was odd: such a base never packed
    (until 2b234be). A commit without a watermark (the first load) counts alone.

    >>> merges_since_rewrite([{"operation": "overwrite", "added-data-files": "3"},
    ...                       {"operation": "overwrite", "added-data-files": "0"},
    ...                       {"operation": "replace"},
    ...                       {"operation": "append", "added-data-files": "9"}])
    1
    >>> W = WATERMARK_PROPERTY
    >>> merges_since_rewrite([{"operation": "append", "added-data-files": "4", W: "8"},
    ...                       {"operation": "overwrite", "added-data-files": "4", W: "8"},
    ...                       {"operation": "append", "added-data-files": "4", W: "7"},
    ...                       {"operation": "overwrite", "added-data-files": "4", W: "7"},
    ...                       {"operation": "append", "added-data-files": "32"}])
    3

    On a merge-on-read base the DELETE commits last and adds delete files only:

    >>> merges_since_rewrite([{"operation": "delete", W: "8"},
    ...                       {"operation": "append", "added-data-files": "4", W: "8"},
    ...                       {"operation": "delete", W: "7"},
    ...                       {"operation": "append", "added-data-files": "4", W: "7"}])
    2
    """
    count = 0
    counted: str | None = None  # the watermark of the last commit counted
    for summary in summaries:
        if summary.get("operation") == "replace":
            break
        watermark = summary.get(WATERMARK_PROPERTY)
        if int(summary.get("added-data-files", "0") or 0) > 0 and (
            watermark is None or watermark != counted
        ):
            count += 1
            counted = watermark
    return count


def packings_since_dangling_removal(summaries: Iterable[Mapping[str, str]]) -> int:
    """Packings (``replace`` commits that wrote data files) since the last commit that
    only removed delete files (Iceberg's dangling-delete removal), from the lineage's
    summaries newest first. A removal that found nothing commits nothing, so after one
    the count goes on: the next packing removes again.

    >>> packings_since_dangling_removal([{"operation": "replace", "added-data-files": "4"},
    ...                                  {"operation": "overwrite", "added-data-files": "4"},
    ...                                  {"operation": "replace", "added-data-files": "2",
    ...                                   "removed-delete-files": "4"},
    ...                                  {"operation": "replace", "removed-delete-files": "7"},
    ...                                  {"operation": "replace", "added-data-files": "4"}])
    2
    """
    count = 0
    for summary in summaries:
        if summary.get("operation") != "replace":
            continue
        if int(summary.get("added-data-files", "0") or 0) > 0:
            count += 1
        elif int(summary.get("removed-delete-files", "0") or 0) > 0:
            break
    return count


def removes_dangling(summaries: Sequence[Mapping[str, str]]) -> bool:
    """Whether this packing also removes the delete files left dangling: on every
    ``DANGLING_EVERY``-th packing (:func:`packings_since_dangling_removal`), and only
    when the base holds delete files (its current snapshot's summary, ``summaries[0]``).
    A copy-on-write base never does: there the removal's queries would find nothing,
    commit nothing, and so run again at every packing after.

    >>> due = [{"operation": "replace", "added-data-files": "4"}] * 3
    >>> removes_dangling([{"total-delete-files": "16"}, *due])
    True
    >>> removes_dangling([{"total-delete-files": "0"}, *due])
    False
    >>> removes_dangling([{"total-delete-files": "16"}, *due[:2]])
    False
    """
    if not summaries or int(summaries[0].get("total-delete-files", "0") or 0) == 0:
        return False
    return packings_since_dangling_removal(summaries) + 1 >= DANGLING_EVERY


def small_file_bytes(summary: Mapping[str, str], buckets: int, target_file_size: int) -> int:
    """The size below which a data file counts as small: a ``SMALL_SHARE``-th of the
    average bucket (from the snapshot summary), and below the compaction target.

    >>> small_file_bytes({"total-files-size": "64000000"}, 16, 128 * 2**20)
    1000000
    """
    total = int(summary.get("total-files-size", "0") or 0)
    return max(1, min(total // (buckets * SMALL_SHARE), target_file_size * 3 // 4))


def rewrite_small_files_sql(
    table: TableName, *, small_bytes: int, target_file_size: int, remove_dangling: bool
) -> str:
    """Bin-pack, per bucket, the data files below ``small_bytes`` (two or more of them).

    The new files take a new sequence number, so the position deletes that pointed at
    the replaced files apply to nothing: those of one replaced file leave in the
    rewrite's commit, those of several (and of a large file too) stay until a dangling
    removal (``remove_dangling``, a second commit; icetide writes no equality deletes,
    see maintenance's rewrite for the reasoning).

    >>> print(rewrite_small_files_sql(TableName("lake", "s", "t"), small_bytes=10,
    ...     target_file_size=100, remove_dangling=True))  # doctest: +NORMALIZE_WHITESPACE
    CALL `lake`.system.rewrite_data_files(table => '`s`.`t`', strategy => 'binpack',
    options => map('target-file-size-bytes', '100', 'min-file-size-bytes', '10',
    'min-input-files', '2', 'remove-dangling-deletes', 'true',
    'use-starting-sequence-number', 'false'))
    """
    options = {
        "target-file-size-bytes": str(target_file_size),
        "min-file-size-bytes": str(small_bytes),
        "min-input-files": "2",
        "remove-dangling-deletes": "true" if remove_dangling else "false",
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
    remove_dangling: bool,
) -> Compaction:
    """Run :func:`rewrite_small_files_sql` on ``table`` (``summary``: its current
    snapshot's)."""
    small = small_file_bytes(summary, buckets, target_file_size)
    sql = rewrite_small_files_sql(
        table, small_bytes=small, target_file_size=target_file_size, remove_dangling=remove_dangling
    )
    row = spark.sql(sql).first()
    if row is None:
        return Compaction(0, 0)
    return Compaction(
        int(row["rewritten_data_files_count"]),
        int(row["added_data_files_count"]),
        int(row["removed_delete_files_count"]),
    )
