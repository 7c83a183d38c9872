"""Redo a step that lost a commit race or met a catalog outage, a bounded number of times.

Two kinds of failure go away by themselves, and each step commits atomically, so
redoing it is safe:

- a **conflict** (:class:`~icetide.errors.CommitConflictError`): another writer
  committed first (maintenance rewriting files under a merge, a second merge of the
  same table). Iceberg retries plain metadata conflicts itself; a refused validation
  needs the step planned again from a fresh read, soon: the other writer is done.
- an **outage** (:class:`~icetide.errors.CatalogUnavailableError`): the catalog or its
  storage did not answer. Asking again at once only adds load to a server that is
  restarting, so the pauses double up to a ceiling, within a budget of waiting; past it
  the outage is raised (the supervisor of ``icetide run`` restarts the stage later).

Anything else is **permanent** for this step and raised at once: a rerun would fail the
same way until someone fixes the cause. What to do after which failure is decided in
pure code (:func:`classify`, :func:`next_pause`); :func:`retry_step` only carries it out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from icetide.errors import CatalogUnavailableError, CommitConflictError, IcetideError
from icetide.spark.errors import jvm_boundary

T = TypeVar("T")

Failure = Literal["conflict", "outage", "permanent"]


def classify(exc: BaseException) -> Failure:
    """What kind of failure ``exc`` (an error out of :func:`~icetide.spark.errors.jvm_boundary`)
    is, for retrying.

    >>> from icetide.errors import StageError
    >>> classify(CommitConflictError("x")), classify(CatalogUnavailableError("x"))
    ('conflict', 'outage')
    >>> classify(StageError("x")), classify(KeyError("k"))
    ('permanent', 'permanent')
    """
    if isinstance(exc, CommitConflictError):
        return "conflict"
    if isinstance(exc, CatalogUnavailableError):
        return "outage"
    return "permanent"


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a step is redone."""

    conflict_attempts: int = 6
    """Attempts in all while other writers keep winning; then the conflict is raised."""
    conflict_pause: float = 0.2
    """Seconds before the second attempt after a conflict; one more of them each time."""
    outage_first: float = 1.0
    """Seconds before the first retry after an outage; doubled each time."""
    outage_ceiling: float = 30.0
    """The longest single pause during an outage."""
    outage_budget: float = 300.0
    """Seconds of pauses in all before an outage is raised: a catalog restarting or a
    network blip is over well within it, one that is not needs a person."""


DEFAULT_POLICY = RetryPolicy()


def next_pause(policy: RetryPolicy, kind: Failure, failures: int, waited: float) -> float | None:
    """Seconds to wait before redoing a step after its ``failures``-th failure in a row
    (of ``kind``), having waited ``waited`` seconds already; None: stop and raise.

    >>> p = RetryPolicy(outage_first=1, outage_ceiling=8, outage_budget=20)
    >>> [next_pause(p, "outage", n, w) for n, w in ((1, 0), (2, 1), (4, 7), (5, 15))]
    [1.0, 2.0, 8.0, None]
    >>> next_pause(p, "conflict", 2, 0), next_pause(p, "conflict", 6, 0)
    (0.4, None)
    >>> next_pause(p, "permanent", 1, 0) is None
    True
    """
    if kind == "conflict":
        if failures >= policy.conflict_attempts:
            return None
        return round(policy.conflict_pause * failures, 6)
    if kind == "outage":
        pause = min(policy.outage_ceiling, policy.outage_first * 2.0 ** (failures - 1))
        return None if waited + pause > policy.outage_budget else float(pause)
    return None


def retry_step(
    action: str,
    step: Callable[[], T],
    *,
    policy: RetryPolicy = DEFAULT_POLICY,
    on_retry: Callable[[int, IcetideError, float], None] | None = None,
    pause: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``step`` (JVM errors translated, named by ``action``); after a conflict or an
    outage, wait as :func:`next_pause` says and run it again. ``on_retry(failures, error,
    seconds)`` is told of each retry before its pause (to report it once per attempt).

    A run of one kind of failure counts on its own: a conflict after an outage starts
    the conflict count over.
    """
    failures, waited, last_kind = 0, 0.0, None
    while True:
        try:
            with jvm_boundary(action):
                return step()
        except (CommitConflictError, CatalogUnavailableError) as exc:
            kind = classify(exc)
            if kind != last_kind:
                failures, waited, last_kind = 0, 0.0, kind
            failures += 1
            seconds = next_pause(policy, kind, failures, waited)
            if seconds is None:
                raise
            if on_retry is not None:
                on_retry(failures, exc, seconds)
            pause(seconds)
            waited += seconds
