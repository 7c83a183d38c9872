"""MySQL/MariaDB column types ↔ icetide types, both ways."""

from __future__ import annotations

import pytest

from icetide.errors import SchemaError
from icetide.schema.convert.mysql import (
    DDL_UNSUPPORTED,
    accepts,
    enum_labels,
    icetide_type,
    mysql_type,
)
from icetide.schema.types import (
    TYPE_NAMES,
    DecimalType,
    EnumType,
    IcetideType,
    StringType,
    parse_type,
)
from tests.type_samples import SAMPLES

READS_BACK_AS: dict[str, IcetideType] = {"uuid": StringType(), "enum": StringType()}
"""Types MySQL stores in a type that reads back as another (char(36), ENUM → string)."""


@pytest.mark.parametrize("name", TYPE_NAMES)
def test_round_trip_through_mysql_ddl(name: str) -> None:
    ctype = SAMPLES[name]
    if name in DDL_UNSUPPORTED:
        with pytest.raises(SchemaError, match="MySQL has no column type"):
            mysql_type(ctype)
        return
    back, _ = icetide_type(mysql_type(ctype))
    assert back == READS_BACK_AS.get(name, ctype)
    # what reads back as another type is still a valid declaration of the column written
    assert accepts(mysql_type(ctype), ctype)


@pytest.mark.parametrize(
    ("column_type", "expected", "hint"),
    [
        ("tinyint(1)", "int", None),
        ("smallint unsigned", "int", None),
        ("mediumint", "int", None),
        ("int(11)", "int", None),
        ("INT UNSIGNED", "long", None),
        ("int(10) unsigned zerofill", "long", None),
        ("bigint", "long", None),
        ("bigint(20) unsigned", "decimal(20,0)", None),
        ("year", "int", None),
        ("float", "float", None),
        ("float unsigned", "float", None),
        ("float(30)", "double", None),
        ("double", "double", None),
        ("double precision", "double", None),
        ("decimal(10,2)", "decimal(10,2)", None),
        ("decimal(10,2) unsigned", "decimal(10,2)", None),
        ("numeric(7)", "decimal(7,0)", None),
        ("decimal", "decimal(10,0)", None),
        ("decimal(65,30)", "string", None),
        ("decimal(0,0)", "string", None),
        ("bit(1)", "boolean", None),
        ("bit(10)", "binary", "io.debezium.data.Bits"),
        ("date", "date", "io.debezium.time.Date"),
        ("datetime", "timestamp", "io.debezium.time.Timestamp"),
        ("datetime(3)", "timestamp", "io.debezium.time.Timestamp"),
        ("datetime(4)", "timestamp", "io.debezium.time.MicroTimestamp"),
        ("timestamp(6)", "timestamptz", "io.debezium.time.ZonedTimestamp"),
        ("time(2)", "time", "io.debezium.time.MicroTime"),
        ("json", "json", None),
        ("geometry", "json", None),
        ("point", "json", None),
        ("binary(16)", "binary", None),
        ("varbinary(255)", "binary", None),
        ("longblob", "binary", None),
        ("char(3)", "string", None),
        ("varchar(255)", "string", None),
        ("mediumtext", "string", None),
        ("enum('a','b(c)')", "string", None),
        ("set('x','y')", "string", None),
        ("type6", "string", None),
    ],
)
def test_mysql_types(column_type: str, expected: str, hint: str | None) -> None:
    assert icetide_type(column_type) == (parse_type(expected), hint)


def test_ddl_types() -> None:
    assert mysql_type(DecimalType(38, 10)) == "decimal(38,10)"
    assert mysql_type(SAMPLES["enum"]) == "enum('new','paid','shipped')"
    assert mysql_type(parse_type("boolean")) == "bit(1)"


STATUS = EnumType(("new", "paid"))


@pytest.mark.parametrize(
    ("column_type", "declared", "valid"),
    [
        ("tinyint(1)", parse_type("boolean"), True),
        ("TINYINT(1) UNSIGNED", parse_type("boolean"), True),
        ("bool", parse_type("boolean"), True),
        ("tinyint(1)", parse_type("int"), True),  # what inference reads
        ("tinyint(4)", parse_type("boolean"), False),
        ("tinyint", parse_type("boolean"), False),
        ("int", parse_type("boolean"), False),  # MODIFY vip INT: a change
        ("varchar(5)", parse_type("boolean"), False),
        ("tinyint(1)", parse_type("long"), False),  # a widening is the sink config's job
        ("char(36)", parse_type("uuid"), True),
        ("varchar(36)", parse_type("uuid"), False),
        ("char(32)", parse_type("uuid"), False),
        ("enum('new','paid')", STATUS, True),
        ("enum('new')", STATUS, True),  # a label dropped: the enum still holds the values
        ("enum('new','paid','shipped')", STATUS, False),  # a label added: not held
        ("enum('paid','new')", EnumType(("new", "paid", "x")), True),
        ("set('new','paid')", STATUS, False),
        ("varchar(10)", STATUS, False),
        ("enum('new','paid')", StringType(), True),
    ],
)
def test_declared_types_a_column_type_accepts(
    column_type: str, declared: IcetideType, valid: bool
) -> None:
    assert accepts(column_type, declared) is valid


def test_enum_labels_are_read_with_quotes_and_parentheses() -> None:
    assert enum_labels("enum('a(1)','it''s',',')") == ("a(1)", "it's", ",")
    assert enum_labels("ENUM('x')") == ("x",)
    assert enum_labels("set('x')") is None
