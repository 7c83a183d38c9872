"""The one list of column types: frozen values, nested types carrying their field ids.

Modelled on PyIceberg's types: every primitive is a value (``LongType()``), ``decimal``
and ``enum`` carry parameters, and the nested types ``struct``, ``list`` and ``map`` carry
the ids of what they hold (struct fields, the list element, the map key and value) so
evolution can follow each one by id, exactly as Iceberg does.

Every type answers ``.name``, its keyword in :data:`TYPE_NAMES`: the key every per-type
table in the code base uses (Spark/Arrow conversion, event coercion, bootstrap read
rules, checksum rules, source type mapping), so a test can check each table covers the
whole list.

A type is written in a schema file as text (``long``, ``decimal(12,2)``) or, for the
types that hold others, as a one-key mapping::

    {enum: [new, paid, shipped]}
    {struct: [{id: 6, name: city, type: string}, {id: 7, name: zip, type: string}]}
    {list: {element_id: 9, element: string}}
    {map: {key_id: 11, key: string, value_id: 12, value: long}}
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from icetide.errors import SchemaError

PRIMITIVES = (
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "string",
    "binary",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "uuid",
    "json",
)
"""Types without parameters. ``timestamp`` is wall-clock time without zone (MySQL
DATETIME), ``timestamptz`` an instant; ``time`` is a time of day; ``uuid`` and ``json``
are text with a meaning."""
PARAMETRIC = ("decimal", "enum")
NESTED = ("struct", "list", "map")
TYPE_NAMES = PRIMITIVES + PARAMETRIC + NESTED
"""Every type keyword, in one list."""
LEAF_NAMES = PRIMITIVES + PARAMETRIC
"""The types that hold a value rather than other fields."""


@dataclass(frozen=True)
class IcetideType:
    """Base of every column type."""

    name: ClassVar[str] = ""

    @property
    def is_nested(self) -> bool:
        """True for struct, list and map."""
        return self.name in NESTED

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class PrimitiveType(IcetideType):
    """A type without parameters; compare by value (``LongType() == LongType()``)."""


@dataclass(frozen=True)
class BooleanType(PrimitiveType):
    name: ClassVar[str] = "boolean"


@dataclass(frozen=True)
class IntType(PrimitiveType):
    name: ClassVar[str] = "int"


@dataclass(frozen=True)
class LongType(PrimitiveType):
    name: ClassVar[str] = "long"


@dataclass(frozen=True)
class FloatType(PrimitiveType):
    name: ClassVar[str] = "float"


@dataclass(frozen=True)
class DoubleType(PrimitiveType):
    name: ClassVar[str] = "double"


@dataclass(frozen=True)
class StringType(PrimitiveType):
    name: ClassVar[str] = "string"


@dataclass(frozen=True)
class BinaryType(PrimitiveType):
    name: ClassVar[str] = "binary"


@dataclass(frozen=True)
class DateType(PrimitiveType):
    name: ClassVar[str] = "date"


@dataclass(frozen=True)
class TimeType(PrimitiveType):
    name: ClassVar[str] = "time"


@dataclass(frozen=True)
class TimestampType(PrimitiveType):
    name: ClassVar[str] = "timestamp"


@dataclass(frozen=True)
class TimestamptzType(PrimitiveType):
    name: ClassVar[str] = "timestamptz"


@dataclass(frozen=True)
class UUIDType(PrimitiveType):
    name: ClassVar[str] = "uuid"


@dataclass(frozen=True)
class JsonType(PrimitiveType):
    name: ClassVar[str] = "json"


_PRIMITIVE_CLASSES: dict[str, type[PrimitiveType]] = {
    cls.name: cls
    for cls in (
        BooleanType,
        IntType,
        LongType,
        FloatType,
        DoubleType,
        StringType,
        BinaryType,
        DateType,
        TimeType,
        TimestampType,
        TimestamptzType,
        UUIDType,
        JsonType,
    )
}


@dataclass(frozen=True)
class DecimalType(IcetideType):
    """``decimal(precision, scale)``, precision 1..38."""

    precision: int
    scale: int
    name: ClassVar[str] = "decimal"

    def __str__(self) -> str:
        return f"decimal({self.precision},{self.scale})"


@dataclass(frozen=True)
class EnumType(IcetideType):
    """One of a fixed list of symbols; stored as its text, so adding symbols is safe."""

    symbols: tuple[str, ...]
    name: ClassVar[str] = "enum"

    def __str__(self) -> str:
        return f"enum({', '.join(self.symbols)})"


@dataclass(frozen=True)
class StructType(IcetideType):
    """Named fields, each a :class:`Column` with its own id."""

    fields: tuple[Column, ...]
    name: ClassVar[str] = "struct"

    def __str__(self) -> str:
        return "struct<" + ", ".join(f"{f.name}: {f.type}" for f in self.fields) + ">"


@dataclass(frozen=True)
class ListType(IcetideType):
    """A list whose element has field id ``element_id``."""

    element_id: int
    element: IcetideType
    element_nullable: bool = True
    name: ClassVar[str] = "list"

    def __str__(self) -> str:
        return f"list<{self.element}>"


@dataclass(frozen=True)
class MapType(IcetideType):
    """A map; the key (never null) and the value each have a field id."""

    key_id: int
    key: IcetideType
    value_id: int
    value: IcetideType
    value_nullable: bool = True
    name: ClassVar[str] = "map"

    def __str__(self) -> str:
        return f"map<{self.key}, {self.value}>"


@dataclass(frozen=True)
class ColumnDefault:
    """A column's source ``DEFAULT``: a typed literal, or the source's SQL when it is not
    a constant.

    ``value`` is a Python value of the column's type (``int`` for int/long, ``Decimal``
    for decimal, ``str`` for string/uuid/json/enum, ``bool``, ``float``, ``date``,
    ``time``, ``datetime`` (aware for timestamptz), ``bytes`` for binary): what every
    old row holds after the source added the column, so Iceberg's ``initial-default`` or
    a fill can write it. ``sql`` is the default's text when it is computed
    (``CURRENT_TIMESTAMP``, ``nextval('s')``, ``uuid()``): then old rows hold values
    only the source knows, and a fill has to read them from there.
    A ``DEFAULT NULL`` is no default (``Column.default is None``).
    """

    value: Any = None
    sql: str | None = None

    @property
    def constant(self) -> bool:
        """Whether every old row holds the same, known value."""
        return self.sql is None


SENSITIVE = "sensitive"
"""The tag of a column whose values must not be copied before someone approves it."""


@dataclass(frozen=True)
class Column:
    """A column, or a field nested in a struct; ``id`` is stable for the life of the table.

    ``default`` is the source's ``DEFAULT`` (``None``: none); ``tags`` are free-form
    labels such as :data:`SENSITIVE` that evolution and the sink read.
    """

    id: int
    name: str
    type: IcetideType
    nullable: bool = True
    doc: str | None = None
    default: ColumnDefault | None = None
    tags: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        tags: Any = self.tags  # schema files and callers hand in any iterable of labels
        if not isinstance(tags, frozenset):
            object.__setattr__(self, "tags", frozenset(tags))

    def __repr__(self) -> str:
        # default and tags only when set, so columns without them print as they always did
        text = (
            f"Column(id={self.id!r}, name={self.name!r}, type={self.type!r}, "
            f"nullable={self.nullable!r}, doc={self.doc!r}"
        )
        if self.default is not None:
            text += f", default={self.default!r}"
        if self.tags:
            text += f", tags={sorted(self.tags)!r}"
        return text + ")"


_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def primitive(name: str) -> PrimitiveType:
    """The primitive type called ``name``.

    >>> primitive("long")
    LongType()
    """
    return _PRIMITIVE_CLASSES[name]()


def parse_type(text: str) -> IcetideType:
    """Parse a type written as text: a primitive or ``decimal(p,s)``.

    >>> parse_type("decimal(10, 2)")
    DecimalType(precision=10, scale=2)
    >>> parse_type("long").name
    'long'
    """
    cleaned = text.strip().lower()
    match = _DECIMAL.match(cleaned)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        if not 1 <= precision <= 38 or scale > precision:
            raise SchemaError(
                f"type {text!r}: precision must be 1..38 and scale <= precision",
                hint="use e.g. decimal(12,2)",
            )
        return DecimalType(precision, scale)
    if cleaned in _PRIMITIVE_CLASSES:
        return primitive(cleaned)
    close = difflib.get_close_matches(cleaned, [*PRIMITIVES, "decimal(p,s)"], n=1)
    raise SchemaError(
        f"unknown column type {text!r}" + (f"; did you mean {close[0]!r}?" if close else ""),
        hint=f"use one of {', '.join(PRIMITIVES)}, decimal(p,s), or a mapping "
        "{enum: [...]}, {struct: [...]}, {list: {...}}, {map: {...}}",
    )


def precision_scale(ctype: IcetideType) -> tuple[int, int]:
    """A decimal's ``(precision, scale)``; ``(0, 0)`` for every other type.

    >>> precision_scale(DecimalType(12, 2)), precision_scale(LongType())
    ((12, 2), (0, 0))
    """
    return (ctype.precision, ctype.scale) if isinstance(ctype, DecimalType) else (0, 0)
