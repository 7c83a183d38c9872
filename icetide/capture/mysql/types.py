"""MySQL/MariaDB binlog column values → Debezium JSON values, one converter per column.

python-mysql-replication decodes a row into Python values (``Decimal``, ``datetime``,
``timedelta``, bit strings, sets …). Debezium's MySQL connector, with the JSON converter
and its default settings, writes them as follows; this module does the same, so the
envelopes capture emits decode exactly like Debezium's:

==========================  ===========================================================
MySQL type                  JSON value (Connect schema / logical name)
==========================  ===========================================================
TINYINT … BIGINT            number, unsigned widened (BIGINT UNSIGNED: exact number,
                            ``Decimal`` scale 0 – Debezium's ``precise`` mode)
FLOAT / DOUBLE              number (FLOAT as the shortest text that round-trips a float32)
DECIMAL(p,s)                string ``"-12.340"`` (``decimal.handling.mode=string``)
DATE                        days since 1970-01-01 (``io.debezium.time.Date``)
TIME(fsp)                   microseconds, may be negative or over 24h (``MicroTime``)
DATETIME(0-3)               epoch milliseconds of the wall-clock time (``Timestamp``)
DATETIME(4-6)               epoch microseconds (``MicroTimestamp``)
TIMESTAMP(fsp)              ISO-8601 in UTC, ``fsp`` fraction digits (``ZonedTimestamp``)
YEAR                        number (``io.debezium.time.Year``)
BIT(1) / BIT(n)             boolean / base64 of the bits, little-endian (``Bits``)
ENUM / SET                  string; a SET in definition order, comma-separated
CHAR/VARCHAR/TEXT           string (MariaDB's JSON is a LONGTEXT, so a string too)
JSON (MySQL)                string with the JSON text (``io.debezium.data.Json``)
BINARY/VARBINARY/BLOB       base64 (BINARY(n) padded with zero bytes to n, like SELECT)
GEOMETRY                    ``{"wkb": base64, "srid": n}`` (``io.debezium.data.geometry``)
==========================  ===========================================================

Zero dates (``0000-00-00``) become ``null``, as in Debezium.

BIT(n > 1): the envelope carries Debezium's form, ``ceil(n/8)`` bytes least significant
byte first (``BIT(10)`` 513 is ``01 02``), so an external Debezium feed and this capture
write the same events. The base table stores the column's own value, most significant
byte first (``02 01``, what ``SELECT`` returns and ``HEX(CAST(b AS BINARY))`` shows):
reading the envelope reverses the bytes
(:func:`icetide.events.logical_types.bits_bytes`), the bootstrap copies
``CAST(b AS BINARY)``, and ``icetide verify`` compares that same form.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from icetide.schema import infer
from icetide.schema.convert import mysql
from icetide.schema.model import TableSchema

# MySQL's column type codes (include/mysql_com.h enum_field_types), as in the binlog.
DECIMAL_OLD = 0
TINY = 1
SHORT = 2
LONG = 3
FLOAT = 4
DOUBLE = 5
NULL = 6
TIMESTAMP = 7
LONGLONG = 8
INT24 = 9
DATE = 10
TIME = 11
DATETIME = 12
YEAR = 13
NEWDATE = 14
VARCHAR = 15
BIT = 16
TIMESTAMP2 = 17
DATETIME2 = 18
TIME2 = 19
JSON = 245
NEWDECIMAL = 246
ENUM = 247
SET = 248
TINY_BLOB = 249
MEDIUM_BLOB = 250
LONG_BLOB = 251
BLOB = 252
VAR_STRING = 253
STRING = 254
GEOMETRY = 255

INTEGER_TYPES = (TINY, SHORT, INT24, LONG, LONGLONG)
_EPOCH = datetime(1970, 1, 1)
_EPOCH_DATE = date(1970, 1, 1)
_MICRO = timedelta(microseconds=1)
_INT_NAMES = {TINY: "tinyint", SHORT: "smallint", INT24: "mediumint", LONG: "int"}
_BLOB_NAMES = {1: "tiny", 2: "", 3: "medium", 4: "long"}
# Bytes per character by character set, to turn a binlog byte length back into CHAR(n).
_MBMAXLEN = {"utf8mb4": 4, "utf8mb3": 3, "utf8": 3, "ucs2": 2, "utf16": 4, "utf32": 4}

Converter = Callable[[Any], Any]
"""``(python-mysql-replication value) -> Debezium JSON value``; never called with ``None``."""


@dataclass(frozen=True)
class ColumnInfo:
    """One column as the binlog's table map describes it (``binlog_row_metadata=FULL``)."""

    name: str
    type_code: int
    unsigned: bool = False
    nullable: bool = True
    primary: bool = False
    fsp: int = 0
    precision: int = 0
    scale: int = 0
    bits: int = 0
    max_length: int = 0
    """CHAR/VARCHAR/BINARY length in bytes."""
    length_size: int = 0
    """BLOB/TEXT length prefix size: 1 tiny, 2 plain, 3 medium, 4 long."""
    charset: str | None = None
    """Python codec of a text column, ``binary`` for binary columns, ``None`` otherwise."""
    collation: str | None = None
    enum_values: tuple[str, ...] = ()
    set_values: tuple[str, ...] = ()

    @property
    def is_binary(self) -> bool:
        """Whether a string-typed column holds bytes (BINARY, VARBINARY, BLOB)."""
        return self.charset == "binary" or self.collation == "binary"

    def signature(self) -> dict[str, Any]:
        """The column as JSON for the schema history: name, SQL type, nullability, key."""
        return {
            "name": self.name,
            "type": sql_type(self),
            "nullable": self.nullable,
            "primary": self.primary,
        }


def column_info(column: Any, nullable: bool = True) -> ColumnInfo:
    """A :class:`ColumnInfo` from a python-mysql-replication ``Column``."""
    get = column.__dict__.get
    return ColumnInfo(
        name=str(column.name),
        type_code=int(column.type),
        unsigned=bool(get("unsigned")),
        nullable=nullable,
        primary=bool(get("is_primary")),
        fsp=int(get("fsp") or 0),
        precision=int(get("precision") or 0),
        scale=int(get("decimals") or 0),
        bits=int(get("bits") or 0),
        max_length=int(get("max_length") or 0),
        length_size=int(get("length_size") or 0),
        charset=get("character_set_name"),
        collation=get("collation_name"),
        enum_values=tuple((get("enum_values") or [""])[1:]),
        set_values=tuple(get("set_values") or ()),
    )


def nullable_flags(null_bitmask: bytes | bytearray, count: int) -> list[bool]:
    """The table map's null bitmask as one flag per column (bit ``i`` = column ``i``).

    >>> nullable_flags(b"\\x05", 3)
    [True, False, True]
    """
    return [bool(null_bitmask[i // 8] & (1 << (i % 8))) for i in range(count)]


# --- pure value conversions ---------------------------------------------------------------


def float32_value(value: float) -> float:
    """The shortest decimal that reads back as the same float32, as a float.

    MySQL stores FLOAT as 4 bytes; widened to a double it shows binary noise
    (``1.100000023841858``). Java's ``Float.toString`` — what Debezium prints — and a
    ``SELECT`` both show ``1.1``.

    >>> float32_value(struct.unpack("<f", struct.pack("<f", 1.1))[0])
    1.1
    """
    packed = struct.pack("<f", value)
    for digits in range(6, 10):
        candidate = float(f"{value:.{digits}g}")
        if struct.pack("<f", candidate) == packed:
            return candidate
    return value


def decimal_text(value: Decimal) -> str:
    """A DECIMAL as plain text with its scale, never in exponent form.

    >>> decimal_text(Decimal("-12.340")), decimal_text(Decimal("1E+3"))
    ('-12.340', '1000')
    """
    return format(value, "f")


def epoch_days(value: date) -> int:
    """Days since 1970-01-01 (``io.debezium.time.Date``).

    >>> epoch_days(date(1969, 12, 31))
    -1
    """
    return (value - _EPOCH_DATE).days


def epoch_micros(value: datetime) -> int:
    """Microseconds since the epoch of a naive wall-clock datetime (``MicroTimestamp``).

    >>> epoch_micros(datetime(1969, 12, 31, 23, 59, 59, 999999))
    -1
    """
    return (value - _EPOCH) // _MICRO


def epoch_millis(value: datetime) -> int:
    """Milliseconds since the epoch, rounded toward the past (``io.debezium.time.Timestamp``).

    >>> epoch_millis(datetime(2024, 2, 29, 10, 11, 12, 123000))
    1709201472123
    """
    return epoch_micros(value) // 1000


def zoned_timestamp(value: datetime, fsp: int) -> str:
    """A TIMESTAMP (naive, in UTC) as ISO-8601 with ``Z`` and ``fsp`` fraction digits.

    >>> zoned_timestamp(datetime(2024, 1, 1, 0, 0, 0, 500000), 2)
    '2024-01-01T00:00:00.50Z'
    >>> zoned_timestamp(datetime(2024, 1, 1), 0)
    '2024-01-01T00:00:00Z'
    """
    text = value.replace(tzinfo=None).strftime("%Y-%m-%dT%H:%M:%S")
    if fsp > 0:
        text += "." + f"{value.microsecond:06d}"[:fsp]
    return text + "Z"


def micro_time(value: timedelta) -> int:
    """A TIME as signed microseconds (``io.debezium.time.MicroTime``); may exceed a day.

    >>> micro_time(timedelta(hours=-838, minutes=-59, seconds=-59))
    -3020399000000
    """
    return value // _MICRO


def bits_value(bits: str, width: int) -> bool | str:
    """A BIT value (python-mysql-replication gives ``"1000000001"``) in Debezium's form.

    BIT(1) is a boolean; BIT(n) is ``ceil(n/8)`` bytes, least significant byte first,
    base64-encoded (Debezium's ``Bits``; the base stores them the other way round, see
    the module docs).

    >>> bits_value("1", 1), bits_value("1000000001", 10)
    (True, 'AQI=')
    """
    return bits_number(int(bits or "0", 2), width)


def bits_number(number: int, width: int) -> bool | str:
    """A BIT(``width``) value given as a number, in Debezium's form (see :func:`bits_value`).

    >>> bits_number(513, 10)
    'AQI='
    """
    if width <= 1:
        return bool(number)
    return base64_text(number.to_bytes((width + 7) // 8, "little"))


def set_text(members: Any, allowed: Sequence[str]) -> str:
    """A SET value as its members in definition order, comma-separated.

    >>> set_text({"z", "x"}, ["x", "y", "z"])
    'x,z'
    """
    chosen = set(members or ())
    ordered = [m for m in allowed if m in chosen]
    ordered += sorted(chosen - set(allowed))  # definitions unknown: keep every member
    return ",".join(ordered)


def year_value(year: int) -> int:
    """A YEAR; python-mysql-replication turns the zero year into 1900, which YEAR cannot hold.

    >>> year_value(1900), year_value(2024)
    (0, 2024)
    """
    return 0 if year == 1900 else year


def base64_text(raw: bytes) -> str:
    """Bytes as standard base64 text, as the JSON converter writes ``bytes``."""
    return base64.b64encode(raw).decode("ascii")


def padded_binary(raw: bytes, length: int) -> bytes:
    """A BINARY(n) value: the binlog drops trailing zero bytes, ``SELECT`` shows them.

    >>> padded_binary(b"\\x01", 3)
    b'\\x01\\x00\\x00'
    """
    return raw + b"\x00" * (length - len(raw)) if len(raw) < length else raw


def geometry_value(raw: bytes) -> dict[str, Any]:
    """MySQL's internal geometry (4-byte SRID, little-endian, then WKB) as Debezium's struct.

    >>> geometry_value(bytes([0x10, 0x0F, 0, 0]) + b"wkb")
    {'wkb': 'd2ti', 'srid': 3856}
    """
    srid = int.from_bytes(raw[:4], "little") if len(raw) >= 4 else 0
    return {"wkb": base64_text(raw[4:]), "srid": srid}


def _json_plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {_json_plain(k): _json_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_plain(v) for v in value]
    if isinstance(value, datetime | date | timedelta):
        return str(value)
    return value


def json_text(value: Any) -> str:
    """A MySQL binary JSON value (parsed by python-mysql-replication) as JSON text.

    Separators are MySQL's own (``{"a": [1, 2]}``), so the text matches a ``SELECT``.

    >>> json_text({b"a": [1, Decimal("2.50")]})
    '{"a": [1, 2.50]}'
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return _dump_mysql_json(_json_plain(value))


def _dump_mysql_json(value: Any) -> str:
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(f"{json.dumps(k)}: {_dump_mysql_json(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(_dump_mysql_json(v) for v in value) + "]"
    if isinstance(value, Decimal):
        return decimal_text(value)
    return json.dumps(value)


# --- per-column converters -----------------------------------------------------------------


def _identity(value: Any) -> Any:
    return value


def raw_bytes(value: Any) -> bytes:
    """A binary column's value as bytes.

    python-mysql-replication gives ``""`` for an empty one (``b"".decode()`` never looks
    up the ``binary`` codec that fails for the others), e.g. a BINARY(4) of zero bytes,
    whose trailing zeros the binlog drops.

    >>> raw_bytes(""), raw_bytes(b"ab")
    (b'', b'ab')
    """
    return value.encode() if isinstance(value, str) else bytes(value)


def text_or_base64(value: Any) -> Any:
    """A CHAR/VARCHAR/TEXT value (a ``str``) as it is; VARBINARY/BLOB bytes as base64."""
    return base64_text(bytes(value)) if isinstance(value, bytes | bytearray) else value


def _datetime_converter(fsp: int) -> Converter:
    to_epoch = epoch_micros if fsp > 3 else epoch_millis

    def convert(value: Any) -> Any:
        return to_epoch(value) if isinstance(value, datetime) else None

    return convert


def value_converter(info: ColumnInfo) -> Converter:
    """The converter for one column; built once per table map, applied to every row."""
    code = info.type_code
    if code in INTEGER_TYPES or code in (DOUBLE, NULL):
        return _identity
    if code == FLOAT:
        return float32_value
    if code in (NEWDECIMAL, DECIMAL_OLD):
        return lambda v: decimal_text(v) if isinstance(v, Decimal) else str(v)
    if code == YEAR:
        return year_value
    if code in (DATE, NEWDATE):
        return lambda v: epoch_days(v) if isinstance(v, date) else None
    if code in (DATETIME, DATETIME2):
        return _datetime_converter(info.fsp)
    if code in (TIMESTAMP, TIMESTAMP2):
        fsp = info.fsp
        return lambda v: zoned_timestamp(v, fsp) if isinstance(v, datetime) else None
    if code in (TIME, TIME2):
        return micro_time
    if code == BIT:
        width = info.bits
        return lambda v: bits_value(v, width)
    if code == ENUM:
        return _identity
    if code == SET:
        allowed = info.set_values
        return lambda v: set_text(v, allowed)
    if code == JSON:
        return json_text
    if code == GEOMETRY:
        return lambda v: geometry_value(raw_bytes(v))
    if code == STRING and info.is_binary:
        length = info.max_length
        return lambda v: base64_text(padded_binary(raw_bytes(v), length))
    # VARCHAR, CHAR, TEXT (a str) or VARBINARY, BLOB (bytes): python-mysql-replication
    # decodes by the column's character set and leaves binary columns as bytes.
    return text_or_base64


def null_value(info: ColumnInfo, none_source: str | None) -> Any:
    """The JSON value of a column python-mysql-replication gave as ``None``.

    Only an empty SET is not null: the library reports it as ``None`` with the reason
    ``empty set``.
    """
    if info.type_code == SET and none_source == "empty set":
        return ""
    return None


# --- Connect schemas, SQL types and icetide types ---------------------------------------------


def connect_schema(info: ColumnInfo) -> dict[str, Any]:
    """The Kafka Connect field schema Debezium gives this column (without ``field``)."""
    code = info.type_code
    schema: dict[str, Any]
    if code in (TINY, SHORT):
        schema = {"type": "int32" if code == SHORT and info.unsigned else "int16"}
    elif code in (INT24, LONG):
        schema = {"type": "int64" if code == LONG and info.unsigned else "int32"}
    elif code == LONGLONG:
        schema = (
            {
                "type": "bytes",
                "name": "org.apache.kafka.connect.data.Decimal",
                "version": 1,
                "parameters": {"scale": "0", "connect.decimal.precision": "20"},
            }
            if info.unsigned
            else {"type": "int64"}
        )
    elif code == FLOAT:
        schema = {"type": "float32"}
    elif code == DOUBLE:
        schema = {"type": "float64"}
    elif code in (NEWDECIMAL, DECIMAL_OLD):
        schema = {"type": "string"}
    elif code == YEAR:
        schema = {"type": "int32", "name": "io.debezium.time.Year", "version": 1}
    elif code in (DATE, NEWDATE):
        schema = {"type": "int32", "name": "io.debezium.time.Date", "version": 1}
    elif code in (DATETIME, DATETIME2):
        logical = "MicroTimestamp" if info.fsp > 3 else "Timestamp"
        schema = {"type": "int64", "name": f"io.debezium.time.{logical}", "version": 1}
    elif code in (TIMESTAMP, TIMESTAMP2):
        schema = {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1}
    elif code in (TIME, TIME2):
        schema = {"type": "int64", "name": "io.debezium.time.MicroTime", "version": 1}
    elif code == BIT:
        schema = (
            {"type": "boolean"}
            if info.bits <= 1
            else {
                "type": "bytes",
                "name": "io.debezium.data.Bits",
                "version": 1,
                "parameters": {"length": str(info.bits)},
            }
        )
    elif code == ENUM:
        schema = {
            "type": "string",
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {"allowed": ",".join(info.enum_values)},
        }
    elif code == SET:
        schema = {
            "type": "string",
            "name": "io.debezium.data.EnumSet",
            "version": 1,
            "parameters": {"allowed": ",".join(info.set_values)},
        }
    elif code == JSON:
        schema = {"type": "string", "name": "io.debezium.data.Json", "version": 1}
    elif code == GEOMETRY:
        schema = {
            "type": "struct",
            "name": "io.debezium.data.geometry.Geometry",
            "version": 1,
            "fields": [
                {"field": "wkb", "type": "bytes", "optional": False},
                {"field": "srid", "type": "int32", "optional": True},
            ],
        }
    else:
        schema = {"type": "bytes" if info.is_binary else "string"}
    schema["optional"] = info.nullable
    return schema


def _chars(info: ColumnInfo) -> int:
    if info.is_binary or not info.collation:
        return info.max_length
    charset = info.collation.split("_", 1)[0]
    return info.max_length // _MBMAXLEN.get(charset, 1)


def sql_type(info: ColumnInfo) -> str:
    """The column's SQL type as far as the binlog tells it (``int unsigned``,
    ``varchar(20)``, ``datetime(6)``, ``enum('a','b')`` …); for the schema history.

    >>> sql_type(ColumnInfo("n", NEWDECIMAL, precision=10, scale=2))
    'decimal(10,2)'
    """
    code = info.type_code
    unsigned = " unsigned" if info.unsigned else ""
    if code in _INT_NAMES:
        return _INT_NAMES[code] + unsigned
    if code == LONGLONG:
        return "bigint" + unsigned
    if code in (FLOAT, DOUBLE):
        return ("float" if code == FLOAT else "double") + unsigned
    if code in (NEWDECIMAL, DECIMAL_OLD):
        return f"decimal({info.precision},{info.scale}){unsigned}"
    fsp = f"({info.fsp})" if info.fsp else ""
    simple = {
        YEAR: "year",
        DATE: "date",
        NEWDATE: "date",
        JSON: "json",
        GEOMETRY: "geometry",
        DATETIME: "datetime",
        DATETIME2: f"datetime{fsp}",
        TIMESTAMP: "timestamp",
        TIMESTAMP2: f"timestamp{fsp}",
        TIME: "time",
        TIME2: f"time{fsp}",
    }
    if code in simple:
        return simple[code]
    if code == BIT:
        return f"bit({info.bits})"
    if code in (ENUM, SET):
        values = info.enum_values if code == ENUM else info.set_values
        quoted = ",".join("'" + v.replace("'", "''") + "'" for v in values)
        return f"{'enum' if code == ENUM else 'set'}({quoted})"
    if code in (BLOB, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB):
        prefix = _BLOB_NAMES.get(info.length_size, "")
        return prefix + ("blob" if info.is_binary else "text")
    if code == STRING:
        return f"{'binary' if info.is_binary else 'char'}({_chars(info)})"
    if code in (VARCHAR, VAR_STRING):
        return f"{'varbinary' if info.is_binary else 'varchar'}({_chars(info)})"
    return f"type{code}"


def icetide_type(info: ColumnInfo) -> tuple[str, str | None]:
    """The icetide type, as schema-file text, and Debezium logical name of a binlog column:
    :func:`icetide.schema.convert.mysql.icetide_type` of its :func:`sql_type`.

    >>> icetide_type(ColumnInfo("t", DATETIME2, fsp=6))
    ('timestamp', 'io.debezium.time.MicroTimestamp')
    """
    # The pre-5.6 DATETIME code has no fraction in its SQL text, but a table map may
    # still carry one: read it as DATETIME2, whose text shows it.
    declared = replace(info, type_code=DATETIME2) if info.type_code == DATETIME else info
    ctype, logical = mysql.icetide_type(sql_type(declared))
    return str(ctype), logical


def infer_table_schema(
    table: str, columns: Sequence[ColumnInfo], primary_key: Sequence[str] = ()
) -> TableSchema:
    """A first icetide schema for a table from its binlog columns (see
    :func:`icetide.schema.infer.infer_table_schema`)."""
    return infer.infer_table_schema(table, columns, icetide_type, primary_key)


def convert_row(
    values: Mapping[str, Any],
    columns: Sequence[tuple[ColumnInfo, Converter]],
    none_sources: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One row image (python-mysql-replication ``values``) as a Debezium JSON object."""
    sources = none_sources or {}
    out: dict[str, Any] = {}
    for info, convert in columns:
        raw = values.get(info.name)
        out[info.name] = null_value(info, sources.get(info.name)) if raw is None else convert(raw)
    return out
