"""The SQL the bootstrap sends for each column (no JVM, no server)."""

from __future__ import annotations

import pytest

from icetide.bootstrap.jdbc import read_name
from icetide.bootstrap.mysql import mysql_select_expression
from icetide.bootstrap.postgres import PgSnapshot, postgres_select_expression
from icetide.capture.errors import CaptureError
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, ListType, parse_type
from icetide.sources.postgres_catalog import SourceColumn
from icetide.sources.postgres_types import builtin_type


def col(name: str, kind: str) -> Column:
    return Column(1, name, parse_type(kind))


def test_mysql_bits_are_read_as_their_bytes_and_years_as_numbers() -> None:
    # The driver hands BIT(n) over as a 64-bit number and YEAR as a date.
    assert mysql_select_expression(col("b", "binary")) == "CAST(`b` AS BINARY)"
    assert mysql_select_expression(col("y", "int")) == "CAST(`y` AS SIGNED)"
    assert mysql_select_expression(col("ba`ck", "long")) == "CAST(`ba``ck` AS SIGNED)"
    # A key as it is: the chunk predicates on it must reach its index.
    assert mysql_select_expression(col("id", "long"), key=True) == "`id`"


def test_postgres_arrays_are_read_as_their_literal() -> None:
    """A list column (or one declared json, as before lists) reads the array's literal,
    which capture's own conversion turns into the stored value in Python."""
    ints = SourceColumn("_int4", True, builtin_type(1007))
    assert ints.json_array
    literal = 'CASE WHEN "qu""ote" IS NULL THEN NULL ELSE format(\'%s\', "qu""ote") END'
    assert postgres_select_expression(col('qu"ote', "json"), ints) == literal
    listed = Column(1, 'qu"ote', ListType(2, parse_type("int")))
    assert postgres_select_expression(listed, ints) == literal
    bits = SourceColumn("_bit", True, None)
    assert not bits.json_array  # elements of no known type: the array's text
    with pytest.raises(CaptureError, match="a list column cannot be bootstrapped") as caught:
        postgres_select_expression(listed, bits)
    assert "PostgreSQL array of a type capture converts" in str(caught.value.hint)


def test_chunk_queries_name_columns_by_position() -> None:
    schema = TableSchema(
        "t",
        (
            Column(1, "I d", parse_type("int"), nullable=False),
            Column(2, "dot.ted", parse_type("int")),
        ),
        ("I d",),
    )
    assert [read_name(schema, c.name) for c in schema.columns] == ["c0", "c1"]


def test_the_snapshot_is_imported_in_the_drivers_transaction_without_a_second_begin() -> None:
    statement = PgSnapshot("00000003-00000002-1", "10:10:").init_statement
    assert "BEGIN" not in statement.upper()
    assert statement.startswith("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY; ")
    assert "SET TRANSACTION SNAPSHOT '00000003-00000002-1'" in statement
    # Values read as text read as capture's session writes them.
    for setting in ("IntervalStyle = 'iso_8601'", "TimeZone = 'UTC'", "extra_float_digits"):
        assert f"SET LOCAL {setting}" in statement
