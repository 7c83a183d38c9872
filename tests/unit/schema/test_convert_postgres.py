"""PostgreSQL column types ↔ icetide types, both ways."""

from __future__ import annotations

import pytest

from icetide.errors import SchemaError
from icetide.schema.convert.postgres import (
    DDL_UNSUPPORTED,
    accepts,
    icetide_type,
    postgres_type,
)
from icetide.schema.types import TYPE_NAMES, EnumType, IcetideType, StringType, parse_type
from tests.type_samples import SAMPLES

READS_BACK_AS: dict[str, IcetideType] = {"enum": StringType()}
"""An enum is written as text (a PostgreSQL enum needs its own CREATE TYPE)."""


@pytest.mark.parametrize("name", TYPE_NAMES)
def test_round_trip_through_postgres_ddl(name: str) -> None:
    ctype = SAMPLES[name]
    if name in DDL_UNSUPPORTED:
        with pytest.raises(SchemaError, match="PostgreSQL has no column type"):
            postgres_type(ctype)
        return
    back, _ = icetide_type(postgres_type(ctype))
    assert back == READS_BACK_AS.get(name, ctype)


@pytest.mark.parametrize(
    ("column_type", "expected", "hint"),
    [
        ("boolean", "boolean", None),
        ("smallint", "int", None),
        ("int4", "int", None),
        ("bigint", "long", None),
        ("oid", "long", None),
        ("real", "float", None),
        ("double precision", "double", None),
        ("numeric(12,4)", "decimal(12,4)", None),
        ("numeric(5)", "decimal(5,0)", None),
        ("numeric(2,-3)", "decimal(5,0)", None),
        ("numeric(3,5)", "decimal(5,5)", None),
        ("numeric(39,0)", "string", None),
        ("numeric", "string", "io.debezium.data.VariableScaleDecimal"),
        ("bytea", "binary", None),
        ("date", "date", "io.debezium.time.Date"),
        ("time(3) without time zone", "time", "io.debezium.time.Time"),
        ("time with time zone", "time", "io.debezium.time.ZonedTime"),
        ("timestamp without time zone", "timestamp", "io.debezium.time.MicroTimestamp"),
        ("timestamp(3) with time zone", "timestamptz", "io.debezium.time.ZonedTimestamp"),
        ("timestamptz", "timestamptz", "io.debezium.time.ZonedTimestamp"),
        ("interval", "long", "io.debezium.time.MicroDuration"),
        ("uuid", "uuid", None),
        ("json", "json", None),
        ("jsonb", "json", None),
        ("character varying(20)", "string", None),
        ('"char"', "string", None),
        ("xml", "string", None),
        ('"money"', "string", None),
        ('"uuid"', "string", None),
        ("integer[]", "json", None),
        ("numeric(12,4)[]", "json", None),
        ('"char"[]', "json", None),
        ('"money"[]', "string", None),
        ('"a(b)"[]', "string", None),
    ],
)
def test_postgres_types(column_type: str, expected: str, hint: str | None) -> None:
    assert icetide_type(column_type) == (parse_type(expected), hint)


def test_enums_are_text_and_their_arrays_json() -> None:
    assert icetide_type('"mood"', enum=True) == (StringType(), None)
    assert icetide_type('"mood"[]', enum=True) == (parse_type("json"), None)


MOOD = EnumType(("sad", "ok", "happy"))


@pytest.mark.parametrize(
    ("column_type", "declared", "enum", "labels", "valid"),
    [
        ('"mood"', MOOD, True, ("sad", "ok", "happy"), True),
        ('"mood"', MOOD, True, ("sad", "ok"), True),  # a label the source dropped
        ('"mood"', MOOD, True, ("sad", "ok", "happy", "meh"), False),  # one it added
        ('"mood"', MOOD, True, (), False),  # labels unknown: nothing to check against
        ('"mood"', StringType(), True, ("sad",), True),  # what inference reads
        ('"mood"[]', MOOD, True, ("sad", "ok", "happy"), False),
        ("text", MOOD, False, (), False),  # text holds any value, the enum does not
        ("boolean", parse_type("boolean"), False, (), True),
        ("integer", parse_type("boolean"), False, (), False),
        ("character(36)", parse_type("uuid"), False, (), False),  # PostgreSQL has uuid
        ("uuid", parse_type("uuid"), False, (), True),
    ],
)
def test_declared_types_a_column_type_accepts(
    column_type: str, declared: IcetideType, enum: bool, labels: tuple[str, ...], valid: bool
) -> None:
    assert accepts(column_type, declared, enum=enum, labels=labels) is valid
