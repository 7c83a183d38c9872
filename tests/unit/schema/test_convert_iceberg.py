"""icetide schemas ↔ Iceberg schema JSON, both ways, checked against PyIceberg."""

from __future__ import annotations

import json
from typing import Any

import pyiceberg.schema as pyiceberg_schema
import pyiceberg.types as pyiceberg_types
import pytest

from icetide.errors import SchemaError
from icetide.schema.convert.iceberg import from_iceberg, schema_json, table_schema
from icetide.schema.model import Column, TableSchema
from icetide.schema.types import (
    TYPE_NAMES,
    BinaryType,
    DecimalType,
    DoubleType,
    IcetideType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)
from tests.type_samples import SAMPLES

READS_BACK_AS: dict[str, IcetideType] = {"json": StringType(), "enum": StringType()}
"""Iceberg has no JSON or enum type: both are strings there."""


def _table(ctype: IcetideType, nullable: bool = True) -> TableSchema:
    key = Column(1, "id", LongType(), nullable=False, doc="the key")
    return TableSchema("t", (key, Column(2, "c", ctype, nullable)), ("id",))


def _pyiceberg_json(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` parsed by PyIceberg and written back as its own JSON."""
    parsed = pyiceberg_schema.Schema.model_validate_json(json.dumps(doc))
    return dict(json.loads(parsed.model_dump_json(by_alias=True, exclude_none=True)))


@pytest.mark.parametrize("nullable", [True, False])
@pytest.mark.parametrize("name", TYPE_NAMES)
def test_round_trip_every_type(name: str, nullable: bool) -> None:
    doc = schema_json(_table(SAMPLES[name], nullable), schema_id=3)
    back = table_schema(doc, "t")
    assert back == _table(READS_BACK_AS.get(name, SAMPLES[name]), nullable)


@pytest.mark.parametrize("name", TYPE_NAMES)
def test_pyiceberg_reads_the_json_the_same(name: str) -> None:
    doc = schema_json(_table(SAMPLES[name]), schema_id=3)
    assert _pyiceberg_json(doc) == doc
    parsed = pyiceberg_schema.Schema.model_validate_json(json.dumps(doc))
    assert parsed.schema_id == 3
    assert parsed.identifier_field_ids == [1]
    assert parsed.find_field(1).required and parsed.find_field(1).doc == "the key"
    assert parsed.highest_field_id == _table(SAMPLES[name]).last_column_id


def test_a_pyiceberg_schema_reads_as_icetide() -> None:
    t = pyiceberg_types
    schema = pyiceberg_schema.Schema(
        t.NestedField(1, "id", t.LongType(), required=True),
        t.NestedField(2, "price", t.DecimalType(12, 2), required=False),
        t.NestedField(3, "digest", t.FixedType(16), required=False),
        t.NestedField(
            4,
            "address",
            t.StructType(t.NestedField(7, "city", t.StringType(), required=True)),
            required=False,
        ),
        t.NestedField(5, "tags", t.ListType(8, t.StringType(), element_required=True)),
        t.NestedField(
            6, "scores", t.MapType(9, t.StringType(), 10, t.DoubleType(), value_required=False)
        ),
        t.NestedField(11, "at", t.TimestamptzType(), required=False),
        schema_id=0,
        identifier_field_ids=[1],
    )
    doc = json.loads(schema.model_dump_json(by_alias=True, exclude_none=True))
    assert table_schema(doc, "orders", version=4, last_column_id=20) == TableSchema(
        "orders",
        (
            Column(1, "id", LongType(), nullable=False),
            Column(2, "price", DecimalType(12, 2)),
            Column(3, "digest", BinaryType()),
            Column(4, "address", StructType((Column(7, "city", StringType(), False),))),
            Column(5, "tags", ListType(8, StringType(), element_nullable=False)),
            Column(6, "scores", MapType(9, StringType(), 10, DoubleType())),
            Column(11, "at", TimestamptzType()),
        ),
        ("id",),
        version=4,
        last_column_id=20,
    )


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        ("timestamp_ns", TimestampType()),
        ("timestamptz_ns", TimestamptzType()),
        ("fixed[4]", BinaryType()),
        ("decimal(38,0)", DecimalType(38, 0)),
    ],
)
def test_iceberg_types_icetide_reads_as_a_near_type(found: str, expected: IcetideType) -> None:
    assert from_iceberg(found) == expected


@pytest.mark.parametrize("found", ["variant", "geometry", {"type": "union"}, 3])
def test_unknown_iceberg_types_are_errors(found: Any) -> None:
    with pytest.raises(SchemaError, match="has no icetide type"):
        from_iceberg(found)
