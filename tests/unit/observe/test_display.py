"""The status page's and ``icetide status``'s pure rules: which table comes first, which
match a filter, and how figures read for people."""

from __future__ import annotations

import random

import pytest

from icetide.observe import display
from icetide.observe.display import Verdict


def _order(rows: list[tuple[str, Verdict, float | None]]) -> list[str]:
    return [r[0] for r in sorted(rows, key=lambda r: display.rank_key(*r))]


def test_worst_first_failing_or_held_then_stale_then_oldest_freshness() -> None:
    rows: list[tuple[str, Verdict, float | None]] = [
        ("fresh", "ok", 3.0),
        ("old_ok", "ok", 7200.0),
        ("stale_a_bit", "stale", 700.0),
        ("stale_very", "stale", 90_000.0),
        ("held", "held", 1.0),
        ("failing", "failing", 2.0),
        ("never_merged", "ok", None),
        ("not_observed", "unknown", None),
    ]
    expected = [
        "failing",  # failing and held share a tier: freshness decides between them
        "held",
        "stale_very",
        "stale_a_bit",
        "never_merged",  # nothing of the source arrived: the oldest of its tier
        "old_ok",
        "fresh",
        "not_observed",
    ]
    for seed in range(5):  # whatever order they come in
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        assert _order(shuffled) == expected


def test_ties_are_broken_by_name_so_the_order_is_stable() -> None:
    rows: list[tuple[str, Verdict, float | None]] = [("b", "ok", 5.0), ("a", "ok", 5.0)]
    assert _order(rows) == ["a", "b"]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"failing": True, "held": True, "breached": True}, "failing"),
        ({"held": True, "breached": True}, "held"),
        ({"held": True, "observed": False}, "held"),
        ({"breached": True}, "stale"),
        ({"breached": True, "observed": False}, "unknown"),
        ({}, "ok"),
    ],
)
def test_the_verdict_names_the_worst_thing(flags: dict[str, bool], expected: str) -> None:
    assert display.verdict(**flags) == expected


def test_a_filter_matches_every_word_anywhere_in_the_name_ignoring_case() -> None:
    names = ["shop_orders_eu", "shop_orders_us", "crm_customers", "ORDERS_archive"]
    rows = [(n, "ok", 1.0) for n in names]
    shown, matching = display.select(
        rows, lambda r: r[0], lambda r: display.rank_key(r[0], "ok", r[2]), "orders"
    )
    assert [r[0] for r in shown] == ["ORDERS_archive", "shop_orders_eu", "shop_orders_us"]
    assert matching == 3
    shown, matching = display.select(
        rows, lambda r: r[0], lambda r: display.rank_key(r[0], "ok", r[2]), "us ORD"
    )
    assert [r[0] for r in shown] == ["shop_orders_us"] and matching == 1


def test_a_limit_keeps_the_worst_and_still_counts_every_match() -> None:
    rows = [(f"t{i}", "ok", float(i)) for i in range(10)]
    shown, matching = display.select(
        rows, lambda r: r[0], lambda r: display.rank_key(r[0], "ok", r[2]), None, limit=3
    )
    assert [r[0] for r in shown] == ["t9", "t8", "t7"] and matching == 10
    assert display.select(rows, lambda r: r[0], lambda r: (0, 0.0, r[0]), None, 0) == ([], 10)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.04, "0 s"),
        (1.84, "1.8 s"),
        (9.96, "10 s"),
        (12.9, "12 s"),
        (60, "1 min"),
        (185, "3 min 5 s"),
        (3599, "59 min 59 s"),
        (3600, "1 h"),
        (32_167, "8 h 56 min"),
        (86_400 + 59, "1 d"),
        (32_167_462, "372 d 7 h"),
        (None, "-"),
    ],
)
def test_durations_read_in_their_two_largest_units(seconds: float | None, text: str) -> None:
    assert display.duration(seconds) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (9_999, "9,999"),
        (10_000, "10.0 k"),
        (123_456, "123 k"),
        (999_999, "1.0 M"),
        (1_234_567, "1.2 M"),
        (4_200_000_000, "4.2 B"),
        (3e15, "3000 T"),
        (-25_000, "-25.0 k"),
        (None, "-"),
    ],
)
def test_counts_read_in_three_figures(value: float | None, text: str) -> None:
    assert display.count(value) == text


def test_a_snapshot_id_is_shortened_to_its_ends() -> None:
    assert display.short_id(8327164253829462847) == "8327…2847"
    assert display.short_id(-8327164253829462847) == "-832…2847"
    assert display.short_id(123456789) == "123456789"
    assert display.short_id(None) == "-"
