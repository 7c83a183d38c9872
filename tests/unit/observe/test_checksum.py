"""The checksum's SQL builders and plain-Python specification, and verify's key diff and
report: everything that needs no database and no JVM."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from icetide.errors import SchemaError
from icetide.observe import checksum as ck
from icetide.observe.verify import (
    ColumnValues,
    KeyDifference,
    TableVerdict,
    diff_hashes,
    exit_code,
    render_verdicts,
    verdict_dicts,
)
from icetide.schema.types import PRIMITIVES, Column, ListType, parse_type

HOSTILE = 'x`y"z OR 1=1 --'
"""A column name that breaks out of any identifier quoting that is not doubled."""


def col(name: str, type_text: str, column_id: int = 1) -> Column:
    return Column(column_id, name, parse_type(type_text))


def strip_identifiers(sql: str) -> str:
    """``sql`` with every correctly quoted identifier (`…` or "…", doubled quotes inside)
    removed; what is left must not contain any part of a config name."""
    return re.sub(r'`(?:[^`]|``)*`|"(?:[^"]|"")*"', "", sql)


# -- quoting -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [("mysql", '`x``y"z OR 1=1 --`'), ("postgres", '"x`y""z OR 1=1 --"')],
)
def test_identifiers_are_quoted_with_inner_quotes_doubled(
    dialect: ck.Dialect, expected: str
) -> None:
    assert ck.quote_ident(dialect, HOSTILE) == expected
    assert (
        ck.qualified_ident(dialect, "db", HOSTILE) == ck.quote_ident(dialect, "db") + "." + expected
    )


@pytest.mark.parametrize("dialect", ["mysql", "postgres"])
@pytest.mark.parametrize("type_text", [*PRIMITIVES, "decimal(12,2)"])
def test_no_builder_lets_a_column_name_out_of_its_quotes(
    dialect: ck.Dialect, type_text: str
) -> None:
    key, column = col("id", "int"), col(HOSTILE, type_text, 2)
    table = ck.qualified_ident(dialect, "shop", HOSTILE)
    statements = [
        ck.text_sql(dialect, column),
        ck.piece_sql(dialect, column),
        ck.display_sql(dialect, column),
        ck.checksum_sql(dialect, table, [key, column]),
        ck.hashes_sql(dialect, table, [key], [key, column]),
        ck.rows_sql(dialect, table, [key], [key, column], 3),
    ]
    for sql in statements:
        assert ck.quote_ident(dialect, HOSTILE) in sql
        assert "OR 1=1" not in strip_identifiers(sql), sql


def test_every_schema_type_has_a_rule_on_every_engine() -> None:
    assert set(ck.RULES) == {*PRIMITIVES, "decimal", "list"}
    for rule in ck.RULES.values():
        assert callable(rule.mysql) and callable(rule.postgres) and callable(rule.spark)


def test_a_list_is_its_elements_pieces_and_has_no_sql_text() -> None:
    """A list's text is its elements' own canonical texts, length-prefixed (so no element
    text can pass for two), nested lists the same way; it enters the row hash as the
    digest of that text. Only Spark and Python compute it: a PostgreSQL array's value is
    computed in Python (verify), never in SQL."""
    floats = ck.python_text([0.1, None, float("nan"), -0.0], parse_type_list("double"))
    assert floats == "[20:0x1.999999999999ap-4,N,3:nan,8:0x0.0p+0]"
    texts = ck.python_text(["a,b", "", None], parse_type_list("string"))
    assert texts == "[3:a,b,0:,N]"
    assert ck.python_text(["a", "b"], parse_type_list("string")) != ck.python_text(
        ["a,1:b"], parse_type_list("string")
    )
    at = ck.python_text([datetime(2024, 2, 29, 10, 0, 0, 5)], parse_type_list("timestamp"))
    assert at == "[26:2024-02-29 10:00:00.000005]"
    assert ck.python_text([], parse_type_list("int")) == "[]"
    digest = hashlib.md5(b"[1:1,N]").hexdigest()
    assert ck.python_piece([1, None], parse_type_list("int")) == f"{len(digest)}:{digest}"
    with pytest.raises(SchemaError, match="in Python"):
        ck.text_sql("postgres", Column(2, "l", parse_type_list("int")))


def parse_type_list(element: str) -> ListType:
    return ListType(9, parse_type(element))


# -- SQL shapes --------------------------------------------------------------------------


def test_checksum_sums_sixty_bit_row_values_exactly_on_both_engines() -> None:
    columns = [col("id", "int")]
    mysql = ck.checksum_sql("mysql", "`t`", columns)
    postgres = ck.checksum_sql("postgres", '"t"', columns)
    assert mysql.startswith("SELECT COUNT(*), CAST(SUM(") and "DECIMAL(38,0)" in mysql
    assert "CONV(SUBSTRING(MD5(CONCAT(" in mysql and ", 1, 15), 16, 10)" in mysql
    assert "::bit(60)::bigint" in postgres and "sum(" in postgres and "numeric(38,0)" in postgres


def test_mysql_session_pins_utc_and_utf8mb4() -> None:
    assert "SET time_zone = '+00:00'" in ck.MYSQL_SESSION
    assert "SET NAMES utf8mb4" in ck.MYSQL_SESSION


def test_postgres_session_pins_what_capture_pins() -> None:
    # Strings are compared as their output text, and float text must be exact.
    for setting in ("TimeZone = 'UTC'", "IntervalStyle = 'iso_8601'", "extra_float_digits"):
        assert any(setting in statement for statement in ck.POSTGRES_SESSION), setting


def test_mysql_binary_text_is_the_bytes_also_of_a_bit_column() -> None:
    # HEX(b) of a BIT(8) holding 6 is '6'; the base holds the byte 06.
    assert ck.text_sql("mysql", col("b", "binary")).endswith("LOWER(HEX(CAST(`b` AS BINARY))) END")


def test_long_values_enter_the_row_hash_as_digests_of_their_bytes() -> None:
    # CONCAT of a row with a multi-megabyte value would pass max_allowed_packet.
    assert ck.piece_sql("mysql", col("b", "binary")).count("MD5(`b`)") == 2
    # The type's output text (char(n) keeps its padding, as capture receives it).
    assert "md5(convert_to(format('%s', \"s\"), 'UTF8'))" in ck.piece_sql(
        "postgres", col("s", "string")
    )
    assert "MD5(" not in ck.piece_sql("mysql", col("d", "date"))


def test_bind_placeholders_escapes_percent_signs_of_date_formats() -> None:
    keys = [col("id", "int"), col("at", "timestamp", 2)]
    sql = ck.bind_placeholders(ck.rows_sql("mysql", "`t`", keys, keys, 3))
    assert ck.KEY_PLACEHOLDER not in sql
    assert "'%%Y-%%m-%%d %%H:%%i:%%s.%%f'" in sql
    assert len(re.findall(r"(?<!%)%s", sql)) == 6  # two key columns, three keys
    # what the driver does with it: one value per %s, %% back to %
    assert "'%Y-%m-%d" in sql % tuple(["'k'"] * 6)


# -- the specification -------------------------------------------------------------------

SPEC: list[tuple[str, Any, str | None]] = [
    ("boolean", True, "1"),
    ("boolean", 0, "0"),
    ("int", -2147483648, "-2147483648"),
    ("long", 2**63 - 1, "9223372036854775807"),
    ("decimal(38,10)", Decimal(0), "0.0000000000"),  # not 0E-10
    ("decimal(12,2)", Decimal("-0.00"), "0.00"),  # no negative zero
    ("decimal(12,2)", Decimal("-1.5"), "-1.50"),
    (
        "decimal(38,10)",
        Decimal("-1234567890123456789012345678.0123456789"),
        "-1234567890123456789012345678.0123456789",  # beyond the default 28-digit context
    ),
    ("decimal(20,0)", 18446744073709551615, "18446744073709551615"),
    ("double", 0.1, "0x1.999999999999ap-4"),
    ("float", 0.1, "0x1.99999a0000000p-4"),  # the float32 nearest 0.1, widened exactly
    ("double", 1.0, "0x1.0000000000000p+0"),
    ("double", -2.5, "-0x1.4000000000000p+1"),
    ("double", -0.0, "0x0.0p+0"),
    ("double", 5e-324, "0x0.0000000000001p-1022"),
    ("double", 1.7976931348623157e308, "0x1.fffffffffffffp+1023"),
    ("double", float("nan"), "nan"),
    ("float", float("-inf"), "-inf"),
    ("string", "héllo ✓", "héllo ✓"),
    ("binary", b"\x00\xffA", "00ff41"),
    ("uuid", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    ("date", date(5, 2, 28), "0005-02-28"),
    ("time", time(0, 0), "00:00:00.000000"),
    ("time", "10:11:12", "10:11:12.000000"),  # the base's ISO text without micros
    ("time", "10:11:12.5", "10:11:12.500000"),
    ("time", "10:15:30.123000+00:00", "10:15:30.123000"),
    ("time", timedelta(hours=-1, microseconds=5), "-00:59:59.999995"),
    ("timestamp", datetime(1969, 12, 31, 23, 59, 59, 999999), "1969-12-31 23:59:59.999999"),
    ("timestamp", datetime(5, 1, 2, 3, 4, 5), "0005-01-02 03:04:05.000000"),
    (
        "timestamptz",
        datetime(2024, 1, 1, 5, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        "2024-01-01 00:00:00.000000",
    ),
    ("timestamptz", datetime(2024, 1, 1, 0, 0, 0, 1), "2024-01-01 00:00:00.000001"),
    ("json", '{"a": 1}', '{"a": 1}'),
    ("string", None, None),
]


@pytest.mark.parametrize(("type_text", "value", "expected"), SPEC)
def test_python_text_is_the_canonical_text(
    type_text: str, value: Any, expected: str | None
) -> None:
    assert ck.python_text(value, parse_type(type_text)) == expected


def test_null_and_empty_string_make_different_pieces() -> None:
    string = parse_type("string")
    assert ck.python_piece(None, string) == "N"
    assert ck.python_piece("", string) == "32:" + hashlib.md5(b"").hexdigest()


def test_length_prefixes_keep_column_boundaries() -> None:
    columns = [col("a", "int"), col("b", "int", 2)]
    assert ck.python_row_hash({"a": 1, "b": 23}, columns) != ck.python_row_hash(
        {"a": 12, "b": 3}, columns
    )
    assert ck.python_row_hash({"a": None, "b": 1}, columns) != ck.python_row_hash(
        {"a": 1, "b": None}, columns
    )


def test_row_value_is_the_first_fifteen_hex_digits() -> None:
    assert ck.python_row_value("f" * 32) == 2**60 - 1
    assert ck.python_row_value("0123456789abcdef" * 2) == 0x0123456789ABCDE


# -- verify: the key diff and the report ---------------------------------------------------


def test_diff_sorts_keys_by_value_and_keeps_the_first_ten() -> None:
    int_key = [col("id", "int")]
    source = [(str(i), f"h{i}") for i in range(1, 30)]
    base = [(str(i), "changed") for i in range(3, 30)] + [("100", "x")]
    diff = diff_hashes(source, base, 1)
    assert sorted(diff.missing) == [("1",), ("2",)]
    assert diff.extra == [("100",)]
    assert len(diff.different) == 27
    first = diff.first(int_key)
    assert [key for _, key in first] == [(str(i),) for i in range(1, 11)]  # 10 after 9
    assert [kind for kind, _ in first[:3]] == ["missing", "missing", "different"]


def test_a_duplicated_base_key_is_extra_and_a_duplicated_source_key_is_missing() -> None:
    diff = diff_hashes([("1", "a"), ("2", "b"), ("2", "b")], [("1", "a"), ("1", "a")], 1)
    assert diff.extra == [("1",)] and diff.missing == [("2",), ("2",)] and diff.different == []


def test_composite_keys_sort_column_by_column() -> None:
    keys = [col("region", "string"), col("n", "decimal(10,1)", 2)]
    diff = diff_hashes([("b", "1.0", "x"), ("a", "10.0", "x"), ("a", "9.5", "x")], [], 2)
    assert [key for _, key in diff.first(keys)] == [("a", "9.5"), ("a", "10.0"), ("b", "1.0")]


def _verdict(**changes: Any) -> TableVerdict:
    verdict = TableVerdict(
        table="orders",
        source="shop:shop.orders",
        source_rows=3,
        base_rows=3,
        source_checksum=2**62,
        base_checksum=2**62,
        base_snapshot=42,
        matches=True,
    )
    for name, value in changes.items():
        setattr(verdict, name, value)
    return verdict


def test_report_lists_each_kind_with_both_sides() -> None:
    bad = _verdict(
        matches=False,
        base_checksum=5,
        missing=1,
        extra=1,
        different=12,
        differences=[
            KeyDifference("different", {"id": "2"}, (ColumnValues("amount", "1.50", "1.51"),)),
            KeyDifference("different", {"id": "3"}, (ColumnValues("note", "", None),)),
            KeyDifference("missing", {"id": "4"}, (ColumnValues("id", "4", None),)),
            KeyDifference("extra", {"id": "9"}, (ColumnValues("id", None, "9"),)),
        ],
    )
    text = render_verdicts([_verdict(table="customers"), bad])
    lines = text.splitlines()
    assert lines[0].startswith("customers") and lines[0].endswith("MATCH")
    assert "DIFFERENT (1 missing, 1 extra, 12 different)" in lines[1]
    assert "  key id=2: different: amount: source '1.50', base '1.51'" in lines
    assert "  key id=3: different: note: source '', base NULL" in lines
    assert "  key id=4: missing in base (id='4')" in lines
    assert "  key id=9: extra in base (id='9')" in lines
    assert lines[-1] == "  … and 10 more differing key(s)"
    assert exit_code([_verdict()]) == 0 and exit_code([_verdict(), bad]) == 1


def test_json_form_keeps_checksums_exact() -> None:
    (data,) = verdict_dicts([_verdict()])
    assert data["source_checksum"] == str(2**62) and data["matches"] is True
    assert data["differences"] == [] and data["base_snapshot"] == 42


def test_long_values_are_cut_in_the_report() -> None:
    long = "x" * 500
    verdict = _verdict(
        matches=False,
        different=1,
        differences=[KeyDifference("different", {"id": "1"}, (ColumnValues("s", long, "y"),))],
    )
    line = render_verdicts([verdict]).splitlines()[1]
    assert "x" * 59 + "…" in line and "x" * 61 not in line


def test_naive_timestamptz_is_read_as_utc() -> None:
    naive = datetime(2024, 1, 1, 12)
    assert ck.python_text(naive, parse_type("timestamptz")) == ck.python_text(
        naive.replace(tzinfo=UTC), parse_type("timestamptz")
    )
