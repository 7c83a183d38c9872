"""PostgreSQL column types ↔ icetide types.

A PostgreSQL type is read as its SQL text, the form ``format_type()`` writes
(``numeric(12,4)``, ``timestamp(3) without time zone``, ``integer[]``); the usual
aliases (``int4``, ``varchar``, ``timestamptz`` …) are read too. A double-quoted name is a
user-defined type. The icetide type is the one that holds every value capture sends
without loss; the hint is the Debezium logical type its values arrive in, given where
reading them without an inline schema needs it:

===========================  ==============  ======================================
PostgreSQL type              icetide type    Debezium hint
===========================  ==============  ======================================
boolean                      boolean
smallint, integer            int
bigint, oid                  long
real / double precision      float / double
numeric(p,s)                 decimal(p,s)    (over 38 digits: string)
numeric (unconstrained)      string          ``io.debezium.data.VariableScaleDecimal``
bytea                        binary
date                         date            ``io.debezium.time.Date``
time(0-3)                    time            ``io.debezium.time.Time``
time, time(4-6)              time            ``io.debezium.time.MicroTime``
time with time zone          time            ``io.debezium.time.ZonedTime``
timestamp(0-3)               timestamp       ``io.debezium.time.Timestamp``
timestamp, timestamp(4-6)    timestamp       ``io.debezium.time.MicroTimestamp``
timestamp with time zone     timestamptz     ``io.debezium.time.ZonedTimestamp``
interval                     long            ``io.debezium.time.MicroDuration``
uuid                         uuid
json, jsonb                  json
text, varchar, char, xml,    string
enums, anything else
an array of a type above     list<element>   the element's (it applies to every
   other than "anything      (``dims`` deep: element of the list)
   else", or of an enum      list<list<…>>)
an array of anything else    string          (the array's text, as capture sends it)
===========================  ==============  ======================================

**Arrays.** An array column is a list of its element's icetide type, element by element
as the scalar column would be, NULL elements as null (list elements are optional). A
PostgreSQL array type has no fixed number of dimensions (``int[]`` holds ``{{1,2},{3,4}}``
too, and ``format_type`` writes ``integer[]`` for ``int[][]``): the depth is the column's
declared one, ``pg_attribute.attndims`` (``dims``; ``int[][]`` → 2 →
``list<list<int>>``), 1 when the catalog says 0 (``CREATE TABLE AS``, a domain over an
array). A value of another depth does not fit the column and becomes a dead letter
(``type_mismatch``, naming the depths), so nothing is lost. Lower bounds are not kept:
``'[0:1]={7,8}'`` is the list ``[7, 8]``. The hint is the element's and applies to every
element. A schema file may keep declaring an array column ``json`` (the form before lists,
the array as compact JSON text): :func:`accepts` keeps that declaration, and so does a
list of the same element declared with another depth, since PostgreSQL does not enforce
dimensions.

The time hints are those of Debezium's PostgreSQL connector with its default
``time.precision.mode=adaptive``: milliseconds up to precision 3, microseconds above
(icetide's capture writes the same). An unconstrained ``numeric`` is kept as its exact
text; the hint says Debezium's precise mode sends it as a ``{scale, value}`` struct.

Enums stay ``string`` (the label), so a label added at the source never rejects rows;
an enum's name alone does not say it is one, so the caller says so (``enum=True``).

A schema file may also declare an enum column as an icetide enum holding every one of its
labels (:func:`accepts`; the caller passes the labels, from ``pg_enum``). Change detection
keeps such a declaration instead of reporting a type change nobody made
(:mod:`icetide.evolution.source_schema`). Every other PostgreSQL type has exactly one
declaration: a native ``uuid`` or ``boolean`` is its own type, and a ``text`` column
declared as an enum would let the source write values the enum does not hold.

The other way, :func:`postgres_type` writes the DDL type holding an icetide type (for
tests and the demo creating source tables), :data:`DDL_TYPES`: boolean ``boolean``,
int ``integer``, long ``bigint``, float ``real``, double ``double precision``, string
``text``, binary ``bytea``, date ``date``, time ``time(6) without time zone``, timestamp
``timestamp(6) without time zone``, timestamptz ``timestamp(6) with time zone``, uuid
``uuid``, json ``jsonb``, decimal(p,s) ``numeric(p,s)``, and enum ``text`` (a PostgreSQL
enum needs its own ``CREATE TYPE``; it reads back as ``string``). Nested types need
composite types or arrays (whose depth the type text does not carry): they are
:data:`DDL_UNSUPPORTED`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from icetide.errors import SchemaError
from icetide.schema.convert import NextId, holds_enum, ids_from
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
    ListType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

Mapped = tuple[IcetideType, str | None]
"""An icetide type and the Debezium logical name its values need, if any."""

_SIMPLE: dict[str, Mapped] = {
    "boolean": (BooleanType(), None),
    "bool": (BooleanType(), None),
    "smallint": (IntType(), None),
    "int2": (IntType(), None),
    "integer": (IntType(), None),
    "int": (IntType(), None),
    "int4": (IntType(), None),
    "bigint": (LongType(), None),
    "int8": (LongType(), None),
    "oid": (LongType(), None),
    "real": (FloatType(), None),
    "float4": (FloatType(), None),
    "double precision": (DoubleType(), None),
    "float8": (DoubleType(), None),
    "bytea": (BinaryType(), None),
    "date": (DateType(), "io.debezium.time.Date"),
    "time": (TimeType(), "io.debezium.time.MicroTime"),
    "time without time zone": (TimeType(), "io.debezium.time.MicroTime"),
    "time with time zone": (TimeType(), "io.debezium.time.ZonedTime"),
    "timetz": (TimeType(), "io.debezium.time.ZonedTime"),
    "timestamp": (TimestampType(), "io.debezium.time.MicroTimestamp"),
    "timestamp without time zone": (TimestampType(), "io.debezium.time.MicroTimestamp"),
    "timestamp with time zone": (TimestamptzType(), "io.debezium.time.ZonedTimestamp"),
    "timestamptz": (TimestamptzType(), "io.debezium.time.ZonedTimestamp"),
    "interval": (LongType(), "io.debezium.time.MicroDuration"),
    "uuid": (UUIDType(), None),
    "json": (JsonType(), None),
    "jsonb": (JsonType(), None),
}
_TEXT = frozenset(
    {
        "text",
        "character varying",
        "varchar",
        "character",
        "char",
        "bpchar",
        "name",
        '"char"',
        "xml",
    }
)
_DECIMAL = frozenset({"numeric", "decimal"})
_MILLIS = {
    "io.debezium.time.MicroTime": "io.debezium.time.Time",
    "io.debezium.time.MicroTimestamp": "io.debezium.time.Timestamp",
}
"""The microsecond hint → the millisecond one Debezium uses up to precision 3."""
VARIABLE_SCALE = "io.debezium.data.VariableScaleDecimal"
_KNOWN = frozenset(_SIMPLE) | _TEXT | _DECIMAL
"""The types whose array values capture converts element by element."""
_MODIFIER = re.compile(r"\(([^)]*)\)")
_BRACKETS = re.compile(r"(\s*\[\d*\])+$")
"""``[]`` (or ``[3]``) after an element type, once per written dimension."""


def _base_name(text: str) -> str:
    """``timestamp(3) without time zone`` → ``timestamp without time zone``; a quoted
    (user-defined) name stays as it is."""
    if text.startswith('"'):
        return text
    return " ".join(_MODIFIER.sub(" ", text.lower()).split())


def decimal_for(precision: int, scale: int) -> DecimalType | None:
    """The smallest ``decimal(p,s)`` (p <= 38, 0 <= s <= p) holding every value of a
    ``numeric(precision, scale)``; ``None`` when none does. PostgreSQL 15 allows a scale
    below zero or above the precision.

    >>> decimal_for(2, -3), decimal_for(3, 5), decimal_for(39, 0)
    (DecimalType(precision=5, scale=0), DecimalType(precision=5, scale=5), None)
    """
    if scale < 0:
        precision, scale = precision - scale, 0
    elif scale > precision:
        precision = scale
    return DecimalType(precision, scale) if 1 <= precision <= 38 else None


def icetide_type(
    column_type: str, *, enum: bool = False, dims: int = 1, next_id: NextId | None = None
) -> Mapped:
    """The icetide type (and Debezium logical name) holding a PostgreSQL column type's
    values as capture sends them; ``enum``: the (user-defined) base type is an enum;
    ``dims``: an array column's declared dimensions (``attndims``; a type text written
    ``integer[][]`` says so itself). A list's element ids come from ``next_id`` (default:
    counting from 1; inference gives them their place after the columns).

    >>> icetide_type("timestamp(3) without time zone")[1], icetide_type("timestamp")[1]
    ('io.debezium.time.Timestamp', 'io.debezium.time.MicroTimestamp')
    >>> icetide_type("numeric(12,4)"), icetide_type('"mood"[]')
    ((DecimalType(precision=12, scale=4), None), (StringType(), None))
    >>> icetide_type("integer[]")
    (ListType(element_id=1, element=IntType(), element_nullable=True), None)
    >>> print(icetide_type("time(3)[]", dims=2)[0], icetide_type('"mood"[]', enum=True)[0])
    list<list<time>> list<string>
    """
    text = column_type.strip()
    brackets = _BRACKETS.search(text)
    if brackets is None:
        return _scalar(text, enum)
    element = text[: brackets.start()].rstrip()
    written = brackets.group(0).count("[")
    if not (enum or _base_name(element) in _KNOWN):
        return StringType(), None  # elements capture cannot convert: the array's text
    ctype, hint = _scalar(element, enum)
    ids = next_id or ids_from(1)
    for _ in range(max(dims, written, 1)):
        ctype = ListType(ids(), ctype, True)
    return ctype, hint


def _scalar(text: str, enum: bool) -> Mapped:
    if enum:
        return StringType(), None
    name = _base_name(text)
    numbers = _MODIFIER.search(text)
    if name in _SIMPLE:
        ctype, hint = _SIMPLE[name]
        if hint in _MILLIS and numbers and int(numbers.group(1)) <= 3:
            return ctype, _MILLIS[hint]  # adaptive: milliseconds up to precision 3
        return ctype, hint
    if name in _DECIMAL:
        if numbers:
            precision, _, scale = numbers.group(1).partition(",")
            found = decimal_for(int(precision), int(scale or 0))
            return (found, None) if found else (StringType(), None)
        return StringType(), VARIABLE_SCALE
    return StringType(), None


def leaf(ctype: IcetideType) -> IcetideType:
    """The element type a list holds at its innermost level (any other type itself).

    >>> leaf(ListType(2, ListType(3, IntType())))
    IntType()
    """
    while isinstance(ctype, ListType):
        ctype = ctype.element
    return ctype


def depth(ctype: IcetideType) -> int:
    """How many lists ``ctype`` nests (0 for any other type)."""
    levels = 0
    while isinstance(ctype, ListType):
        ctype, levels = ctype.element, levels + 1
    return levels


def accepts(
    column_type: str, declared: IcetideType, *, enum: bool = False, labels: Sequence[str] = ()
) -> bool:
    """Whether a schema file may declare a column of this PostgreSQL type as ``declared``:
    the type :func:`icetide_type` reads; for an array, also ``json`` (the array as JSON
    text, how arrays were declared before lists) or a list of the same element at another
    depth (PostgreSQL does not enforce an array's dimensions); for an enum (``enum``, its
    ``labels``), an icetide enum holding every label (see the module doc).

    >>> from icetide.schema.types import EnumType
    >>> accepts('"mood"', EnumType(("sad", "ok", "happy")), enum=True, labels=["sad", "ok"])
    True
    >>> accepts("text", EnumType(("sad", "ok"))), accepts("integer", BooleanType())
    (False, False)
    >>> accepts("integer[]", JsonType()), accepts("integer[]", ListType(9, LongType()))
    (True, False)
    """
    mapped = icetide_type(column_type, enum=enum)[0]
    if isinstance(mapped, ListType):
        if isinstance(declared, JsonType):
            return True
        return isinstance(declared, ListType) and _same_element(declared, mapped)
    if declared == mapped:
        return True
    scalar = _BRACKETS.search(column_type.strip()) is None
    return enum and scalar and holds_enum(declared, labels)


def _same_element(declared: ListType, mapped: ListType) -> bool:
    """Lists of the same leaf type with nullable elements at every level (ids aside)."""
    inner: IcetideType = declared
    while isinstance(inner, ListType):
        if not inner.element_nullable:
            return False
        inner = inner.element
    return inner == leaf(mapped)


def _fixed(text: str) -> Callable[[Any], str]:
    return lambda _: text


DDL_TYPES: dict[str, Callable[[Any], str]] = {
    "boolean": _fixed("boolean"),
    "int": _fixed("integer"),
    "long": _fixed("bigint"),
    "float": _fixed("real"),
    "double": _fixed("double precision"),
    "string": _fixed("text"),
    "binary": _fixed("bytea"),
    "date": _fixed("date"),
    "time": _fixed("time(6) without time zone"),
    "timestamp": _fixed("timestamp(6) without time zone"),
    "timestamptz": _fixed("timestamp(6) with time zone"),
    "uuid": _fixed("uuid"),
    "json": _fixed("jsonb"),
    "decimal": lambda t: f"numeric({t.precision},{t.scale})",
    "enum": _fixed("text"),
}
"""Type name → the PostgreSQL DDL type of that icetide type."""
DDL_UNSUPPORTED = NESTED
"""Type names with no PostgreSQL column type that reads back as the same type."""


def postgres_type(ctype: IcetideType) -> str:
    """The PostgreSQL DDL type that holds an icetide type's values.

    >>> postgres_type(DecimalType(12, 2)), postgres_type(TimestampType())
    ('numeric(12,2)', 'timestamp(6) without time zone')
    """
    if ctype.name in DDL_UNSUPPORTED:
        raise SchemaError(
            f"PostgreSQL has no column type reading back as {ctype}",
            hint="declare the column as jsonb and keep the nested value as JSON text",
        )
    return DDL_TYPES[ctype.name](ctype)
