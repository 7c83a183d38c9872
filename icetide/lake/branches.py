"""Write several statements to a branch of a table, then publish them on main at once.

A merge applied as two statements (the batch's keys deleted, then its rows appended)
would let readers of main see the moment between them: the keys gone, their new rows
not there yet. Written to a branch that starts at main's head, then fast-forwarded, main
moves once, from the snapshot before the merge to the last one of the branch; main's
history (its snapshot log) lists only that one, so to every reader the statements are
one change. Through Iceberg's API on the loaded table (no Spark job, no SQL text).
"""

from __future__ import annotations

from typing import Any

from icetide.errors import CommitConflictError
from icetide.spark.jvm import jvm_class

MAIN = "main"


class BranchDiverged(CommitConflictError):
    """Main moved while the branch was being written (another writer committed to it):
    the branch can no longer be fast-forwarded onto it, and main holds nothing of it."""


def start_branch(table: Any, branch: str, snapshot_id: int) -> None:
    """Point ``branch`` of the loaded Iceberg ``table`` at ``snapshot_id`` (main's head).

    Created the first time; moved back when an earlier run left it elsewhere (a crash
    before publishing); no commit at all when it is already there, which is the usual
    case: the last publish left main and the branch on the same snapshot.
    """
    ref = table.refs().get(branch)
    if ref is not None and int(ref.snapshotId()) == snapshot_id:
        return
    manage = table.manageSnapshots()
    if ref is None:
        manage.createBranch(branch, snapshot_id).commit()
    else:
        manage.replaceBranch(branch, snapshot_id).commit()


def publish(table: Any, branch: str) -> None:
    """Fast-forward main of the loaded ``table`` to ``branch``'s head.

    Raises :class:`BranchDiverged` when main is no longer an ancestor of the branch, and
    leaves main as it was.
    """
    table.refresh()
    try:
        table.manageSnapshots().fastForwardBranch(MAIN, branch).commit()
    except Exception as exc:  # Iceberg's refusal arrives as whatever py4j made of it
        table.refresh()
        if _main_is_ancestor(table, branch):
            raise
        raise BranchDiverged(
            f"cannot publish branch {branch}: main moved meanwhile ({exc.__class__.__name__})",
            hint="another writer committed to main; main holds nothing of the branch, and "
            "the step is retried from main's new head",
        ) from None


def _main_is_ancestor(table: Any, branch: str) -> bool:
    """Whether main's head is on ``branch``'s lineage (so it can be fast-forwarded)."""
    main, ahead = table.refs().get(MAIN), table.refs().get(branch)
    if main is None or ahead is None:
        return False
    return bool(
        jvm_class("org.apache.iceberg.util.SnapshotUtil").isAncestorOf(
            table, ahead.snapshotId(), main.snapshotId()
        )
    )
