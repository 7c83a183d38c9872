"""Kafka Connect / Debezium logical types → Python values."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import pytest

from icetide.errors import DecodeError
from icetide.events.logical_types import (
    LOGICAL_DECODERS,
    TYPE_DECODERS,
    decode_struct,
    decode_value,
    unscaled_to_decimal,
)

DECIMAL = "org.apache.kafka.connect.data.Decimal"


def logical(name: str, type_: str = "int64", **parameters: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": type_, "name": name}
    if parameters:
        schema["parameters"] = parameters
    return schema


# (logical name, connect type, parameters, JSON value, expected Python value)
LOGICAL_CASES: list[tuple[str, str, dict[str, str], Any, Any]] = [
    (DECIMAL, "bytes", {"scale": "2"}, "AeI=", Decimal("4.82")),
    (DECIMAL, "bytes", {"scale": "2"}, "hQ==", Decimal("-1.23")),
    (DECIMAL, "bytes", {"scale": "2"}, "/4U=", Decimal("-1.23")),
    (DECIMAL, "bytes", {"scale": "0"}, "/4A=", Decimal("-128")),
    (DECIMAL, "bytes", {"scale": "0"}, "AIA=", Decimal("128")),
    (DECIMAL, "bytes", {"scale": "3"}, "AA==", Decimal("0.000")),
    (DECIMAL, "bytes", {"scale": "2"}, Decimal("12.50"), Decimal("12.50")),
    (
        "io.debezium.data.VariableScaleDecimal",
        "struct",
        {},
        {"scale": 3, "value": "AeI="},
        Decimal("0.482"),
    ),
    (
        "io.debezium.data.VariableScaleDecimal",
        "struct",
        {},
        {"scale": 1, "value": "/4U="},
        Decimal("-12.3"),
    ),
    ("org.apache.kafka.connect.data.Date", "int32", {}, 17897, date(2019, 1, 1)),
    ("io.debezium.time.Date", "int32", {}, -1, date(1969, 12, 31)),
    ("io.debezium.time.Date", "int32", {}, 0, date(1970, 1, 1)),
    ("org.apache.kafka.connect.data.Time", "int32", {}, 45296789, time(12, 34, 56, 789000)),
    ("io.debezium.time.Time", "int32", {}, 45296789, time(12, 34, 56, 789000)),
    ("io.debezium.time.MicroTime", "int64", {}, 45296789012, time(12, 34, 56, 789012)),
    ("io.debezium.time.NanoTime", "int64", {}, 45296789012345, time(12, 34, 56, 789012)),
    (
        "org.apache.kafka.connect.data.Timestamp",
        "int64",
        {},
        1529499423123,
        datetime(2018, 6, 20, 12, 57, 3, 123000),
    ),
    (
        "io.debezium.time.Timestamp",
        "int64",
        {},
        1529499423123,
        datetime(2018, 6, 20, 12, 57, 3, 123000),
    ),
    (
        "io.debezium.time.MicroTimestamp",
        "int64",
        {},
        1529499423123456,
        datetime(2018, 6, 20, 12, 57, 3, 123456),
    ),
    (
        "io.debezium.time.NanoTimestamp",
        "int64",
        {},
        1529499423123456789,
        datetime(2018, 6, 20, 12, 57, 3, 123456),
    ),
    (
        "io.debezium.time.ZonedTimestamp",
        "string",
        {},
        "2018-06-20T14:57:03.123+02:00",
        datetime(2018, 6, 20, 12, 57, 3, 123000, tzinfo=UTC),
    ),
    ("io.debezium.time.ZonedTime", "string", {}, "10:15:30.123Z", time(10, 15, 30, 123000, UTC)),
    ("io.debezium.time.Year", "int32", {}, 2024, 2024),
    # time.precision.mode=isostring: ISO-8601 text.
    ("io.debezium.time.IsoDate", "string", {}, "2024-02-29", date(2024, 2, 29)),
    ("io.debezium.time.IsoTime", "string", {}, "10:15:30.5Z", time(10, 15, 30, 500000)),
    (
        "io.debezium.time.IsoTimestamp",
        "string",
        {},
        "2024-02-29T10:15:30.123456Z",
        datetime(2024, 2, 29, 10, 15, 30, 123456),
    ),
    ("io.debezium.data.Json", "string", {}, '{"a": [1, 2]}', '{"a": [1, 2]}'),
    ("io.debezium.data.Enum", "string", {"allowed": "red,green"}, "green", "green"),
    ("io.debezium.data.EnumSet", "string", {"allowed": "a,b,c"}, "a,c", "a,c"),
    # Debezium's little-endian bytes become the column's own order (see bits_bytes).
    ("io.debezium.data.Bits", "bytes", {"length": "9"}, "AQI=", b"\x02\x01"),
    (
        "io.debezium.data.Uuid",
        "string",
        {},
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    ),
    ("io.debezium.data.Xml", "string", {}, "<a>1</a>", "<a>1</a>"),
]


@pytest.mark.parametrize(("name", "type_", "params", "value", "expected"), LOGICAL_CASES)
def test_logical_type_decodes(
    name: str, type_: str, params: dict[str, str], value: Any, expected: Any
) -> None:
    result = decode_value(value, logical(name, type_, **params), "col")
    assert result == expected
    assert type(result) is type(expected)
    if isinstance(expected, datetime | time):
        assert result.tzinfo == expected.tzinfo


def test_every_logical_decoder_has_a_case() -> None:
    assert {case[0] for case in LOGICAL_CASES} == set(LOGICAL_DECODERS)


def test_decimal_keeps_all_38_digits() -> None:
    unscaled = 10**38 - 1
    raw = unscaled.to_bytes(17, "big", signed=True)
    assert unscaled_to_decimal(raw, 10) == Decimal("9999999999999999999999999999.9999999999")
    assert unscaled_to_decimal((-unscaled).to_bytes(17, "big", signed=True), 0) == -unscaled


def test_nano_timestamp_truncates_toward_the_past() -> None:
    schema = logical("io.debezium.time.NanoTimestamp")
    assert decode_value(-1, schema) == datetime(1969, 12, 31, 23, 59, 59, 999999)
    assert decode_value(999, schema) == datetime(1970, 1, 1)
    assert decode_value(1_000, schema) == datetime(1970, 1, 1, 0, 0, 0, 1)


def test_timestamps_are_naive_wall_clock() -> None:
    result = decode_value(0, logical("io.debezium.time.MicroTimestamp"))
    assert result == datetime(1970, 1, 1)
    assert result.tzinfo is None


def test_zoned_timestamp_with_nanoseconds_and_negative_offset() -> None:
    schema = logical("io.debezium.time.ZonedTimestamp", "string")
    got = decode_value("2018-06-20T08:57:03.123456789-04:00", schema)
    assert got == datetime(2018, 6, 20, 12, 57, 3, 123456, tzinfo=UTC)
    assert got.utcoffset() == timedelta(0)
    assert got.tzinfo is UTC


def test_zoned_time_with_offset_moves_to_utc_across_midnight() -> None:
    schema = logical("io.debezium.time.ZonedTime", "string")
    assert decode_value("12:15:30+02:00", schema) == time(10, 15, 30, tzinfo=UTC)
    got = decode_value("01:00:00+02:00", schema)
    assert got == time(23, 0, tzinfo=UTC)
    assert got.tzinfo is UTC


@pytest.mark.parametrize(
    ("type_", "value", "expected"),
    [
        ("int8", -128, -128),
        ("int16", 32767, 32767),
        ("int32", 1004, 1004),
        ("int64", 2**63 - 1, 2**63 - 1),
        ("int64", Decimal("7"), 7),
        ("float32", Decimal("1.5"), 1.5),
        ("float64", 2, 2.0),
        ("float64", "Infinity", math.inf),
        ("float64", "-Infinity", -math.inf),
        ("boolean", True, True),
        ("string", "Anne", "Anne"),
        ("bytes", "AQID", b"\x01\x02\x03"),
    ],
)
def test_plain_types(type_: str, value: Any, expected: Any) -> None:
    result = decode_value(value, {"type": type_})
    assert result == expected
    assert type(result) is type(expected)


def test_float_nan_string() -> None:
    assert math.isnan(decode_value("NaN", {"type": "float64"}))


def test_null_stays_null_for_any_type() -> None:
    assert decode_value(None, logical(DECIMAL, "bytes", scale="2")) is None
    assert decode_value(None, {"type": "struct", "fields": []}) is None


def test_unknown_logical_name_falls_back_to_plain_type() -> None:
    assert decode_value("AQ==", {"type": "bytes", "name": "com.example.Blob"}) == b"\x01"
    assert decode_value(5, {"type": "int64", "name": "io.debezium.time.MicroDuration"}) == 5
    with pytest.raises(DecodeError) as err:
        decode_value("x", {"type": "int64", "name": "com.example.Unknown"}, "after.n")
    assert err.value.reason == "bad_logical_value"


def test_unknown_type_is_left_alone() -> None:
    assert decode_value({"x": 1}, {"type": "mystery"}) == {"x": 1}


def test_struct_array_and_map_decode_recursively() -> None:
    schema = {
        "type": "struct",
        "fields": [
            {"field": "price", **logical(DECIMAL, "bytes", scale="2")},
            {
                "field": "days",
                "type": "array",
                "items": logical("io.debezium.time.Date", "int32"),
            },
            {
                "field": "by_name",
                "type": "map",
                "keys": {"type": "string"},
                "values": logical("io.debezium.time.Date", "int32"),
            },
            {
                "field": "by_id",
                "type": "map",
                "keys": {"type": "int32"},
                "values": {"type": "bytes"},
            },
            {
                "field": "point",
                "type": "struct",
                "name": "io.debezium.data.geometry.Point",
                "fields": [
                    {"field": "x", "type": "float64"},
                    {"field": "y", "type": "float64"},
                ],
            },
        ],
    }
    value = {
        "price": "AeI=",
        "days": [0, 1],
        "by_name": {"a": 17897},
        "by_id": [[1, "AQ=="], [2, "Ag=="]],
        "point": {"x": Decimal("1.5"), "y": 2},
        "not_in_schema": Decimal("3.0"),
    }
    assert decode_value(value, schema) == {
        "price": Decimal("4.82"),
        "days": [date(1970, 1, 1), date(1970, 1, 2)],
        "by_name": {"a": date(2019, 1, 1)},
        "by_id": {1: b"\x01", 2: b"\x02"},
        "point": {"x": 1.5, "y": 2.0},
        "not_in_schema": Decimal("3.0"),
    }


def test_decode_struct_names_the_nested_column_in_errors() -> None:
    schema = {
        "type": "struct",
        "fields": [
            {
                "field": "address",
                "type": "struct",
                "fields": [{"field": "since", **logical("io.debezium.time.Date", "int32")}],
            }
        ],
    }
    with pytest.raises(DecodeError) as err:
        decode_struct({"address": {"since": "yesterday"}}, schema, "after")
    assert err.value.reason == "bad_logical_value"
    assert err.value.column == "address"
    assert "after.address.since" in err.value.message
    assert "'yesterday'" in err.value.message


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        (logical(DECIMAL, "bytes", scale="2"), "not base64!"),
        (logical(DECIMAL, "bytes", scale="2"), ""),
        (logical(DECIMAL, "bytes", scale="x"), "AQ=="),
        (logical(DECIMAL, "bytes", scale="2"), True),
        (logical("io.debezium.data.VariableScaleDecimal", "struct"), {"scale": 2}),
        (
            logical("io.debezium.data.VariableScaleDecimal", "struct"),
            {"scale": "2", "value": "AQ=="},
        ),
        (logical("io.debezium.data.VariableScaleDecimal", "struct"), "AQ=="),
        (logical("io.debezium.time.Date", "int32"), "2019-01-01"),
        (logical("io.debezium.time.Date", "int32"), 10**9),
        (logical("io.debezium.time.MicroTime"), 86_400_000_000),
        (logical("io.debezium.time.Time", "int32"), -1),
        (logical("io.debezium.time.MicroTimestamp"), 1.5),
        (logical("io.debezium.time.Timestamp"), 10**17),
        (logical("io.debezium.time.ZonedTimestamp", "string"), "2018-06-20T12:57:03"),
        (logical("io.debezium.time.ZonedTimestamp", "string"), "infinity"),
        (logical("io.debezium.time.ZonedTimestamp", "string"), 1529499423),
        (logical("io.debezium.time.ZonedTime", "string"), "10:15:30"),
        (logical("io.debezium.time.Year", "int32"), "2024"),
        (logical("io.debezium.data.Json", "string"), {"a": 1}),
        (logical("io.debezium.data.Bits", "bytes"), "%%"),
        ({"type": "int8"}, 128),
        ({"type": "int32"}, True),
        ({"type": "float64"}, "fast"),
        ({"type": "boolean"}, "true"),
        ({"type": "string"}, 5),
        ({"type": "array", "items": {"type": "int32"}}, {"a": 1}),
        ({"type": "map", "values": {"type": "int32"}}, [1, 2]),
        ({"type": "struct", "fields": []}, [1]),
    ],
)
def test_invalid_values_raise_bad_logical_value(schema: dict[str, Any], value: Any) -> None:
    with pytest.raises(DecodeError) as err:
        decode_value(value, schema, "after.col")
    assert err.value.reason == "bad_logical_value"
    assert err.value.column == "col"
    assert err.value.message.startswith("after.col")
    assert ": expected " in err.value.message


def test_decoder_tables_are_plain_dicts_of_callables() -> None:
    assert set(TYPE_DECODERS) == {
        "int8",
        "int16",
        "int32",
        "int64",
        "float32",
        "float64",
        "boolean",
        "string",
        "bytes",
        "struct",
        "array",
        "map",
    }
    assert all(callable(f) for f in [*LOGICAL_DECODERS.values(), *TYPE_DECODERS.values()])


def test_zoned_time_keeps_utc_offset_zero() -> None:
    got = decode_value("23:59:59.999999-00:30", logical("io.debezium.time.ZonedTime", "string"))
    assert got == time(0, 29, 59, 999999, tzinfo=UTC)
    assert got.utcoffset() == UTC.utcoffset(None)
