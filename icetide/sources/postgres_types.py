"""pgoutput column values (text format) → Debezium JSON values, one converter per column.

pgoutput sends every non-null value as the text its type's output function writes. The
reader's replication session pins the settings that shape that text (``DateStyle=ISO``,
``TimeZone=UTC``, ``IntervalStyle=iso_8601``, ``bytea_output=hex``,
``extra_float_digits=1``), so the parsers here see one form. Values come out the way
Debezium's PostgreSQL connector writes them with the JSON converter, and decode with
:func:`icetide.events.envelope.decode_message`:

===========================  ============================================================
PostgreSQL type              JSON value (Connect schema / logical name) → icetide type
===========================  ============================================================
boolean                      true/false → ``boolean``
smallint, integer            number (int16/int32) → ``int``
bigint, oid                  number (int64) → ``long``
real / double precision      number; ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` as strings
                             → ``float`` / ``double``
numeric(p,s)                 string ``"-12.3400"`` exactly as stored
                             (``decimal.handling.mode=string``) → ``decimal(p,s)``;
                             unconstrained or wider than 38 digits → ``string``
text, varchar, char, name    string → ``string``
bytea                        base64 → ``binary``
date                         days since 1970-01-01 (``io.debezium.time.Date``) → ``date``
time(0-3)                    milliseconds of the day (``io.debezium.time.Time``) → ``time``
time, time(4-6)              microseconds of the day (``MicroTime``) → ``time``
time with time zone          ISO time in UTC, ``"07:15:30.5Z"`` (``ZonedTime``) → ``time``
timestamp(0-3)               epoch milliseconds of the wall-clock time
                             (``io.debezium.time.Timestamp``) → ``timestamp``
timestamp, timestamp(4-6)    epoch microseconds (``MicroTimestamp``) → ``timestamp``
timestamp with time zone     ISO instant in UTC, ``"2024-01-01T10:00:00.123456Z"``
                             (``ZonedTimestamp``) → ``timestamptz``
interval                     microseconds, a month counted as 30.4375 days
                             (``io.debezium.time.MicroDuration``) → ``long``
uuid                         string (``io.debezium.data.Uuid``) → ``uuid``
json, jsonb                  the JSON text (``io.debezium.data.Json``) → ``json``
xml                          string (``io.debezium.data.Xml``) → ``string``
enum types                   the label (``io.debezium.data.Enum``) → ``string``
domains                      as their base type
arrays of the types above    JSON array, any depth, elements as above (times and
                             timestamps in microseconds whatever their precision), SQL
                             NULL as null (Connect ``array`` without ``items``: PostgreSQL
                             does not fix the depth per column) → ``list<element>``,
                             nested as deep as the column's declared dimensions
                             (``attndims``); a value of another depth is a dead letter
anything else                the PostgreSQL text (money, inet, bit, ranges, geometry …,
                             and arrays of those) → ``string``
===========================  ============================================================

Arrays are lists of their element (:mod:`icetide.schema.convert.postgres`): the projection
converts each element as it converts the scalar column. A table whose schema file declares
an array ``json`` (as before lists) stores the JSON array as compact JSON text, exactly as
before; ``icetide schema apply --retype COLUMN`` turns it into a list
(docs/schema-evolution.md). The bootstrap and ``icetide verify`` read an array as its
literal and put it through this same conversion and projection (:func:`list_value`,
:func:`array_json_text`), so the three paths cannot disagree.

Why numeric is a string: Debezium's default ``precise`` mode writes base64 unscaled
bytes whose scale lives only in the inline schema; without one, icetide's projection
cannot tell a base64 text made of digits from a number, so an exact decimal string is
the one form that decodes the same with or without ``schemas.enable``.

Values no icetide type can hold are still captured exactly and fail loudly downstream
(dead letter, ``bad_logical_value``/``type_mismatch``) instead of being bent: dates and
timestamps outside years 1–9999 (BC, ±infinity: days/µs beyond the int32/int64 range
Python can place), ``time '24:00:00'``, and non-finite numerics.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

from icetide.events.model import UNAVAILABLE
from icetide.schema import infer
from icetide.schema.convert import postgres
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, IcetideType

# --- type OIDs (src/include/catalog/pg_type.dat) ---------------------------------------------

BOOL = 16
BYTEA = 17
CHAR = 18
NAME = 19
INT8 = 20
INT2 = 21
INT4 = 23
TEXT = 25
OID = 26
JSON = 114
XML = 142
FLOAT4 = 700
FLOAT8 = 701
BPCHAR = 1042
VARCHAR = 1043
DATE = 1082
TIME = 1083
TIMESTAMP = 1114
TIMESTAMPTZ = 1184
INTERVAL = 1186
TIMETZ = 1266
NUMERIC = 1700
UUID = 2950
JSONB = 3802

ENUM = -1
"""Pseudo OID the reader gives a column whose type is an enum (its real OID varies)."""

ARRAY_ELEMENTS: dict[int, int] = {
    1000: BOOL,
    1001: BYTEA,
    1002: CHAR,
    1003: NAME,
    1016: INT8,
    1005: INT2,
    1007: INT4,
    1009: TEXT,
    1028: OID,
    199: JSON,
    143: XML,
    1021: FLOAT4,
    1022: FLOAT8,
    1014: BPCHAR,
    1015: VARCHAR,
    1182: DATE,
    1183: TIME,
    1115: TIMESTAMP,
    1185: TIMESTAMPTZ,
    1187: INTERVAL,
    1270: TIMETZ,
    1231: NUMERIC,
    2951: UUID,
    3807: JSONB,
}
"""Built-in array type OID → element type OID."""

_NAMES = {
    BOOL: "boolean",
    BYTEA: "bytea",
    CHAR: '"char"',
    NAME: "name",
    INT8: "bigint",
    INT2: "smallint",
    INT4: "integer",
    TEXT: "text",
    OID: "oid",
    JSON: "json",
    XML: "xml",
    FLOAT4: "real",
    FLOAT8: "double precision",
    BPCHAR: "character",
    VARCHAR: "character varying",
    DATE: "date",
    TIME: "time without time zone",
    TIMESTAMP: "timestamp without time zone",
    TIMESTAMPTZ: "timestamp with time zone",
    INTERVAL: "interval",
    TIMETZ: "time with time zone",
    NUMERIC: "numeric",
    UUID: "uuid",
    JSONB: "jsonb",
}
SUPPORTED = frozenset(_NAMES) | {ENUM}
"""OIDs with a dedicated conversion; every other type is passed on as its text."""

_TEXT_TYPES = frozenset({TEXT, VARCHAR, BPCHAR, NAME, CHAR})
_VARHDRSZ = 4
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_MICROS_PER_DAY = 86_400_000_000
_MICROS_PER_MONTH = 2_629_800_000_000  # Debezium's average month: 365.25 / 12 days


@dataclass(frozen=True)
class PgType:
    """A column type as capture needs it: the OID that decides the conversion (a domain's
    base type, :data:`ENUM` for enums), the SQL name, and the element type of an array."""

    oid: int
    name: str = ""
    element: PgType | None = None
    enum_values: tuple[str, ...] = ()

    @property
    def is_array(self) -> bool:
        """Whether values are arrays (of ``element``)."""
        return self.element is not None


def builtin_type(oid: int) -> PgType | None:
    """The :class:`PgType` of a built-in OID (arrays included); ``None`` for other OIDs.

    >>> builtin_type(1007).name, builtin_type(1007).element.oid
    ('integer[]', 23)
    """
    if oid in _NAMES:
        return PgType(oid, _NAMES[oid])
    element = ARRAY_ELEMENTS.get(oid)
    if element is not None:
        return PgType(oid, _NAMES[element] + "[]", PgType(element, _NAMES[element]))
    return None


@dataclass(frozen=True)
class ColumnInfo:
    """One column as pgoutput's Relation message and the catalog describe it."""

    name: str
    type: PgType
    typmod: int = -1
    identity: bool = False
    """Part of the replica identity (the Relation message's key flag)."""
    primary: bool = False
    """Part of the primary key (from the catalog)."""
    nullable: bool = True
    dims: int = 0
    """An array column's declared dimensions (``pg_attribute.attndims``; 0 when the
    catalog does not say, read as 1)."""

    @property
    def oid(self) -> int:
        """The OID deciding the conversion."""
        return self.type.oid

    def signature(self) -> dict[str, Any]:
        """The column as JSON for schema-change records: name, SQL type, nullability, key."""
        return {
            "name": self.name,
            "type": sql_type(self),
            "nullable": self.nullable,
            "primary": self.primary,
        }


def numeric_precision(typmod: int) -> tuple[int, int] | None:
    """``(precision, scale)`` of a ``numeric`` type modifier; ``None`` if unconstrained.

    PostgreSQL 15 allows a scale below zero or above the precision.

    >>> numeric_precision(((12 << 16) | 4) + 4), numeric_precision(-1)
    ((12, 4), None)
    >>> numeric_precision(((2 << 16) | (-3 & 0x7FF)) + 4)
    (2, -3)
    """
    if typmod < _VARHDRSZ:
        return None
    packed = typmod - _VARHDRSZ
    scale = packed & 0x7FF
    if scale >= 0x400:
        scale -= 0x800  # 11-bit two's complement
    return (packed >> 16) & 0xFFFF, scale


def sql_type(info: ColumnInfo) -> str:
    """The column's SQL type with its modifier (``numeric(12,4)``, ``character varying(20)``,
    ``timestamp(3) without time zone``, ``integer[]``).

    >>> sql_type(ColumnInfo("n", PgType(NUMERIC, "numeric"), ((12 << 16) | 4) + 4))
    'numeric(12,4)'
    """
    kind, typmod = info.type, info.typmod
    base = kind.element if kind.element is not None else kind
    suffix = "[]" if kind.is_array else ""
    name = base.name or f"type {base.oid}"
    if typmod < 0:
        return name + suffix
    if base.oid == NUMERIC:
        found = numeric_precision(typmod)
        return f"numeric({found[0]},{found[1]})" + suffix if found else name + suffix
    if base.oid in (VARCHAR, BPCHAR):
        return f"{name}({typmod - _VARHDRSZ}){suffix}"
    if base.oid in (TIMESTAMP, TIMESTAMPTZ, TIME, TIMETZ):
        head, _, zone = name.partition(" ")
        return f"{head}({typmod}) {zone}{suffix}"
    return name + suffix


# --- date and time arithmetic (any year, no datetime limits) -------------------------------


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (astronomical year: 1 BC = 0).

    >>> days_from_civil(1970, 1, 1), days_from_civil(2000, 3, 1), days_from_civil(0, 12, 31)
    (0, 11017, -719163)
    """
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """The inverse of :func:`days_from_civil`.

    >>> civil_from_days(-719163), civil_from_days(19782)
    ((0, 12, 31), (2024, 2, 29))
    """
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (month <= 2), month, day


_DATE = re.compile(r"^(\d+)-(\d\d)-(\d\d)( BC)?$")
_TIME = re.compile(r"^(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?([+-]\d\d(?::?\d\d){0,2})?$")
_TIMESTAMP = re.compile(
    r"^(\d+)-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?"
    r"([+-]\d\d(?::?\d\d){0,2})?( BC)?$"
)
_INTERVAL_PART = re.compile(r"(-?\d+(?:\.\d+)?)([YMWDHS])")


def _fraction(text: str | None) -> int:
    return int(text.ljust(6, "0")) if text else 0


def _offset_seconds(text: str | None) -> int:
    """``+05``, ``-03:30``, ``+05:53:28`` → seconds east of UTC."""
    if not text:
        return 0
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    hours, minutes, seconds = int(digits[:2]), int(digits[2:4] or 0), int(digits[4:6] or 0)
    return sign * (hours * 3600 + minutes * 60 + seconds)


def _year(text: str, bc: str | None) -> int:
    return 1 - int(text) if bc else int(text)


def date_days(text: str) -> int:
    """A ``date`` as days since 1970-01-01 (``io.debezium.time.Date``); ±infinity become
    the int32 extremes.

    >>> date_days("2024-02-29"), date_days("1969-12-31"), date_days("0001-01-01 BC")
    (19782, -1, -719528)
    """
    match = _DATE.match(text)
    if match is None:
        return _infinity(text, _INT32)
    year, month, day, bc = match.groups()
    return days_from_civil(_year(year, bc), int(month), int(day))


def time_micros(text: str) -> int:
    """A ``time`` as microseconds since midnight (``io.debezium.time.MicroTime``).

    >>> time_micros("12:34:56.789"), time_micros("24:00:00")
    (45296789000, 86400000000)
    """
    match = _TIME.match(text)
    if match is None:
        raise ValueError(f"not a PostgreSQL time: {text!r}")
    hours, minutes, seconds, fraction, _ = match.groups()
    seconds_of_day = int(hours) * 3600 + int(minutes) * 60 + int(seconds)
    return seconds_of_day * 1_000_000 + _fraction(fraction)


def time_millis(text: str) -> int:
    """A ``time(0-3)`` as milliseconds since midnight (``io.debezium.time.Time``, what
    Debezium's default ``time.precision.mode=adaptive`` writes up to precision 3).

    >>> time_millis("12:34:56.789")
    45296789
    """
    return time_micros(text) // 1_000


def timetz_text(text: str) -> str:
    """A ``time with time zone`` as ISO time in UTC (``io.debezium.time.ZonedTime``).

    >>> timetz_text("12:34:56.5+05:30"), timetz_text("00:15:00-01")
    ('07:04:56.5Z', '01:15:00Z')
    """
    match = _TIME.match(text)
    if match is None:
        raise ValueError(f"not a PostgreSQL time with time zone: {text!r}")
    hours, minutes, seconds, fraction, offset = match.groups()
    total = int(hours) * 3600 + int(minutes) * 60 + int(seconds) - _offset_seconds(offset)
    total %= 86_400
    clock = f"{total // 3600:02d}:{total // 60 % 60:02d}:{total % 60:02d}"
    return clock + ("." + fraction if fraction else "") + "Z"


def _timestamp_parts(text: str) -> tuple[int, int]:
    """``(epoch seconds of the written wall clock minus its offset, microseconds)``."""
    match = _TIMESTAMP.match(text)
    if match is None:
        raise ValueError(f"not a PostgreSQL timestamp: {text!r}")
    year, month, day, hours, minutes, seconds, fraction, offset, bc = match.groups()
    days = days_from_civil(_year(year, bc), int(month), int(day))
    clock = int(hours) * 3600 + int(minutes) * 60 + int(seconds)
    return days * 86_400 + clock - _offset_seconds(offset), _fraction(fraction)


def timestamp_micros(text: str) -> int:
    """A ``timestamp`` as epoch microseconds of its wall-clock value (``MicroTimestamp``);
    ±infinity become the int64 extremes.

    >>> timestamp_micros("2018-06-20 12:57:03.123456"), timestamp_micros("1969-12-31 23:59:59.5")
    (1529499423123456, -500000)
    """
    if text[0] in "-i" and text.lstrip("-") == "infinity":
        return _infinity(text, _INT64)
    # The form capture's session gives every AD timestamp, ``YYYY-MM-DD HH:MM:SS[.f]``,
    # read by position (its date cached); anything else (BC, 5-digit years, a stray
    # character) goes through the full pattern, which also names what is wrong.
    size = len(text)
    if 19 <= size <= 26 and text[10] == " " and text[13] == ":" and text[16] == ":":
        hours, minutes, seconds = text[11:13], text[14:16], text[17:19]
        fraction = text[20:]
        if (
            (hours + minutes + seconds).isdecimal()
            and (size == 19 or (text[19] == "." and fraction.isdecimal()))
            and (days := _ad_date_days(text[:10])) is not None
        ):
            clock = int(hours) * 3600 + int(minutes) * 60 + int(seconds)
            return (days * 86_400 + clock) * 1_000_000 + _fraction(fraction)
    seconds_total, micros = _timestamp_parts(text)
    return seconds_total * 1_000_000 + micros


@lru_cache(maxsize=1 << 12)
def _ad_date_days(text: str) -> int | None:
    """Days since 1970-01-01 of a ``YYYY-MM-DD`` date as :func:`date_days` reads it,
    ``None`` when ``text`` is not one. Rows of a table share few dates: cached."""
    match = _DATE.match(text)
    if match is None or match.group(4):
        return None
    year, month, day, _ = match.groups()
    return days_from_civil(int(year), int(month), int(day))


def timestamp_millis(text: str) -> int:
    """A ``timestamp(0-3)`` as epoch milliseconds of its wall-clock value
    (``io.debezium.time.Timestamp``); ±infinity become the int64 extremes.

    >>> timestamp_millis("2018-06-20 12:57:03.123"), timestamp_millis("1969-12-31 23:59:59.5")
    (1529499423123, -500)
    """
    if text[0] in "-i" and text.lstrip("-") == "infinity":
        return _infinity(text, _INT64)
    return timestamp_micros(text) // 1_000


_MILLIS_UP_TO = 3
"""Debezium's adaptive mode: a time or timestamp of precision 0-3 is in milliseconds."""


def _in_millis(info: ColumnInfo | PgType) -> bool:
    return isinstance(info, ColumnInfo) and 0 <= info.typmod <= _MILLIS_UP_TO


def timestamptz_text(text: str) -> str:
    """A ``timestamp with time zone`` as ISO-8601 in UTC (``ZonedTimestamp``); years
    outside 1–9999 are written with a sign (``+10000-…``, ``-0044-…``) and ±infinity as
    ``"infinity"``/``"-infinity"``.

    >>> timestamptz_text("2024-01-01 10:00:00.25+05:30")
    '2024-01-01T04:30:00.25Z'
    >>> timestamptz_text("2024-01-01 00:00:00+00")
    '2024-01-01T00:00:00Z'
    """
    if text in ("infinity", "-infinity"):
        return text
    match = _TIMESTAMP.match(text)
    if match is None:
        raise ValueError(f"not a PostgreSQL timestamp with time zone: {text!r}")
    fraction = match.group(7)
    seconds, _ = _timestamp_parts(text)
    days, clock = divmod(seconds, 86_400)
    year, month, day = civil_from_days(days)
    year_text = f"{year:04d}" if 1 <= year <= 9999 else f"{year:+05d}"
    stamp = (
        f"{year_text}-{month:02d}-{day:02d}T"
        f"{clock // 3600:02d}:{clock // 60 % 60:02d}:{clock % 60:02d}"
    )
    return stamp + ("." + fraction if fraction else "") + "Z"


def interval_micros(text: str) -> int:
    """An ``interval`` (``IntervalStyle=iso_8601``) as microseconds, months counted as
    30.4375 days like Debezium's ``MicroDuration``.

    >>> interval_micros("P1DT2H3M4.5S"), interval_micros("PT-0.000001S"), interval_micros("P1M")
    (93784500000, -1, 2629800000000)
    >>> interval_micros("P1Y-2M3W")
    28112400000000
    """
    if not text.startswith("P"):
        raise ValueError(f"not an ISO-8601 interval: {text!r}")
    date_part, _, time_part = text[1:].partition("T")
    total = 0
    for number, unit in _INTERVAL_PART.findall(date_part):
        count = int(number)
        total += {
            "Y": 12 * _MICROS_PER_MONTH,
            "M": _MICROS_PER_MONTH,
            "W": 7 * _MICROS_PER_DAY,
            "D": _MICROS_PER_DAY,
        }[unit] * count
    for number, unit in _INTERVAL_PART.findall(time_part):
        if unit == "S":
            whole, _, fraction = number.partition(".")
            micros = abs(int(whole)) * 1_000_000 + _fraction(fraction)
            total += -micros if number.startswith("-") else micros
        else:
            total += int(number) * (3_600_000_000 if unit == "H" else 60_000_000)
    return total


def _infinity(text: str, bounds: tuple[int, int]) -> int:
    if text == "infinity":
        return bounds[1]
    if text == "-infinity":
        return bounds[0]
    raise ValueError(f"not a PostgreSQL date: {text!r}")


def bytea_base64(text: str) -> str:
    """A ``bytea`` (hex output, or the old escape output) as base64.

    >>> bytea_base64("\\\\x00ff10"), bytea_base64("a\\\\000b")
    ('AP8Q', 'YQBi')
    """
    if text.startswith("\\x"):
        raw = bytes.fromhex(text[2:])
    else:
        raw = _unescape_bytea(text)
    return base64.b64encode(raw).decode("ascii")


def _unescape_bytea(text: str) -> bytes:
    out = bytearray()
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and text[i + 1 : i + 2] == "\\":
            out.append(0x5C)
            i += 2
        elif char == "\\":
            out.append(int(text[i + 1 : i + 4], 8))
            i += 4
        else:
            out += char.encode()
            i += 1
    return bytes(out)


def float_value(text: str) -> float | str:
    """A ``real``/``double precision``: a number, or Debezium's word for a non-finite one.

    >>> float_value("1.5e-07"), float_value("NaN"), float_value("-Infinity")
    (1.5e-07, 'NaN', '-Infinity')
    """
    if text in ("NaN", "Infinity", "-Infinity"):
        return text
    return float(text)


# --- arrays -----------------------------------------------------------------------------------


def parse_array(text: str) -> list[Any]:
    """A PostgreSQL array literal as nested lists of element texts (``None`` for NULL).

    >>> parse_array('{1,NULL,"a \\\\"b\\\\"",{x,"y,z"}}')
    ['1', None, 'a "b"', ['x', 'y,z']]
    >>> parse_array("[0:1]={7,8}"), parse_array("{}")
    (['7', '8'], [])
    """
    if text.startswith("["):
        text = text[text.index("=") + 1 :]
    value, end = _parse_level(text, 0)
    if end != len(text):
        raise ValueError(f"trailing text in array literal {text!r}")
    return value


def _parse_level(text: str, i: int) -> tuple[list[Any], int]:
    if text[i] != "{":
        raise ValueError(f"array literal {text!r}: expected '{{' at {i}")
    items: list[Any] = []
    i += 1
    if text[i] == "}":
        return items, i + 1
    while True:
        char = text[i]
        if char == "{":
            nested, i = _parse_level(text, i)
            items.append(nested)
        elif char == '"':
            chunk = []
            i += 1
            while text[i] != '"':
                if text[i] == "\\":
                    i += 1
                chunk.append(text[i])
                i += 1
            items.append("".join(chunk))
            i += 1
        else:
            start = i
            while text[i] not in ",}":
                i += 1
            word = text[start:i].strip()
            items.append(None if word == "NULL" else word)
        if text[i] == "}":
            return items, i + 1
        i += 1  # the comma


# --- per-column converters -----------------------------------------------------------------

Converter = Callable[[str], Any]
"""``(pgoutput text value) -> Debezium JSON value``; never called for NULL."""


def _bool(text: str) -> bool:
    return text == "t"


def _identity(text: str) -> str:
    return text


_SCALARS: dict[int, Converter] = {
    BOOL: _bool,
    INT2: int,
    INT4: int,
    INT8: int,
    OID: int,
    FLOAT4: float_value,
    FLOAT8: float_value,
    BYTEA: bytea_base64,
    DATE: date_days,
    TIME: time_micros,
    TIMETZ: timetz_text,
    TIMESTAMP: timestamp_micros,
    TIMESTAMPTZ: timestamptz_text,
    INTERVAL: interval_micros,
}


def keeps_text(convert: Converter) -> bool:
    """Whether a converter from :func:`value_converter` sends the text as it is (text,
    numeric, uuid, json, enums, types without a conversion).

    >>> [keeps_text(value_converter(builtin_type(oid))) for oid in (TEXT, INT4)]
    [True, False]
    """
    return convert is _identity


def _array_converter(element: Converter) -> Converter:
    def convert_items(items: list[Any]) -> list[Any]:
        return [
            None if v is None else convert_items(v) if isinstance(v, list) else element(v)
            for v in items
        ]

    def convert(text: str) -> list[Any]:
        return convert_items(parse_array(text))

    return convert


def value_converter(info: ColumnInfo | PgType) -> Converter:
    """The converter for one column (or type); built once per Relation message.

    >>> value_converter(builtin_type(1007))("{{1,2},{3,NULL}}")
    [[1, 2], [3, None]]
    """
    kind = info.type if isinstance(info, ColumnInfo) else info
    if kind.element is not None:
        if kind.element.oid not in SUPPORTED or kind.element.is_array:
            return _identity
        return _array_converter(value_converter(kind.element))
    if _in_millis(info) and kind.oid in (TIME, TIMESTAMP):
        return time_millis if kind.oid == TIME else timestamp_millis
    return _SCALARS.get(kind.oid, _identity)


def is_json_array(kind: PgType) -> bool:
    """Whether capture sends this type's values as JSON arrays (icetide type ``json``):
    an array whose elements have a conversion of their own."""
    return kind.is_array and value_converter(kind) is not _identity


def array_json_text(text: str, kind: PgType) -> str:
    """The JSON text a base table holds for an array value written ``text`` (the array
    literal, in the session settings capture pins).

    Capture sends ``value_converter(kind)(text)`` as a JSON array; the ledger parses the
    envelope with fractional numbers as exact decimals and stores the array as compact
    JSON (:func:`icetide.events.project.dump_json`). This is that whole path in one call,
    so the bootstrap copies, and ``icetide verify`` compares, exactly what capture's
    changes leave in the base.

    >>> array_json_text('{1.5,NULL,-0,5e-324}', builtin_type(1022))
    '[1.5,null,-0.0,5E-324]'
    >>> print(array_json_text('{"a,b",é}', builtin_type(1009)))
    ["a,b","\\u00e9"]
    """
    from icetide.events.project import dump_json

    return dump_json(_sent(text, kind))


def _sent(text: str, kind: PgType) -> Any:
    """An array literal as the ledger reads what capture sends for it: the JSON array,
    parsed with fractional numbers as exact decimals."""
    return json.loads(json.dumps(value_converter(kind)(text)), parse_float=Decimal)


def list_value(text: str, kind: PgType, column: Column, hint: str | None = None) -> Any:
    """The typed list a base table holds for an array value written ``text`` (its
    literal, in the session settings capture pins), in a list column: capture's element
    conversion, then the ledger's projection (``hint``: the column's hint as the ledger
    reads capture's messages, :data:`icetide.schema.connector.CAPTURE`). A value of
    another depth than the column's raises the projection's ``type_mismatch``
    :class:`~icetide.errors.DecodeError`.

    >>> from icetide.schema.types import ListType, IntType, TimestampType
    >>> grid = Column(1, "grid", ListType(2, ListType(3, IntType())))
    >>> list_value("{{1,NULL},{3,4}}", builtin_type(1007), grid)
    [[1, None], [3, 4]]
    >>> at = Column(1, "at", ListType(2, TimestampType()))
    >>> list_value('{"2024-02-29 10:11:12.5"}', builtin_type(1115), at,
    ...            "io.debezium.time.MicroTimestamp")
    [datetime.datetime(2024, 2, 29, 10, 11, 12, 500000)]
    """
    from icetide.events.project import coerce_value

    return coerce_value(_sent(text, kind), column, logical=hint)


def unavailable_value(info: ColumnInfo) -> Any:
    """Debezium's unchanged-TOAST placeholder in the column's own JSON shape: base64 for
    bytea, a one-element array for arrays, the plain text otherwise."""
    if info.oid == BYTEA:
        return base64.b64encode(UNAVAILABLE.encode()).decode("ascii")
    if info.type.is_array and value_converter(info) is not _identity:
        return [UNAVAILABLE]
    return UNAVAILABLE


# --- Connect schemas and icetide types --------------------------------------------------------


def _connect_of(kind: PgType, typmod: int) -> dict[str, Any]:
    oid = kind.oid
    if kind.element is not None:
        if value_converter(kind) is _identity:
            return {"type": "string"}
        # No ``items``: a column's arrays may have any number of dimensions (int[] holds
        # {{1,2},{3,4}} too), so elements are taken as they are, the same JSON values as
        # without a schema; the projection converts them by the column's list type (or
        # keeps the JSON text of a column declared json).
        return {"type": "array"}
    logical: dict[int, tuple[str, str]] = {
        DATE: ("int32", "io.debezium.time.Date"),
        TIME: ("int64", "io.debezium.time.MicroTime"),
        TIMETZ: ("string", "io.debezium.time.ZonedTime"),
        TIMESTAMP: ("int64", "io.debezium.time.MicroTimestamp"),
        TIMESTAMPTZ: ("string", "io.debezium.time.ZonedTimestamp"),
        INTERVAL: ("int64", "io.debezium.time.MicroDuration"),
        UUID: ("string", "io.debezium.data.Uuid"),
        JSON: ("string", "io.debezium.data.Json"),
        JSONB: ("string", "io.debezium.data.Json"),
        XML: ("string", "io.debezium.data.Xml"),
    }
    if 0 <= typmod <= _MILLIS_UP_TO:
        logical[TIME] = ("int32", "io.debezium.time.Time")
        logical[TIMESTAMP] = ("int64", "io.debezium.time.Timestamp")
    if oid in logical:
        connect, name = logical[oid]
        return {"type": connect, "name": name, "version": 1}
    if oid == ENUM:
        return {
            "type": "string",
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {"allowed": ",".join(kind.enum_values)},
        }
    plain = {
        BOOL: "boolean",
        INT2: "int16",
        INT4: "int32",
        INT8: "int64",
        OID: "int64",
        FLOAT4: "float32",
        FLOAT8: "float64",
        BYTEA: "bytes",
    }
    return {"type": plain.get(oid, "string")}


def connect_schema(info: ColumnInfo) -> dict[str, Any]:
    """The Kafka Connect field schema of this column's values (without ``field``).

    A float column is ``float32``/``float64``, although ``"NaN"`` and the infinities
    arrive as strings (as Debezium writes them); icetide's decoder accepts both.
    """
    schema = _connect_of(info.type, info.typmod)
    schema["optional"] = info.nullable
    return schema


def declared_type(info: ColumnInfo) -> str:
    """The column's type as :mod:`icetide.schema.convert.postgres` reads it: a built-in by
    its OID's own name (a domain as its base type), any other type by its quoted name.

    >>> declared_type(ColumnInfo("t", PgType(TIMESTAMP, "my_domain"), 3))
    'timestamp(3) without time zone'
    >>> declared_type(ColumnInfo("m", PgType(790, "money")))
    '"money"'
    """
    kind = info.type
    base = kind.element if kind.element is not None else kind
    if base.is_array:
        return '"' + kind.name + '"'  # an array of arrays (a domain over one): kept as text
    name = _NAMES.get(base.oid) or '"' + base.name.replace('"', '""') + '"'
    plain = PgType(base.oid, name)
    canonical = PgType(kind.oid, name + "[]", plain) if kind.is_array else plain
    return sql_type(ColumnInfo(info.name, canonical, info.typmod))


def icetide_type(info: ColumnInfo) -> tuple[IcetideType, str | None]:
    """The icetide type and Debezium logical name of a column:
    :func:`icetide.schema.convert.postgres.icetide_type` of its :func:`declared_type` and
    declared dimensions.

    >>> icetide_type(ColumnInfo("t", PgType(TIMESTAMP)))
    (TimestampType(), 'io.debezium.time.MicroTimestamp')
    >>> print(icetide_type(ColumnInfo("g", builtin_type(1007), dims=2))[0])
    list<list<int>>
    """
    base = info.type.element if info.type.element is not None else info.type
    return postgres.icetide_type(declared_type(info), enum=base.oid == ENUM, dims=info.dims)


def infer_table_schema(
    table: str, columns: Sequence[ColumnInfo], primary_key: Sequence[str] = ()
) -> TableSchema:
    """A first icetide schema for a table from its columns (see
    :func:`icetide.schema.infer.infer_table_schema`)."""
    return infer.infer_table_schema(table, columns, icetide_type, primary_key)
