"""An event still in flight when a schema change is applied is read under the version it
was written with (by its source position): a swap of two columns does not swap its
values, and a precision change does not read its milliseconds as microseconds."""

from __future__ import annotations

import json
from datetime import datetime

from icetide.events.envelope import decode_message
from icetide.events.model import ChangeEvent
from icetide.ledger.decode import ROW, Era, Projection, project_one
from icetide.schema.contract import ledger as c
from icetide.schema.file import schema_from_dict

MILLIS, MICROS = "io.debezium.time.Timestamp", "io.debezium.time.MicroTimestamp"
# Version 2: x and y swapped (ids 2 and 3 trade names), ts now DATETIME(6).
NOW = schema_from_dict(
    {
        "table": "t",
        "version": 2,
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {"id": 3, "name": "x", "type": "int"},
            {"id": 2, "name": "y", "type": "int"},
            {"id": 4, "name": "ts", "type": "timestamp"},
        ],
        "sink": {"logical": {"ts": MICROS}},
    }
)


def _message(pos: int, after: dict[str, object]) -> bytes:
    source = {"db": "shop", "table": "t", "file": "mysql-bin.000001", "pos": pos, "ts_ms": 1}
    return json.dumps({"op": "c", "after": after, "source": source}).encode()


def _key(pos: int) -> int:
    event = decode_message(_message(pos, {"id": 0}).decode())
    assert isinstance(event, ChangeEvent) and event.position is not None
    return event.position.key


# Version 1 as its events name and encode them, until the change at binlog position 1000.
BEFORE = Era(_key(1000), {"x": "y", "y": "x"}, {4: MILLIS})
PROJECTION = Projection(NOW, hints={4: MICROS}, earlier=(BEFORE,))


def test_an_event_written_before_the_change_is_read_under_its_own_version() -> None:
    row = project_one(_message(500, {"id": 1, "x": 1, "y": 2, "ts": 1704164645123}), PROJECTION)
    assert row["_status"] == ROW
    after = row[c.AFTER]
    assert (after["x"], after["y"]) == (2, 1)  # by id: the old x is the new y
    assert after["ts"] == datetime(2024, 1, 2, 3, 4, 5, 123000)  # milliseconds


def test_an_event_written_after_it_is_read_under_the_new_one() -> None:
    message = _message(1500, {"id": 2, "x": 30, "y": 20, "ts": 1704164645123456})
    after = project_one(message, PROJECTION)[c.AFTER]
    assert (after["x"], after["y"]) == (30, 20)
    assert after["ts"] == datetime(2024, 1, 2, 3, 4, 5, 123456)


# Version 3: c (id 3) was dropped in version 2, at binlog position 1000, and a new c
# (id 4) added under its name in version 3, at 2000.
READDED = schema_from_dict(
    {
        "table": "t",
        "version": 3,
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {"id": 2, "name": "v", "type": "int"},
            {"id": 4, "name": "c", "type": "string"},
        ],
    }
)
DROPPED = Projection(
    READDED,
    earlier=(Era(_key(1000), {}, None, frozenset({"c"})), Era(_key(2000), {}, None)),
)


def test_a_value_of_a_column_dropped_since_is_neither_projected_nor_rescued() -> None:
    """The old c's value is no value of the new c, and no unknown field either: kept in
    ``_rescued`` it would be a column to detect and, once the new c converges, a value
    phase 3 fills it with (the base would show the old value where the source shows
    NULL)."""
    row = project_one(_message(500, {"id": 1, "v": 1, "c": "old"}), DROPPED)
    assert row["_status"] == ROW
    assert (row[c.AFTER]["c"], row[c.RESCUED], row["_extra"]) == (None, None, [])
    # Written after the drop, before the re-add was applied: no c in it at all.
    assert project_one(_message(1500, {"id": 2, "v": 2}), DROPPED)[c.AFTER]["c"] is None
    # Written under the new c: its value.
    row = project_one(_message(2500, {"id": 3, "v": 3, "c": "new"}), DROPPED)
    assert (row[c.AFTER]["c"], row[c.RESCUED]) == ("new", None)
