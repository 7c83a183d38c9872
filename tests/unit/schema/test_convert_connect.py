"""Debezium / Kafka Connect field schemas ↔ icetide types with a hint, both ways."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from icetide.errors import SchemaError
from icetide.schema.convert import ids_from
from icetide.schema.convert.connect import HINTED, connect_schema, icetide_type
from icetide.schema.types import (
    TYPE_NAMES,
    Column,
    EnumType,
    IntType,
    ListType,
    MapType,
    StringType,
    StructType,
    parse_type,
    primitive,
)
from tests.type_samples import FIRST_ID, SAMPLES
from tests.unit.events.test_events_fixtures import fixtures_dir

FIXTURES = fixtures_dir()


@pytest.mark.parametrize("optional", [True, False])
@pytest.mark.parametrize("name", TYPE_NAMES)
def test_round_trip_every_type(name: str, optional: bool) -> None:
    schema = connect_schema(SAMPLES[name], optional=optional)
    assert schema["optional"] is optional
    ctype, _ = icetide_type(schema, ids_from(FIRST_ID))
    assert ctype == SAMPLES[name]


@pytest.mark.parametrize("hint", HINTED)
def test_round_trip_every_hint(hint: str) -> None:
    ctype = primitive(HINTED[hint][1])
    schema = connect_schema(ctype, hint)
    assert (schema["type"], schema["name"]) == (HINTED[hint][0], hint)
    assert icetide_type(schema, ids_from(1)) == (ctype, hint)


def test_time_types_come_back_with_their_default_hint() -> None:
    for name, hint in [
        ("date", "io.debezium.time.Date"),
        ("time", "io.debezium.time.MicroTime"),
        ("timestamp", "io.debezium.time.MicroTimestamp"),
        ("timestamptz", "io.debezium.time.ZonedTimestamp"),
    ]:
        assert icetide_type(connect_schema(SAMPLES[name]), ids_from(1)) == (SAMPLES[name], hint)


def test_nullability_of_nested_parts_round_trips() -> None:
    ctype = StructType(
        (
            Column(100, "k", IntType(), nullable=False),
            Column(101, "l", ListType(103, StringType(), element_nullable=False)),
            Column(102, "m", MapType(104, StringType(), 105, IntType(), value_nullable=False)),
        )
    )
    assert icetide_type(connect_schema(ctype), ids_from(100)) == (ctype, None)


@pytest.mark.parametrize(
    ("schema", "expected", "hint"),
    [
        ({"type": "int8"}, "int", None),
        ({"type": "int16"}, "int", None),
        ({"type": "int64"}, "long", None),
        ({"type": "float64"}, "double", None),
        ({"type": "bytes"}, "binary", None),
        (
            {
                "type": "bytes",
                "name": "org.apache.kafka.connect.data.Decimal",
                "parameters": {"scale": "0", "connect.decimal.precision": "20"},
            },
            "decimal(20,0)",
            None,
        ),
        (
            {
                "type": "bytes",
                "name": "org.apache.kafka.connect.data.Decimal",
                "parameters": {"scale": "3"},
            },
            "decimal(38,3)",
            None,
        ),
        ({"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"}, "string", None),
        ({"type": "int32", "name": "io.debezium.time.Year"}, "int", None),
        ({"type": "string", "name": "io.debezium.data.Json"}, "json", None),
        ({"type": "string", "name": "io.debezium.data.Uuid"}, "uuid", None),
        ({"type": "string", "name": "io.debezium.data.Xml"}, "string", None),
        ({"type": "string", "name": "io.debezium.data.EnumSet"}, "string", None),
        ({"type": "struct", "name": "io.debezium.data.geometry.Geometry"}, "json", None),
        (
            {"type": "int32", "name": "org.apache.kafka.connect.data.Date"},
            "date",
            "org.apache.kafka.connect.data.Date",
        ),
        (
            {"type": "int64", "name": "io.debezium.time.NanoTimestamp"},
            "timestamp",
            "io.debezium.time.NanoTimestamp",
        ),
        (
            {"type": "string", "name": "io.debezium.time.ZonedTime"},
            "time",
            "io.debezium.time.ZonedTime",
        ),
        (
            {"type": "int64", "name": "io.debezium.time.MicroDuration"},
            "long",
            "io.debezium.time.MicroDuration",
        ),
        ({"type": "bytes", "name": "io.debezium.data.Bits"}, "binary", "io.debezium.data.Bits"),
        ({"type": "string", "name": "some.unknown.Logical"}, "string", None),
        ({"type": "array"}, "json", None),
    ],
)
def test_connect_schemas(schema: dict[str, Any], expected: str, hint: str | None) -> None:
    assert icetide_type(schema, ids_from(1)) == (parse_type(expected), hint)


def test_enum_takes_its_symbols_from_allowed() -> None:
    schema = {"type": "string", "name": "io.debezium.data.Enum", "parameters": {"allowed": "s,m,l"}}
    assert icetide_type(schema, ids_from(1)) == (EnumType(("s", "m", "l")), None)
    assert icetide_type({**schema, "parameters": {}}, ids_from(1)) == (StringType(), None)


def test_unknown_types_and_mismatched_hints_are_errors() -> None:
    with pytest.raises(SchemaError, match="unknown type 'decimal'"):
        icetide_type({"type": "decimal"}, ids_from(1))
    with pytest.raises(SchemaError, match="does not carry long values"):
        connect_schema(parse_type("long"), "io.debezium.time.Date")


def _value_fields(document: Any) -> Iterator[dict[str, Any]]:
    """The column fields of every ``before``/``after`` image schema in a Debezium message."""
    if isinstance(document, dict):
        if document.get("field") in ("before", "after") and document.get("type") == "struct":
            yield from document.get("fields") or ()
        for value in document.values():
            yield from _value_fields(value)
    elif isinstance(document, list):
        for value in document:
            yield from _value_fields(value)


def test_every_column_schema_of_the_debezium_examples_converts() -> None:
    fields = [
        f
        for path in sorted(FIXTURES.glob("*/*.json"))
        for f in _value_fields(json.loads(path.read_text()))
    ]
    assert fields
    for field in fields:
        ctype, _ = icetide_type(field, ids_from(1))
        back, _ = icetide_type(connect_schema(ctype, optional=field["optional"]), ids_from(1))
        assert back == ctype, field
