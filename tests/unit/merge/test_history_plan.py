"""The SCD type 2 interval rule (icetide/merge/history_plan.py), on small cases and
against the source model's intervals of random workloads delivered badly."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from icetide.demo.workload import generate
from icetide.events.envelope import decode_message
from icetide.events.model import ChangeEvent
from icetide.events.project import project_event
from icetide.merge.history_plan import Event, Version, history_events, versions

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def at(position: int) -> datetime:
    return T0 + timedelta(seconds=position)


def ev(key: int, op: str, position: int, v: Any = None, **kw: Any) -> Event:
    values = None if op == "d" else {"id": key, "v": v, "big": kw.pop("big", None)}
    return Event((key,), op, position, at(position), values, **kw)


def spans(found: list[Version]) -> list[tuple[Any, ...]]:
    return [(v.key[0], v.from_position, v.to_position, v.values["v"], v.op) for v in found]


def test_a_late_event_splits_the_interval_it_falls_into() -> None:
    late = [ev(1, "c", 10, "a"), ev(1, "u", 30, "c"), ev(1, "u", 20, "b")]
    assert spans(versions(late)) == [
        (1, 10, 20, "a", "c"),
        (1, 20, 30, "b", "u"),
        (1, 30, None, "c", "u"),
    ]
    found = versions(late)
    assert [v.valid_to for v in found] == [at(20), at(30), None]
    assert [v.is_current for v in found] == [False, False, True]


def test_a_duplicate_counts_once_and_the_first_copy_wins() -> None:
    found = versions([ev(1, "c", 10, "a"), ev(1, "c", 10, "other"), ev(1, "u", 20, "b")])
    assert spans(found) == [(1, 10, 20, "a", "c"), (1, 20, None, "b", "u")]


def test_delete_closes_and_a_reinsert_opens_again() -> None:
    found = versions([ev(1, "c", 10, "a"), ev(1, "d", 20), ev(1, "c", 30, "b")])
    assert spans(found) == [(1, 10, 20, "a", "c"), (1, 30, None, "b", "c")]
    # A late delete ends the interval it falls into early, and nothing opens.
    late = versions([ev(1, "c", 10, "a"), ev(1, "u", 40, "c"), ev(1, "d", 20)])
    assert spans(late) == [(1, 10, 20, "a", "c"), (1, 40, None, "c", "u")]


def test_a_key_change_ends_the_old_key_and_starts_the_new_one() -> None:
    move = ev(2, "u", 20, "b", old_key=(1,))
    found = versions([ev(1, "c", 10, "a"), move, ev(1, "c", 30, "again")])
    assert spans(found) == [
        (1, 10, 20, "a", "c"),
        (1, 30, None, "again", "c"),
        (2, 20, None, "b", "u"),
    ]


def test_unchanged_toast_values_come_from_the_version_before_in_position_order() -> None:
    toast = frozenset({"big"})
    events = [
        ev(1, "c", 10, "a", big="X"),
        ev(1, "u", 30, "c", unavailable=toast),
        # Late: falls before the update that left "big" out, so that one now has "Y".
        ev(1, "u", 20, "b", big="Y"),
    ]
    found = versions(events)
    assert [v.values["big"] for v in found] == ["X", "Y", "Y"]
    assert found[2].inherited == toast
    # Across a key change: from the old key's version.
    moved = versions(
        [ev(1, "c", 10, "a", big="X"), ev(2, "u", 20, "b", old_key=(1,), unavailable=toast)]
    )
    assert [(v.key, v.values["big"]) for v in moved] == [((1,), "X"), ((2,), "X")]
    # Nothing before it: the event's own value stands (a kept version's value).
    alone = versions([ev(1, "u", 10, "a", big="kept", unavailable=toast)])
    assert alone[0].values["big"] == "kept"


def test_a_truncate_closes_every_open_version() -> None:
    events = [
        ev(1, "c", 10, "a"),
        ev(2, "c", 11, "b"),
        Event(None, "t", 20, at(20)),
        ev(1, "c", 30, "z"),
    ]
    assert spans(versions(events)) == [
        (1, 10, 20, "a", "c"),
        (1, 30, None, "z", "c"),
        (2, 11, 20, "b", "c"),
    ]


def test_kept_versions_as_events_give_the_same_versions_and_take_late_ones() -> None:
    toast = frozenset({"big"})
    first = versions(
        [
            ev(1, "c", 10, "a", big="X"),
            ev(1, "d", 20),
            ev(1, "c", 30, "c"),
            ev(1, "u", 50, "e", unavailable=toast),
        ]
    )
    assert versions(history_events(first)) == first
    # A late update at 40 splits [30, 50) and gives the TOAST version at 50 its value.
    again = versions([*history_events(first), ev(1, "u", 40, "d", big="W"), ev(1, "c", 10, "dup")])
    assert spans(again) == [
        (1, 10, 20, "a", "c"),
        (1, 30, 40, "c", "c"),
        (1, 40, 50, "d", "u"),
        (1, 50, None, "e", "u"),
    ]
    assert again[-1].values["big"] == "W"


def _decoded_events(seed: int, count: int) -> tuple[Any, dict[str, list[Event]]]:
    """A generated workload's messages decoded as the ledger decodes them, as events."""
    workload = generate(seed, count, toast=True)
    schemas = {s.table: s for s in workload.schemas}
    out: dict[str, list[Event]] = {s.table: [] for s in workload.schemas}
    for envelope in workload.events:
        event = decode_message(json.dumps(envelope.message))
        assert isinstance(event, ChangeEvent)
        schema = schemas[envelope.table]
        p = project_event(event, schema)
        assert event.position is not None
        keys = schema.primary_key
        image = p.after if p.after is not None else p.before
        key = None if p.op == "t" else tuple(image[k] for k in keys)
        old = tuple(p.before[k] for k in keys) if p.before is not None and p.op != "d" else None
        out[envelope.table].append(
            Event(
                key,
                p.op,
                event.position.key,
                event.source_ts,
                p.after,
                frozenset(p.unavailable),
                old,
            )
        )
    return workload, out


@pytest.mark.parametrize("seed", [3, 17])
def test_random_workloads_delivered_badly_equal_the_model_intervals(seed: int) -> None:
    workload, by_table = _decoded_events(seed, 700)
    rng = random.Random(seed)
    for table, events in by_table.items():
        # Duplicates, any order, and the stream cut in two rounds: the second round
        # recomputed from the first round's versions and its remembered deletes (a
        # delete that came before its insert closed nothing yet), as the merge does.
        bad = events + rng.sample(events, len(events) // 5)
        rng.shuffle(bad)
        cut = len(bad) // 2
        first = versions(bad[:cut])
        remembered = [e for e in bad[:cut] if e.op in ("d", "t")] + [
            Event(e.old_key, "d", e.position, e.ts)
            for e in bad[:cut]
            if e.old_key is not None and e.old_key != e.key
        ]
        found = versions([*history_events(first), *bad[cut:], *remembered])
        model = workload.intervals(table)
        ms = lambda t: None if t is None else round(t.timestamp() * 1000)  # noqa: E731
        got = [
            (
                v.key,
                v.from_position,
                v.to_position,
                ms(v.valid_from),
                ms(v.valid_to),
                dict(v.values),
            )
            for v in found
        ]
        want = [(i.key, i.from_position, i.to_position, i.from_ms, i.to_ms, i.row) for i in model]
        assert sorted(got, key=repr) == sorted(want, key=repr), table
        assert any(v.inherited for v in found) or table != "products"
