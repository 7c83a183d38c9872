"""Write several statements to a branch of a table, then publish them on main at once.

A merge applied as two statements (the batch's keys deleted, then its rows appended)
would let readers of main see the moment between them: the keys gone, their new rows
not there yet. Written to a branch that starts at main's head, then fast-forwarded, main
moves once, from the snapshot before the merge to the last one of the branch; main's
history (its snapshot log) lists only that one, so to every reader the statements are
one change. Through Iceberg's API on the loaded table (no Spark job, no SQL text).
"""

from __future__ import annotations

from collections.abc import Iterable
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


def writer_branch(prefix: str, writer: str, now: float) -> str:
    """The branch of one writer (a process): its own, so two writers of one table (two
    merges started by mistake) never write on each other's branch or move it back; the
    time it was named says when it may be stale (:func:`stale_branches`).

    >>> writer_branch("icetide_merge", "0123456789abcdef", 1764676800.5)
    'icetide_merge_1764676800_0123456789ab'
    """
    return f"{prefix}_{int(now)}_{writer[:12]}"


def stale_branches(
    names: Iterable[str], prefix: str, now: float, max_age: float, keep: str
) -> list[str]:
    """The branches among ``names`` that writers named ``prefix`` (then
    :func:`writer_branch`) more than ``max_age`` seconds ago, except ``keep`` (the
    caller's own), and ``prefix`` itself (the one shared branch of earlier versions).
    Removing a live writer's branch costs it a retry, never a change: its publish fails
    and it starts over.

    >>> stale_branches(["main", "icetide_merge", "icetide_merge_100_ab",
    ...     "icetide_merge_990_cd", "icetide_merge_x_ef", "icetide_merge_50_me"],
    ...     "icetide_merge", 1000, 60, keep="icetide_merge_50_me")
    ['icetide_merge', 'icetide_merge_100_ab']
    """
    stale = []
    for name in names:
        if name == keep:
            continue
        if name == prefix:
            stale.append(name)
            continue
        named_at, _, rest = name.removeprefix(prefix + "_").partition("_")
        if name.startswith(prefix + "_") and rest and named_at.isdigit():
            if now - int(named_at) > max_age:
                stale.append(name)
    return sorted(stale)


def drop_branches(table: Any, names: Iterable[str]) -> None:
    """Remove the branches ``names`` of the loaded ``table``, in one commit."""
    manage = table.manageSnapshots()
    for name in names:
        manage = manage.removeBranch(name)
    manage.commit()


def branch_names(table: Any) -> list[str]:
    """The names of every branch and tag of the loaded ``table``."""
    return [str(name) for name in table.refs().keySet()]


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
