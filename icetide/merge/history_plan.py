"""The SCD type 2 intervals of a table's rows, decided in plain Python.

A table configured with ``history: scd2`` keeps ``<table>_history``: one row per
version of each source row, valid from the source position (and commit time) of the
event that wrote it up to the position of the event that replaced or deleted it.
:func:`versions` is the rule, on events in any order with duplicates:

* events are ordered by source position, never by arrival, and one position is one
  event (a duplicate, or an event the history already holds, counts once);
* an insert, update or snapshot read (``c``, ``u``, ``r``) opens a version and closes
  the key's open one at its position; a delete (``d``) closes it and opens nothing; a
  truncate (``t``, no key) closes every open version;
* an update that changes the primary key closes the old key's version and opens the
  new key's at the same position;
* a column an update left out (an unchanged PostgreSQL TOAST value) takes the value of
  the version before it in position order (for a key change, the old key's version),
  as the base table does; with no version before it, the event's own value stands (a
  version already in the history carries the value it was given).

So a late event splits the interval it falls into, and a late delete ends one early.
The merge (:mod:`icetide.merge.history`) runs the same rule in Spark over the keys a
ledger range touches: their versions already in the history, as events again, plus the
range's events; the unit tests compare the two through the model workloads.

>>> from datetime import datetime
>>> t = datetime(2026, 1, 1)
>>> late = [Event((1,), "c", 10, t, {"v": "a"}), Event((1,), "u", 30, t, {"v": "c"}),
...         Event((1,), "u", 20, t, {"v": "b"})]
>>> [(v.from_position, v.to_position, v.values["v"]) for v in versions(late)]
[(10, 20, 'a'), (20, 30, 'b'), (30, None, 'c')]
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

Key = tuple[Hashable, ...]
OPENING_OPS = ("c", "u", "r")
"""The ops that open a version; ``d`` closes one, ``t`` closes all."""


@dataclass(frozen=True)
class Event:
    """One change event of one key (``key`` None for a truncate).

    ``values``: every column's value (None for a delete or truncate); a column named in
    ``unavailable`` was left out by the source and its value here is only a fallback.
    ``old_key``: for an update that changed the primary key, the key it moved from.
    """

    key: Key | None
    op: str
    position: int
    ts: datetime | None
    values: Mapping[str, Any] | None = None
    unavailable: frozenset[str] = frozenset()
    old_key: Key | None = None


@dataclass(frozen=True)
class Version:
    """One interval of one key: ``[from_position, to_position)``, open when
    ``to_position`` is None (the row as it is now)."""

    key: Key
    values: Mapping[str, Any]
    op: str
    """The op of the event that opened it."""
    from_position: int
    valid_from: datetime | None
    to_position: int | None = None
    valid_to: datetime | None = None
    inherited: frozenset[str] = field(default_factory=frozenset)
    """The columns whose values came from the version before (unchanged TOAST): kept
    so a late event before it can give them again."""

    @property
    def is_current(self) -> bool:
        """True for the key's open version."""
        return self.to_position is None


def history_events(rows: Iterable[Version]) -> list[Event]:
    """Versions already kept, as the events that made them: each opens at its start,
    and an end no version of the key starts at was a delete (or a truncate, the same
    to one key). Fed back to :func:`versions` with new events, they give the same
    versions again, split or ended where a late event falls.

    >>> from datetime import datetime
    >>> t = datetime(2026, 1, 1)
    >>> kept = [Version((1,), {"v": 1}, "c", 10, t, 20, t)]
    >>> [(e.op, e.position) for e in history_events(kept)]
    [('c', 10), ('d', 20)]
    """
    rows = list(rows)
    starts = {(r.key, r.from_position) for r in rows}
    events: list[Event] = []
    for r in rows:
        events.append(Event(r.key, r.op, r.from_position, r.valid_from, r.values, r.inherited))
        if r.to_position is not None and (r.key, r.to_position) not in starts:
            events.append(Event(r.key, "d", r.to_position, r.valid_to))
    return events


def _order(event: Event) -> tuple[int, int]:
    """Position order; within one position a truncate first, then the closing halves."""
    rank = 0 if event.op == "t" else 1 if event.op == "d" else 2
    return (event.position, rank)


def versions(events: Iterable[Event]) -> list[Version]:
    """Every version the events make, per key in position order (see the module).

    The first event seen at a key's position wins over later copies: pass the versions
    already kept (:func:`history_events`) first, so a duplicate of an event they hold
    does not replace the value they inherited.
    """
    seen: set[tuple[Key | None, int]] = set()
    unique: list[Event] = []
    for e in events:
        if (e.key, e.position) not in seen:
            seen.add((e.key, e.position))
            unique.append(e)
    unique.sort(key=_order)
    done: list[Version] = []
    open_: dict[Key, Version] = {}
    latest: dict[Key, Version] = {}
    """Per key its newest version, open or closed: what a left-out value is taken from
    (across a delete too, as the base's per-column newest available value is)."""

    def close(key: Key, event: Event) -> None:
        was = open_.pop(key, None)
        if was is not None:
            closed = Version(
                was.key,
                was.values,
                was.op,
                was.from_position,
                was.valid_from,
                event.position,
                event.ts,
                was.inherited,
            )
            done.append(closed)
            latest[key] = closed

    for e in unique:
        if e.op == "t":
            for key in list(open_):
                close(key, e)
            continue
        assert e.key is not None, f"a {e.op!r} event without a key"
        moved = e.old_key is not None and e.old_key != e.key
        if moved:
            assert e.old_key is not None
            close(e.old_key, e)
        close(e.key, e)
        if e.op not in OPENING_OPS:
            continue
        assert e.values is not None, f"a {e.op!r} event without values"
        source = latest.get(e.old_key) if moved and e.old_key is not None else latest.get(e.key)
        values = dict(e.values)
        inherited = frozenset(e.unavailable)
        if source is not None:
            for name in inherited:
                values[name] = source.values.get(name)
        opened = Version(e.key, values, e.op, e.position, e.ts, inherited=inherited)
        open_[e.key] = opened
        latest[e.key] = opened
    done.extend(open_.values())
    done.sort(key=lambda v: (repr(v.key), v.from_position))
    return done


def appendable(in_order: bool, truncated: bool, unavailable: frozenset[str] | None) -> bool:
    """Whether a ledger range's versions can be appended rather than recomputed with
    the versions kept (:mod:`icetide.merge.history`).

    True when every event of the range is newer than every version kept and every
    delete remembered (``in_order``: the base's batch found none older than its rows),
    no event truncates, and none left a column out (``unavailable`` known and empty).
    Then :func:`versions` over the kept versions and the range changes nothing kept but
    each touched key's open version, which ends at the key's first event of the range,
    and the range's events alone, in position order, make the new versions: no kept
    value is inherited, no interval is split.

    >>> appendable(True, False, frozenset()), appendable(True, False, frozenset({"doc"}))
    (True, False)
    >>> appendable(False, False, frozenset()), appendable(True, True, frozenset())
    (False, False)
    >>> appendable(True, False, None)  # the columns left out not known
    False
    """
    return in_order and not truncated and unavailable is not None and not unavailable
