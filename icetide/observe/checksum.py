"""Canonical column text and row checksums, the same on MySQL/MariaDB, PostgreSQL and Spark.

``icetide verify`` proves a base table equals its source by computing, on each side, the
row count and the sum of a 60-bit hash of every row. That only works when equal values
give byte-identical text on all three engines, so every column type has one canonical
text, defined once in :data:`RULES` (MySQL SQL, PostgreSQL SQL, Spark Column) and once
in plain Python (:func:`python_text`, the specification the tests hold the engines to):

=============  =====================================================================
type           canonical text
=============  =====================================================================
boolean        ``1`` / ``0`` (MySQL: any non-zero TINYINT(1)/BIT(1) is ``1``)
int, long      decimal digits, ``-`` for negatives
decimal(p,s)   plain digits with exactly ``s`` fraction digits (``-0.50``, ``0.0000``)
float, double  the exact IEEE value in hex, as Python's ``float.hex()``:
               ``-0x1.999999999999ap-4``, ``0x0.0000000000001p-1022`` (subnormal);
               ``0x0.0p+0`` for ±0; ``nan``, ``inf``, ``-inf``
date           ``YYYY-MM-DD``
time           ``HH:MM:SS.ffffff``
timestamp      ``YYYY-MM-DD HH:MM:SS.ffffff`` (wall clock, no zone)
timestamptz    the same, in UTC
string, json   the text itself (JSON as the source renders it; see below)
uuid           lower-case text
binary         lower-case hex (MySQL ``BIT(n)``: its ``ceil(n/8)`` bytes, most
               significant first, the form the base stores; see ``capture.mysql.types``)
list           ``[`` the elements' pieces (below: ``N``, or ``<length>:<text>`` of the
               element's own canonical text, a nested list's too) joined by ``,`` ``]``:
               ``[1:1,N,2:-3]`` for ``{1,NULL,-3}``; Spark and Python only (a PostgreSQL
               array is compared in Python, below)
=============  =====================================================================

Floats. Decimal text of a float differs across engines (MySQL ``1e-7``, PostgreSQL
``1e-07``, Java ``1.0E-7``; MySQL FLOAT vs Spark float→double), and rounding to N digits
with ``LOG10``/``ROUND`` depends on each engine's libm and rounding rule. So floats are
compared *exactly*, by their bits written as hex: Spark has it built in (Java's ``%a``);
MySQL and PostgreSQL compute it with operations that are exact in IEEE arithmetic:
``e = floor(log2 |x|)`` corrected by one step each way (so libm error does not matter),
``m = |x| / 2^e`` (division by a power of two is exact) and the 52 fraction bits
``(m - 1) * 2^52``. A ``float`` is widened to double first (exact); -0.0 equals 0.0 and
NaN equals NaN. Limits: a MySQL FLOAT declared ``double`` in the schema is reported as
different (the base then holds the double nearest the float's decimal text, not the
float; a PostgreSQL ``real`` declared so is compared through its text, as capture reads
it); MySQL has no NaN/Infinity. Reading MariaDB FLOATs as text yourself loses
bits (it prints 6 digits); the binlog, and these expressions, do not.

JSON is compared as text in the source's own rendering (MySQL 8 JSON: its normalised
text; MariaDB: the stored LONGTEXT; PostgreSQL ``json``: as stored, ``jsonb``: its
normalised text), which is what Debezium and icetide's capture write. Equal documents
spelled differently (key order, spaces, ``1.0`` vs ``1``) count as different.
PostgreSQL arrays are the exception: capture sends them as JSON arrays with converted
elements, which no SQL expression reproduces exactly, so ``icetide verify`` reads their
literal and computes their value in Python with capture's own conversion, the list (or,
for a column declared ``json``, the JSON text) the base holds (see
:mod:`icetide.observe.verify`). PostgreSQL strings are the type's output text
(``format('%s', …)``, so ``char(n)`` keeps its padding, as capture receives it).

Row hash: each column becomes a *piece*, ``N`` for NULL, else ``<length>:<text>``
(length in characters, so the pieces cannot run into each other; a piece never starts
with ``N`` otherwise). ``string``, ``json`` and ``binary`` enter as the MD5 of their
UTF-8 (binary: raw) bytes instead of their text, so a row's hash input stays small
whatever the value size (MySQL's CONCAT returns NULL past ``max_allowed_packet``). The row
hash is the MD5 of the concatenated pieces; its first 15 hex digits, as an integer, are
summed as DECIMAL(38,0). Count and sum together are the checksum.

Sessions: MySQL must run with ``time_zone='+00:00'`` and ``utf8mb4``
(:data:`MYSQL_SESSION`); PostgreSQL with the settings capture's session pins
(:data:`POSTGRES_SESSION`: the text of values compared as strings depends on them, and
``extra_float_digits`` keeps float text exact); the Spark expressions do not depend on
the session time zone.
"""

from __future__ import annotations

import hashlib
import math
import re
import struct
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, localcontext
from typing import TYPE_CHECKING, Any, Literal

from icetide.errors import SchemaError
from icetide.schema.quoting import quote as spark_quote
from icetide.schema.types import Column, IcetideType, ListType, precision_scale
from icetide.sources.postgres_catalog import SESSION_SETTINGS
from icetide.sources.quoting import mysql_quote, postgres_quote

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame

Dialect = Literal["mysql", "postgres"]

MYSQL_SESSION = ("SET time_zone = '+00:00'", "SET NAMES utf8mb4")
"""Statements a MySQL/MariaDB session runs before any checksum query."""
POSTGRES_SESSION = tuple(f"SET {name} = '{value}'" for name, value in SESSION_SETTINGS)
"""Statements a PostgreSQL session runs first: capture's session settings."""

NULL_PIECE = "N"
"""The piece of a NULL value; a non-NULL piece starts with a digit."""
HASH_DIGITS = 15
"""Hex digits of the row MD5 that are summed: 60 bits, so a sum fits DECIMAL(38,0)."""
DISPLAY_CHARS = 120
"""Characters of a string shown when a difference is reported."""
DISPLAY_BYTES = 48
"""Bytes of a binary value shown (as hex) when a difference is reported."""

_FRACTION = 4503599627370496  # 2**52: the fraction bits of a double's mantissa
_ZERO = "0x0.0p+0"
_MIN_NORMAL = 2.2250738585072014e-308  # below it a double is subnormal: 0x0.<bits>p-1022


# -- identifiers -------------------------------------------------------------------------


def quote_ident(dialect: Dialect, name: str) -> str:
    """Quote one identifier for ``dialect`` (by :mod:`icetide.sources.quoting`).

    >>> print(quote_ident("mysql", "we`ird"), quote_ident("postgres", 'a"b'))
    `we``ird` "a""b"
    """
    return mysql_quote(name) if dialect == "mysql" else postgres_quote(name)


def qualified_ident(dialect: Dialect, *parts: str) -> str:
    """Quote and join a multi-part name.

    >>> qualified_ident("postgres", "public", "order")
    '"public"."order"'
    """
    return ".".join(quote_ident(dialect, p) for p in parts)


# -- the rules ---------------------------------------------------------------------------

SqlRule = Callable[[str, IcetideType], str]
"""``(quoted column expression, column type) -> SQL text expression`` (never given NULL)."""
SparkRule = Callable[["SparkColumn", IcetideType], "SparkColumn"]


@dataclass(frozen=True)
class Rule:
    """How one column type becomes canonical text on each engine.

    ``digest`` says how the value enters the row hash: ``None`` as its text, ``"text"`` as
    the MD5 of its UTF-8 text, ``"bytes"`` as the MD5 of its raw bytes.
    """

    mysql: SqlRule
    postgres: SqlRule
    spark: SparkRule
    digest: Literal["text", "bytes"] | None = None


def _mysql_float(c: str, _: IcetideType) -> str:
    # MySQL has no NaN/Infinity. `+ 0e0` makes a FLOAT a DOUBLE (exactly).
    a = f"(ABS({c}) + 0e0)"
    e0 = f"LEAST(GREATEST(FLOOR(LOG2({a})), -1022), 1023)"
    m0 = f"({a} / POW(2, {e0}))"
    e = f"({e0} + ({m0} >= 2) - ({m0} < 1))"
    q = f"CAST(({a} / POW(2, {e}) - 1) * {_FRACTION} AS UNSIGNED)"
    tiny = f"CAST({a} / POW(2, -1074) AS UNSIGNED)"
    return (
        f"CASE WHEN {c} = 0 THEN '{_ZERO}' ELSE CONCAT(IF({c} < 0, '-', ''), "
        f"IF({a} < {_MIN_NORMAL!r}, CONCAT('0x0.', LPAD(LOWER(HEX({tiny})), 13, '0'), 'p-1022'), "
        f"CONCAT('0x1.', LPAD(LOWER(HEX({q})), 13, '0'), 'p', IF({e} >= 0, '+', ''), "
        f"CAST({e} AS SIGNED)))) END"
    )


def _postgres_float(c: str, _: IcetideType) -> str:
    x = f"({c})::float8"
    a = f"abs({x})"
    e0 = f"least(greatest(floor(ln({a}) / ln(2::float8)), -1022), 1023)"
    m0 = f"({a} / power(2::float8, {e0}))"
    e = f"({e0} + ({m0} >= 2)::int - ({m0} < 1)::int)"
    q = f"((({a} / power(2::float8, {e})) - 1) * {_FRACTION}::float8)::bigint"
    tiny = f"({a} / power(2::float8, -1074))::bigint"
    return (
        f"CASE WHEN {x} = 'NaN' THEN 'nan' WHEN {x} = 'Infinity' THEN 'inf' "
        f"WHEN {x} = '-Infinity' THEN '-inf' WHEN {x} = 0 THEN '{_ZERO}' "
        f"ELSE (CASE WHEN {x} < 0 THEN '-' ELSE '' END) || (CASE WHEN {a} < {_MIN_NORMAL!r} "
        f"THEN '0x0.' || lpad(to_hex({tiny}), 13, '0') || 'p-1022' "
        f"ELSE '0x1.' || lpad(to_hex({q}), 13, '0') || 'p' "
        f"|| (CASE WHEN {e} >= 0 THEN '+' ELSE '' END) || ({e})::bigint::text END) END"
    )


def _spark_float(c: SparkColumn, _: IcetideType) -> SparkColumn:
    from pyspark.sql import functions as F

    # Java's %a is Double.toHexString: Python's float.hex() digits with trailing zeros
    # dropped and no "+" on the exponent ("0x1.8p0"); pad and sign it back.
    x = c.cast("double")
    java = F.format_string("%a", x)
    pattern = r"^(-?0x[01])\.([0-9a-f]+)p(-?)(\d+)$"
    parts = [F.regexp_extract(java, pattern, i) for i in (1, 2, 3, 4)]
    exponent_sign = F.when(parts[2] == "-", "-").otherwise("+")
    finite = F.concat(
        parts[0], F.lit("."), F.rpad(parts[1], 13, "0"), F.lit("p"), exponent_sign, parts[3]
    )
    return (
        F.when(F.isnan(x), "nan")
        .when(x == float("inf"), "inf")
        .when(x == float("-inf"), "-inf")
        .when(x == 0, _ZERO)
        .otherwise(finite)
    )


def _spark_decimal(c: SparkColumn, t: IcetideType) -> SparkColumn:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType

    # CAST(decimal AS STRING) uses BigDecimal.toString (0 at scale 10 is "0E-10");
    # format_number formats the exact BigDecimal, with US grouping commas to drop.
    precision, scale = precision_scale(t)
    value = c.cast(DecimalType(precision, scale))
    return F.regexp_replace(F.format_number(value, scale), ",", "")


def _spark_clock(date_text: SparkColumn, micros_of_day: SparkColumn) -> SparkColumn:
    """``YYYY-MM-DD HH:MM:SS.ffffff`` from a date's text and microseconds since midnight."""
    from pyspark.sql import functions as F

    us = micros_of_day.cast("long")

    def part(value: SparkColumn, width: int) -> SparkColumn:
        return F.lpad(value.cast("long").cast("string"), width, "0")

    return F.concat(
        date_text,
        F.lit(" "),
        part(F.floor(us / 3_600_000_000), 2),
        F.lit(":"),
        part(F.pmod(F.floor(us / 60_000_000), F.lit(60)), 2),
        F.lit(":"),
        part(F.pmod(F.floor(us / 1_000_000), F.lit(60)), 2),
        F.lit("."),
        part(F.pmod(us, F.lit(1_000_000)), 6),
    )


def _spark_timestamp(c: SparkColumn, _: IcetideType) -> SparkColumn:
    from pyspark.sql import functions as F

    # TIMESTAMP_NTZ: date, hour, minute and EXTRACT(SECOND) read the wall clock without a
    # zone (date_format would go through the session zone and shift DST-gap times).
    seconds = F.extract(F.lit("SECOND"), c).cast("decimal(8,6)")
    micros = (
        F.hour(c).cast("long") * 3_600_000_000
        + F.minute(c).cast("long") * 60_000_000
        + (seconds * 1_000_000).cast("long")
    )
    return _spark_clock(F.to_date(c).cast("string"), micros)


def _spark_timestamptz(c: SparkColumn, _: IcetideType) -> SparkColumn:
    from pyspark.sql import functions as F

    # An instant: epoch microseconds are zone-free; the UTC date and time of day follow
    # by arithmetic, so the session time zone never enters.
    micros = F.unix_micros(c)
    day = F.lit(86_400_000_000)
    rem = F.pmod(micros, day)
    days = F.round((micros - rem) / day).cast("int")
    return _spark_clock(F.date_from_unix_date(days).cast("string"), rem)


def _spark_time(c: SparkColumn, _: IcetideType) -> SparkColumn:
    from pyspark.sql import functions as F

    # Spark has no time type: the base holds ISO text, "10:11:12" or "10:11:12.5",
    # possibly with an offset ("+00:00") after it.
    pattern = r"^(\d{2}:\d{2}:\d{2})(\.(\d{1,6}))?"
    clock = F.regexp_extract(c, pattern, 1)
    fraction = F.rpad(F.regexp_extract(c, pattern, 3), 6, "0")
    return F.when(clock == "", c).otherwise(F.concat(clock, F.lit("."), fraction))


def _spark_plain(c: SparkColumn, _: IcetideType) -> SparkColumn:
    return c.cast("string")


def _spark_boolean(c: SparkColumn, _: IcetideType) -> SparkColumn:
    from pyspark.sql import functions as F

    return F.when(c, "1").otherwise("0")


def _spark_binary(c: SparkColumn, _: IcetideType) -> SparkColumn:
    from pyspark.sql import functions as F

    return F.lower(F.hex(c))


def _spark_lower(c: SparkColumn, _: IcetideType) -> SparkColumn:
    from pyspark.sql import functions as F

    return F.lower(c)


def _spark_list(c: SparkColumn, t: IcetideType) -> SparkColumn:
    from pyspark.sql import functions as F

    assert isinstance(t, ListType)
    element = t.element
    rule = rule_for(element)

    def piece(x: SparkColumn) -> SparkColumn:
        text = rule.spark(x, element)
        body = F.concat(F.length(text).cast("string"), F.lit(":"), text)
        return F.when(x.isNull(), F.lit(NULL_PIECE)).otherwise(body)

    return F.concat(F.lit("["), F.array_join(F.transform(c, piece), ","), F.lit("]"))


def _no_sql(c: str, t: IcetideType) -> str:
    raise SchemaError(
        f"verify compares a {t} column with a PostgreSQL array only, in Python",
        hint="a list column's source is a PostgreSQL array of a type capture converts",
    )


def _sql(template: str) -> SqlRule:
    """A rule from a template with ``{c}``, ``{p}`` and ``{s}`` (column, precision, scale)."""
    return lambda c, t: template.format(c=c, p=precision_scale(t)[0], s=precision_scale(t)[1])


_MYSQL_TS = "DATE_FORMAT({c}, '%Y-%m-%d %H:%i:%s.%f')"
_PG_TS = "to_char({c}, 'YYYY-MM-DD HH24:MI:SS.US')"

RULES: dict[str, Rule] = {
    "boolean": Rule(
        _sql("IF({c} <> 0, '1', '0')"),
        _sql("CASE WHEN {c} THEN '1' ELSE '0' END"),
        _spark_boolean,
    ),
    "int": Rule(_sql("CAST(CAST({c} AS SIGNED) AS CHAR)"), _sql("({c})::text"), _spark_plain),
    "long": Rule(_sql("CAST(CAST({c} AS SIGNED) AS CHAR)"), _sql("({c})::text"), _spark_plain),
    "decimal": Rule(
        _sql("CAST(CAST({c} AS DECIMAL({p},{s})) AS CHAR)"),
        _sql("(({c})::numeric({p},{s}))::text"),
        _spark_decimal,
    ),
    "float": Rule(_mysql_float, _postgres_float, _spark_float),
    "double": Rule(_mysql_float, _postgres_float, _spark_float),
    "string": Rule(
        _sql("CONVERT({c} USING utf8mb4)"),
        _sql("format('%s', {c})"),
        _spark_plain,
        digest="text",
    ),
    "json": Rule(
        _sql("CONVERT({c} USING utf8mb4)"), _sql("({c})::text"), _spark_plain, digest="text"
    ),
    "uuid": Rule(
        _sql("LOWER(CONVERT({c} USING utf8mb4))"), _sql("lower(({c})::text)"), _spark_lower
    ),
    "binary": Rule(
        # HEX of a BIT(n) is its number's hex ('6' for BIT(8) 6); of its bytes, '06'.
        _sql("LOWER(HEX(CAST({c} AS BINARY)))"),
        _sql("encode({c}, 'hex')"),
        _spark_binary,
        digest="bytes",
    ),
    "date": Rule(
        _sql("DATE_FORMAT({c}, '%Y-%m-%d')"), _sql("to_char({c}, 'YYYY-MM-DD')"), _spark_plain
    ),
    "time": Rule(
        _sql("TIME_FORMAT({c}, '%H:%i:%s.%f')"),
        _sql("to_char({c}, 'HH24:MI:SS.US')"),
        _spark_time,
    ),
    "timestamp": Rule(_sql(_MYSQL_TS), _sql(_PG_TS), _spark_timestamp),
    # MySQL TIMESTAMP renders in the session zone, which MYSQL_SESSION sets to UTC.
    "timestamptz": Rule(
        _sql(_MYSQL_TS),
        _sql("to_char({c} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"),
        _spark_timestamptz,
    ),
    # A PostgreSQL array: its text is computed in Python from the literal (verify.py).
    "list": Rule(_no_sql, _no_sql, _spark_list, digest="text"),
}
"""Column type name → its canonical text on each engine: the one table to extend."""
UNSUPPORTED = ("enum", "struct", "map")
"""Type names ``icetide verify`` has no canonical text for yet: no source column maps to
them today (capture infers enums as ``string``); a table using one cannot be verified."""


def rule_for(ctype: IcetideType) -> Rule:
    """The :class:`Rule` of a column type."""
    if ctype.name in UNSUPPORTED:
        raise SchemaError(
            f"verify has no canonical text for {ctype.name} columns",
            hint=f"verify compares columns of types {', '.join(RULES)}",
        )
    return RULES[ctype.name]


# -- SQL builders ------------------------------------------------------------------------


def _col(dialect: Dialect, column: Column) -> str:
    return quote_ident(dialect, column.name)


def _sql_rule(dialect: Dialect, column: Column) -> SqlRule:
    rule = rule_for(column.type)
    return rule.mysql if dialect == "mysql" else rule.postgres


def text_sql(dialect: Dialect, column: Column) -> str:
    """The canonical text of ``column`` as a SQL expression; NULL stays NULL.

    >>> from icetide.schema.types import parse_type
    >>> text_sql("mysql", Column(1, "ord`er", parse_type("int")))
    'CASE WHEN `ord``er` IS NULL THEN NULL ELSE CAST(CAST(`ord``er` AS SIGNED) AS CHAR) END'
    """
    c = _col(dialect, column)
    return f"CASE WHEN {c} IS NULL THEN NULL ELSE {_sql_rule(dialect, column)(c, column.type)} END"


def _digest_sql(dialect: Dialect, column: Column) -> str:
    """What enters the row hash for a non-NULL value: its text, or the MD5 of its bytes."""
    c = _col(dialect, column)
    rule = rule_for(column.type)
    text = _sql_rule(dialect, column)(c, column.type)
    if rule.digest is None:
        return text
    if dialect == "mysql":
        return f"MD5({c})" if rule.digest == "bytes" else f"MD5({text})"
    return f"md5({c})" if rule.digest == "bytes" else f"md5(convert_to({text}, 'UTF8'))"


def piece_sql(dialect: Dialect, column: Column) -> str:
    """The column's piece of the row hash input: ``N`` or ``<length>:<text or digest>``."""
    c = _col(dialect, column)
    value = _digest_sql(dialect, column)
    if dialect == "mysql":
        body = f"CONCAT(CHAR_LENGTH({value}), ':', {value})"
    else:
        body = f"(length({value})::text || ':' || {value})"
    return f"CASE WHEN {c} IS NULL THEN '{NULL_PIECE}' ELSE {body} END"


def display_sql(dialect: Dialect, column: Column) -> str:
    """The canonical text cut to a readable size, for reporting differences."""
    c = _col(dialect, column)
    rule = rule_for(column.type)
    if rule.digest == "bytes":
        cut = (
            f"SUBSTRING({c}, 1, {DISPLAY_BYTES})"
            if dialect == "mysql"
            else (f"substr({c}, 1, {DISPLAY_BYTES})")
        )
        text = _sql_rule(dialect, column)(cut, column.type)
    elif rule.digest == "text":
        full = _sql_rule(dialect, column)(c, column.type)
        text = (
            f"LEFT({full}, {DISPLAY_CHARS})"
            if dialect == "mysql"
            else (f"left({full}, {DISPLAY_CHARS})")
        )
    else:
        text = _sql_rule(dialect, column)(c, column.type)
    return f"CASE WHEN {c} IS NULL THEN NULL ELSE {text} END"


def row_hash_sql(dialect: Dialect, columns: Sequence[Column]) -> str:
    """The MD5 (32 hex digits) of a row's concatenated pieces."""
    pieces = [piece_sql(dialect, c) for c in columns]
    if dialect == "mysql":
        return f"MD5(CONCAT({', '.join(pieces)}))"
    return f"md5({' || '.join(pieces)})"


def row_value_sql(dialect: Dialect, columns: Sequence[Column]) -> str:
    """The row hash's first :data:`HASH_DIGITS` hex digits as an exact integer."""
    digest = row_hash_sql(dialect, columns)
    if dialect == "mysql":
        return f"CAST(CONV(SUBSTRING({digest}, 1, {HASH_DIGITS}), 16, 10) AS DECIMAL(38,0))"
    bits = HASH_DIGITS * 4
    return f"(('x' || substr({digest}, 1, {HASH_DIGITS}))::bit({bits})::bigint)::numeric"


def checksum_sql(dialect: Dialect, table: str, columns: Sequence[Column]) -> str:
    """``SELECT count, sum of row values FROM table`` (``table`` already quoted)."""
    value = row_value_sql(dialect, columns)
    total = (
        f"CAST(SUM({value}) AS DECIMAL(38,0))"
        if dialect == "mysql"
        else (f"sum({value})::numeric(38,0)")
    )
    return f"SELECT COUNT(*), {total} FROM {table}"


def hashes_sql(
    dialect: Dialect, table: str, keys: Sequence[Column], columns: Sequence[Column]
) -> str:
    """``SELECT <key texts>, <row hash> FROM table``: the input of the key-by-key diff."""
    selected = [text_sql(dialect, k) for k in keys] + [row_hash_sql(dialect, columns)]
    return f"SELECT {', '.join(selected)} FROM {table}"


KEY_PLACEHOLDER = "\x00key\x00"
"""Stands for one bound key text in :func:`rows_sql`; see :func:`bind_placeholders`."""


def rows_sql(
    dialect: Dialect,
    table: str,
    keys: Sequence[Column],
    columns: Sequence[Column],
    count: int,
    raw: Collection[str] = (),
) -> str:
    """The key texts, pieces and display texts of the rows with ``count`` given keys.

    Each key is matched on its canonical text (``KEY_PLACEHOLDER`` per key column), so a
    key found on the other engine is looked up without converting its type. Columns
    named in ``raw`` give their whole value in both places instead, for the caller to
    turn into canonical text (see :func:`pieces_sql`).
    """
    one = " AND ".join(f"{text_sql(dialect, k)} = {KEY_PLACEHOLDER}" for k in keys)
    where = " OR ".join(f"({one})" for _ in range(count))
    selected = [text_sql(dialect, k) for k in keys]
    selected += [_raw_or(piece_sql, dialect, c, raw) for c in columns]
    selected += [_raw_or(display_sql, dialect, c, raw) for c in columns]
    return f"SELECT {', '.join(selected)} FROM {table} WHERE {where}"


def _raw_or(
    build: Callable[[Dialect, Column], str], dialect: Dialect, column: Column, raw: Collection[str]
) -> str:
    if column.name in raw:
        return quote_ident(dialect, column.name)
    return build(dialect, column)


def pieces_sql(
    dialect: Dialect,
    table: str,
    keys: Sequence[Column],
    columns: Sequence[Column],
    raw: Collection[str],
) -> str:
    """``SELECT <key texts>, <each column's piece> FROM table``, the columns in ``raw``
    as their plain value: for a row hash finished in Python, when a column's canonical
    text needs a conversion SQL cannot do (:func:`python_piece` gives its piece)."""
    selected = [text_sql(dialect, k) for k in keys]
    selected += [_raw_or(piece_sql, dialect, c, raw) for c in columns]
    return f"SELECT {', '.join(selected)} FROM {table}"


def bind_placeholders(query: str) -> str:
    """``query`` in the DB-API ``format`` style (pymysql, psycopg2): literal ``%`` doubled,
    each :data:`KEY_PLACEHOLDER` turned into ``%s``."""
    return query.replace("%", "%%").replace(KEY_PLACEHOLDER, "%s")


# -- Spark -------------------------------------------------------------------------------


def _spark_col(column: Column) -> SparkColumn:
    from pyspark.sql import functions as F

    return F.col(spark_quote(column.name))


def text_column(column: Column) -> SparkColumn:
    """The canonical text of ``column`` as a Spark Column; NULL stays NULL."""
    from pyspark.sql import functions as F

    c = _spark_col(column)
    return F.when(c.isNotNull(), rule_for(column.type).spark(c, column.type))


def _value_column(column: Column) -> SparkColumn:
    """What enters the row hash for ``column``: its text or the MD5 of its bytes; NULL
    stays NULL (see :func:`piece_sql`)."""
    from pyspark.sql import functions as F

    c = _spark_col(column)
    rule = rule_for(column.type)
    if rule.digest == "bytes":
        return F.md5(c)
    value = text_column(column)
    return F.md5(value) if rule.digest == "text" else value


def _piece(value: SparkColumn) -> SparkColumn:
    from pyspark.sql import functions as F

    body = F.concat(F.length(value).cast("string"), F.lit(":"), value)
    return F.when(value.isNull(), F.lit(NULL_PIECE)).otherwise(body)


def display_column(column: Column) -> SparkColumn:
    """The canonical text cut to a readable size (see :func:`display_sql`)."""
    from pyspark.sql import functions as F

    c = _spark_col(column)
    rule = rule_for(column.type)
    if rule.digest == "bytes":
        text = rule.spark(F.substring(c, 1, DISPLAY_BYTES), column.type)
    elif rule.digest == "text":
        text = F.substring(rule.spark(c, column.type), 1, DISPLAY_CHARS)
    else:
        text = rule.spark(c, column.type)
    return F.when(c.isNotNull(), text)


def hash_frame(
    frame: DataFrame,
    keys: Sequence[Column],
    columns: Sequence[Column],
    *,
    pieces: bool = False,
    display: bool = False,
) -> DataFrame:
    """``frame`` as key texts ``_k0…``, the row hash ``_hash`` and, on request, each
    column's piece ``_p0…`` and display text ``_d0…``.

    Values are computed in one projection and the pieces over them in a second, so each
    canonical text is computed once though its piece uses it twice (Spark does not merge
    projections when that would repeat an expensive expression).
    """
    from pyspark.sql import functions as F

    key_texts = [text_column(k).alias(f"_k{i}") for i, k in enumerate(keys)]
    values = [_value_column(c).alias(f"_v{i}") for i, c in enumerate(columns)]
    shown = [display_column(c).alias(f"_d{i}") for i, c in enumerate(columns)] if display else []
    staged = frame.select(*key_texts, *values, *shown)
    piece_list = [_piece(F.col(f"_v{i}")) for i in range(len(columns))]
    out = [F.col(f"_k{i}") for i in range(len(keys))]
    out.append(F.md5(F.concat(*piece_list)).alias("_hash"))
    if pieces:
        out += [p.alias(f"_p{i}") for i, p in enumerate(piece_list)]
    out += [F.col(f"_d{i}") for i in range(len(shown))]
    return staged.select(*out)


def spark_checksum(frame: DataFrame, columns: Sequence[Column]) -> tuple[int, int]:
    """``(row count, sum of row values)`` of ``frame``, as :func:`checksum_sql` computes."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType

    head = F.substring(F.col("_hash"), 1, HASH_DIGITS)
    value = F.conv(head, 16, 10).cast(DecimalType(38, 0))
    row = hash_frame(frame, (), columns).agg(F.count(F.lit(1)), F.sum(value)).first()
    assert row is not None
    return int(row[0]), int(row[1] or 0)


# -- the specification in plain Python ----------------------------------------------------


def _float_text(value: float, single: bool) -> str:
    if single:
        value = struct.unpack("<f", struct.pack("<f", value))[0]
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return _ZERO if value == 0 else value.hex()


def _clock(value: time | datetime) -> str:
    return f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}"


def _date(value: date) -> str:
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


def _time_text(value: Any) -> str:
    if isinstance(value, timedelta):  # pymysql returns TIME as a timedelta
        micros = value // timedelta(microseconds=1)
        sign, micros = ("-" if micros < 0 else ""), abs(micros)
        seconds, micro = divmod(micros, 1_000_000)
        return (
            f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{micro:06d}"
        )
    if isinstance(value, time):
        return _clock(value)
    match = re.match(r"(\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?", str(value))
    return f"{match.group(1)}.{(match.group(2) or '').ljust(6, '0')}" if match else str(value)


def python_text(value: Any, ctype: IcetideType) -> str | None:
    """The canonical text of a Python value: what every engine's expression must give.

    A naive ``timestamptz`` is read as UTC.

    >>> from icetide.schema.types import parse_type
    >>> python_text(Decimal("-0.5"), parse_type("decimal(10,3)"))
    '-0.500'
    >>> python_text(0.1, parse_type("double")), python_text(0.1, parse_type("float"))
    ('0x1.999999999999ap-4', '0x1.99999a0000000p-4')
    >>> python_text([[1, None], [], None], ListType(2, ListType(3, parse_type("int"))))
    '[7:[1:1,N],2:[],N]'
    """
    if value is None:
        return None
    kind = ctype.name
    if kind == "boolean":
        return "1" if value else "0"
    if kind in ("int", "long"):
        return str(int(value))
    if kind == "decimal":
        with localcontext(prec=80):  # 38 digits exceed the default context's 28
            exact = Decimal(value).quantize(Decimal(1).scaleb(-precision_scale(ctype)[1]))
        return format(exact.copy_abs() if exact == 0 else exact, "f")
    if kind in ("float", "double"):
        return _float_text(float(value), kind == "float")
    if kind == "binary":
        return bytes(value).hex()
    if kind == "uuid":
        return str(value).lower()
    if kind == "date":
        return _date(value)
    if kind == "time":
        return _time_text(value)
    if kind in ("timestamp", "timestamptz"):
        if kind == "timestamptz" and value.tzinfo is not None:
            value = value.astimezone(UTC)
        return f"{_date(value)} {_clock(value)}"
    if isinstance(ctype, ListType):
        return "[" + ",".join(_element_piece(v, ctype.element) for v in value) + "]"
    return str(value)


def _element_piece(value: Any, ctype: IcetideType) -> str:
    """A list element's piece: its own canonical text, length-prefixed (never digested:
    the list's whole text is)."""
    text = python_text(value, ctype)
    return NULL_PIECE if text is None else f"{len(text)}:{text}"


def python_piece(value: Any, ctype: IcetideType) -> str:
    """The piece of a Python value (see :func:`piece_sql`)."""
    text = python_text(value, ctype)
    if text is None:
        return NULL_PIECE
    digest = rule_for(ctype).digest
    if digest == "bytes":
        text = hashlib.md5(bytes(value)).hexdigest()
    elif digest == "text":
        text = hashlib.md5(text.encode()).hexdigest()
    return f"{len(text)}:{text}"


def python_row_hash(row: Mapping[str, Any], columns: Sequence[Column]) -> str:
    """The row hash of a row of Python values keyed by column name.

    >>> from icetide.schema.types import parse_type
    >>> cols = (Column(1, "id", parse_type("int")), Column(2, "name", parse_type("string")))
    >>> python_row_hash({"id": 1, "name": None}, cols) == hashlib.md5(b"1:1N").hexdigest()
    True
    """
    joined = "".join(python_piece(row.get(c.name), c.type) for c in columns)
    return hashlib.md5(joined.encode()).hexdigest()


def python_row_value(row_hash: str) -> int:
    """The summed integer of a row hash: its first :data:`HASH_DIGITS` hex digits."""
    return int(row_hash[:HASH_DIGITS], 16)
