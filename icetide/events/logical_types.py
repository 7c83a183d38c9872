"""Decode JSON column values by their Kafka Connect field schema.

Debezium writes many column types as Kafka Connect *logical types*: a decimal is
base64 bytes plus a scale, a timestamp is a number of milli-, micro- or nanoseconds, a
date is a number of days. JsonConverter only gives us the JSON value and the field
schema, so this module turns the pair back into a Python value, in one table
(:data:`LOGICAL_DECODERS`) keyed by the logical name and one (:data:`TYPE_DECODERS`)
keyed by the plain Connect type for everything else.

Representations (what downstream stages receive):

* ``Decimal``/``VariableScaleDecimal`` → :class:`decimal.Decimal` with the exact scale;
* ``Date`` → :class:`datetime.date`;
* ``Time``/``MicroTime``/``NanoTime`` → naive :class:`datetime.time`;
* ``ZonedTime`` → :class:`datetime.time` in UTC with ``tzinfo=UTC``;
* ``Timestamp``/``MicroTimestamp``/``NanoTimestamp`` → *naive* :class:`datetime.datetime`
  (a wall-clock value; the epoch number is read as UTC and the zone dropped);
* ``ZonedTimestamp`` → *aware* datetime in UTC;
* ``Json``/``Enum``/``EnumSet``/``Uuid``/``Xml`` → ``str``; ``bytes`` → ``bytes``;
* ``Bits`` → ``bytes`` in the *source's* order, most significant byte first (see
  :func:`bits_bytes`).

>>> decode_value("AeI=", {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
...                       "parameters": {"scale": "2"}}, "price")
Decimal('4.82')
>>> decode_value(1529499423123456, {"type": "int64", "name": "io.debezium.time.MicroTimestamp"})
datetime.datetime(2018, 6, 20, 12, 57, 3, 123456)
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from icetide.errors import DecodeError
from icetide.schema.convert.connect import plain_type

Schema = Mapping[str, Any]
"""A Kafka Connect field schema as JsonConverter writes it (``type``, ``name`` …)."""

Decoder = Callable[[Any, Schema, str], Any]
"""``(json_value, field_schema, path) -> python_value``; ``path`` names the value in errors."""

EPOCH_DATE = date(1970, 1, 1)
EPOCH = datetime(1970, 1, 1)

# Counts per second of each epoch/time-of-day unit.
_PER_SECOND = {"ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_DAY_SECONDS = 86_400
_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
FLOAT_WORDS = {"nan": math.nan, "infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf}
"""How Debezium writes non-finite floats as strings (lower-cased)."""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def bad_value(path: str, expected: str, value: Any) -> DecodeError:
    """The ``bad_logical_value`` error for ``value`` at ``path`` (``column`` = top level).

    >>> bad_value("after.price.value", "base64 bytes", 3).column
    'price'
    """
    column = path.split(".", 1)[-1] if path.startswith(("after.", "before.")) else path
    column = column.split(".", 1)[0].split("[", 1)[0]
    return DecodeError(
        "bad_logical_value",
        f"{path or 'value'}: expected {expected}, got {_show(value)}",
        column=column or None,
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(value: Any, path: str, what: str) -> int:
    # parse_float=Decimal turns "1.0" into Decimal; accept it when it is integral.
    if _is_int(value):
        return int(value)
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)
    raise bad_value(path, what, value)


def decode_base64(value: Any, path: str, what: str = "base64 bytes") -> bytes:
    """Strict base64 → bytes; anything else is a ``bad_logical_value``."""
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if not isinstance(value, str):
        raise bad_value(path, what, value)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise bad_value(path, what, value) from None


def unscaled_to_decimal(raw: bytes, scale: int) -> Decimal:
    """Big-endian two's-complement unscaled bytes and a scale → exact Decimal.

    >>> unscaled_to_decimal(b"\\xff\\x85", 2)
    Decimal('-1.23')
    """
    unscaled = int.from_bytes(raw, "big", signed=True)
    sign, digits, _ = Decimal(unscaled).as_tuple()
    # Built from the tuple so no context precision can round a 38-digit value.
    return Decimal((sign, digits, -scale))


def connect_decimal(value: Any, scale: int, path: str) -> Decimal:
    """A Connect ``Decimal`` value: base64 bytes (precise mode) or a JSON number."""
    if isinstance(value, Decimal | int) and not isinstance(value, bool):
        return Decimal(value)
    raw = decode_base64(value, path, f"base64 decimal bytes (scale {scale})")
    if not raw:
        raise bad_value(path, f"non-empty base64 decimal bytes (scale {scale})", value)
    return unscaled_to_decimal(raw, scale)


def days_to_date(days: int, path: str = "") -> date:
    """Days since 1970-01-01 → date.

    >>> days_to_date(-1)
    datetime.date(1969, 12, 31)
    """
    try:
        return EPOCH_DATE + timedelta(days=days)
    except OverflowError:
        raise bad_value(path, "days since epoch within year 1..9999", days) from None


def _to_micros(count: int, unit: str) -> int:
    # Floor division keeps NanoTimestamp truncation toward the past for negative values,
    # which is what cutting the last three digits of the fraction means.
    if unit == "ns":
        return count // 1_000
    return count * (1_000_000 // _PER_SECOND[unit])


def epoch_to_datetime(count: int, unit: str, path: str = "") -> datetime:
    """Epoch count in ``unit`` (``ms``/``us``/``ns``) → naive UTC wall-clock datetime.

    >>> epoch_to_datetime(1_500_000_000_123_456_789, "ns")
    datetime.datetime(2017, 7, 14, 2, 40, 0, 123456)
    """
    try:
        return EPOCH + timedelta(microseconds=_to_micros(count, unit))
    except OverflowError:
        raise bad_value(path, f"epoch {unit} within year 1..9999", count) from None


def time_of_day(count: int, unit: str, path: str = "") -> time:
    """Count of ``unit`` since midnight → naive time; rejects values outside one day.

    >>> time_of_day(45_296_789, "ms")
    datetime.time(12, 34, 56, 789000)
    """
    micros = _to_micros(count, unit)
    if not 0 <= micros < _DAY_SECONDS * 1_000_000:
        raise bad_value(path, f"time of day in {unit} within 00:00..24:00", count)
    seconds, micro = divmod(micros, 1_000_000)
    return time(seconds // 3600, seconds // 60 % 60, seconds % 60, micro)


def parse_datetime(text: str, path: str = "") -> datetime:
    """ISO-8601 text (``Z``, offsets, up to nanoseconds truncated to µs) → datetime."""
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise bad_value(path, "an ISO-8601 timestamp", text) from None


def parse_time(text: str, path: str = "") -> time:
    """ISO-8601 time of day, with or without offset (``10:15:30.123Z``) → time."""
    try:
        return time.fromisoformat(text.strip())
    except ValueError:
        raise bad_value(path, "an ISO-8601 time of day", text) from None


def time_to_utc(value: time) -> time:
    """An aware time moved to UTC (``tzinfo=UTC``); a naive time is returned unchanged."""
    offset = value.utcoffset()
    if offset is None:
        return value
    moved = datetime.combine(EPOCH_DATE, value.replace(tzinfo=None)) - offset
    return moved.time().replace(tzinfo=UTC)


# --- logical decoders -------------------------------------------------------------------


def _scale(schema: Schema, path: str) -> int:
    raw = (schema.get("parameters") or {}).get("scale", 0)
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise bad_value(path, "an integer 'scale' schema parameter", raw) from None


def _decimal(value: Any, schema: Schema, path: str) -> Decimal:
    return connect_decimal(value, _scale(schema, path), path)


def variable_scale_decimal(value: Any, schema: Schema, path: str) -> Decimal:
    """A ``VariableScaleDecimal`` ``{scale, value}`` struct → exact Decimal."""
    if not isinstance(value, Mapping) or "value" not in value:
        raise bad_value(path, "a {scale, value} struct", value)
    scale = _int(value.get("scale"), f"{path}.scale", "an integer scale")
    raw = decode_base64(value["value"], f"{path}.value", "base64 unscaled bytes")
    if not raw:
        raise bad_value(f"{path}.value", "non-empty base64 unscaled bytes", value["value"])
    return unscaled_to_decimal(raw, scale)


def _date(value: Any, schema: Schema, path: str) -> date:
    return days_to_date(_int(value, path, "days since epoch (int)"), path)


def _time_in(unit: str) -> Decoder:
    def decode(value: Any, schema: Schema, path: str) -> time:
        return time_of_day(_int(value, path, f"{unit} of day (int)"), unit, path)

    return decode


def _timestamp_in(unit: str) -> Decoder:
    def decode(value: Any, schema: Schema, path: str) -> datetime:
        return epoch_to_datetime(_int(value, path, f"epoch {unit} (int)"), unit, path)

    return decode


def _zoned_timestamp(value: Any, schema: Schema, path: str) -> datetime:
    if not isinstance(value, str):
        raise bad_value(path, "an ISO-8601 timestamp string", value)
    parsed = parse_datetime(value, path)
    if parsed.tzinfo is None:
        raise bad_value(path, "an ISO-8601 timestamp with zone or offset", value)
    return parsed.astimezone(UTC)


def _zoned_time(value: Any, schema: Schema, path: str) -> time:
    if not isinstance(value, str):
        raise bad_value(path, "an ISO-8601 time string with offset", value)
    parsed = parse_time(value, path)
    if parsed.tzinfo is None:
        raise bad_value(path, "an ISO-8601 time with zone or offset", value)
    return time_to_utc(parsed)


def _iso_date(value: Any, schema: Schema, path: str) -> date:
    if not isinstance(value, str):
        raise bad_value(path, "an ISO-8601 date string", value)
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise bad_value(path, "an ISO-8601 date", value) from None


def _iso_time(value: Any, schema: Schema, path: str) -> time:
    if not isinstance(value, str):
        raise bad_value(path, "an ISO-8601 time string", value)
    return time_to_utc(parse_time(value, path)).replace(tzinfo=None)


def _iso_timestamp(value: Any, schema: Schema, path: str) -> datetime:
    if not isinstance(value, str):
        raise bad_value(path, "an ISO-8601 timestamp string", value)
    parsed = parse_datetime(value, path)
    return parsed if parsed.tzinfo is None else parsed.astimezone(UTC).replace(tzinfo=None)


def _year(value: Any, schema: Schema, path: str) -> int:
    return _int(value, path, "a year (int)")


def _text(value: Any, schema: Schema, path: str) -> str:
    if not isinstance(value, str):
        raise bad_value(path, f"a string ({schema.get('name')})", value)
    return value


def _bytes(value: Any, schema: Schema, path: str) -> bytes:
    return decode_base64(value, path)


VARIABLE_SCALE = "io.debezium.data.VariableScaleDecimal"
"""Debezium's logical name of a numeric without a fixed scale (``{scale, value}``)."""
BITS = "io.debezium.data.Bits"
"""Debezium's logical name of a ``BIT(n > 1)`` value."""


def bits_bytes(raw: bytes) -> bytes:
    """A ``Bits`` value as the source database holds it: most significant byte first.

    Debezium's ``io.debezium.data.Bits`` carries ``ceil(n/8)`` bytes *least* significant
    byte first (Java's ``BitSet.toByteArray``), and envelopes keep that form, so external
    Debezium feeds and icetide's capture stay interchangeable. A ``BIT(n)`` column's own
    value — what a ``SELECT`` returns, ``HEX(CAST(b AS BINARY))`` shows and the bootstrap
    copies — is the same ``ceil(n/8)`` bytes in the opposite order, and that is what a
    base table stores: the bytes are reversed once, here, when the envelope is read.

    >>> bits_bytes(b"\\x01\\x02").hex()  # BIT(10) value 513, b'1000000001'
    '0201'
    """
    return bytes(reversed(raw))


def _bits(value: Any, schema: Schema, path: str) -> bytes:
    return bits_bytes(decode_base64(value, path))


LOGICAL_DECODERS: dict[str, Decoder] = {
    "org.apache.kafka.connect.data.Decimal": _decimal,
    VARIABLE_SCALE: variable_scale_decimal,
    "org.apache.kafka.connect.data.Date": _date,
    "io.debezium.time.Date": _date,
    "org.apache.kafka.connect.data.Time": _time_in("ms"),
    "io.debezium.time.Time": _time_in("ms"),
    "io.debezium.time.MicroTime": _time_in("us"),
    "io.debezium.time.NanoTime": _time_in("ns"),
    "org.apache.kafka.connect.data.Timestamp": _timestamp_in("ms"),
    "io.debezium.time.Timestamp": _timestamp_in("ms"),
    "io.debezium.time.MicroTimestamp": _timestamp_in("us"),
    "io.debezium.time.NanoTimestamp": _timestamp_in("ns"),
    "io.debezium.time.ZonedTimestamp": _zoned_timestamp,
    "io.debezium.time.ZonedTime": _zoned_time,
    "io.debezium.time.Year": _year,
    "io.debezium.time.IsoDate": _iso_date,
    "io.debezium.time.IsoTime": _iso_time,
    "io.debezium.time.IsoTimestamp": _iso_timestamp,
    "io.debezium.data.Json": _text,
    "io.debezium.data.Enum": _text,
    "io.debezium.data.EnumSet": _text,
    "io.debezium.data.Uuid": _text,
    "io.debezium.data.Xml": _text,
    BITS: _bits,
}
"""Logical name → decoder. A name not listed here falls back to :data:`TYPE_DECODERS`."""


# --- plain Connect types ----------------------------------------------------------------


def integer_range(schema: Schema) -> tuple[int, int]:
    """The values a Connect integer field (``int8`` … ``int64``) holds.

    >>> integer_range({"type": "int16"})
    (-32768, 32767)
    """
    return _INT_RANGES[plain_type(schema) or "int64"]


def _integer(value: Any, schema: Schema, path: str) -> int:
    kind = plain_type(schema) or "int64"
    number = _int(value, path, f"an integer ({kind})")
    low, high = integer_range(schema)
    if not low <= number <= high:
        raise bad_value(path, f"an integer in {kind} range", value)
    return number


def _float(value: Any, schema: Schema, path: str) -> float:
    if isinstance(value, float | int | Decimal) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in FLOAT_WORDS:
        return FLOAT_WORDS[value.strip().lower()]
    raise bad_value(path, f"a number ({schema.get('type')})", value)


def _boolean(value: Any, schema: Schema, path: str) -> bool:
    if not isinstance(value, bool):
        raise bad_value(path, "a boolean", value)
    return value


def _string(value: Any, schema: Schema, path: str) -> str:
    if not isinstance(value, str):
        raise bad_value(path, "a string", value)
    return value


def _struct(value: Any, schema: Schema, path: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise bad_value(path, "an object (struct)", value)
    return decode_struct(value, schema, path)


def _array(value: Any, schema: Schema, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise bad_value(path, "an array", value)
    items = schema.get("items")
    if not isinstance(items, Mapping):
        return list(value)
    return [decode_value(v, items, f"{path}[{i}]") for i, v in enumerate(value)]


def _map(value: Any, schema: Schema, path: str) -> dict[Any, Any]:
    keys, values = schema.get("keys") or {}, schema.get("values") or {}
    if isinstance(value, Mapping):
        # JsonConverter writes string-keyed maps as objects.
        return {k: decode_value(v, values, f"{path}[{k!r}]") for k, v in value.items()}
    if isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value):
        # … and maps with other key types as [[key, value], …].
        return {
            decode_value(k, keys, f"{path}[{i}].key"): decode_value(v, values, f"{path}[{i}]")
            for i, (k, v) in enumerate(value)
        }
    raise bad_value(path, "an object or a list of [key, value] pairs (map)", value)


TYPE_DECODERS: dict[str, Decoder] = {
    "int8": _integer,
    "int16": _integer,
    "int32": _integer,
    "int64": _integer,
    "float32": _float,
    "float64": _float,
    "boolean": _boolean,
    "string": _string,
    "bytes": _bytes,
    "struct": _struct,
    "array": _array,
    "map": _map,
}
"""Plain Connect type (as :func:`~icetide.schema.convert.connect.plain_type` names it, so
JsonConverter's ``float``/``double`` too) → decoder, used when a field has no (known)
logical name."""


def decode_value(value: Any, schema: Schema, path: str = "") -> Any:
    """Decode one JSON value by its Connect field schema; ``None`` stays ``None``.

    ``path`` (``after.price``) names the value in errors; the error's ``column`` is its
    top-level column. An unknown logical name falls back to the plain ``type``; an
    unknown type leaves the value as it is.

    >>> decode_value(17897, {"type": "int32", "name": "io.debezium.time.Date"})
    datetime.date(2019, 1, 1)
    """
    if value is None:
        return None
    decoder = LOGICAL_DECODERS.get(str(schema.get("name"))) or TYPE_DECODERS.get(
        plain_type(schema) or ""
    )
    return value if decoder is None else decoder(value, schema, path)


def decode_struct(values: Mapping[str, Any], schema: Schema, path: str = "") -> dict[str, Any]:
    """Decode each field of a struct value; fields the schema does not list stay raw."""
    fields = {
        f["field"]: f
        for f in schema.get("fields") or ()
        if isinstance(f, Mapping) and isinstance(f.get("field"), str)
    }
    prefix = f"{path}." if path else ""
    out: dict[str, Any] = {}
    for name, raw in values.items():
        field_schema = fields.get(name)
        out[name] = raw if field_schema is None else decode_value(raw, field_schema, prefix + name)
    return out
