"""icetide types ↔ Spark SQL type text and Arrow types, both ways."""

from __future__ import annotations

import pyarrow as pa
import pytest

from icetide.errors import SchemaError
from icetide.schema.convert import ids_from
from icetide.schema.convert.spark import arrow_type, from_arrow, from_sql, sql_type
from icetide.schema.types import (
    TYPE_NAMES,
    Column,
    DecimalType,
    IcetideType,
    IntType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    parse_type,
)
from tests.type_samples import FIRST_ID, SAMPLES

STORED_AS_TEXT: dict[str, IcetideType] = {
    name: StringType() for name in ("time", "uuid", "json", "enum")
}
"""Types Spark and Arrow hold as text; the schema file keeps what the text means."""


@pytest.mark.parametrize("name", TYPE_NAMES)
def test_round_trip_through_spark_sql(name: str) -> None:
    back = from_sql(sql_type(SAMPLES[name]), ids_from(FIRST_ID))
    assert back == STORED_AS_TEXT.get(name, SAMPLES[name])


@pytest.mark.parametrize("name", TYPE_NAMES)
def test_round_trip_through_arrow(name: str) -> None:
    back = from_arrow(arrow_type(SAMPLES[name]), ids_from(FIRST_ID))
    assert back == STORED_AS_TEXT.get(name, SAMPLES[name])


def test_arrow_keeps_element_and_value_nullability() -> None:
    ctype = MapType(1, StringType(), 2, ListType(3, LongType(), element_nullable=False), False)
    assert from_arrow(arrow_type(ctype), ids_from(1)) == ctype


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bigint", "long"),
        ("LONG", "long"),
        ("tinyint", "int"),
        ("SMALLINT", "int"),
        ("INTEGER", "int"),
        ("REAL", "float"),
        ("VARCHAR(10)", "string"),
        ("CHAR(2)", "string"),
        ("TIMESTAMP", "timestamptz"),
        ("TIMESTAMP_LTZ", "timestamptz"),
        ("timestamp_ntz", "timestamp"),
        ("DECIMAL", "decimal(10,0)"),
        ("DECIMAL(5)", "decimal(5,0)"),
        ("dec( 12 , 2 )", "decimal(12,2)"),
    ],
)
def test_spark_type_names(text: str, expected: str) -> None:
    assert from_sql(text, ids_from(1)) == parse_type(expected)


def test_struct_text_with_quoting_not_null_and_commas_inside_types() -> None:
    text = "STRUCT<`a``b, c`: DECIMAL(9,2) NOT NULL, n STRUCT<x: INT>, m: MAP<STRING, ARRAY<INT>>>"
    assert from_sql(text, ids_from(10)) == StructType(
        (
            Column(10, "a`b, c", DecimalType(9, 2), nullable=False),
            Column(11, "n", StructType((Column(13, "x", IntType()),))),
            Column(12, "m", MapType(14, StringType(), 15, ListType(16, IntType()))),
        )
    )


@pytest.mark.parametrize("text", ["INTERVAL DAY", "ARRAY<INT", "STRUCT<a: INT> x", "VARIANT"])
def test_unreadable_spark_types_are_errors(text: str) -> None:
    with pytest.raises(SchemaError, match="Spark type"):
        from_sql(text, ids_from(1))


def test_unreadable_arrow_types_are_errors() -> None:
    with pytest.raises(SchemaError, match="has no icetide type"):
        from_arrow(pa.duration("us"), ids_from(1))
