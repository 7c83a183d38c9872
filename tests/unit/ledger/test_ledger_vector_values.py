"""The block's array converters against the per-value converters they stand in for: a
value taken at once is typed exactly as one by one, and a value the per-value converter
refuses is never taken (the range edges, the encodings' edges)."""

from __future__ import annotations

import base64
import random
from typing import Any

import pyarrow as pa
import pytest

from icetide.events.inline import struct_reader
from icetide.events.plain import Refuse, value_converter
from icetide.ledger.vector_values import vector_converter
from icetide.schema.convert.spark import arrow_type
from icetide.schema.types import Column, EnumType, parse_type

DAYS = [0, -1, 19_000, -719_162, -719_163, 2_932_896, 2_932_897, 2**40, -(2**62)]
MICROS = [0, -1, 1_700_000_000_123_456, -62_135_596_800_000_000, -62_135_596_800_000_001]
MICROS += [253_402_300_799_999_999, 253_402_300_800_000_000, 2**63 - 1, -(2**63)]
MILLIS = [m // 1000 for m in MICROS] + [m // 1000 + 1 for m in MICROS] + [-62_135_596_800_001]
MILLIS = [m for m in MILLIS if -(2**63) <= m < 2**63]
NANOS = [m * 1000 + d for m in MICROS[:3] for d in (-1, 0, 999)] + [2**63 - 1, -(2**63)]


def unscaled(number: int) -> str:
    size = max(1, (number.bit_length() + 8) // 8)
    return base64.b64encode(number.to_bytes(size, "big", signed=True)).decode()


DECIMALS = [unscaled(n) for n in (0, 1, -1, 482, 10**10 - 1, -(10**10) + 1, 10**10, -(10**10))]
DECIMALS += [
    "",
    "AeI",
    "AeI=\n",
    " AeI=",
    "12.50",
    "AAAAAAAAAAAAAAAAAAAAAAE=",
    unscaled(2**200),
    "__debezium_unavailable_value",
    "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",
]
INSTANTS = [
    "2024-03-01T18:57:24.481321Z",
    "2024-03-01T18:57:24Z",
    "2024-03-01T18:57:24.4Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999Z",
    "2024-02-29T23:59:59Z",
    "2024-01-01T24:00:00Z",
    "2024-01-01T00:00:60Z",
    "2024-01-01T00:00:00.1234567Z",
    "2024-01-01T00:00:00+01:00",
    "2024-01-01T00:00:00",
    "2024-01-01 00:00:00Z",
    "junk",
    "",
]
TEXTS = ['{"a":1}', "[]", "", "not json", "__debezium_unavailable_value", DECIMALS[-1]]
DATE_TEXTS = [
    "2024-03-01", "2024-02-29", "1000-01-01", "9999-12-31", "0001-01-01", "2024-13-01",
    "2024-1-01", " 2024-03-01", "20240301", "2024-03-01T00:00:00", "junk", "",
]  # fmt: skip
LOCAL_TEXTS = [
    "2024-03-01T12:34:56.123456", "2024-03-01T12:34:56", "2024-03-01T12:34:56.5",
    "9999-12-31T23:59:59.999999", "0001-01-01T00:00:00", "2024-03-01 12:34:56",
    "2024-03-01T12:34:56Z", "2024-03-01T24:00:00", "2024-03-01T12:34:56.1234567",
    "2024-03-01T12:34:56+01:00", "2024-03-01", "junk",
]  # fmt: skip
TIME_TEXTS = ["12:34:56.123456", "00:00:00", "23:59:59.999999", "12:00:00.000000",
              "12:34:56.123", "24:00:00", "12:60:00", "12:34:56Z", "12:34:56+01:00",
              "1:02:03", " 12:34:56", "junk", ""]  # fmt: skip
UUID_TEXTS = [
    "3f2504e0-4f89-11d3-9a0c-0305e82c3301", "3F2504E0-4F89-11D3-9A0C-0305E82C3301",
    "{3f2504e0-4f89-11d3-9a0c-0305e82c3301}", "3f2504e04f8911d39a0c0305e82c3301",
    " 3f2504e0-4f89-11d3-9a0c-0305e82c3301", "urn:uuid:3f2504e0-4f89-11d3-9a0c-0305e82c3301",
    "not-a-uuid", "__debezium_unavailable_value", "",
]  # fmt: skip

CASES: list[tuple[str, str | None, bool, list[Any]]] = [
    ("date", "io.debezium.time.Date", True, DAYS),
    ("date", None, True, DAYS),
    ("date", "org.apache.kafka.connect.data.Date", False, DAYS),
    ("timestamp", "io.debezium.time.MicroTimestamp", True, MICROS),
    ("timestamp", "io.debezium.time.Timestamp", False, MILLIS),
    ("timestamp", None, True, MILLIS),
    ("timestamp", "io.debezium.time.NanoTimestamp", True, NANOS),
    ("timestamptz", "io.debezium.time.MicroTimestamp", True, MICROS),
    ("timestamptz", "io.debezium.time.ZonedTimestamp", True, INSTANTS),
    ("timestamptz", "io.debezium.time.ZonedTimestamp", False, INSTANTS),
    ("timestamptz", None, True, INSTANTS + MILLIS),
    ("decimal(10,2)", "org.apache.kafka.connect.data.Decimal", True, DECIMALS),
    ("decimal(10,2)", "org.apache.kafka.connect.data.Decimal", False, DECIMALS),
    ("decimal(10,2)", None, True, DECIMALS),
    ("json", "io.debezium.data.Json", True, TEXTS),
    ("json", "io.debezium.data.Json", False, TEXTS),
    ("json", None, True, TEXTS),
    ("date", None, True, DATE_TEXTS),
    ("date", "io.debezium.time.Date", True, DATE_TEXTS + DAYS),
    ("timestamp", None, True, LOCAL_TEXTS + MILLIS),
    ("timestamp", "io.debezium.time.MicroTimestamp", True, LOCAL_TEXTS + MICROS),
    ("time", None, True, TIME_TEXTS),
    ("time", "io.debezium.time.MicroTime", True, TIME_TEXTS),
    ("uuid", None, True, UUID_TEXTS),
    ("uuid", "io.debezium.data.Uuid", True, UUID_TEXTS),
]


def one_by_one(column: Column, arrival: str | None, schemaless: bool) -> Any:
    """The per-value typing the array converter stands in for: the schemaless read by
    its hint, or a field of that logical name decoded, then the typed converter."""
    if schemaless:
        return value_converter(column, arrival, column)
    kind = {"date": "int32", "decimal(10,2)": "bytes", "timestamptz": "string", "json": "string"}
    field = {"field": column.name, "type": kind.get(str(column.type), "int64"), "name": arrival}
    if arrival == "org.apache.kafka.connect.data.Decimal":
        field["parameters"] = {"scale": "2"}
    reader = struct_reader(
        {"fields": [{"field": f, "fields": [field]} for f in ("before", "after")]}
    )
    assert reader is not None
    decode = reader.fields[column.name][0]
    assert decode is not None
    typed = value_converter(column, arrival, column, typed=True)

    def run(value: Any) -> Any:
        try:
            decoded = decode(value)
        except Exception:
            raise Refuse from None
        return typed(decoded)

    return run


@pytest.mark.parametrize(("kind", "arrival", "schemaless", "values"), CASES)
def test_a_value_taken_at_once_is_typed_as_one_by_one(
    kind: str, arrival: str | None, schemaless: bool, values: list[Any]
) -> None:
    column = Column(1, "c", parse_type(kind))
    stored = arrow_type(column.type)
    vector = vector_converter(column, stored, arrival, schemaless)
    assert vector is not None
    convert = one_by_one(column, arrival, schemaless)
    rnd = random.Random(5)
    mixed = [rnd.choice(values) for _ in range(300)] + values + [None]
    numbers = [v for v in mixed if not isinstance(v, str)]
    for part in ([v for v in mixed if isinstance(v, str) or v is None], numbers):
        if not any(v is not None for v in part):
            continue
        parsed = pa.array(part, pa.string() if isinstance(part[0], str) else pa.int64())
        at_once, taken = vector(parsed)
        assert at_once.type == stored
        typed = at_once.to_pylist()
        took = 0
        for i, value in enumerate(part):
            try:
                expected = None if value is None else convert(value)
            except Refuse:
                assert not taken[i], value  # refused one by one: never taken at once
                continue
            if taken[i]:
                took += 1
                as_stored = pa.array([expected], stored).to_pylist()[0]
                assert repr(typed[i]) == repr(as_stored), value
        assert took > 0


def test_an_enum_symbol_is_taken_as_it_is_and_nothing_else() -> None:
    column = Column(1, "e", EnumType(("new", "paid", "__debezium_unavailable_value")))
    vector = vector_converter(column, pa.string(), None, True)
    assert vector is not None
    values = ["new", "paid", "New", " new", "", "__debezium_unavailable_value", None]
    at_once, taken = vector(pa.array(values, pa.string()))
    assert taken.tolist() == [True, True, False, False, False, False, False]
    assert at_once.to_pylist()[:2] == ["new", "paid"]
    assert vector(pa.array([1, 2]))[1].tolist() == [False, False]


def test_a_day_its_month_lacks_leaves_the_column_to_the_per_value_read() -> None:
    for kind, text in (("date", "2023-02-29"), ("timestamp", "2023-02-29T00:00:00")):
        column = Column(1, "d", parse_type(kind))
        vector = vector_converter(column, arrow_type(column.type), None, True)
        assert vector is not None
        assert not vector(pa.array(["2024-02-29" + text[10:], text]))[1].any()


def test_a_column_its_arrival_does_not_say_is_typed_one_by_one() -> None:
    day = Column(1, "d", parse_type("date"))
    assert vector_converter(day, pa.date32(), "io.debezium.time.Timestamp", False) is None
    assert vector_converter(day, pa.date32(), None, False) is None
    amount = Column(2, "a", parse_type("decimal(10,2)"))
    assert vector_converter(amount, pa.decimal128(10, 2), "string", True) is None
    assert vector_converter(amount, pa.decimal128(12, 3), None, True) is None
    at = Column(3, "t", parse_type("timestamp"))
    assert vector_converter(at, pa.timestamp("us"), "io.debezium.time.ZonedTimestamp", True) is None
