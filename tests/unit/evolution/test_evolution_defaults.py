"""Column defaults and tags: the schema-file form, located errors, source text, inference."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from icetide.config.loader import load_schema_file
from icetide.errors import ConfigError
from icetide.schema.defaults import COERCERS, default_from_source
from icetide.schema.file import schema_from_dict, schema_to_dict
from icetide.schema.infer import infer_table_schema
from icetide.schema.types import (
    LEAF_NAMES,
    ColumnDefault,
    DecimalType,
    IntType,
    StringType,
    TimestampType,
    parse_type,
)

SAMPLES: dict[str, tuple[Any, Any]] = {
    "boolean": (True, True),
    "int": (7, 7),
    "long": ("-9000000000", -9000000000),
    "float": (1.5, 1.5),
    "double": ("2.25", 2.25),
    "string": ("n/a", "n/a"),
    "binary": ("AAE=", b"\x00\x01"),
    "date": ("2024-01-31", dt.date(2024, 1, 31)),
    "time": ("08:30:00", dt.time(8, 30)),
    "timestamp": ("2024-01-31T08:30:00", dt.datetime(2024, 1, 31, 8, 30)),
    "timestamptz": ("2024-01-31T08:30:00+02:00", dt.datetime(2024, 1, 31, 6, 30, tzinfo=dt.UTC)),
    "uuid": ("123E4567-E89B-12D3-A456-426614174000", "123e4567-e89b-12d3-a456-426614174000"),
    "json": ('{"a": 1}', '{"a": 1}'),
    "decimal(12,2)": ("1.5", Decimal("1.50")),
    "enum": ("paid", "paid"),
}


def test_every_leaf_type_has_a_default_coercer() -> None:
    assert set(COERCERS) == set(LEAF_NAMES)


@pytest.mark.parametrize("type_text", list(SAMPLES))
def test_a_default_of_every_leaf_type_round_trips_through_the_schema_file(type_text: str) -> None:
    given, value = SAMPLES[type_text]
    ctype: Any = {"enum": ["new", "paid"]} if type_text == "enum" else type_text
    data = {
        "table": "t",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long"},
            {"id": 2, "name": "c", "type": ctype, "default": given, "tags": ["sensitive", "pii"]},
        ],
    }
    schema = schema_from_dict(data)
    column = schema.columns[1]
    assert column.default == ColumnDefault(value=value)
    assert column.tags == frozenset({"sensitive", "pii"})
    assert schema_from_dict(schema_to_dict(schema)) == schema


def test_bad_defaults_and_tags_name_their_yaml_path_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        "table: t\nprimary_key: [id]\ncolumns:\n"
        "  - {id: 1, name: id, type: long}\n"
        "  - {id: 2, name: n, type: int, default: many}\n"
        '  - {id: 3, name: d, type: "decimal(4,2)", default: "123.456"}\n'
        "  - {id: 5, name: c, type: string, default: {sqll: now()}}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_schema_file(path)
    text = str(err.value)
    assert "columns[1].default: must be a whole number (the column is int) (line 5)" in text
    assert "columns[2].default: 123.456 does not fit decimal(4,2)" in text
    assert "columns[3].default: must be a literal value, or {sql: TEXT}" in text
    path.write_text(
        "table: t\nprimary_key: [id]\ncolumns:\n"
        "  - {id: 1, name: id, type: long}\n"
        "  - {id: 4, name: s, type: string, tags: sensitive}\n"
    )
    with pytest.raises(ConfigError, match=r"columns\[1\].tags: must be a list of tags"):
        load_schema_file(path)


@pytest.mark.parametrize(
    "ctype,text,dialect,expected",
    [
        (StringType(), "'new'::character varying", "postgres", ColumnDefault("new")),
        (StringType(), "'it''s'", "mysql", ColumnDefault("it's")),
        (IntType(), "-1", "mysql", ColumnDefault(-1)),
        (DecimalType(10, 2), "0.00", "mysql", ColumnDefault(Decimal("0.00"))),
        (TimestampType(), "current_timestamp()", "mysql", ColumnDefault(sql="CURRENT_TIMESTAMP()")),
        (
            IntType(),
            "nextval('t_id_seq'::regclass)",
            "postgres",
            ColumnDefault(sql="NEXTVAL(CAST('t_id_seq' AS REGCLASS))"),
        ),
        (
            TimestampType(),
            "'0000-00-00 00:00:00'",
            "mysql",
            ColumnDefault(sql="'0000-00-00 00:00:00'"),
        ),
        (IntType(), "NULL", "mysql", None),
        (IntType(), None, "mysql", None),
    ],
)
def test_source_defaults_are_literals_or_sql(
    ctype: Any, text: str | None, dialect: Any, expected: Any
) -> None:
    assert default_from_source(ctype, text, dialect) == expected


class _Col:
    def __init__(
        self, name: str, type_text: str, default: str | None, primary: bool = False
    ) -> None:
        self.name, self.type_text, self.default, self.primary = name, type_text, default, primary
        self.nullable, self.dialect = not primary, "postgres"


def test_inference_carries_catalog_defaults() -> None:
    columns = [
        _Col("id", "long", None, True),
        _Col("status", "string", "'new'::text"),
        _Col("made", "timestamptz", "now()"),
    ]
    schema = infer_table_schema("t", columns, lambda c: (c.type_text, None))
    assert schema.columns[0].default is None
    assert schema.columns[1].default == ColumnDefault("new")
    assert schema.columns[2].default == ColumnDefault(sql="CURRENT_TIMESTAMP")
    assert parse_type("string") == schema.columns[1].type
