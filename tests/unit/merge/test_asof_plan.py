"""Which base snapshot an as-of starts from, and what it says when it cannot."""

from __future__ import annotations

from decimal import Decimal

import pytest

from icetide.events.position import binlog_position
from icetide.merge.asof_plan import (
    Reach,
    Start,
    TargetError,
    Unreachable,
    parse_target,
    plan_asof,
)

MERGES = [Start(11, 101), Start(12, 102), Start(13, 103), Start(14, 104), Start(15, 105)]
THROUGH = {10: 80, 11: 100, 12: 200, 13: 200, 14: 300, 15: 400}


def plan(target: int, starts=MERGES, copied=False, first=50, kept=lambda s: True, asked=None):  # type: ignore[no-untyped-def]
    def through(start: Start) -> Decimal:
        if asked is not None:
            asked.append(start.snapshot_id)
        return Decimal(THROUGH[start.snapshot_id])

    return plan_asof(Decimal(target), starts, through, lambda: Reach(Decimal(first), copied), kept)


@pytest.mark.parametrize(
    ("target", "snapshot"),
    [(100, 11), (199, 11), (200, 13), (250, 13), (400, 15), (10**30, 15)],
)
def test_the_newest_snapshot_through_at_most_the_target_starts(target: int, snapshot: int) -> None:
    assert plan(target).start == next(s for s in MERGES if s.snapshot_id == snapshot)


def test_before_every_snapshot_the_ledger_alone_from_its_first_event() -> None:
    chosen = plan(60)
    assert chosen.start is None and chosen.through is None


def test_the_search_asks_few_snapshots_for_their_newest_position() -> None:
    asked: list[int] = []
    plan(250, asked=asked)
    assert len(asked) <= 3


def test_a_snapshot_whose_watermark_the_ledger_expired_cannot_start() -> None:
    assert plan(450, kept=lambda s: s != 105).start == Start(14, 104)


def test_before_the_first_event_names_it() -> None:
    with pytest.raises(Unreachable) as caught:
        plan(49)
    assert caught.value.earliest == Decimal(50)
    assert "earliest reachable position 50" in caught.value.message


def test_a_copied_table_reaches_back_only_to_its_oldest_kept_snapshot() -> None:
    copy = [Start(10, None), *MERGES]  # the bootstrap's copy, at hand-off 80
    assert plan(90, starts=copy, copied=True).start == Start(10, None)
    with pytest.raises(Unreachable) as caught:
        plan(79, starts=copy, copied=True)
    assert caught.value.earliest == Decimal(80)
    # The copy's snapshot expired: the oldest merge's, even though the ledger is older.
    with pytest.raises(Unreachable) as caught:
        plan(90, copied=True)
    assert caught.value.earliest == Decimal(100)
    assert "hand-off" in caught.value.message


def test_nothing_kept_at_all() -> None:
    with pytest.raises(Unreachable) as caught:
        plan_asof(Decimal(1), [], lambda s: None, lambda: Reach(None, False), bool)
    assert caught.value.earliest is None


def test_targets() -> None:
    assert parse_target("mysql-bin.000010:99").position == Decimal(
        binlog_position("mysql-bin.000010", 99, 999_999).key
    )
    assert parse_target(" 2026-03-01T09:00:00Z ").kind == "time"
    with pytest.raises(TargetError, match="neither a time nor a source position"):
        parse_target("binlog 10")
    with pytest.raises(TargetError, match="not an ISO-8601 time"):
        parse_target("2026-13-01")


def test_a_copy_is_reachable_only_from_the_position_read_once_it_ended() -> None:
    """A bootstrap's rows carry the low watermark (MySQL) or 0 (PostgreSQL), but chunks
    read while writes went on (or a copy at the slot's consistent point) may be newer
    than any position before the copy ended: that position (``exact_from``, 90) is the
    earliest reachable, for the copy and for the merges after it that still hold its
    rows."""
    copy = [
        Start(10, None, exact_from=90),
        Start(11, 101, exact_from=90),  # a merge that consumed the ledger up to 85 only
        *MERGES[1:],
    ]
    through = {**THROUGH, 10: 0, 11: 85}

    def plan_copy(target: int) -> object:
        return plan_asof(
            Decimal(target),
            copy,
            lambda s: Decimal(through[s.snapshot_id]),
            lambda: Reach(Decimal(50), True),
            lambda s: True,
        )

    with pytest.raises(Unreachable) as caught:
        plan_copy(89)  # after the rows' stamps (0) and the first merge's events (85)
    assert caught.value.earliest == Decimal(90)
    assert "earliest reachable position 90" in caught.value.message
    assert plan_copy(90).start == Start(11, 101, exact_from=90)  # type: ignore[attr-defined]
    assert plan_copy(199).start == Start(11, 101, exact_from=90)  # type: ignore[attr-defined]
    assert plan_copy(200).start == Start(13, 103)  # type: ignore[attr-defined]
