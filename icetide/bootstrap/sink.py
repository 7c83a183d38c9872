"""Rows read from the source table, in the sink's form.

A table's sink config (``sink.columns``: Iceberg names, type overrides, conversions)
shapes every row the ledger writes (:func:`icetide.ledger.decode.to_sink`). Rows read
from the source directly, by a bootstrap chunk or by ``verify``, get the same treatment
here, through the same per-column code (:func:`icetide.events.sink_values.convert_values`),
so a copied row, a captured row and a verified row agree.

A value the sink cannot convert leaves its column null and its row marked with
:data:`CONVERSION_ERROR` (and the row's source values as JSON in :data:`SOURCE_ROW`);
the bootstrap dead-letters such rows, ``verify`` keeps them (the base lacks them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame

from icetide.events.sink_values import convert_values
from icetide.schema.contract.builder import TableContract
from icetide.schema.convert.spark import sql_type
from icetide.schema.quoting import quote

CONVERSION_ERROR = "_icetide_conversion_error"
"""Why the row's value could not be converted (null: every value was)."""
SOURCE_ROW = "_icetide_source_row"
"""The row's source values as JSON, set only on a row that could not be converted."""


def sink_frame(frame: DataFrame, contract: TableContract, keep: Sequence[str] = ()) -> DataFrame:
    """``frame`` (the schema's columns under their source names and types, plus the
    columns ``keep`` passed through) as the contract's target columns, then ``keep``,
    :data:`CONVERSION_ERROR` and :data:`SOURCE_ROW`."""
    schema, target = contract.schema, contract.target
    sink = schema.sink
    pairs = list(zip(schema.columns, target.columns, strict=True))
    kept = [(name, frame.schema[name].dataType.simpleString()) for name in keep]
    shape = ", ".join(
        [
            *(f"{quote(stored.name)} {sql_type(stored.type)}" for _, stored in pairs),
            *(f"{quote(name)} {kind}" for name, kind in kept),
            f"{CONVERSION_ERROR} STRING",
            f"{SOURCE_ROW} STRING",
        ]
    )

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            failed: dict[int, str] = {}
            arrays = []
            for src, stored in pairs:
                converted = convert_values(
                    batch.column(src.name), src.type, sink.conversions.get(src.id), stored.type
                )
                for row, why in converted.failed.items():
                    failed.setdefault(row, f"column {src.name} of table {schema.table}: {why}")
                arrays.append(converted.array)
            arrays += [batch.column(name) for name, _ in kept]
            rows = range(batch.num_rows)
            arrays.append(pa.array([failed.get(i) for i in rows], pa.string()))
            arrays.append(
                pa.array(
                    [
                        json.dumps(batch.slice(i, 1).to_pylist()[0], default=str)
                        if i in failed
                        else None
                        for i in rows
                    ],
                    pa.string(),
                )
            )
            names = [stored.name for _, stored in pairs] + [n for n, _ in kept]
            yield pa.RecordBatch.from_arrays(arrays, names=[*names, CONVERSION_ERROR, SOURCE_ROW])

    source_names = [quote(src.name) for src, _ in pairs] + [quote(n) for n in keep]
    return frame.select(*source_names).mapInArrow(run, shape)
