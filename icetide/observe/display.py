"""The pure decisions behind the status page and ``icetide status``: which tables come
first, which match a filter, and how figures read for people.

A pipeline of a thousand tables is read worst first: a table that is failing or held
(a stage cannot get on with it without a person), then the ones stale beyond their
freshness SLA, then by freshness, oldest first. Figures are humanized ("8 h 56 min",
"1.2 M", "8327…2847") with the exact value kept beside them (a tooltip on the page, the
raw field in JSON). No I/O here, so every rule is a unit test.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Literal, TypeVar

T = TypeVar("T")

Verdict = Literal["failing", "held", "stale", "ok", "unknown"]
"""A table's verdict, worst first (see :func:`verdict`)."""

VERDICTS: tuple[Verdict, ...] = ("failing", "held", "stale", "ok", "unknown")

_TIER: dict[Verdict, int] = {"failing": 0, "held": 0, "stale": 1, "ok": 2, "unknown": 3}
"""Failing and held share the first tier: both wait for a person, neither is worse."""


def verdict(
    *, failing: bool = False, held: bool = False, breached: bool = False, observed: bool = True
) -> Verdict:
    """The one word a table's row leads with.

    ``failing``: its last merge or maintenance failed; ``held``: a schema change waits
    for an approval, or is over its convergence SLA; ``breached``: stale beyond its
    freshness SLA; ``observed``: measured at least once (else ``unknown``).

    >>> verdict(failing=True, breached=True), verdict(held=True), verdict(breached=True)
    ('failing', 'held', 'stale')
    >>> verdict(), verdict(observed=False)
    ('ok', 'unknown')
    """
    if failing:
        return "failing"
    if held:
        return "held"
    if not observed:
        return "unknown"
    return "stale" if breached else "ok"


def rank_key(name: str, state: Verdict, freshness: float | None) -> tuple[int, float, str]:
    """The sort key that puts the worst table first: failing or held, then stale beyond
    the SLA, then ok, then not yet measured; within a tier the oldest freshness first
    (never merged, no freshness at all, counts as the oldest: nothing of the source has
    arrived), then by name so the order is stable.

    >>> rows = [("a", "ok", 5.0), ("b", "stale", 90.0), ("c", "ok", 60.0),
    ...         ("d", "held", 1.0), ("e", "ok", None), ("f", "unknown", None)]
    >>> [r[0] for r in sorted(rows, key=lambda r: rank_key(*r))]
    ['d', 'b', 'e', 'c', 'a', 'f']
    """
    age = math.inf if freshness is None else freshness
    return (_TIER[state], -age, name)


def matches(name: str, pattern: str | None) -> bool:
    """Whether a table's name matches a filter: every word of ``pattern`` is part of
    the name, ignoring case (``"ord eu"`` matches ``orders_eu``); an empty filter
    matches all.

    >>> matches("orders_eu", "ORD eu"), matches("orders_eu", "us"), matches("x", "")
    (True, False, True)
    """
    if not pattern:
        return True
    folded = name.casefold()
    return all(word in folded for word in pattern.casefold().split())


def select(
    rows: Iterable[T],
    name: Callable[[T], str],
    key: Callable[[T], tuple[int, float, str]],
    pattern: str | None = None,
    limit: int | None = None,
) -> tuple[list[T], int]:
    """The rows matching ``pattern``, worst first (``key``: :func:`rank_key` of a row),
    at most ``limit`` of them; and how many matched before the limit.

    >>> rows = [("a", "ok", 5.0), ("ab", "stale", 9.0), ("b", "ok", 7.0)]
    >>> select(rows, lambda r: r[0], lambda r: rank_key(*r), "a", limit=1)
    ([('ab', 'stale', 9.0)], 2)
    """
    chosen = sorted((r for r in rows if matches(name(r), pattern)), key=key)
    return (chosen if limit is None else chosen[: max(0, limit)]), len(chosen)


def duration(seconds: float | None) -> str:
    """Seconds for people, the two largest units: ``"12 s"``, ``"3 min 5 s"``,
    ``"8 h 56 min"``, ``"372 d 7 h"``; tenths under ten seconds; ``"-"`` for None.

    >>> duration(12.4), duration(185), duration(32167), duration(32167462)
    ('12 s', '3 min 5 s', '8 h 56 min', '372 d 7 h')
    >>> duration(1.84), duration(0), duration(3600), duration(None), duration(-2)
    ('1.8 s', '0 s', '1 h', '-', '0 s')
    """
    if seconds is None or math.isnan(seconds):
        return "-"
    if seconds < 10:
        return f"{round(max(0.0, seconds), 1):g} s"
    left = int(seconds)
    for i, (unit, size) in enumerate(_UNITS):
        if left >= size:
            text = f"{left // size} {unit}"
            if i + 1 < len(_UNITS):
                smaller, smaller_size = _UNITS[i + 1]
                rest = left % size // smaller_size
                text += f" {rest} {smaller}" if rest else ""
            return text
    return f"{left} s"  # pragma: no cover - seconds >= 10 always takes a unit


_UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))


def count(value: float | None) -> str:
    """A count for people: exact below 10,000, else three figures with ``k``, ``M``,
    ``B`` or ``T`` (thousand, million, billion, trillion); ``"-"`` for None.

    >>> count(7), count(9999), count(12345), count(1_234_567), count(987_654_321)
    ('7', '9,999', '12.3 k', '1.2 M', '988 M')
    >>> count(4_200_000_000), count(None), count(999_999), count(99_960)
    ('4.2 B', '-', '1.0 M', '100 k')
    """
    if value is None:
        return "-"
    if abs(value) < 10_000:
        return f"{int(value):,}"
    sign = "-" if value < 0 else ""
    for unit, size in (("k", 1e3), ("M", 1e6), ("B", 1e9), ("T", 1e12)):
        scaled = abs(value) / size
        text = f"{scaled:.1f}" if scaled < 99.95 else f"{scaled:.0f}"
        if float(text) < 1000 or unit == "T":  # 999,999 is 1.0 M, not 1000 k
            break
    return f"{sign}{text} {unit}"


def short_id(value: int | None) -> str:
    """An Iceberg snapshot id (19 digits, random) as its first and last four digits;
    the page keeps the whole id in the cell's tooltip.

    >>> short_id(8327164253829462847), short_id(12345), short_id(None)
    ('8327…2847', '12345', '-')
    """
    if value is None:
        return "-"
    text = str(value)
    return text if len(text) <= 9 else f"{text[:4]}…{text[-4:]}"


def ago(seconds: float | None) -> str:
    """How long ago, for people.

    >>> ago(75), ago(None)
    ('1 min 15 s ago', '-')
    """
    return "-" if seconds is None else f"{duration(seconds)} ago"
