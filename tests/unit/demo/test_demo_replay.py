"""The generator's expected end state, checked by an independent replay.

Every generated message is decoded by :mod:`icetide.events` exactly as the ledger does
(``decode_message`` on the JSON text, then ``project_event`` against the workload's
schemas), and applied in :class:`~icetide.events.position.Position` order per table by the
tiny reference applier below. The result must equal ``Workload.expected`` exactly, value
*types* included: the expected rows use the decoder's types (``Decimal`` with the column's
scale, ``date``, naive ``datetime`` for ``timestamp``, UTC-aware ``datetime`` for
``timestamptz``, ``str`` for ``json``), the same values a Spark read of the Iceberg table
gives once ``timestamptz`` is normalized to UTC (see ``icetide.observe.compare``).
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from demo_support import Decoded, decode_all, key_of

from icetide.demo.workload import Workload, deliver, demo_sources, expected_rows, generate
from icetide.events.envelope import decode_message
from icetide.events.model import ChangeEvent
from icetide.events.project import ProjectedEvent, project_event
from icetide.schema.model import TableSchema

Key = tuple[Any, ...]
State = dict[str, dict[Key, dict[str, Any]]]
Change = tuple[str, int, ProjectedEvent]
"""(table, position key, projected event): all the applier needs of a message."""


def changes(events: list[Decoded]) -> list[Change]:
    return [(d.envelope.table, d.position, d.projected) for d in events]


def apply_events(
    events: list[Change],
    schemas: list[TableSchema],
    *,
    keep_unavailable: bool = True,
    delete_old_key: bool = True,
    in_position_order: bool = True,
) -> State:
    """The reference applier: per table, in position order, insert/update/delete by key.

    An update whose before image has another key first deletes that key; a column listed
    in ``unavailable`` keeps the stored value. The switches turn those rules off, to show
    that the workload depends on them.
    """
    by_table = {s.table: s for s in schemas}
    state: State = {s.table: {} for s in schemas}
    ordered = sorted(events, key=lambda e: (e[0], e[1])) if in_position_order else events
    for table, _, p in ordered:
        schema = by_table[table]
        rows = state[table]
        key = key_of(p.key, schema.primary_key)
        if p.op == "d":
            rows.pop(key, None)
            continue
        assert p.op in ("c", "r", "u") and p.after is not None
        if delete_old_key and p.before is not None:
            old_key = key_of(p.before, schema.primary_key)
            if old_key != key:
                rows.pop(old_key, None)
        row = dict(p.after)
        for column in p.unavailable:
            row[column] = rows[key][column] if keep_unavailable and key in rows else None
        rows[key] = row
    return state


def assert_same_typed(actual: State, expected: State) -> None:
    """Equal, and every value of the same Python type (and decimal scale, time zone)."""
    assert actual.keys() == expected.keys()
    for table, rows in expected.items():
        assert sorted(actual[table]) == sorted(rows), table
        for key, row in rows.items():
            got = actual[table][key]
            assert list(got) == list(row), (table, key)
            for column, want in row.items():
                have = got[column]
                where = (table, key, column, want, have)
                assert have == want and type(have) is type(want), where
                if isinstance(want, Decimal):
                    assert have.as_tuple().exponent == want.as_tuple().exponent, where
                if isinstance(want, datetime):
                    assert have.tzinfo == want.tzinfo, where


def test_replay_of_the_decoded_stream_equals_expected(
    workload: Workload, decoded: list[Decoded]
) -> None:
    assert_same_typed(apply_events(changes(decoded), workload.schemas), workload.expected)
    assert all(workload.expected[t] for t in ("customers", "order_lines", "products"))


@pytest.mark.parametrize(
    "options",
    [
        {"seed": 1, "events": 600, "with_schema_ratio": 0.0},
        {"seed": 2, "events": 600, "with_schema_ratio": 1.0},
        {"seed": 3, "events": 600, "toast": False},
        {"seed": 4, "events": 600, "key_changes": False},
        {"seed": 5, "events": 400, "tables": ["products"], "key_space": 6},
        {"seed": 6, "events": 400, "tables": ["order_lines", "customers"], "key_space": 8},
        {"seed": 7, "events": 3},
        {"seed": 8, "events": 0},
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
def test_replay_equals_expected_for_every_option(options: dict[str, Any]) -> None:
    workload = generate(**options)
    assert len(workload.events) == options["events"]
    replayed = apply_events(changes(decode_all(workload)), workload.schemas)
    assert_same_typed(replayed, workload.expected)


def test_the_workload_depends_on_every_rule_of_the_applier(
    workload: Workload, decoded: list[Decoded]
) -> None:
    # An applier that drops unavailable values, ignores the old key of a key-changing
    # update, or ignores positions must get another answer; else the replay check could
    # pass a generator that never exercises those rules.
    events = changes(decoded)
    no_toast = apply_events(events, workload.schemas, keep_unavailable=False)
    assert no_toast["products"] != workload.expected["products"]
    no_rekey = apply_events(events, workload.schemas, delete_old_key=False)
    for table in ("customers", "order_lines"):
        assert set(no_rekey[table]) > set(workload.expected[table])
    backwards = apply_events(events[::-1], workload.schemas, in_position_order=False)
    assert all(backwards[t] != workload.expected[t] for t in workload.expected)


def test_expected_value_types_per_column_type(workload: Workload) -> None:
    python_types: dict[str, type] = {
        "long": int,
        "int": int,
        "boolean": bool,
        "string": str,
        "json": str,
        "decimal": Decimal,
        "date": date,
        "timestamp": datetime,
        "timestamptz": datetime,
    }
    for schema in workload.schemas:
        rows = workload.expected[schema.table]
        for key, row in rows.items():
            assert key == key_of(row, schema.primary_key)
            assert list(row) == [c.name for c in schema.columns]
            for column in schema.columns:
                value = row[column.name]
                if value is None:
                    assert column.nullable, (schema.table, column.name)
                    continue
                assert type(value) is python_types[column.type.name], (column, value)
                if isinstance(value, Decimal):
                    assert value.as_tuple().exponent == -column.type.scale
                    assert len(value.as_tuple().digits) <= column.type.precision
                if isinstance(value, datetime):
                    zone = UTC if column.type.name == "timestamptz" else None
                    assert value.tzinfo is zone, (column, value)
                if column.type.name == "json":
                    text = str(value)
                    canonical = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
                    assert text == canonical


def test_expected_rows_are_sorted_copies(workload: Workload) -> None:
    for schema in workload.schemas:
        rows = expected_rows(workload, schema.table)
        keys = [key_of(r, schema.primary_key) for r in rows]
        assert keys == sorted(workload.expected[schema.table])
        assert rows == [workload.expected[schema.table][k] for k in keys]
        rows[0]["_scratch"] = 1  # a copy: the workload's own rows stay untouched
        assert "_scratch" not in workload.expected[schema.table][keys[0]]


def test_replay_of_delivered_files_equals_expected(workload: Workload, tmp_path: Path) -> None:
    """The pipeline end to end in plain Python: read every landed line, skip the noise,
    route by source, keep one copy per (table, position), apply in position order."""
    deliver(workload, tmp_path, seed=9, files=5, redeliver_all=True, noise=True)
    schemas = {s.table: s for s in workload.schemas}
    route = {source: table for table, source in demo_sources().items()}
    seen: dict[tuple[str, int], ProjectedEvent] = {}
    for path in sorted(tmp_path.iterdir()):
        for line in path.read_text(encoding="utf-8").splitlines():
            event = decode_message(line)
            if not isinstance(event, ChangeEvent):
                continue
            assert event.source is not None and event.position is not None
            table = route[event.source.qualified]
            projected = project_event(event, schemas[table])
            first = seen.setdefault((table, event.position.key), projected)
            assert first == projected  # every copy is the same change
    assert len(seen) == len(workload.events)
    replayed = apply_events([(t, pos, p) for (t, pos), p in seen.items()], workload.schemas)
    assert_same_typed(replayed, workload.expected)
