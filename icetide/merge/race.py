"""Whether another merge of the same table committed while this one ran.

Two merges of one table (two ``icetide merge`` processes started by mistake, a manual
merge beside ``icetide run``) each read the watermark, merge the ledger's events after
it and commit the new watermark with the data. Iceberg refuses the second commit when
it touches files the first one changed since the second one's *scan*, but the second
one *planned* earlier, from the watermark it read before the first committed: its
batch may be older than what the base already holds, and its commit moves the
watermark back. The rows stay right wherever the merge is guarded by position, and the
events between the two watermarks are merged again by the next round; a batch merged
without the guard (every event newer than the base when planned) may have written
older images over newer ones until then.

So each merge attempt tags its commits with an attempt id (:data:`ATTEMPT_PROPERTY`)
and, once committed, looks at the base's lineage since the snapshot it planned from:
a snapshot carrying a watermark and another attempt id means another merge committed
in between, and the round is merged again from a fresh read (the watermark read again,
the batch guarded), which makes the base exact before the command reports success.
"""

from __future__ import annotations

from collections.abc import Iterable

from icetide.errors import CommitConflictError
from icetide.lake.tables import Snapshot
from icetide.schema.contract.base import WATERMARK_PROPERTY

ATTEMPT_PROPERTY = "icetide.merge.attempt"
"""The snapshot summary property naming the merge attempt that committed the snapshot."""


def concurrent_merges(lineage: Iterable[Snapshot], planned: int | None, attempt: str) -> list[int]:
    """The snapshots on ``lineage`` (newest first) after ``planned`` (the base's snapshot
    the merge planned from; None: it had none) that another merge attempt than
    ``attempt`` committed with a watermark, newest first.

    >>> def snap(i, parent, **summary):
    ...     return Snapshot(i, parent, summary)
    >>> w = WATERMARK_PROPERTY
    >>> mine = snap(4, 3, **{w: "9", ATTEMPT_PROPERTY: "a"})
    >>> theirs = snap(3, 2, **{w: "12", ATTEMPT_PROPERTY: "b"})
    >>> rewrite = snap(2, 1)  # maintenance: no watermark
    >>> concurrent_merges([mine, theirs, rewrite, snap(1, None, **{w: "5"})], 1, "a")
    [3]
    >>> concurrent_merges([mine, rewrite, snap(1, None, **{w: "5"})], 1, "a")
    []
    """
    found = []
    for snapshot in lineage:
        if snapshot.snapshot_id == planned:
            break
        summary = snapshot.summary
        if WATERMARK_PROPERTY in summary and summary.get(ATTEMPT_PROPERTY) != attempt:
            found.append(snapshot.snapshot_id)
    return found


class ConcurrentMergeError(CommitConflictError):
    """Another merge of the same table committed between this merge's read of the
    watermark and its own commit: the round is merged again from a fresh read."""

    def __init__(self, table: str, snapshots: list[int]) -> None:
        listed = ", ".join(str(s) for s in snapshots)
        super().__init__(
            f"merge of {table}: another merge of the same table committed while this one "
            f"ran (snapshot {listed})",
            hint="nothing is lost or doubled: the table is merged again from the watermark "
            "as it is now. Run one merge per pipeline (one `icetide merge` or `icetide "
            "run`); two only slow each other down",
        )
        self.table = table
        self.snapshots = snapshots
