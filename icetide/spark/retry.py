"""Redo a step that lost a commit race, a bounded number of times.

Maintenance rewrites files while merges commit: whichever commits second may be refused
(:class:`~icetide.errors.CommitConflictError`, mapped in :mod:`icetide.spark.errors`).
Iceberg retries plain metadata conflicts itself; a refused validation (a merge deleted
rows from a file the rewrite replaced) needs the step planned again, which is what this
does. Each step commits atomically, so redoing it after a refusal is safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from icetide.errors import CommitConflictError
from icetide.spark.errors import jvm_boundary

T = TypeVar("T")

ATTEMPTS = 6


def retry_conflicts(
    action: str,
    step: Callable[[], T],
    *,
    attempts: int = ATTEMPTS,
    on_retry: Callable[[int, CommitConflictError], None] | None = None,
    pause: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``step``; when a concurrent commit wins, wait a little longer each time and
    run it again, up to ``attempts`` times in all (then the conflict is raised)."""
    for attempt in range(1, attempts + 1):
        try:
            with jvm_boundary(action):
                return step()
        except CommitConflictError as exc:
            if attempt == attempts:
                raise
            if on_retry is not None:
                on_retry(attempt, exc)
            pause(0.2 * attempt)
    raise AssertionError("unreachable")
