"""icetide types ↔ Spark SQL types and Arrow types, in one table each way.

==============  ==================  =========================  ==========================
icetide         Spark SQL           Arrow                      read back from Spark/Arrow
==============  ==================  =========================  ==========================
boolean         BOOLEAN             bool                       boolean
int             INT                 int32                      int (also TINYINT,
                                                               SMALLINT, int8, int16)
long            BIGINT              int64                      long
float           FLOAT               float32                    float
double          DOUBLE              float64                    double
string          STRING              string                     string (also VARCHAR(n),
                                                               CHAR(n), large_string)
binary          BINARY              binary                     binary
date            DATE                date32                     date
time            STRING ¹            string ¹                   string
timestamp       TIMESTAMP_NTZ       timestamp[us]              timestamp
timestamptz     TIMESTAMP           timestamp[us, tz=UTC]      timestamptz
uuid, json      STRING              string                     string
decimal(p,s)    DECIMAL(p,s)        decimal128(p, s)           decimal(p,s)
enum(…)         STRING              string                     string
struct          STRUCT<…>           struct                     struct
list            ARRAY<…>            list<element: …>           list
map             MAP<…, …>           map<…, …>                  map
==============  ==================  =========================  ==========================

¹ Spark 3.5 has no time-of-day type: ISO text (``HH:MM:SS.ffffff``) sorts correctly.

Going to Spark and Arrow, a leaf is one lookup in :data:`SQL_TYPES` or
:data:`ARROW_TYPES`; a struct, list or map is walked by a schema visitor
(:mod:`icetide.schema.visitor`) that spells each node from its children's results.

``time``, ``uuid``, ``json`` and ``enum`` are stored as text, so they read back as
``string``: the schema file, not the table, keeps their meaning. Spark and Arrow have no
field ids: reading a nested type takes a :data:`~icetide.schema.convert.NextId` callback;
a struct's fields take ids first, then what each holds (a list its element id, a map its
key then value id), depth first. Spark type text is parsed by sqlglot here (``schema/``
sits below everything and never imports pyspark).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import time
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from icetide.errors import SchemaError
from icetide.schema.convert import NextId
from icetide.schema.model import TableSchema
from icetide.schema.quoting import quote
from icetide.schema.types import (
    BinaryType,
    BooleanType,
    Column,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcetideType,
    IntType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)
from icetide.schema.visitor import SchemaVisitor, visit


def _fixed(value: Any) -> Callable[[Any], Any]:
    return lambda _: value


SQL_TYPES: dict[str, Callable[[Any], str]] = {
    "boolean": _fixed("BOOLEAN"),
    "int": _fixed("INT"),
    "long": _fixed("BIGINT"),
    "float": _fixed("FLOAT"),
    "double": _fixed("DOUBLE"),
    "string": _fixed("STRING"),
    "binary": _fixed("BINARY"),
    "date": _fixed("DATE"),
    "time": _fixed("STRING"),
    "timestamp": _fixed("TIMESTAMP_NTZ"),
    "timestamptz": _fixed("TIMESTAMP"),
    "uuid": _fixed("STRING"),
    "json": _fixed("STRING"),
    "decimal": lambda t: f"DECIMAL({t.precision},{t.scale})",
    "enum": _fixed("STRING"),
    "struct": lambda t: visit(t, _SQL),
    "list": lambda t: visit(t, _SQL),
    "map": lambda t: visit(t, _SQL),
}
"""Type name → its Spark SQL type (a nested type's is spelled by :class:`_SparkSql`)."""

ARROW_TYPES: dict[str, Callable[[Any], pa.DataType]] = {
    "boolean": _fixed(pa.bool_()),
    "int": _fixed(pa.int32()),
    "long": _fixed(pa.int64()),
    "float": _fixed(pa.float32()),
    "double": _fixed(pa.float64()),
    "string": _fixed(pa.string()),
    "binary": _fixed(pa.binary()),
    "date": _fixed(pa.date32()),
    "time": _fixed(pa.string()),
    "timestamp": _fixed(pa.timestamp("us")),
    "timestamptz": _fixed(pa.timestamp("us", tz="UTC")),
    "uuid": _fixed(pa.string()),
    "json": _fixed(pa.string()),
    "decimal": lambda t: pa.decimal128(t.precision, t.scale),
    "enum": _fixed(pa.string()),
    "struct": lambda t: visit(t, _ARROW),
    "list": lambda t: visit(t, _ARROW),
    "map": lambda t: visit(t, _ARROW),
}
"""Type name → the Arrow type Spark expects in ``mapInArrow`` output (a nested type's is
built by :class:`_Arrow`)."""


def sql_type(ctype: IcetideType) -> str:
    """The Spark SQL type name of a column type.

    >>> sql_type(DecimalType(12, 2))
    'DECIMAL(12,2)'
    """
    return SQL_TYPES[ctype.name](ctype)


def arrow_type(ctype: IcetideType) -> pa.DataType:
    """The Arrow type Spark expects for a column type in ``mapInArrow`` output."""
    return ARROW_TYPES[ctype.name](ctype)


def arrow_value(value: Any, ctype: IcetideType) -> Any:
    """A decoded Python value in the form Arrow takes for :func:`arrow_type` (a time of
    day as its text, inside structs, lists and maps too).

    >>> from icetide.schema.types import TimeType
    >>> arrow_value({"at": time(10, 30)}, StructType((Column(1, "at", TimeType()),)))
    {'at': '10:30:00'}
    """
    if value is None:
        return None
    if ctype.name == "time" and isinstance(value, time):
        return value.isoformat()
    if isinstance(ctype, StructType) and isinstance(value, dict):
        return {f.name: arrow_value(value.get(f.name), f.type) for f in ctype.fields}
    if (
        isinstance(ctype, ListType)
        and isinstance(value, list)
        and ctype.element.name in _HOLDS_TIME
    ):
        return [arrow_value(v, ctype.element) for v in value]
    if isinstance(ctype, MapType) and isinstance(value, list):
        return [(arrow_value(k, ctype.key), arrow_value(v, ctype.value)) for k, v in value]
    return value


_HOLDS_TIME = ("time", "struct", "list", "map")


def struct_sql(columns: tuple[Column, ...]) -> str:
    """A Spark SQL ``STRUCT<...>`` of the given columns; every name quoted, so a name
    with a backtick stays one field.

    >>> from icetide.schema.types import LongType
    >>> print(struct_sql((Column(1, "a` INT, b", LongType()),)))
    STRUCT<`a`` INT, b`: BIGINT>
    """
    return visit(StructType(columns), _SQL)


def arrow_struct(columns: tuple[Column, ...]) -> pa.StructType:
    """The Arrow struct type of the given columns."""
    struct: pa.StructType = visit(StructType(columns), _ARROW)
    return struct


class _SparkSql(SchemaVisitor[str]):
    """A nested type's Spark SQL text from its parts'; leaves come from :data:`SQL_TYPES`."""

    def schema(self, schema: TableSchema, struct_result: str) -> str:
        return struct_result

    def struct(self, struct: StructType, field_results: Sequence[str]) -> str:
        return f"STRUCT<{', '.join(field_results)}>"

    def field(self, field: Column, field_result: str) -> str:
        return f"{quote(field.name)}: {field_result}"

    def list(self, list_type: ListType, element_result: str) -> str:
        return f"ARRAY<{element_result}>"

    def map(self, map_type: MapType, key_result: str, value_result: str) -> str:
        return f"MAP<{key_result}, {value_result}>"

    def primitive(self, primitive: IcetideType) -> str:
        return SQL_TYPES[primitive.name](primitive)


class _Arrow(SchemaVisitor[pa.DataType]):
    """A nested type's Arrow type from its parts'; leaves come from :data:`ARROW_TYPES`.

    Struct fields come out nullable (``pa.field``'s default) whatever the column says, as
    :func:`arrow_struct` has always made them; list elements and map values keep theirs.
    """

    def schema(self, schema: TableSchema, struct_result: pa.DataType) -> pa.DataType:
        return struct_result

    def struct(self, struct: StructType, field_results: Sequence[pa.DataType]) -> pa.DataType:
        return pa.struct(
            [pa.field(f.name, t) for f, t in zip(struct.fields, field_results, strict=True)]
        )

    def field(self, field: Column, field_result: pa.DataType) -> pa.DataType:
        return field_result

    def list(self, list_type: ListType, element_result: pa.DataType) -> pa.DataType:
        return pa.list_(pa.field("element", element_result, list_type.element_nullable))

    def map(
        self, map_type: MapType, key_result: pa.DataType, value_result: pa.DataType
    ) -> pa.DataType:
        return pa.map_(key_result, pa.field("value", value_result, map_type.value_nullable))

    def primitive(self, primitive: IcetideType) -> pa.DataType:
        return ARROW_TYPES[primitive.name](primitive)


_SQL: SchemaVisitor[str] = _SparkSql()
_ARROW: SchemaVisitor[pa.DataType] = _Arrow()


# --- Spark SQL type text → icetide ------------------------------------------------------------

# sqlglot reads Spark's spellings (BYTE, SHORT, LONG, REAL, DEC, NUMERIC, TIMESTAMP_LTZ)
# into its own type names; these are the ones icetide stores without a parameter.
_SPARK_TYPES: dict[Any, IcetideType] = {
    exp.DataType.Type.BOOLEAN: BooleanType(),
    exp.DataType.Type.TINYINT: IntType(),
    exp.DataType.Type.SMALLINT: IntType(),
    exp.DataType.Type.INT: IntType(),
    exp.DataType.Type.BIGINT: LongType(),
    exp.DataType.Type.FLOAT: FloatType(),
    exp.DataType.Type.DOUBLE: DoubleType(),
    exp.DataType.Type.BINARY: BinaryType(),
    exp.DataType.Type.VARBINARY: BinaryType(),
    exp.DataType.Type.DATE: DateType(),
    exp.DataType.Type.TIMESTAMP: TimestamptzType(),
    exp.DataType.Type.TIMESTAMPLTZ: TimestamptzType(),
    exp.DataType.Type.TIMESTAMPTZ: TimestamptzType(),
    exp.DataType.Type.TIMESTAMPNTZ: TimestampType(),
    exp.DataType.Type.DATETIME: TimestampType(),
}

_HINT = "write e.g. BIGINT, DECIMAL(12,2), ARRAY<STRING>, STRUCT<a: INT>"


def from_datatype(dtype: exp.DataType, next_id: NextId) -> IcetideType:
    """The icetide type of a sqlglot type (as sqlglot's Spark dialect parses or annotates
    it); nested ids from ``next_id``, a struct's fields first, then what each holds.

    Views derive their column types through sqlglot too, so both read types here.
    """
    kind = dtype.this
    if kind in _SPARK_TYPES:
        return _SPARK_TYPES[kind]
    if dtype.is_type(*exp.DataType.TEXT_TYPES):
        return StringType()
    if kind == exp.DataType.Type.DECIMAL:
        params = [int(p.this.this) for p in dtype.expressions]
        precision, scale = (params + [10, 0][len(params) :])[:2]
        return DecimalType(precision, scale)
    if kind == exp.DataType.Type.ARRAY and len(dtype.expressions) == 1:
        element_id = next_id()
        return ListType(element_id, from_datatype(dtype.expressions[0], next_id))
    if kind == exp.DataType.Type.MAP and len(dtype.expressions) == 2:
        key_id, value_id = next_id(), next_id()
        key = from_datatype(dtype.expressions[0], next_id)
        return MapType(key_id, key, value_id, from_datatype(dtype.expressions[1], next_id))
    if kind == exp.DataType.Type.STRUCT:
        return _struct(dtype, next_id)
    raise SchemaError(f"Spark type {dtype.sql('spark')!r} has no icetide type", hint=_HINT)


def _struct(dtype: exp.DataType, next_id: NextId) -> StructType:
    definitions = []
    for definition in dtype.expressions:
        kind = definition.args.get("kind")
        if not isinstance(definition, exp.ColumnDef) or not isinstance(kind, exp.DataType):
            raise SchemaError(f"Spark type {dtype.sql('spark')!r}: a struct field without a type")
        required = any(
            isinstance(c.args.get("kind"), exp.NotNullColumnConstraint)
            for c in definition.args.get("constraints") or ()
        )
        definitions.append((next_id(), definition.name, kind, not required))
    return StructType(
        tuple(
            Column(field_id, name, from_datatype(kind, next_id), nullable)
            for field_id, name, kind, nullable in definitions
        )
    )


def from_sql(text: str, next_id: NextId) -> IcetideType:
    """The icetide type of a Spark SQL type text, parsed by sqlglot; nested ids from
    ``next_id``.

    >>> from icetide.schema.convert import ids_from
    >>> from_sql("STRUCT<a: BIGINT, `b c`: ARRAY<DECIMAL(12,2)>>", ids_from(10))
    ... # doctest: +NORMALIZE_WHITESPACE
    StructType(fields=(Column(id=10, name='a', type=LongType(), nullable=True, doc=None),
        Column(id=11, name='b c', type=ListType(element_id=12,
        element=DecimalType(precision=12, scale=2), element_nullable=True),
        nullable=True, doc=None)))
    """
    try:
        # Inside a CAST the parser must consume the whole text (a bare type parse stops
        # early and accepts ``ARRAY<INT``).
        cast = sqlglot.parse_one(f"CAST(NULL AS {text})", read="spark")
    except ParseError as error:
        reason = error.errors[0].get("description", "unreadable") if error.errors else "unreadable"
        raise SchemaError(f"Spark type {text!r}: {reason}", hint=_HINT) from None
    if not isinstance(cast, exp.Cast):
        raise SchemaError(f"Spark type {text!r}: not a single type", hint=_HINT)
    return from_datatype(cast.to, next_id)


# --- Arrow type → icetide ---------------------------------------------------------------------


def from_arrow(dtype: pa.DataType, next_id: NextId) -> IcetideType:
    """The icetide type of an Arrow type; nested ids from ``next_id``.

    >>> from icetide.schema.convert import ids_from
    >>> from_arrow(pa.list_(pa.int64()), ids_from(3))
    ListType(element_id=3, element=LongType(), element_nullable=True)
    """
    if pa.types.is_boolean(dtype):
        return BooleanType()
    if pa.types.is_int8(dtype) or pa.types.is_int16(dtype) or pa.types.is_int32(dtype):
        return IntType()
    if pa.types.is_int64(dtype):
        return LongType()
    if pa.types.is_float32(dtype):
        return FloatType()
    if pa.types.is_float64(dtype):
        return DoubleType()
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return StringType()
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return BinaryType()
    if pa.types.is_date32(dtype):
        return DateType()
    if pa.types.is_timestamp(dtype):
        return TimestampType() if dtype.tz is None else TimestamptzType()
    if pa.types.is_decimal(dtype):
        return DecimalType(dtype.precision, dtype.scale)
    if pa.types.is_struct(dtype):
        fields = [dtype.field(i) for i in range(dtype.num_fields)]
        ids = [next_id() for _ in fields]
        return StructType(
            tuple(
                Column(field_id, f.name, from_arrow(f.type, next_id), f.nullable)
                for field_id, f in zip(ids, fields, strict=True)
            )
        )
    if pa.types.is_map(dtype):
        key_id, value_id = next_id(), next_id()
        key = from_arrow(dtype.key_type, next_id)
        value = from_arrow(dtype.item_field.type, next_id)
        return MapType(key_id, key, value_id, value, dtype.item_field.nullable)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        element_id = next_id()
        element = from_arrow(dtype.value_field.type, next_id)
        return ListType(element_id, element, dtype.value_field.nullable)
    raise SchemaError(
        f"Arrow type {dtype} has no icetide type",
        hint="icetide reads Arrow booleans, integers, floats, strings, binaries, date32, "
        "timestamps, decimals, structs, lists and maps",
    )


# --- icetide → Spark's JSON form of a type (StructType.fromJson) -------------------------------

_SPARK_JSON_NAMES = {
    "BOOLEAN": "boolean",
    "INT": "integer",
    "BIGINT": "long",
    "FLOAT": "float",
    "DOUBLE": "double",
    "STRING": "string",
    "BINARY": "binary",
    "DATE": "date",
    "TIMESTAMP_NTZ": "timestamp_ntz",
    "TIMESTAMP": "timestamp",
}


def spark_json_type(ctype: IcetideType) -> Any:
    """The type in Spark's JSON form, which ``pyspark.sql.types`` reads without a JVM
    (``StructType.fromJson``); generated code builds its ``StructType`` from it.

    >>> spark_json_type(DecimalType(12, 2)), spark_json_type(LongType())
    ('decimal(12,2)', 'long')
    """
    return visit(ctype, _JSON)


def spark_json_struct(columns: tuple[Column, ...]) -> dict[str, Any]:
    """A ``struct`` of ``columns`` in Spark's JSON form, docs as field comments."""
    struct: dict[str, Any] = visit(StructType(columns), _JSON)
    return struct


class _SparkJson(SchemaVisitor[Any]):
    """A type in Spark's JSON form from its parts'."""

    def schema(self, schema: TableSchema, struct_result: Any) -> Any:
        return struct_result

    def struct(self, struct: StructType, field_results: Sequence[Any]) -> Any:
        return {"type": "struct", "fields": list(field_results)}

    def field(self, field: Column, field_result: Any) -> Any:
        return {
            "name": field.name,
            "type": field_result,
            "nullable": field.nullable,
            "metadata": {"comment": field.doc} if field.doc else {},
        }

    def list(self, list_type: ListType, element_result: Any) -> Any:
        return {
            "type": "array",
            "elementType": element_result,
            "containsNull": list_type.element_nullable,
        }

    def map(self, map_type: MapType, key_result: Any, value_result: Any) -> Any:
        return {
            "type": "map",
            "keyType": key_result,
            "valueType": value_result,
            "valueContainsNull": map_type.value_nullable,
        }

    def primitive(self, primitive: IcetideType) -> Any:
        if isinstance(primitive, DecimalType):
            return f"decimal({primitive.precision},{primitive.scale})"
        return _SPARK_JSON_NAMES[sql_type(primitive)]


_JSON: SchemaVisitor[Any] = _SparkJson()
