"""pgoutput text values → Debezium JSON values, schemas and icetide types (no server)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import pytest

from icetide.capture.errors import CaptureError, ServerSettingsError
from icetide.capture.postgres.offset import LsnOffset
from icetide.capture.postgres.pgoutput import parse_tuple
from icetide.capture.postgres.publication import split_table
from icetide.capture.postgres.settings import find_problems, settings_error, table_problems
from icetide.events import logical_types as lt
from icetide.events.envelope import decode_message, is_unavailable
from icetide.events.position import lsn_position, parse_lsn
from icetide.events.project import project_event
from icetide.schema.connector import CAPTURE, read_hints
from icetide.schema.types import parse_type
from icetide.sources import postgres_types as t


def column(oid: int, typmod: int = -1, name: str = "c") -> t.ColumnInfo:
    kind = t.builtin_type(oid)
    assert kind is not None
    return t.ColumnInfo(name, kind, typmod)


def convert(oid: int, text: str, typmod: int = -1) -> Any:
    return t.value_converter(column(oid, typmod))(text)


def decoded(oid: int, text: str, typmod: int = -1) -> Any:
    """What icetide's logical-type decoder makes of the converted value."""
    info = column(oid, typmod)
    return lt.decode_value(t.value_converter(info)(text), t.connect_schema(info), "after.c")


NUMERIC_12_4 = ((12 << 16) | 4) + 4
HALF_PAST = datetime(2024, 6, 30, 18, 30, 0, 500000, UTC)


@pytest.mark.parametrize(
    ("oid", "text", "expected"),
    [
        (t.BOOL, "t", True),
        (t.BOOL, "f", False),
        (t.INT2, "-32768", -32768),
        (t.INT4, "2147483647", 2147483647),
        (t.INT8, "-9223372036854775808", -9223372036854775808),
        (t.FLOAT4, "1.1", 1.1),
        (t.FLOAT8, "-1.5e-300", -1.5e-300),
        (t.FLOAT8, "NaN", "NaN"),
        (t.FLOAT4, "-Infinity", "-Infinity"),
        (t.NUMERIC, "-12345678.1234", "-12345678.1234"),
        (t.NUMERIC, "NaN", "NaN"),
        (t.TEXT, "héllo ✓ 🎉", "héllo ✓ 🎉"),
        (t.BPCHAR, "ab   ", "ab   "),
        (t.BYTEA, "\\x00ff", "AP8="),
        (t.BYTEA, "\\x", ""),
        (t.DATE, "1970-01-01", 0),
        (t.DATE, "1969-12-31", -1),
        (t.DATE, "9999-12-31", 2932896),
        (t.DATE, "0001-01-01", -719162),
        (t.DATE, "infinity", 2**31 - 1),
        (t.TIME, "00:00:00", 0),
        (t.TIME, "23:59:59.999999", 86_399_999_999),
        (t.TIME, "12:00:00.5", 43_200_500_000),
        (t.TIMETZ, "12:34:56.789+05:30", "07:04:56.789Z"),
        (t.TIMETZ, "23:30:00-01", "00:30:00Z"),
        (t.TIMESTAMP, "1970-01-01 00:00:00", 0),
        (t.TIMESTAMP, "1969-12-31 23:59:59.999999", -1),
        (t.TIMESTAMP, "2038-01-19 03:14:07.5", 2_147_483_647_500_000),
        (t.TIMESTAMP, "-infinity", -(2**63)),
        (t.TIMESTAMPTZ, "2024-06-30 18:00:00.25+00", "2024-06-30T18:00:00.25Z"),
        (t.TIMESTAMPTZ, "2024-07-01 00:00:00+05:30", "2024-06-30T18:30:00Z"),
        (t.TIMESTAMPTZ, "0001-01-01 00:00:00+00", "0001-01-01T00:00:00Z"),
        (t.TIMESTAMPTZ, "infinity", "infinity"),
        (t.INTERVAL, "PT0S", 0),
        (t.INTERVAL, "P1DT2H3M4.5S", 93_784_500_000),
        (t.INTERVAL, "P-1DT2H", -79_200_000_000),
        (t.INTERVAL, "PT-4H-5M-6.000001S", -14_706_000_001),
        (t.INTERVAL, "P1Y2M", 14 * 2_629_800_000_000),
        (t.UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        (t.JSONB, '{"a": [1, 2.50]}', '{"a": [1, 2.50]}'),
        (1007, "{1,NULL,-3}", [1, None, -3]),
        (1007, "{{1,2},{3,4}}", [[1, 2], [3, 4]]),
        (1009, '{"a,b","c \\"d\\"",NULL,"NULL",""}', ["a,b", 'c "d"', None, "NULL", ""]),
        (1000, "{t,f}", [True, False]),
        (1022, "{1.5,NaN}", [1.5, "NaN"]),
        (1231, "{1.50,-2}", ["1.50", "-2"]),
        (1182, "{1970-01-02}", [1]),
        (1007, "[0:1]={7,8}", [7, 8]),
        (1007, "{}", []),
        (869, "192.168.0.1/24", "192.168.0.1/24"),  # inet: no conversion, the text
    ],
)
def test_values_convert_like_debezium(oid: int, text: str, expected: Any) -> None:
    kind = t.builtin_type(oid) or t.PgType(oid)
    assert t.value_converter(t.ColumnInfo("c", kind))(text) == expected


@pytest.mark.parametrize(
    ("oid", "text", "typmod", "expected"),
    [
        (t.NUMERIC, "-12345678.1234", NUMERIC_12_4, "-12345678.1234"),
        (t.DATE, "2024-02-29", -1, date(2024, 2, 29)),
        (t.DATE, "0001-01-01", -1, date(1, 1, 1)),
        (t.TIME, "23:59:59.999999", -1, time(23, 59, 59, 999999)),
        (t.TIMETZ, "12:34:56.789+05:30", -1, time(7, 4, 56, 789000, tzinfo=UTC)),
        (t.TIMESTAMP, "9999-12-31 23:59:59.999999", -1, datetime(9999, 12, 31, 23, 59, 59, 999999)),
        (t.TIMESTAMP, "1900-01-01 00:00:01", -1, datetime(1900, 1, 1, 0, 0, 1)),
        (t.TIMESTAMPTZ, "2024-07-01 00:00:00.5+05:30", -1, HALF_PAST),
        (t.BYTEA, "\\x00ff", -1, b"\x00\xff"),
        (t.INT2, "7", -1, 7),
        (t.BOOL, "t", -1, True),
    ],
)  # fmt: skip
def test_icetide_decodes_what_capture_emits(
    oid: int, text: str, typmod: int, expected: Any
) -> None:
    value = decoded(oid, text, typmod)
    assert value == expected and type(value) is type(expected)


def test_values_icetide_cannot_hold_fail_loudly_not_silently() -> None:
    from icetide.errors import DecodeError

    for oid, text in [
        (t.DATE, "0044-03-15 BC"),
        (t.DATE, "infinity"),
        (t.TIMESTAMP, "infinity"),
        (t.TIMESTAMPTZ, "-infinity"),
        (t.TIMESTAMPTZ, "0001-01-01 00:00:00+00 BC"),
        (t.TIME, "24:00:00"),
    ]:
        with pytest.raises(DecodeError):
            decoded(oid, text)


def test_bc_dates_are_exact_day_counts() -> None:
    # PostgreSQL: SELECT '0001-01-01 BC'::date - '1970-01-01'::date  → -719528
    assert t.date_days("0001-01-01 BC") == -719528
    assert t.date_days("0001-12-31 BC") == t.date_days("0001-01-01") - 1
    assert (
        t.timestamp_micros("0001-12-31 23:59:59 BC")
        == t.date_days("0001-01-01") * 86_400_000_000 - 1_000_000
    )
    assert t.timestamptz_text("0044-03-15 12:00:00+00 BC") == "-0043-03-15T12:00:00Z"
    assert t.timestamptz_text("10000-01-01 00:00:00+00") == "+10000-01-01T00:00:00Z"  # fmt: skip


@pytest.mark.parametrize("days", [-800_000, -719_528, -1, 0, 1, 11_016, 2_932_896, 3_000_000])
def test_day_numbers_round_trip(days: int) -> None:
    assert t.days_from_civil(*t.civil_from_days(days)) == days


def test_unavailable_placeholders_are_what_the_decoder_recognises() -> None:
    for oid in (t.TEXT, t.BYTEA, t.JSONB, t.NUMERIC, 1007, 1009, 869):
        kind = t.builtin_type(oid) or t.PgType(oid)
        assert is_unavailable(t.unavailable_value(t.ColumnInfo("c", kind)))
    assert (
        t.unavailable_value(column(t.BYTEA))
        == base64.b64encode(b"__debezium_unavailable_value").decode()
    )


def test_icetide_types_and_logical_hints() -> None:
    cases = {
        t.BOOL: ("boolean", None),
        t.INT2: ("int", None),
        t.INT4: ("int", None),
        t.INT8: ("long", None),
        t.FLOAT4: ("float", None),
        t.FLOAT8: ("double", None),
        t.TEXT: ("string", None),
        t.BYTEA: ("binary", None),
        t.DATE: ("date", "io.debezium.time.Date"),
        t.TIME: ("time", "io.debezium.time.MicroTime"),
        t.TIMETZ: ("time", "io.debezium.time.ZonedTime"),
        t.TIMESTAMP: ("timestamp", "io.debezium.time.MicroTimestamp"),
        t.TIMESTAMPTZ: ("timestamptz", "io.debezium.time.ZonedTimestamp"),
        t.INTERVAL: ("long", "io.debezium.time.MicroDuration"),
        t.UUID: ("uuid", None),
        t.JSON: ("json", None),
        t.JSONB: ("json", None),
        t.NUMERIC: ("string", "io.debezium.data.VariableScaleDecimal"),
    }
    for oid, expected in cases.items():
        assert named(column(oid)) == expected, oid
        assert t.icetide_type(column(oid))[0] == parse_type(expected[0])
    assert named(column(t.NUMERIC, NUMERIC_12_4)) == ("decimal(12,4)", None)
    # Debezium's adaptive mode: milliseconds up to precision 3, as capture writes them.
    assert named(column(t.TIME, 3)) == ("time", "io.debezium.time.Time")
    assert named(column(t.TIMESTAMP, 0)) == ("timestamp", "io.debezium.time.Timestamp")
    micro = ("timestamp", "io.debezium.time.MicroTimestamp")
    assert named(column(t.TIMESTAMP, 4)) == micro
    assert t.value_converter(column(t.TIMESTAMP, 3))("2018-06-20 12:57:03.123") == 1529499423123
    assert t.connect_schema(column(t.TIME, 2))["name"] == "io.debezium.time.Time"
    assert named(column(t.NUMERIC, ((39 << 16) | 0) + 4)) == ("string", None)
    mood = t.PgType(t.ENUM, "mood", enum_values=("a",))
    assert named(t.ColumnInfo("e", mood)) == ("string", None)
    # Arrays: a list of the element's type (its hint), as deep as the column declares.
    assert named(column(1007)) == ("list<int>", None)
    assert named(t.ColumnInfo("g", column(1007).type, dims=2)) == ("list<list<int>>", None)
    assert named(column(1231, NUMERIC_12_4)) == ("list<decimal(12,4)>", None)
    assert named(column(1115, 3)) == ("list<timestamp>", "io.debezium.time.Timestamp")
    assert named(t.ColumnInfo("m", t.PgType(77, "_mood", mood))) == ("list<string>", None)
    assert named(t.ColumnInfo("b", t.PgType(1561, "_bit", t.PgType(1560)))) == ("string", None)


def named(info: t.ColumnInfo) -> tuple[str, str | None]:
    ctype, hint = t.icetide_type(info)
    return str(ctype), hint


def test_connect_schemas() -> None:
    assert t.connect_schema(column(t.INT4)) == {"type": "int32", "optional": True}
    assert t.connect_schema(column(t.TIMESTAMPTZ))["name"] == "io.debezium.time.ZonedTimestamp"
    assert t.connect_schema(column(1007)) == {"type": "array", "optional": True}
    enum = t.ColumnInfo("e", t.PgType(t.ENUM, "mood", enum_values=("sad", "ok")), nullable=False)
    assert t.connect_schema(enum) == {
        "type": "string",
        "name": "io.debezium.data.Enum",
        "version": 1,
        "parameters": {"allowed": "sad,ok"},
        "optional": False,
    }


def test_sql_types() -> None:
    assert t.sql_type(column(t.VARCHAR, 24)) == "character varying(20)"
    assert t.sql_type(column(t.TIMESTAMP, 3)) == "timestamp(3) without time zone"
    assert t.sql_type(column(1231)) == "numeric[]"
    assert t.sql_type(column(t.NUMERIC, NUMERIC_12_4)) == "numeric(12,4)"


def test_infer_table_schema() -> None:
    columns = [
        t.ColumnInfo("id", t.PgType(t.INT8, "bigint"), primary=True, nullable=False),
        t.ColumnInfo("at", t.PgType(t.TIMESTAMP, "timestamp")),
    ]
    schema = t.infer_table_schema("events", columns)
    assert schema.primary_key == ("id",)
    logical = schema.sink.logical.get
    assert [(c.name, str(c.type), c.nullable, logical(c.id)) for c in schema.columns] == [
        ("id", "long", False, None),
        ("at", "timestamp", True, "io.debezium.time.MicroTimestamp"),
    ]


def test_lsn_positions_compare_as_numbers_across_the_32_bit_boundary() -> None:
    low, high = lsn_position(parse_lsn("0/FFFFFFFF")), lsn_position(parse_lsn("1/0"))
    assert low < high and low.key < high.key
    # Text would order these wrongly; the packed key does not.
    a, b = lsn_position(parse_lsn("0/FFFFFF"), 3), lsn_position(parse_lsn("0/1000000"))
    assert a.text > b.text and a < b
    assert lsn_position(5, 0) < lsn_position(5, 1) < lsn_position(6, 0)


def test_lsn_offsets() -> None:
    offset = LsnOffset(parse_lsn("1/0"))
    assert offset.text == "1/0" and offset.to_dict() == {"lsn": "1/0"}
    assert LsnOffset.from_dict({"lsn": "1/0"}) == offset == LsnOffset.from_dict({"lsn": 2**32})
    assert LsnOffset(1) < LsnOffset(2)
    with pytest.raises(CaptureError):
        LsnOffset.from_dict({"pos": 3})


def test_tuple_data() -> None:
    data = b"\x00\x04t\x00\x00\x00\x02idnut\x00\x00\x00\x00"
    values, end = parse_tuple(data, 0)
    assert values[0] == "id" and values[1] is None and values[3] == "" and end == len(data)
    assert values[2] is not None and values[2] != ""  # the unchanged-TOAST sentinel


def test_table_names() -> None:
    assert split_table("public.t") == ("public", "t")
    assert split_table("t") == ("public", "t")
    with pytest.raises(CaptureError):
        split_table("a..b")


GOOD = {
    "wal_level": "logical",
    "max_replication_slots": "10",
    "max_wal_senders": "10",
    "rolreplication": "f",
    "rolsuper": "t",
}


def test_settings_problems_say_what_to_change() -> None:
    assert find_problems(GOOD) == []
    bad = {**GOOD, "wal_level": "replica", "max_wal_senders": "0", "rolsuper": "f"}
    problems = find_problems(bad, user="capture")
    error = settings_error(problems, "the server at db:5432")
    assert isinstance(error, ServerSettingsError)
    assert len(error.problems) == 3
    assert "wal_level = logical" in error.fix
    assert "ALTER SYSTEM SET wal_level = logical;" in error.fix
    assert "max_wal_senders = 10" in error.fix
    assert "ALTER ROLE capture WITH REPLICATION;" in error.fix
    text = error.render()
    assert "restart" in text and "wal_level is replica" in text


def test_a_role_alone_needs_no_restart() -> None:
    error = settings_error(find_problems({**GOOD, "rolsuper": "f"}, user="Cap"))
    assert error.fix == ('ALTER ROLE "Cap" WITH REPLICATION;',)
    assert "restart" not in error.render()


def test_tables_postgres_would_refuse_updates_on() -> None:
    assert table_problems([("public", "ok", "d", True), ("public", "f", "f", False)]) == []
    (problem,) = table_problems([("public", "log", "n", True)])
    assert problem.sql == ("ALTER TABLE public.log REPLICA IDENTITY FULL;",)


@pytest.mark.parametrize(
    ("oid", "text", "stored"),
    [
        (1022, "{5e-324,4,-0,NaN,0.1}", '[5E-324,4.0,-0.0,"NaN",0.1]'),
        (1009, '{solo,"a,b","q\\"u",é,NULL,""}', '["solo","a,b","q\\"u","\\u00e9",null,""]'),
        (1007, "{{1,2},{3,NULL}}", "[[1,2],[3,null]]"),
        (1007, "[0:1]={7,8}", "[7,8]"),
        (1182, "{1970-01-02}", "[1]"),
        (1231, "{1.50,-0.000001}", '["1.50","-0.000001"]'),
        (1001, '{"\\\\x00ff"}', '["AP8="]'),
        (1009, "{}", "[]"),
    ],
)  # fmt: skip
def test_array_json_text_is_what_capture_leaves_in_the_base(
    oid: int, text: str, stored: str
) -> None:
    """The bootstrap's and verify's array text equals the value a captured change of the
    array becomes: its envelope decoded and projected onto a ``json`` column."""
    from icetide.events.envelope import decode_message
    from icetide.events.project import project_event
    from icetide.schema.file import schema_from_dict

    kind = t.builtin_type(oid)
    assert kind is not None and t.is_json_array(kind)
    info = t.ColumnInfo("a", kind)
    envelope = {
        "schema": {
            "type": "struct",
            "fields": [
                {
                    "field": "after",
                    "type": "struct",
                    "fields": [
                        {"field": "id", "type": "int32"},
                        {"field": "a", **t.connect_schema(info)},
                    ],
                }
            ],
        },
        "payload": {
            "op": "c",
            "after": {"id": 1, "a": t.value_converter(info)(text)},
            "source": {"lsn": 1},
        },
    }
    schema = schema_from_dict(
        {
            "table": "t",
            "primary_key": ["id"],
            "columns": [
                {"id": 1, "name": "id", "type": "int", "nullable": False},
                {"id": 2, "name": "a", "type": "json"},
            ],
        }
    )
    for message in (envelope, envelope["payload"]):  # with and without an inline schema
        event = decode_message(json.dumps(message))
        projected = project_event(event, schema)  # type: ignore[arg-type]
        assert projected.after is not None
        assert projected.after["a"] == t.array_json_text(text, kind) == stored


MOOD = t.PgType(t.ENUM, "mood", enum_values=("sad", "ok", "happy"))
NAN, INF = float("nan"), float("inf")


def _array(oid: int) -> t.PgType:
    kind = t.builtin_type(oid)
    assert kind is not None and kind.is_array
    return kind


@pytest.mark.parametrize(
    ("kind", "typmod", "text", "expected"),
    [
        (_array(1000), -1, "{t,f,NULL}", [True, False, None]),
        (_array(1005), -1, "{-32768,NULL,32767}", [-32768, None, 32767]),
        (_array(1007), -1, "{1,NULL,-3}", [1, None, -3]),
        (_array(1016), -1, "{-9223372036854775808}", [-(2**63)]),
        (_array(1028), -1, "{4294967295}", [4294967295]),
        (_array(1021), -1, "{1.1,-0,NaN,Infinity,3.4e+38}", [1.1, -0.0, NAN, INF, 3.4e38]),
        (_array(1022), -1, "{5e-324,-0,NaN,-Infinity,0.1}", [5e-324, -0.0, NAN, -INF, 0.1]),
        (_array(1231), NUMERIC_12_4, "{1.5,-0.0001,NULL}",
         [Decimal("1.5000"), Decimal("-0.0001"), None]),
        (_array(1231), -1, "{1.50,NaN,-0.000001}", ["1.50", "NaN", "-0.000001"]),
        (_array(1009), -1, '{solo,"a,b","q\\"u",é✓,NULL,"NULL",""}',
         ["solo", "a,b", 'q"u', "é✓", None, "NULL", ""]),
        (_array(1015), -1, "{héllo}", ["héllo"]),
        (_array(1014), -1, '{"ab   "}', ["ab   "]),
        (_array(1003), -1, "{pg_class}", ["pg_class"]),
        (_array(1002), -1, "{x}", ["x"]),
        (_array(143), -1, "{<a/>}", ["<a/>"]),
        (_array(1001), -1, '{"\\\\x00ff","\\\\x",NULL}', [b"\x00\xff", b"", None]),
        (_array(1182), -1, "{2024-02-29,0001-01-01}", [date(2024, 2, 29), date(1, 1, 1)]),
        (_array(1183), -1, "{23:59:59.999999,00:00:00}", [time(23, 59, 59, 999999), time(0)]),
        (_array(1183), 3, "{12:00:00.5}", [time(12, 0, 0, 500000)]),
        (_array(1270), -1, "{12:34:56.789+05:30,23:30:00-01}",
         [time(7, 4, 56, 789000), time(0, 30)]),
        (_array(1115), -1, '{"1969-12-31 23:59:59.999999"}',
         [datetime(1969, 12, 31, 23, 59, 59, 999999)]),
        (_array(1115), 3, '{"2024-02-29 10:11:12.345",NULL}',
         [datetime(2024, 2, 29, 10, 11, 12, 345000), None]),
        (_array(1185), -1, '{"2024-06-30 23:30:00.25+05:30"}',
         [datetime(2024, 6, 30, 18, 0, 0, 250000, UTC)]),
        (_array(1187), -1, "{P1DT2H3M4.5S,P-1M}", [93_784_500_000, -2_629_800_000_000]),
        (_array(2951), -1, "{A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11}",
         ["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"]),
        (_array(199), -1, '{"{\\"a\\": 1.50}"}', ['{"a": 1.50}']),
        (_array(3807), -1, '{"{\\"k\\": [1, 2.50]}",NULL}', ['{"k": [1, 2.50]}', None]),
        (t.PgType(77, "_mood", MOOD), -1, "{happy,NULL,sad}", ["happy", None, "sad"]),
        (_array(1007), -1, "[0:1]={7,8}", [7, 8]),  # the lower bound is not kept
        (_array(1007), -1, "{}", []),
    ],
)  # fmt: skip
def test_arrays_land_as_lists_of_the_elements_type(
    kind: t.PgType, typmod: int, text: str, expected: list[Any]
) -> None:
    """Capture's array value, decoded and projected onto the list column capture's own
    inference gives the array (with or without an inline schema, read as the ledger
    reads capture), is each element as its scalar column would hold it, NULL elements
    null; the bootstrap's and verify's :func:`list_value` of the literal is the same."""
    info = t.ColumnInfo("a", kind, typmod)
    schema = _list_schema(info)
    column = schema.by_name["a"]
    assert column.type.name == "list" and column.type.element_nullable
    for projected in _captured(info, schema, text):
        assert _same(projected, expected)
    hint = read_hints(schema, CAPTURE).get(column.id)
    assert _same(t.list_value(text, kind, column, hint), expected)


def test_multi_dimensional_arrays_nest_lists_as_deep_as_the_column_declares() -> None:
    info = t.ColumnInfo("a", _array(1007), dims=2)
    schema = _list_schema(info)
    assert str(schema.by_name["a"].type) == "list<list<int>>"
    for projected in _captured(info, schema, "{{1,NULL},{3,4}}"):
        assert projected == [[1, None], [3, 4]]
    for projected in _captured(info, schema, "[0:1][1:2]={{5,6},{7,8}}"):
        assert projected == [[5, 6], [7, 8]]
    grid = t.ColumnInfo("a", _array(1182), dims=2)
    for projected in _captured(grid, _list_schema(grid), "{{1970-01-02,NULL}}"):
        assert projected == [[date(1970, 1, 2), None]]


@pytest.mark.parametrize(
    ("oid", "dims", "text", "levels"),
    [
        (1007, 2, "{1,2}", r"nests 1 level\(s\) of lists where the type has 2"),
        (1007, 1, "{{1,2},{3,4}}", r"nests 2 level\(s\) of lists where the type has 1"),
        (3807, 1, '{{"{}"}}', r"nests 2 level\(s\) of lists where the type has 1"),
        (1009, 2, "{{{a}}}", r"nests 3 level\(s\) of lists where the type has 2"),
    ],
)
def test_an_array_of_other_dimensions_than_declared_is_a_dead_letter(
    oid: int, dims: int, text: str, levels: str
) -> None:
    """PostgreSQL does not enforce an array column's dimensions: a value of another depth
    does not fit the list and is refused with a reason that says so (the ledger makes it
    a ``type_mismatch`` dead letter, the bootstrap too), never bent to fit."""
    from icetide.errors import DecodeError

    info = t.ColumnInfo("a", _array(oid), dims=dims)
    schema = _list_schema(info)
    for message in _messages(info, text):
        with pytest.raises(DecodeError, match=levels) as caught:
            project_event(decode_message(json.dumps(message)), schema, _hints(schema))  # type: ignore[arg-type]
        assert caught.value.reason == "type_mismatch"
    column = schema.by_name["a"]
    with pytest.raises(DecodeError, match=levels):
        t.list_value(text, info.type, column, _hints(schema).get(column.id))
    # The same value in a column declared json (the form before lists) is stored as is.
    assert t.array_json_text(text, info.type).startswith("[")


def _list_schema(info: t.ColumnInfo) -> Any:
    key = t.ColumnInfo("id", t.PgType(t.INT4, "integer"), primary=True, nullable=False)
    return t.infer_table_schema("t", [key, info])


def _hints(schema: Any) -> Any:
    return read_hints(schema, CAPTURE)


def _messages(info: t.ColumnInfo, text: str) -> list[dict[str, Any]]:
    """Capture's envelope of an insert with ``text`` in column ``a``: with its inline
    Connect schema, and without."""
    key = t.ColumnInfo("id", t.PgType(t.INT4, "integer"), nullable=False)
    payload = {
        "op": "c",
        "after": {"id": 1, "a": t.value_converter(info)(text)},
        "source": {"lsn": 1},
    }
    fields = [{"field": c.name, **t.connect_schema(c)} for c in (key, info)]
    schema = {
        "type": "struct",
        "fields": [{"field": "after", "type": "struct", "fields": fields}],
    }
    return [{"schema": schema, "payload": payload}, payload]


def _captured(info: t.ColumnInfo, schema: Any, text: str) -> list[Any]:
    out = []
    for message in _messages(info, text):
        event = decode_message(json.dumps(message))
        projected = project_event(event, schema, _hints(schema))  # type: ignore[arg-type]
        assert projected.after is not None
        out.append(projected.after["a"])
    return out


def _same(got: Any, want: Any) -> bool:
    """Equal, type for type (repr tells NaN, -0.0 and float from Decimal apart)."""
    return repr(got) == repr(want)


@pytest.mark.parametrize(
    "text",
    [
        "2024-01-01 00:16:40.123456",
        "1969-12-31 23:59:59.5",
        "2024-02-29 10:11:12.1",
        "9999-12-31 23:59:59.999999",
        "0000-01-01 00:00:00",
        "2024-01-01 00:00:00",
        "2024-13-45 25:61:61",  # out of range fields: counted on, as the pattern does
        "0001-01-01 00:00:00 BC",
        "12024-01-01 00:00:00",
        "2024-01-01 00:00:00+05",
        "2024-01-01 00:00:00.5+05",
        "2024-01-01 00:00:00\n",
        "2024-01-01 00:00:00.",
        "2024-01-01 00:00:00.1234567",
        "2024-01-01 0a:00:00",
        "2024-01-01 00:00:00.12345a",
        "2024-01-01T00:00:00",
        "2024-01-01 00:00:00 ",
    ],
)
def test_timestamps_read_by_position_equal_the_full_pattern(text: str) -> None:
    """The common timestamp form is read by position; every text, that form or not,
    gives what the full pattern gives (or fails as it does)."""
    try:
        seconds, micros = t._timestamp_parts(text)
        expected: Any = seconds * 1_000_000 + micros
    except ValueError:
        expected = ValueError
    if expected is ValueError:
        with pytest.raises(ValueError):
            t.timestamp_micros(text)
    else:
        assert t.timestamp_micros(text) == expected
        assert t.timestamp_millis(text) == expected // 1000
