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

from py4j.protocol import Py4JJavaError

from icetide.errors import CommitConflictError

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
    except Py4JJavaError as exc:
        kind = exc.java_exception.getClass().getName()
        if kind.endswith("ValidationException"):
            raise BranchDiverged(
                f"cannot publish branch {branch}: {exc.java_exception.getMessage()}",
                hint="another writer committed to main meanwhile; main holds nothing of "
                "the branch, and the step is retried from main's new head",
            ) from None
        raise
