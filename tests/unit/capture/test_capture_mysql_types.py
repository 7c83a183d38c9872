"""Binlog value → Debezium JSON conversion, and the round trip through decode + project."""

from __future__ import annotations

import base64
import json
import struct
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import pytest

from icetide.capture.mysql import types as t
from icetide.capture.mysql.types import ColumnInfo
from icetide.events.envelope import decode_message
from icetide.events.model import ChangeEvent
from icetide.events.project import project_event
from icetide.schema.connector import CAPTURE, read_hints
from icetide.schema.model import SinkSettings, TableSchema
from icetide.schema.types import Column, parse_type


def f32(value: float) -> float:
    """What python-mysql-replication hands over for a FLOAT column."""
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


@pytest.mark.parametrize("value", [1.1, -3.4e38, 0.1, 123456.7, 1e-7, 0.0, 16777216.0])
def test_float32_value_is_the_shortest_round_tripping_text(value: float) -> None:
    shown = t.float32_value(f32(value))
    assert struct.pack("<f", shown) == struct.pack("<f", value)
    assert len(repr(shown)) <= len(repr(value)) + 1


def test_decimal_text_keeps_scale_and_never_uses_exponents() -> None:
    assert t.decimal_text(Decimal("-12345678.1230")) == "-12345678.1230"
    assert t.decimal_text(Decimal("0E-4")) == "0.0000"
    assert t.decimal_text(Decimal("1E+5")) == "100000"


def test_temporal_conversions() -> None:
    assert t.epoch_days(date(1970, 1, 1)) == 0
    assert t.epoch_days(date(1969, 7, 20)) == -165
    assert t.epoch_micros(datetime(1970, 1, 1, 0, 0, 0, 1)) == 1
    assert t.epoch_micros(datetime(1900, 1, 1)) == -2208988800000000
    assert t.epoch_millis(datetime(1969, 12, 31, 23, 59, 59, 999000)) == -1
    assert t.micro_time(timedelta(hours=838, minutes=59, seconds=59)) == 3020399000000
    assert t.micro_time(timedelta(seconds=-1, microseconds=500000)) == -500000
    assert t.zoned_timestamp(datetime(2038, 1, 19, 3, 14, 7, 499999), 6) == (
        "2038-01-19T03:14:07.499999Z"
    )
    assert t.zoned_timestamp(datetime(2024, 1, 1, 0, 0, 0, 120000), 3) == (
        "2024-01-01T00:00:00.120Z"
    )


def test_bits_are_little_endian_bytes_and_bit1_is_boolean() -> None:
    assert t.bits_value("0", 1) is False
    assert t.bits_value("1", 1) is True
    assert base64.b64decode(str(t.bits_value("1000000001", 10))) == b"\x01\x02"
    assert base64.b64decode(str(t.bits_value("1" * 64, 64))) == b"\xff" * 8
    assert base64.b64decode(str(t.bits_value("101", 17))) == b"\x05\x00\x00"


def test_set_enum_year_binary_geometry_json() -> None:
    assert t.set_text({"blue", "red"}, ["red", "green", "blue"]) == "red,blue"
    assert t.set_text(set(), ["a"]) == ""
    assert t.year_value(1900) == 0 and t.year_value(1901) == 1901
    assert t.padded_binary(b"\x01\x02", 4) == b"\x01\x02\x00\x00"
    assert t.padded_binary(b"\x01\x02", 2) == b"\x01\x02"
    assert t.geometry_value(b"\x00\x00\x00\x00\x01") == {"wkb": "AQ==", "srid": 0}
    assert t.json_text('{"a": 1}') == '{"a": 1}'
    assert t.json_text({b"k": [True, None, b"s", Decimal("1.50")]}) == (
        '{"k": [true, null, "s", 1.50]}'
    )


def test_nullable_flags_read_the_table_map_bitmask() -> None:
    assert t.nullable_flags(b"\xfe\x01", 9) == [False] + [True] * 8


def test_an_empty_set_is_an_empty_string_not_null() -> None:
    columns = [
        (info, t.value_converter(info))
        for info in (
            ColumnInfo("s", t.SET, set_values=("a", "b")),
            ColumnInfo("e", t.ENUM, enum_values=("a",)),
        )
    ]
    row = t.convert_row({"s": None, "e": None}, columns, {"s": "empty set", "e": "null"})
    assert row == {"s": "", "e": None}


def test_sql_types_for_the_history() -> None:
    utf8 = "utf8mb4_bin"
    cases = [
        (ColumnInfo("a", t.LONG, unsigned=True), "int unsigned"),
        (ColumnInfo("a", t.LONGLONG), "bigint"),
        (
            ColumnInfo("a", t.VARCHAR, max_length=400, charset="utf8", collation=utf8),
            "varchar(100)",
        ),
        (ColumnInfo("a", t.VARCHAR, max_length=16, charset="binary"), "varbinary(16)"),
        (ColumnInfo("a", t.STRING, max_length=4, charset="binary"), "binary(4)"),
        (ColumnInfo("a", t.STRING, max_length=20, charset="utf8", collation=utf8), "char(5)"),
        (ColumnInfo("a", t.BLOB, length_size=4, charset="binary"), "longblob"),
        (ColumnInfo("a", t.BLOB, length_size=2, charset="utf8", collation=utf8), "text"),
        (ColumnInfo("a", t.DATETIME2, fsp=6), "datetime(6)"),
        (ColumnInfo("a", t.TIMESTAMP2), "timestamp"),
        (ColumnInfo("a", t.BIT, bits=10), "bit(10)"),
        (ColumnInfo("a", t.ENUM, enum_values=("x", "it's")), "enum('x','it''s')"),
        (ColumnInfo("a", t.SET, set_values=("r", "g")), "set('r','g')"),
    ]
    for info, expected in cases:
        assert t.sql_type(info) == expected, info


# --- the round trip: library value → converter → JSON → decode_message → project_event ---

# (column, value python-mysql-replication gives, icetide type, expected projected value)
ROUND_TRIP: list[tuple[ColumnInfo, Any, Any]] = [
    (ColumnInfo("c_tiny", t.TINY), -128, -128),
    (ColumnInfo("c_tiny_u", t.TINY, unsigned=True), 255, 255),
    (ColumnInfo("c_small_u", t.SHORT, unsigned=True), 65535, 65535),
    (ColumnInfo("c_medium", t.INT24), -8388608, -8388608),
    (ColumnInfo("c_int_u", t.LONG, unsigned=True), 4294967295, 4294967295),
    (ColumnInfo("c_big", t.LONGLONG), -(2**63), -(2**63)),
    (ColumnInfo("c_big_u", t.LONGLONG, unsigned=True), 2**64 - 1, Decimal(2**64 - 1)),
    (ColumnInfo("c_float", t.FLOAT), f32(1.1), 1.1),
    (ColumnInfo("c_double", t.DOUBLE), 2.718281828459045, 2.718281828459045),
    (
        ColumnInfo("c_dec", t.NEWDECIMAL, precision=12, scale=4),
        Decimal("-12345678.1234"),
        Decimal("-12345678.1234"),
    ),
    (ColumnInfo("c_year", t.YEAR), 2155, 2155),
    (ColumnInfo("c_date", t.DATE), date(1969, 7, 20), date(1969, 7, 20)),
    (
        ColumnInfo("c_time", t.TIME2, fsp=6),
        timedelta(hours=23, minutes=59, seconds=59, microseconds=999999),
        time(23, 59, 59, 999999),
    ),
    (
        ColumnInfo("c_dt", t.DATETIME2),
        datetime(1900, 1, 1, 0, 0, 1),
        datetime(1900, 1, 1, 0, 0, 1),
    ),
    (
        ColumnInfo("c_dt3", t.DATETIME2, fsp=3),
        datetime(2024, 2, 29, 10, 11, 12, 345000),
        datetime(2024, 2, 29, 10, 11, 12, 345000),
    ),
    (
        ColumnInfo("c_dt6", t.DATETIME2, fsp=6),
        datetime(1969, 12, 31, 23, 59, 59, 999999),
        datetime(1969, 12, 31, 23, 59, 59, 999999),
    ),
    (
        ColumnInfo("c_ts", t.TIMESTAMP2, fsp=6),
        datetime(2038, 1, 19, 3, 14, 7, 499999),
        datetime(2038, 1, 19, 3, 14, 7, 499999, tzinfo=UTC),
    ),
    (ColumnInfo("c_bit1", t.BIT, bits=1), "1", True),
    # Little-endian Bits in the envelope; the column's own order once projected.
    (ColumnInfo("c_bit", t.BIT, bits=10), "1000000001", b"\x02\x01"),
    (ColumnInfo("c_enum", t.ENUM, enum_values=("s", "m")), "m", "m"),
    (ColumnInfo("c_set", t.SET, set_values=("r", "g", "b")), {"b", "r"}, "r,b"),
    (ColumnInfo("c_json", t.JSON), {b"a": [1, 2]}, '{"a": [1, 2]}'),
    (ColumnInfo("c_text", t.BLOB, length_size=2, charset="utf8"), "héllo ✓ 🎉", "héllo ✓ 🎉"),
    (ColumnInfo("c_binary", t.STRING, max_length=4, charset="binary"), b"\x01", b"\x01\0\0\0"),
    (ColumnInfo("c_blob", t.BLOB, length_size=2, charset="binary"), bytes(range(256)), None),
]


def _round_trip_schema() -> TableSchema:
    columns = [Column(1, "id", parse_type("int"), nullable=False)]
    hints = {}
    for number, (info, _, _) in enumerate(ROUND_TRIP, start=2):
        type_name, logical = t.icetide_type(info)
        columns.append(Column(number, info.name, parse_type(type_name)))
        if logical:
            hints[number] = logical
    return TableSchema("all_types", tuple(columns), ("id",), sink=SinkSettings(hints))


def _message(with_schema: bool) -> str:
    infos = [ColumnInfo("id", t.LONG, nullable=False, primary=True)] + [c for c, _, _ in ROUND_TRIP]
    values = {"id": 1, **{c.name: raw for c, raw, _ in ROUND_TRIP}}
    after = t.convert_row(values, [(c, t.value_converter(c)) for c in infos])
    payload = {
        "before": None,
        "after": after,
        "op": "c",
        "source": {"connector": "mysql", "db": "shop", "table": "all_types", "file": "b.000001"},
        "ts_ms": 1,
    }
    payload["source"]["pos"] = 4
    if not with_schema:
        return json.dumps(payload)
    fields = [{**t.connect_schema(c), "field": c.name} for c in infos]
    schema = {
        "type": "struct",
        "fields": [
            {"type": "struct", "fields": fields, "optional": True, "field": "before"},
            {"type": "struct", "fields": fields, "optional": True, "field": "after"},
        ],
    }
    return json.dumps({"schema": schema, "payload": payload})


@pytest.mark.parametrize("with_schema", [False, True], ids=["schemaless", "with-schema"])
def test_every_type_round_trips_through_decode_and_project(with_schema: bool) -> None:
    event = decode_message(_message(with_schema))
    assert isinstance(event, ChangeEvent)
    schema = _round_trip_schema()
    # Read as the pipeline reads a table icetide captures (decimals as text).
    projected = project_event(event, schema, read_hints(schema, CAPTURE))
    assert projected.after is not None
    for info, raw, expected in ROUND_TRIP:
        want = raw if expected is None else expected
        assert projected.after[info.name] == want, info.name
        assert type(projected.after[info.name]) is type(want), info.name


def test_inferred_schema_uses_binlog_nullability_and_key() -> None:
    schema = t.infer_table_schema(
        "t",
        [
            ColumnInfo("id", t.LONG, nullable=False, primary=True),
            ColumnInfo("v", t.DATETIME2, fsp=2),
        ],
    )
    assert schema.primary_key == ("id",)
    logical = schema.sink.logical.get
    assert [(c.name, str(c.type), c.nullable, logical(c.id)) for c in schema.columns] == [
        ("id", "int", False, None),
        ("v", "timestamp", True, "io.debezium.time.Timestamp"),
    ]


def test_column_info_reads_a_library_column() -> None:
    class FakeColumn:
        def __init__(self, **kw: Any) -> None:
            self.__dict__.update(kw)

    info = t.column_info(
        FakeColumn(
            name="e",
            type=t.ENUM,
            unsigned=False,
            is_primary=False,
            enum_values=["", "a", "b"],
            character_set_name="utf8",
            collation_name="utf8mb4_bin",
        ),
        nullable=False,
    )
    assert info.enum_values == ("a", "b") and not info.nullable and info.charset == "utf8"
