"""Column types to Spark SQL types and Arrow types, in one place each."""

from __future__ import annotations

from datetime import time
from typing import Any

import pyarrow as pa

from icetide.schema.model import Column
from icetide.schema.quoting import quote
from icetide.schema.types import (
    DecimalType,
    EnumType,
    IcetideType,
    ListType,
    MapType,
    StructType,
)

_SQL = {
    "boolean": "BOOLEAN",
    "int": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "string": "STRING",
    "binary": "BINARY",
    "date": "DATE",
    # Spark 3.5 has no time-of-day type: ISO text (HH:MM:SS.ffffff) sorts correctly.
    "time": "STRING",
    "timestamp": "TIMESTAMP_NTZ",
    "timestamptz": "TIMESTAMP",
    "uuid": "STRING",
    "json": "STRING",
}
_ARROW: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "time": pa.string(),
    "timestamp": pa.timestamp("us"),
    "timestamptz": pa.timestamp("us", tz="UTC"),
    "uuid": pa.string(),
    "json": pa.string(),
}


def sql_type(ctype: IcetideType) -> str:
    """The Spark SQL type name of a column type.

    >>> sql_type(DecimalType(12, 2))
    'DECIMAL(12,2)'
    """
    if isinstance(ctype, DecimalType):
        return f"DECIMAL({ctype.precision},{ctype.scale})"
    if isinstance(ctype, StructType):
        return struct_sql(ctype.fields)
    if isinstance(ctype, ListType):
        return f"ARRAY<{sql_type(ctype.element)}>"
    if isinstance(ctype, MapType):
        return f"MAP<{sql_type(ctype.key)}, {sql_type(ctype.value)}>"
    if isinstance(ctype, EnumType):
        return "STRING"
    return _SQL[ctype.name]


def arrow_type(ctype: IcetideType) -> pa.DataType:
    """The Arrow type Spark expects for a column type in ``mapInArrow`` output."""
    if isinstance(ctype, DecimalType):
        return pa.decimal128(ctype.precision, ctype.scale)
    if isinstance(ctype, StructType):
        return arrow_struct(ctype.fields)
    if isinstance(ctype, ListType):
        return pa.list_(pa.field("element", arrow_type(ctype.element), ctype.element_nullable))
    if isinstance(ctype, MapType):
        return pa.map_(
            arrow_type(ctype.key), pa.field("value", arrow_type(ctype.value), ctype.value_nullable)
        )
    if isinstance(ctype, EnumType):
        return pa.string()
    return _ARROW[ctype.name]


def arrow_value(value: Any, ctype: IcetideType) -> Any:
    """A decoded Python value in the form Arrow takes for :func:`arrow_type`."""
    if value is not None and ctype.name == "time" and isinstance(value, time):
        return value.isoformat()
    return value


def struct_sql(columns: tuple[Column, ...]) -> str:
    """A Spark SQL ``STRUCT<...>`` of the given columns; every name quoted, so a name
    with a backtick stays one field.

    >>> from icetide.schema.types import LongType
    >>> print(struct_sql((Column(1, "a` INT, b", LongType()),)))
    STRUCT<`a`` INT, b`: BIGINT>
    """
    fields = ", ".join(f"{quote(c.name)}: {sql_type(c.type)}" for c in columns)
    return f"STRUCT<{fields}>"


def arrow_struct(columns: tuple[Column, ...]) -> pa.StructType:
    """The Arrow struct type of the given columns."""
    return pa.struct([pa.field(c.name, arrow_type(c.type)) for c in columns])
