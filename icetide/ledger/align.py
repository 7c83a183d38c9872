"""Fit a frame to the table it is appended to: fields the table keeps but the schema no
longer has (soft-deleted columns, kept in the ledger's row images) are written as NULL.

Spark's by-name write refuses a struct that lacks one of the table's nested fields, so
after a soft delete every ledger append would fail; :func:`align_to` fills them, at any
depth, and keeps each struct NULL where it was NULL.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from icetide.spark.sql import quote


def _fit(column: Column, have: DataType, want: DataType) -> Column:
    if not isinstance(want, StructType) or not isinstance(have, StructType) or have == want:
        return column
    present = {f.name: f for f in have.fields}
    parts = []
    for field in want.fields:
        if field.name in present:
            child = column.getField(field.name)
            parts.append(
                _fit(child, present[field.name].dataType, field.dataType).alias(field.name)
            )
        else:
            parts.append(F.lit(None).cast(field.dataType).alias(field.name))
    return F.when(column.isNull(), F.lit(None)).otherwise(F.struct(*parts))


def align_to(frame: DataFrame, target: StructType) -> DataFrame:
    """``frame`` with the table's missing nested (and top-level) fields added as NULL."""
    have = {f.name: f for f in frame.schema.fields}
    if all(f.name in have and have[f.name].dataType == f.dataType for f in target.fields):
        return frame
    columns = []
    for field in target.fields:
        if field.name in have:
            source = F.col(quote(field.name))
            columns.append(
                _fit(source, have[field.name].dataType, field.dataType).alias(field.name)
            )
        else:
            columns.append(F.lit(None).cast(field.dataType).alias(field.name))
    return frame.select(*columns)
