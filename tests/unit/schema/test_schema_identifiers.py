"""Every SQL string built from column names quotes each name whole, so a backtick, dot,
space, quote or an attempt to inject a field (``a` INT, b``) stays one identifier.

The checks read the SQL the way Spark's lexer does: a backtick-quoted identifier runs to
the next single backtick, and ``````  inside it is one backtick.
"""

from __future__ import annotations

import re

import pytest

from icetide.ledger.decode import projected_spark_schema
from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.contract.names import TableName
from icetide.schema.convert.spark import struct_sql
from icetide.schema.file import schema_from_dict

HOSTILE_NAMES = [
    "Key.Id",  # dot and mixed case (the primary key)
    "k`ey",
    "a` INT, b",
    "with space",
    "it's",
    'say "hi"',
    "naïve_ü",
    "x.y",
    "``",
]
SCHEMA = schema_from_dict(
    {
        "table": "hostile",
        "primary_key": [HOSTILE_NAMES[0]],
        "columns": [
            {"id": i, "name": name, "type": "long" if i == 1 else "string"}
            for i, name in enumerate(HOSTILE_NAMES, start=1)
        ],
    }
)
CONTRACT = TableContract(SCHEMA, TableSettings(4, "merge-on-read"))
_QUOTED = re.compile(r"`((?:[^`]|``)*)`")


def identifiers(sql: str) -> tuple[list[str], str]:
    """The quoted identifiers of ``sql`` (unescaped) and the SQL with each replaced by
    ``?``; an unbalanced backtick leaves one behind in the rest."""
    found = [m.group(1).replace("``", "`") for m in _QUOTED.finditer(sql)]
    return found, _QUOTED.sub("?", sql)


def struct_fields(sql: str) -> list[str]:
    """The field names of a ``STRUCT<…>`` as Spark splits them (top-level commas)."""
    body = sql[sql.index("<") + 1 : sql.rindex(">")]
    _, rest = identifiers(body)
    names = iter(identifiers(body)[0])
    return [next(names) for part in rest.split(",") if part.strip().startswith("?")]


def assert_only_quoted(sql: str) -> list[str]:
    """No fragment of a hostile name is left outside a quoted identifier."""
    found, rest = identifiers(sql)
    assert "`" not in rest, rest
    for fragment in ("ey", "with space", "it's", "hi", "naïve", "Key", "x.y", " INT, b"):
        assert fragment not in rest, (fragment, rest)
    return found


def test_a_struct_keeps_one_field_per_column_whatever_its_name() -> None:
    sql = struct_sql(SCHEMA.columns)
    assert struct_fields(sql) == HOSTILE_NAMES
    assert "`a`` INT, b`: STRING" in sql
    assert_only_quoted(sql)


@pytest.mark.parametrize(
    "build",
    [
        lambda: ", ".join(CONTRACT.ledger_columns()),
        lambda: CONTRACT.ledger_ddl(TableName("lake", "ns", "hostile_cdc")),
        lambda: projected_spark_schema(SCHEMA),
        lambda: CONTRACT.base_ddl(TableName("lake", "ns", "hostile")),
        lambda: CONTRACT.identifier_fields_sql(TableName("lake", "ns", "hostile")),
        lambda: CONTRACT.merge_sql(TableName("lake", "ns", "hostile"), "batch"),
        lambda: CONTRACT.naive_merge_sql(
            TableName("lake", "ns", "hostile"), TableName("lake", "ns", "ledger")
        ),
    ],
    ids=[
        "ledger columns",
        "ledger ddl",
        "mapInArrow schema",
        "base ddl",
        "identifier fields",
        "merge",
        "naive merge",
    ],
)
def test_every_statement_quotes_every_name_whole(build: object) -> None:
    sql = build()  # type: ignore[operator]
    found = assert_only_quoted(sql)
    assert "Key.Id" in found
