"""The ledger keeps what the running schema does not know in ``_rescued``, projects only
the acknowledged columns, and maps a renamed column's old name by id."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

from icetide.events.project import coerce_value
from icetide.events.rescue import rescue_json, rescued_fields
from icetide.ledger.decode import ROW, STATUS, Projection, project_one
from icetide.schema.contract import ledger as c
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, parse_type

V1 = TableSchema(
    "t",
    (Column(1, "id", parse_type("int"), False), Column(2, "name", parse_type("string"))),
    ("id",),
)
V2 = V1.with_columns(
    (
        *V1.columns,
        Column(3, "note", parse_type("string")),
        Column(4, "at", parse_type("timestamptz")),
    ),
    version=2,
)


def _event(after: dict[str, object]) -> bytes:
    source = {"connector": "mysql", "db": "d", "table": "t", "file": "b.000001", "pos": 4}
    return json.dumps({"op": "c", "after": after, "source": source}).encode()


def test_unknown_fields_are_rescued_and_typed_again_exactly() -> None:
    at = datetime(2024, 2, 29, 10, 0, 0, 123456, tzinfo=UTC)
    text = rescue_json({"id": 1, "p": Decimal("10.50"), "b": b"\x00\xff", "at": at}, None, {"id"})
    assert text is not None
    fields = rescued_fields(text)
    assert fields["p"] == Decimal("10.50")  # every digit, no float
    column = Column(9, "at", parse_type("timestamptz"))
    assert coerce_value(fields["at"], column) == at
    assert coerce_value(fields["b"], Column(8, "b", parse_type("binary"))) == b"\x00\xff"
    assert rescue_json({"id": 1}, {"id": 1}, {"id"}) is None


def test_a_column_the_merge_has_not_acknowledged_stays_null_and_is_rescued() -> None:
    raw = _event({"id": 1, "name": "a", "note": "n1", "other": 5})
    held_back = Projection(V2, V2.with_columns(V1.columns, version=1))
    row = project_one(raw, held_back)
    assert row[STATUS] == ROW
    assert row[c.AFTER] == {"id": 1, "name": "a", "note": None, "at": None}
    assert rescued_fields(row[c.RESCUED]) == {"note": "n1", "other": 5}

    full = project_one(raw, Projection(V2))
    assert full[c.AFTER]["note"] == "n1"
    assert rescued_fields(full[c.RESCUED]) == {"other": 5}
    assert project_one(_event({"id": 2, "name": "b"}), V2)[c.RESCUED] is None


def test_an_old_name_of_a_renamed_column_lands_in_the_column() -> None:
    renamed = V1.with_columns((V1.columns[0], Column(2, "title", parse_type("string"))), version=2)
    row = project_one(
        _event({"id": 1, "name": "old"}), Projection(renamed, None, {"name": "title"})
    )
    assert row[c.AFTER] == {"id": 1, "title": "old"} and row[c.RESCUED] is None
