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
from icetide.schema.types import (
    TYPE_NAMES,
    EnumType,
    IcetideType,
    IntType,
    ListType,
    LongType,
    StringType,
    parse_type,
)
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
        ('"money"[]', "string", None),
        ('"a(b)"[]', "string", None),
    ],
)
def test_postgres_types(column_type: str, expected: str, hint: str | None) -> None:
    assert icetide_type(column_type) == (parse_type(expected), hint)


@pytest.mark.parametrize(
    ("column_type", "dims", "expected", "hint"),
    [
        ("integer[]", 1, "list<int>", None),
        ("integer[]", 0, "list<int>", None),  # attndims 0 (CREATE TABLE AS): one level
        ("integer[]", 2, "list<list<int>>", None),
        ("integer[][]", 0, "list<list<int>>", None),  # DDL text says its own depth
        ("int4[3]", 1, "list<int>", None),
        ("numeric(12,4)[]", 1, "list<decimal(12,4)>", None),
        ("numeric[]", 1, "list<string>", "io.debezium.data.VariableScaleDecimal"),
        ('"char"[]', 1, "list<string>", None),
        ("text[]", 3, "list<list<list<string>>>", None),
        ("timestamp(3) without time zone[]", 1, "list<timestamp>", "io.debezium.time.Timestamp"),
        ("timestamp with time zone[]", 1, "list<timestamptz>", "io.debezium.time.ZonedTimestamp"),
        ("time with time zone[]", 1, "list<time>", "io.debezium.time.ZonedTime"),
        ("interval[]", 1, "list<long>", "io.debezium.time.MicroDuration"),
        ("bytea[]", 1, "list<binary>", None),
        ("uuid[]", 1, "list<uuid>", None),
        ("jsonb[]", 1, "list<json>", None),
        ("double precision[]", 1, "list<double>", None),
        ("real[]", 1, "list<float>", None),
        ("boolean[]", 1, "list<boolean>", None),
        ("date[]", 2, "list<list<date>>", "io.debezium.time.Date"),
        ('"money"[]', 2, "string", None),  # elements capture does not convert: the text
    ],
)
def test_arrays_are_lists_of_their_element_as_deep_as_declared(
    column_type: str, dims: int, expected: str, hint: str | None
) -> None:
    ctype, got = icetide_type(column_type, dims=dims)
    assert (str(ctype), got) == (expected, hint)
    if isinstance(ctype, ListType):
        assert ctype.element_nullable  # NULL elements stay null


def test_enums_are_text_and_their_arrays_lists_of_text() -> None:
    assert icetide_type('"mood"', enum=True) == (StringType(), None)
    assert str(icetide_type('"mood"[]', enum=True)[0]) == "list<string>"


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
        # An array declared json (the form before lists) keeps working as it is; a list
        # of its element at another depth too (PostgreSQL does not enforce dimensions).
        ("integer[]", parse_type("json"), False, (), True),
        ('"mood"[]', parse_type("json"), True, ("sad",), True),
        ("integer[]", ListType(7, IntType()), False, (), True),
        ("integer[]", ListType(7, ListType(8, IntType())), False, (), True),
        ("integer[]", ListType(7, LongType()), False, (), False),
        ("integer[]", ListType(7, IntType(), element_nullable=False), False, (), False),
        ("integer[]", parse_type("string"), False, (), False),
        ('"money"[]', parse_type("json"), False, (), False),  # sent as its text
        ("integer", parse_type("json"), False, (), False),
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
