"""Iceberg v3 ``initial-default``: a column added with a constant default, read by every
older row without rewriting it.

Spark 3.5's SQL has no syntax for a column default on an Iceberg table, so the column is
added through Iceberg's Java API (``UpdateSchema.addColumn(name, type, doc, Literal)``,
which sets both the initial and the write default), over py4j. Only a format-v3 table
may carry one (``tables[i].format_version: 3``); Spark 3.5 with Iceberg 1.10 reads it
through both the vectorized and the row-based Parquet readers (checked by
tests/integration/evolution/test_converge_mariadb.py).

Types a literal is built for here: boolean, int, long, float, double, decimal and
string. Any other column (a date or timestamp, binary, nested) is added by ALTER and its
old rows filled by a rewrite, as on a v2 table (:mod:`icetide.merge.converge`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from icetide.lake.tables import iceberg_table
from icetide.schema.contract.names import TableName
from icetide.spark.jvm import jvm_class

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.schema.types import Column, IcetideType

ICEBERG_TYPES = {
    "boolean": "boolean",
    "int": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "decimal": None,  # decimal(p,s): from the type's own text
    "string": "string",
}
"""icetide type → Iceberg primitive type name, for the types a default literal is built for."""


def _type_text(ctype: IcetideType) -> str | None:
    name = ctype.name
    if name not in ICEBERG_TYPES:
        return None
    return ICEBERG_TYPES[name] or str(ctype)


def initial_default_supported(column: Column) -> bool:
    """Whether ``column``'s constant default can be an Iceberg initial-default here."""
    default = column.default
    return (
        default is not None
        and default.constant
        and default.value is not None
        and _type_text(column.type) is not None
    )


def default_literal(value: Any, ctype: IcetideType) -> Any:
    """The Iceberg ``Literal`` of ``value`` for a column of ``ctype`` (a py4j proxy);
    None when the type is not one a default literal is built for here, or the value does
    not fit it (the column is then added without, and its old rows filled)."""
    text = _type_text(ctype)
    if text is None or value is None:
        return None
    iceberg_type = jvm_class("org.apache.iceberg.types.Types").fromPrimitiveString(text)
    literals = jvm_class("org.apache.iceberg.expressions.Literal")
    if isinstance(value, bool):
        literal = literals.of(value)
    elif isinstance(value, int):
        literal = literals.of(jvm_class("java.lang.Long").valueOf(str(value)))
    elif isinstance(value, float):
        literal = literals.of(jvm_class("java.lang.Double").valueOf(repr(value)))
    elif isinstance(value, Decimal):
        literal = literals.of(jvm_class("java.math.BigDecimal")(str(value)))
    else:
        literal = literals.of(str(value))
    return literal.to(iceberg_type)  # None when the value does not fit the type


def add_with_initial_default(
    spark: SparkSession, table: TableName, column: Column, after: str | None
) -> bool:
    """Add ``column`` to the v3 ``table`` with its constant default as initial-default and
    write-default, placed after ``after`` (first when None) if that column exists; True
    when added, False when the column exists already (a re-run) or its default cannot be
    a literal of its type (the caller adds it by ALTER then)."""
    handle = iceberg_table(spark, table)
    if handle.schema().findField(column.name) is not None:
        return False
    text = _type_text(column.type)
    if text is None or column.default is None:
        return False
    iceberg_type = jvm_class("org.apache.iceberg.types.Types").fromPrimitiveString(text)
    literal = default_literal(column.default.value, column.type)
    if literal is None:
        return False
    update = handle.updateSchema().addColumn(column.name, iceberg_type, column.doc, literal)
    if after is None:
        update = update.moveFirst(column.name)
    elif handle.schema().findField(after) is not None:
        update = update.moveAfter(column.name, after)
    update.commit()
    return True


def initial_default_columns(spark: SparkSession, table: TableName) -> set[str]:
    """The top-level columns of ``table`` that carry an initial-default."""
    schema = iceberg_table(spark, table).schema()
    return {str(field.name()) for field in schema.columns() if field.initialDefault() is not None}
