"""Which base snapshot and which ledger events give a table as of a source position.

The base table holds the present; its snapshots hold the table as each merge left it,
and the ledger holds every change event with its exact source position. The table as of
a position ``P`` is the newest base snapshot that applied nothing after ``P`` (the newest
position its merges consumed is at or before ``P``), with the ledger's events after that
snapshot's watermark, up to ``P``, applied by the merge's own steps
(:mod:`icetide.merge.asof`). Events that arrived late (a position at or before the
snapshot's, appended after it) are among them, and the snapshot's remembered deletes
keep them from resurrecting a row, exactly as in the merge.

These decisions are pure, so they are tested without Spark: which snapshot to start
from, whether the target is reachable at all, and what to say when it is not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Literal

from icetide.errors import StageError
from icetide.events.position import parse_position


@dataclass(frozen=True)
class Target:
    """What the user asked for: a source position or a source commit time."""

    kind: Literal["position", "time"]
    text: str
    """As written, for messages."""
    position: Decimal | None = None
    """The packed position (:mod:`icetide.events.position`), for a position target."""
    time: datetime | None = None
    """A UTC-aware instant, for a time target."""


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([ T].*)?$")


def parse_target(text: str) -> Target:
    """``--at``: an ISO-8601 time (UTC unless it names an offset) or a source position.

    >>> parse_target("2026-03-01T09:00:00").time
    datetime.datetime(2026, 3, 1, 9, 0, tzinfo=datetime.timezone.utc)
    >>> parse_target("2026-03-01 10:00+01:00").time.isoformat()
    '2026-03-01T09:00:00+00:00'
    >>> parse_target("mysql-bin.000010:1234:0").position
    Decimal('100000000001234000000')
    >>> parse_target("10:00")
    Traceback (most recent call last):
    ...
    icetide.merge.asof_plan.TargetError: --at '10:00' is neither a time nor a source position
    """
    written = text.strip()
    if _DATE.match(written):
        try:
            moment = datetime.fromisoformat(written.replace("Z", "+00:00"))
        except ValueError as exc:
            raise TargetError(
                f"--at {text!r}: not an ISO-8601 time ({exc})",
                hint="write the time as 2026-03-01T09:00:00 (UTC) or with an offset, "
                "2026-03-01T10:00:00+01:00",
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return Target("time", written, time=moment.astimezone(UTC))
    try:
        return Target("position", written, position=Decimal(parse_position(written).key))
    except ValueError as exc:
        raise TargetError(
            f"--at {text!r} is neither a time nor a source position",
            hint=f"{exc}; or a time such as 2026-03-01T09:00:00 (UTC)",
        ) from None


class TargetError(StageError):
    """The ``--at`` target is not written as a time or a position."""


class Unreachable(StageError):
    """The table as of the target cannot be rebuilt from what the tables keep.

    ``earliest`` is the earliest position that can be (None: nothing can)."""

    def __init__(self, message: str, *, earliest: Decimal | None, hint: str) -> None:
        super().__init__(message, hint=hint)
        self.earliest = earliest


@dataclass(frozen=True)
class Start:
    """A base snapshot as-of can start from, oldest first on the base's lineage."""

    snapshot_id: int
    watermark: int | None
    """The ledger snapshot its merge consumed; None for a bootstrap's copy, which holds
    no ledger event."""
    exact_from: int | None = None
    """For a bootstrap's copy and every merge after it: the position the copy is exact
    from (read once the copy ended); its rows may be newer than any position before."""


@dataclass(frozen=True)
class Reach:
    """How far back the tables reach for one table."""

    first_event: Decimal | None
    """The oldest position in the ledger (None: the ledger is empty)."""
    copied: bool
    """Whether the base holds rows from before the ledger's first event (a bootstrap's
    copy at its hand-off): then the ledger alone does not make the table, and only a base
    snapshot holding those rows can start an as-of."""


@dataclass(frozen=True)
class AsOfPlan:
    """How to build the table as of ``target``."""

    target: Decimal
    start: Start | None
    """The base snapshot to start from; None: an empty table and the whole ledger."""
    through: Decimal | None
    """The newest position ``start`` applied (its merges' ledger, or the hand-off)."""


def plan_asof(
    target: Decimal,
    starts: Sequence[Start],
    through: Callable[[Start], Decimal | None],
    reach: Callable[[], Reach],
    retained: Callable[[int], bool],
) -> AsOfPlan:
    """The nearest start at or before ``target``, or the empty table, or
    :class:`Unreachable` saying the earliest reachable position.

    ``starts`` oldest first; ``through(start)`` the newest position it applied (a Spark
    aggregate, asked O(log n) times: it never decreases along the lineage);
    ``retained(ledger_snapshot)`` whether the ledger still keeps that snapshot, which the
    read of the events after it needs (expired watermarks cannot start); ``reach()`` how
    far back the tables reach, asked only when no start is at or before the target.

    >>> starts = [Start(1, None), Start(2, 10), Start(3, 11), Start(4, 12)]
    >>> through = {1: Decimal(5), 2: Decimal(20), 3: Decimal(30), 4: Decimal(40)}
    >>> plan = lambda t, copied=True, kept=lambda s: True: plan_asof(
    ...     Decimal(t), starts, lambda s: through[s.snapshot_id], lambda: Reach(Decimal(6), copied),
    ...     kept)
    >>> plan(35).start.snapshot_id, plan(30).through, plan(19).start.snapshot_id
    (3, Decimal('30'), 1)
    >>> plan(5).start.watermark is None  # the bootstrap's copy
    True
    >>> plan(35, kept=lambda s: s != 11).start.snapshot_id  # watermark 11 expired
    2
    >>> plan_asof(Decimal(7), [], through.get, lambda: Reach(Decimal(6), False), bool).start is None
    True
    >>> plan(4)
    Traceback (most recent call last):
    ...
    icetide.merge.asof_plan.Unreachable: position 4 is before the earliest reachable position 5 ...
    """
    usable = [s for s in starts if s.watermark is None or retained(s.watermark)]
    known: dict[int, Decimal | None] = {}

    def upto(i: int) -> Decimal | None:
        start = usable[i]
        if start.snapshot_id not in known:
            newest = through(start)
            if start.exact_from is not None:
                floor = Decimal(start.exact_from)
                newest = floor if newest is None else max(newest, floor)
            known[start.snapshot_id] = newest
        return known[start.snapshot_id]

    # The last usable start whose newest position is at or before the target.
    lo, hi = 0, len(usable)
    while lo < hi:
        mid = (lo + hi) // 2
        newest = upto(mid)
        if newest is None or newest <= target:
            lo = mid + 1
        else:
            hi = mid
    if lo > 0:
        chosen = usable[lo - 1]
        return AsOfPlan(target, chosen, upto(lo - 1))
    kept = reach()
    if not kept.copied and kept.first_event is not None and target >= kept.first_event:
        return AsOfPlan(target, None, None)
    earliest = _earliest(usable, upto, kept)
    if earliest is None:
        raise Unreachable(
            f"position {target} cannot be reached: the ledger holds no event and no base "
            "snapshot is kept",
            earliest=None,
            hint="run the ledger and merge stages first (icetide run)",
        )
    why = (
        "the table was copied at that hand-off, or older snapshots of the base were expired"
        if kept.copied
        else "the ledger's first event"
    )
    raise Unreachable(
        f"position {target} is before the earliest reachable position {earliest} ({why})",
        earliest=earliest,
        hint=f"ask for a position at or after {earliest}; maintenance.snapshots.max_age "
        "keeps base snapshots longer",
    )


def _earliest(
    usable: Sequence[Start], upto: Callable[[int], Decimal | None], reach: Reach
) -> Decimal | None:
    """The earliest position an as-of can reach: the ledger's first event when the
    ledger alone makes the table, else the oldest usable start's newest position."""
    if not reach.copied and reach.first_event is not None:
        return reach.first_event
    for i in range(len(usable)):
        newest = upto(i)
        if newest is not None:
            return newest
    return None
