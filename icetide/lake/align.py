"""Fit a frame to the table it is appended to: fields the table keeps but the schema no
longer has (soft-deleted columns, kept in the ledger's row images) are written as NULL.

Spark's by-name write refuses a struct that lacks one of the table's nested fields, so
after a soft delete every ledger append would fail; :func:`align_to` fills them, at any
depth, and keeps each struct NULL where it was NULL. :func:`fit_array` is the same rule
for Arrow data written as the table's Parquet files without Spark's writer.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
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


def fit_array(array: pa.Array, want: pa.DataType) -> pa.Array:
    """``array`` as Arrow type ``want`` (the table's, field ids and all) by the rule of
    :func:`fit`: a struct field by field at any depth (in lists and maps too), the fields
    it lacks NULL and each struct NULL where it was, a differing primitive cast.

    >>> have = pa.array([{"a": 1}, None], pa.struct([("a", pa.int32())]))
    >>> fit_array(have, pa.struct([("a", pa.int64()), ("b", pa.string())])).to_pylist()
    [{'a': 1, 'b': None}, None]
    >>> lists = pa.array([[{"a": 1}], None, []], pa.list_(have.type))
    >>> fit_array(lists, pa.large_list(pa.struct([("a", pa.int64())]))).to_pylist()
    [[{'a': 1}], None, []]
    """
    if array.type.equals(want, check_metadata=True):
        return array
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(want) and pa.types.is_struct(array.type):
        present = {array.type.field(i).name for i in range(array.type.num_fields)}
        children = [
            fit_array(pc.struct_field(array, f.name), f.type)
            if f.name in present
            else pa.nulls(len(array), f.type)
            for f in want
        ]
        return pa.StructArray.from_arrays(children, fields=list(want), mask=mask)
    if _is_list(want) and _is_list(array.type):
        values = fit_array(array.values, want.value_type)
        large = pa.types.is_large_list(want)
        offsets = array.offsets.cast(pa.int64() if large else pa.int32())
        made = pa.LargeListArray if large else pa.ListArray
        return made.from_arrays(offsets, values, type=want, mask=mask)
    if pa.types.is_map(want) and pa.types.is_map(array.type):
        keys = fit_array(array.keys, want.key_type)
        items = fit_array(array.items, want.item_type)
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=want, mask=mask)
    return array.cast(want)


def _is_list(kind: pa.DataType) -> bool:
    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind))
