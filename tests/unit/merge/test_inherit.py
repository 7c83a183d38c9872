"""Which keys, over which positions, a moved row lived under: the lineage of key moves."""

from __future__ import annotations

from decimal import Decimal

from icetide.merge.inherit import KeyMove, lineage_segments


def move(mid: str, position: int, new: int, old: int | None) -> KeyMove:
    return KeyMove(mid, Decimal(position), (new,), None if old is None else (old,))


def test_a_single_move_reads_the_old_key_before_it_then_the_base_row() -> None:
    assert lineage_segments([move("m", 10, 2, 1)]) == [("m", (1,), None, Decimal(10), True)]


def test_a_chain_is_followed_back_to_its_first_key_in_position_order() -> None:
    # Listed out of order: a→b at 10, b→c at 20, c→d at 30.
    moves = [move("m3", 30, 4, 3), move("m1", 10, 2, 1), move("m2", 20, 3, 2)]
    segments = [s for s in lineage_segments(moves) if s[0] == "m3"]
    assert segments == [
        ("m3", (3,), Decimal(20), Decimal(30), False),
        ("m3", (2,), Decimal(10), Decimal(20), False),
        ("m3", (1,), None, Decimal(10), True),
    ]


def test_a_key_that_moves_away_and_back_uses_the_latest_arrival_before_each_move() -> None:
    # 1→2 at 10, 2→1 at 20, 1→2 at 30: the last move's row was 1 since 20, 2 from 10, 1 before.
    moves = [move("a", 10, 2, 1), move("b", 20, 1, 2), move("c", 30, 2, 1)]
    assert [s for s in lineage_segments(moves) if s[0] == "c"] == [
        ("c", (1,), Decimal(20), Decimal(30), False),
        ("c", (2,), Decimal(10), Decimal(20), False),
        ("c", (1,), None, Decimal(10), True),
    ]
    # An arrival at the move's own position is not before it.
    assert lineage_segments([move("x", 10, 2, 1), move("y", 10, 1, 3)])[0][4] is True


def test_a_move_without_a_known_old_key_has_no_lineage() -> None:
    assert lineage_segments([move("m", 10, 2, None)]) == []
