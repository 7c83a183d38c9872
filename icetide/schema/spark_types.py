"""Column types to Spark SQL types and Arrow types, in one place each."""

from __future__ import annotations

from datetime import time
from typing import Any

import pyarrow as pa

from icetide.schema.model import Column, ColumnType
from icetide.schema.quoting import quote

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


def sql_type(ctype: ColumnType) -> str:
    """The Spark SQL type name of a column type.

    >>> sql_type(ColumnType("decimal", 12, 2))
    'DECIMAL(12,2)'
    """
    if ctype.name == "decimal":
        return f"DECIMAL({ctype.precision},{ctype.scale})"
    return _SQL[ctype.name]


def arrow_type(ctype: ColumnType) -> pa.DataType:
    """The Arrow type Spark expects for a column type in ``mapInArrow`` output."""
    if ctype.name == "decimal":
        return pa.decimal128(ctype.precision, ctype.scale)
    return _ARROW[ctype.name]


def arrow_value(value: Any, ctype: ColumnType) -> Any:
    """A decoded Python value in the form Arrow takes for :func:`arrow_type`."""
    if value is not None and ctype.name == "time" and isinstance(value, time):
        return value.isoformat()
    return value


def struct_sql(columns: tuple[Column, ...]) -> str:
    """A Spark SQL ``STRUCT<...>`` of the given columns; every name quoted, so a name
    with a backtick stays one field.

    >>> print(struct_sql((Column(1, "a` INT, b", ColumnType("long")),)))
    STRUCT<`a`` INT, b`: BIGINT>
    """
    fields = ", ".join(f"{quote(c.name)}: {sql_type(c.type)}" for c in columns)
    return f"STRUCT<{fields}>"


def arrow_struct(columns: tuple[Column, ...]) -> pa.StructType:
    """The Arrow struct type of the given columns."""
    return pa.struct([pa.field(c.name, arrow_type(c.type)) for c in columns])
