"""MySQL/MariaDB column types ↔ icetide types.

A MySQL type is read as its SQL text, the form ``information_schema.COLUMNS.COLUMN_TYPE``
and ``SHOW CREATE TABLE`` write (``int unsigned``, ``decimal(12,2)``, ``datetime(6)``)
and capture rebuilds from a binlog table map. The icetide type is the one that holds
every value without loss; the hint is the Debezium logical type its values arrive in,
given where reading them without an inline schema needs it:

==========================================  ==============  ===============================
MySQL type                                  icetide type    Debezium hint
==========================================  ==============  ===============================
tinyint, smallint, mediumint, int, year     int
int unsigned, bigint                        long
bigint unsigned                             decimal(20,0)
float / float(p > 24), double, real         float / double
decimal(p,s), numeric                       decimal(p,s);   (wider than 38 digits: string)
bit(1) / bit(n > 1)                         boolean/binary  – / ``io.debezium.data.Bits``
date                                        date            ``io.debezium.time.Date``
datetime(0-3) / datetime(4-6)               timestamp       ``…Timestamp`` / ``…MicroTimestamp``
timestamp(fsp)                              timestamptz     ``io.debezium.time.ZonedTimestamp``
time(fsp)                                   time            ``io.debezium.time.MicroTime``
json, geometry (and its subtypes)           json
binary, varbinary, *blob                    binary
char, varchar, *text, enum, set, others     string
==========================================  ==============  ===============================

ENUM stays ``string``: Debezium sends the label, and a source that adds a label must not
make the pipeline reject rows before the schema file learns it.

A schema file may also declare some columns as another type that holds their values, by
a convention the converter knows (:func:`accepts`). Change detection keeps such a
declaration instead of reporting a type change nobody made
(:mod:`icetide.evolution.source_schema`):

==========================  =====================================================
MySQL type                  may also be declared as
==========================  =====================================================
tinyint(1), bool, boolean   boolean (MySQL's own boolean; values 0/1)
char(36)                    uuid (what :func:`mysql_type` writes for a uuid)
enum('a','b')               an enum holding every label (``enum(a, b)`` or more)
==========================  =====================================================

The other way, :func:`mysql_type` writes the DDL type that holds an icetide type (for
tests and the demo creating source tables), :data:`DDL_TYPES`:

==============  ================  ==============  ================
icetide         MySQL DDL         icetide         MySQL DDL
==============  ================  ==============  ================
boolean         ``bit(1)``        date            ``date``
int             ``int``           time            ``time(6)``
long            ``bigint``        timestamp       ``datetime(6)``
float           ``float``         timestamptz     ``timestamp(6)``
double          ``double``        uuid            ``char(36)`` ¹
string          ``longtext``      json            ``json``
binary          ``longblob``      decimal(p,s)    ``decimal(p,s)``
enum(a, b)      ``enum('a','b')`` ¹
==============  ================  ==============  ================

¹ reads back as ``string``. MySQL has no nested types: ``struct``, ``list`` and ``map``
are :data:`DDL_UNSUPPORTED`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from icetide.errors import SchemaError
from icetide.schema.convert import holds_enum
from icetide.schema.types import (
    NESTED,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcetideType,
    IntType,
    JsonType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

Mapped = tuple[IcetideType, str | None]
"""An icetide type and the Debezium logical name its values need, if any."""

_TYPE = re.compile(r"\s*([a-z]+)\s*(?:\(([^)]*)\))?(.*)", re.DOTALL)
_SMALL_INTS = frozenset({"tinyint", "smallint", "mediumint", "year", "bool", "boolean"})
_DECIMALS = frozenset({"decimal", "numeric", "dec", "fixed"})
_GEOMETRY = frozenset(
    {
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
        "geomcollection",
    }
)
_BINARY = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})


def _numbers(args: str | None) -> list[int]:
    return [int(a) for a in (args or "").split(",") if a.strip().isdigit()]


def icetide_type(column_type: str) -> Mapped:
    """The icetide type (and Debezium logical name) holding a MySQL column type's values.

    >>> icetide_type("datetime(6)")
    (TimestampType(), 'io.debezium.time.MicroTimestamp')
    >>> icetide_type("bigint unsigned")
    (DecimalType(precision=20, scale=0), None)
    """
    match = _TYPE.match(column_type.lower())
    if match is None:
        return StringType(), None
    base, args, rest = match.groups()
    numbers = _numbers(args)
    unsigned = "unsigned" in rest.split()
    if base in _SMALL_INTS or (base in ("int", "integer") and not unsigned):
        return IntType(), None
    if base in ("int", "integer") or (base == "bigint" and not unsigned):
        return LongType(), None
    if base == "bigint":
        return DecimalType(20, 0), None
    if base == "float":
        return (DoubleType() if numbers and numbers[0] > 24 else FloatType()), None
    if base in ("double", "real"):
        return DoubleType(), None
    if base in _DECIMALS:
        precision, scale = (numbers + [10, 0][len(numbers) :])[:2]
        if 1 <= precision <= 38:
            return DecimalType(precision, scale), None
        return StringType(), None  # wider than Iceberg's decimal(38): keep the exact text
    if base == "date":
        return DateType(), "io.debezium.time.Date"
    fsp = numbers[0] if numbers else 0
    if base == "datetime":
        logical = "MicroTimestamp" if fsp > 3 else "Timestamp"
        return TimestampType(), f"io.debezium.time.{logical}"
    if base == "timestamp":
        return TimestamptzType(), "io.debezium.time.ZonedTimestamp"
    if base == "time":
        return TimeType(), "io.debezium.time.MicroTime"
    if base == "bit":
        width = numbers[0] if numbers else 1
        return (BooleanType(), None) if width <= 1 else (BinaryType(), "io.debezium.data.Bits")
    if base == "json" or base in _GEOMETRY:
        return JsonType(), None
    if base in _BINARY:
        return BinaryType(), None
    return StringType(), None


def accepts(column_type: str, declared: IcetideType) -> bool:
    """Whether a schema file may declare a column of this MySQL type as ``declared``: the
    type :func:`icetide_type` reads, or another that holds its values by a convention
    (the module doc's second table). Nothing else: a declaration the source type no longer
    fits (``vip`` declared boolean after ``MODIFY vip INT``) is a change to plan.

    >>> accepts("tinyint(1)", BooleanType()), accepts("int", BooleanType())
    (True, False)
    >>> from icetide.schema.types import EnumType
    >>> accepts("enum('new','paid')", EnumType(("new", "paid", "shipped")))
    True
    """
    if declared == icetide_type(column_type)[0]:
        return True
    match = _TYPE.match(column_type.lower())
    if match is None:
        return False
    base, args, _ = match.groups()
    if isinstance(declared, BooleanType):
        return base in ("bool", "boolean") or (base == "tinyint" and _numbers(args) == [1])
    if isinstance(declared, UUIDType):
        return base == "char" and _numbers(args) == [36]
    labels = enum_labels(column_type)
    return labels is not None and holds_enum(declared, labels)


_ENUM = re.compile(r"\s*enum\s*\((.*)\)\s*$", re.DOTALL | re.IGNORECASE)
_LABEL = re.compile(r"'((?:[^']|'')*)'")


def enum_labels(column_type: str) -> tuple[str, ...] | None:
    """The labels of an ``enum(...)`` column type in order (``None``: not an enum), as
    ``information_schema`` writes them: quoted, a quote doubled.

    >>> enum_labels("enum('a','it''s','b(c)')"), enum_labels("varchar(3)")
    (('a', "it's", 'b(c)'), None)
    """
    match = _ENUM.match(column_type)
    if match is None:
        return None
    return tuple(label.replace("''", "'") for label in _LABEL.findall(match.group(1)))


def _fixed(text: str) -> Callable[[Any], str]:
    return lambda _: text


def _enum(ctype: Any) -> str:
    return "enum(" + ",".join("'" + s.replace("'", "''") + "'" for s in ctype.symbols) + ")"


DDL_TYPES: dict[str, Callable[[Any], str]] = {
    "boolean": _fixed("bit(1)"),
    "int": _fixed("int"),
    "long": _fixed("bigint"),
    "float": _fixed("float"),
    "double": _fixed("double"),
    "string": _fixed("longtext"),
    "binary": _fixed("longblob"),
    "date": _fixed("date"),
    "time": _fixed("time(6)"),
    "timestamp": _fixed("datetime(6)"),
    "timestamptz": _fixed("timestamp(6)"),
    "uuid": _fixed("char(36)"),
    "json": _fixed("json"),
    "decimal": lambda t: f"decimal({t.precision},{t.scale})",
    "enum": _enum,
}
"""Type name → the MySQL DDL type of that icetide type."""
DDL_UNSUPPORTED = NESTED
"""Type names MySQL cannot declare: it has no nested column types."""


def mysql_type(ctype: IcetideType) -> str:
    """The MySQL DDL type that holds an icetide type's values.

    >>> mysql_type(DecimalType(12, 2)), mysql_type(TimestampType())
    ('decimal(12,2)', 'datetime(6)')
    """
    if ctype.name in DDL_UNSUPPORTED:
        raise SchemaError(
            f"MySQL has no column type for {ctype}",
            hint="declare the column as json and keep the nested value as JSON text",
        )
    return DDL_TYPES[ctype.name](ctype)
