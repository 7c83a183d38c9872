"""Fit a frame to the table it is appended to: fields the table keeps but the schema no
longer has (soft-deleted columns, kept in the ledger's row images) are written as NULL.

Spark's by-name write refuses a struct that lacks one of the table's nested fields, so
after a soft delete every ledger append would fail; :func:`align_to` fills them, at any
depth, and keeps each struct NULL where it was NULL.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from icetide.schema.quoting import quote


def fit(column: Column, have: DataType, want: DataType) -> Column:
    """``column`` (of type ``have``) as ``want``: a struct field by field, at any depth,
    the fields it lacks NULL (a struct stays NULL where it was), a differing primitive
    cast (a widened field). Spark's ``cast`` refuses structs of other shapes, so an older
    snapshot's row images are read into a newer layout this way."""
    if have == want:
        return column
    if isinstance(want, StructType) and isinstance(have, StructType):
        present = {f.name: f for f in have.fields}
        parts = []
        for field in want.fields:
            if field.name in present:
                child = column.getField(field.name)
                parts.append(
                    fit(child, present[field.name].dataType, field.dataType).alias(field.name)
                )
            else:
                parts.append(F.lit(None).cast(field.dataType).alias(field.name))
        return F.when(column.isNull(), F.lit(None)).otherwise(F.struct(*parts))
    if isinstance(want, _NESTED) or isinstance(have, _NESTED):
        return column  # collections: left to the write's own by-name resolution
    return column.cast(want)


_NESTED = (StructType, ArrayType, MapType)


def align_to(frame: DataFrame, target: StructType) -> DataFrame:
    """``frame`` with the table's missing nested (and top-level) fields added as NULL."""
    have = {f.name: f for f in frame.schema.fields}
    if all(f.name in have and have[f.name].dataType == f.dataType for f in target.fields):
        return frame
    columns = []
    for field in target.fields:
        if field.name in have:
            source = F.col(quote(field.name))
            columns.append(fit(source, have[field.name].dataType, field.dataType).alias(field.name))
        else:
            columns.append(F.lit(None).cast(field.dataType).alias(field.name))
    return frame.select(*columns)
