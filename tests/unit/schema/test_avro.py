"""schema → Avro: fastavro parses every schema, records round-trip, names and nulls exact."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import fastavro
import pytest

from icetide.errors import SchemaError
from icetide.schema.convert import ids_from
from icetide.schema.convert.avro import (
    avro_datum,
    from_avro_schema,
    known_ids,
    to_avro_schema,
)
from icetide.schema.types import (
    Column,
    DecimalType,
    EnumType,
    IntType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    primitive,
)
from tests.type_samples import FIRST_ID, SAMPLES

COLUMNS = (
    Column(1, "Id", LongType(), False, doc="the key"),
    Column(2, "EMail", StringType()),
    Column(3, "status", EnumType(("new", "paid")), False),
    Column(
        4,
        "Address",
        StructType(
            (
                Column(5, "City", StringType(), False),
                Column(6, "kind", EnumType(("home", "work"))),
            )
        ),
    ),
    Column(7, "tags", ListType(8, StringType(), element_nullable=False)),
    Column(9, "scores", MapType(10, StringType(), 11, LongType())),
    Column(12, "by_day", MapType(13, IntType(), 14, StringType())),
    Column(15, "amount", DecimalType(12, 2)),
    Column(16, "at", primitive("timestamptz")),
    Column(17, "local", primitive("timestamp")),
    Column(18, "day", primitive("date")),
    Column(19, "clock", primitive("time")),
    Column(20, "ref", primitive("uuid")),
    Column(21, "mood", EnumType(("so so", "fine"))),
)


def roundtrip(schema: dict[str, Any], records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    parsed = fastavro.parse_schema(schema)
    buffer = io.BytesIO()
    fastavro.writer(buffer, parsed, records)
    buffer.seek(0)
    return list(fastavro.reader(buffer))


def test_names_namespace_nullability_docs_and_enums() -> None:
    schema = to_avro_schema("Users", "shop", COLUMNS, doc="users v1")
    fastavro.parse_schema(schema)
    assert (schema["namespace"], schema["name"], schema["doc"]) == ("shop", "Users", "users v1")
    fields = {f["name"]: f for f in schema["fields"]}
    assert list(fields)[:3] == ["Id", "EMail", "status"]
    assert fields["Id"]["type"] == "long" and "default" not in fields["Id"]
    assert fields["Id"]["doc"] == "the key" and fields["Id"]["field-id"] == 1
    assert fields["EMail"]["type"] == ["null", "string"] and fields["EMail"]["default"] is None
    assert fields["status"]["type"] == {
        "type": "enum",
        "name": "status",
        "namespace": "shop.Users",
        "symbols": ["new", "paid"],
    }
    address = fields["Address"]["type"][1]
    assert (address["type"], address["name"], address["namespace"]) == (
        "record",
        "Address",
        "shop.Users",
    )
    assert address["fields"][1]["type"][1]["namespace"] == "shop.Users.Address"
    assert fields["tags"]["type"][1] == {"type": "array", "items": "string"}
    assert fields["by_day"]["type"][1]["type"] == "array"  # int keys: entries
    assert fields["mood"]["type"] == [
        "null",
        {"type": "string", "icetide.symbols": ["so so", "fine"]},
    ]
    logical = {n: fields[n]["type"][1]["logicalType"] for n in ("amount", "at", "local", "day")}
    assert logical == {
        "amount": "decimal",
        "at": "timestamp-micros",
        "local": "local-timestamp-micros",
        "day": "date",
    }
    assert fields["clock"]["type"][1]["logicalType"] == "time-micros"
    assert fields["ref"]["type"][1]["logicalType"] == "uuid"


def test_records_roundtrip_through_fastavro() -> None:
    schema = to_avro_schema("Users", "shop", COLUMNS)
    row = {
        "Id": 7,
        "EMail": None,
        "status": "paid",
        "Address": {"City": "Oslo", "kind": "work"},
        "tags": ["a", "b"],
        "scores": [("x", 1), ("y", None)],  # Arrow's map form
        "by_day": [(1, "mon")],
        "amount": Decimal("12.50"),
        "at": datetime(2024, 5, 1, 12, 0, 0, 1, tzinfo=UTC),
        "local": datetime(2024, 5, 1, 12, 0, 0, 2),
        "day": date(2024, 5, 1),
        "clock": "12:30:00.000001",
        "ref": "0b5f4d2e-8a51-4d1a-9d7c-0f6c1e3a9b11",
        "mood": "so so",
    }
    datum = {c.name: avro_datum(row[c.name], c.type) for c in COLUMNS}
    (back,) = roundtrip(schema, [datum])
    assert back["status"] == "paid" and back["Address"] == {"City": "Oslo", "kind": "work"}
    assert back["scores"] == {"x": 1, "y": None}
    assert back["by_day"] == [{"key": 1, "value": "mon"}]
    assert back["amount"] == Decimal("12.50") and back["clock"] == time(12, 30, 0, 1)
    assert back["at"] == row["at"] and back["local"] == row["local"]
    assert str(back["ref"]) == row["ref"] and back["EMail"] is None


def test_a_required_field_refuses_null_and_an_enum_refuses_other_symbols() -> None:
    parsed = fastavro.parse_schema(to_avro_schema("Users", "shop", COLUMNS[:3]))
    with pytest.raises((ValueError, TypeError)):
        fastavro.writer(io.BytesIO(), parsed, [{"Id": None, "EMail": None, "status": "new"}])
    with pytest.raises(ValueError):
        fastavro.writer(io.BytesIO(), parsed, [{"Id": 1, "EMail": None, "status": "gone"}])


@pytest.mark.parametrize("name", sorted(set(SAMPLES) - {"struct"}))
def test_every_type_sample_is_valid_avro_and_reads_back_as_itself(name: str) -> None:
    # fastavro takes the schema, and the schema read back is the same column: a converter
    # that wrote a wrong logical type, lost a nullable branch or a nested id fails here.
    column = Column(1, "value", SAMPLES[name])
    schema = to_avro_schema("t", "db", (column,))
    fastavro.parse_schema(schema)
    [back] = from_avro_schema(schema, ids_from(FIRST_ID), known=known_ids((column,)))
    # Avro has no JSON type: a json column is a plain string there (the module's table).
    expected = StringType() if name == "json" else column.type
    assert (back.name, back.type, back.nullable) == ("value", expected, column.nullable)


def test_a_name_avro_cannot_spell_is_a_clear_error() -> None:
    # The struct sample holds a field called "b c".
    with pytest.raises(SchemaError, match=r"column db\.t\.value\.b c: 'b c' cannot") as caught:
        to_avro_schema("t", "db", (Column(1, "value", SAMPLES["struct"]),))
    assert caught.value.hint is not None and "rename" in caught.value.hint
