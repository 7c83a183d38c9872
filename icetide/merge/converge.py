"""Phase 3, data convergence: fill the base columns the running code could not.

Two kinds of values reach the mirror late after a column is added at the source:

* **rescued values**: events written while the ledger did not project the column yet
  kept its value in ``_rescued``; the merge applied those events with the column empty.
  For each key, the rescued event whose position *is* the base row's position (the event
  that produced the row as it stands) gives the value: a MERGE joined on key and
  position, so a row changed since by a newer event is never overwritten with an older
  value, and running it twice writes the same values again;
* **defaults**: ``ADD COLUMN … DEFAULT x`` gives every existing source row ``x`` with no
  event. A base row whose position is older than the change was never touched since, so
  it holds the default at the source: ``UPDATE … WHERE position < change position``.

It runs in the merge process, once the ledger projects the new version (so every ledger
row still needing a fill is in the snapshot read) and after the merge applied them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import functions as F

from icetide.events.project import coerce_value
from icetide.events.rescue import rescued_fields
from icetide.lake.commit import with_commit_properties
from icetide.merge.backfill import backfill_from_source
from icetide.schema.connector import read_hints
from icetide.schema.contract import base as b
from icetide.schema.contract import ledger as c
from icetide.schema.contract import phases as p
from icetide.schema.contract.builder import TableContract, value_slot
from icetide.schema.convert.spark import arrow_type, arrow_value, sql_type
from icetide.schema.model import TableSchema
from icetide.schema.quoting import literal, quote
from icetide.schema.types import Column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from icetide.pipeline import Pipeline


def _fill_values(
    schema: TableSchema, columns: list[Column], hints: Mapping[int, str]
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow``: ledger rows with ``_rescued`` → key, position, one slot per column."""
    keys = schema.key_columns
    fields = [pa.field(k.name, arrow_type(k.type)) for k in keys]
    fields.append(pa.field(c.POSITION, pa.decimal128(38, 0)))
    fields += [
        pa.field(value_slot(col.id), pa.struct([pa.field("v", arrow_type(col.type))]))
        for col in columns
    ]
    out_schema = pa.schema(fields)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = []
            for row in batch.to_pylist():
                found = rescued_fields(row[c.RESCUED], "after")
                out: dict[str, Any] = {k.name: row[k.name] for k in keys}
                out[c.POSITION] = row[c.POSITION]
                for col in columns:
                    if col.name in found:
                        try:
                            value = coerce_value(
                                found[col.name], col, schema.table, hints.get(col.id)
                            )
                        except Exception:  # a value that does not fit stays unfilled
                            continue
                        out[value_slot(col.id)] = {"v": arrow_value(value, col.type)}
                rows.append(out)
            yield pa.RecordBatch.from_pylist(rows, schema=out_schema)

    return run


def rescued_values(
    ledger: DataFrame, pipeline: Pipeline, table: str, schema: TableSchema, columns: list[Column]
) -> DataFrame:
    """The ``columns``' values ``ledger``'s events kept in ``_rescued`` (written while the
    ledger did not project them yet): key, position, one slot per column (NULL: not in
    that event). ``ledger`` has ``_rescued``."""
    keys = [k.name for k in schema.key_columns]
    rescued = (
        ledger.where(
            F.col(c.RESCUED).isNotNull()
            & (F.coalesce(F.col(c.SCHEMA_VERSION), F.lit(0)) < schema.version)
            & (F.col(c.OP) != "d")
        )
        .select(*[quote(k) for k in keys], c.POSITION, c.RESCUED)
        .dropDuplicates([*keys, c.POSITION])
    )
    slots = ", ".join(f"{value_slot(col.id)} STRUCT<v: {sql_type(col.type)}>" for col in columns)
    key_sql = ", ".join(f"{quote(k.name)} {sql_type(k.type)}" for k in schema.key_columns)
    return rescued.mapInArrow(
        _fill_values(schema, columns, read_hints(schema, pipeline.config.connector(table))),
        f"{key_sql}, {c.POSITION} {c.POSITION_SQL}, {slots}",
    )


def new_columns(schema: TableSchema, since: TableSchema) -> list[Column]:
    """The value columns of ``schema`` whose values ``since``'s code could not project:
    the added ones, and the renamed ones (an ambiguous rename approved later: while it
    was held, events carried the new name, so its values went to ``_rescued``)."""
    known = since.field_ids()
    return [
        col
        for col in schema.value_columns
        if col.id not in known or since.find(col.id).name != col.name
    ]


def fill_rescued(
    spark: SparkSession,
    pipeline: Pipeline,
    table: str,
    run: TableContract,
    since: TableSchema,
    end: int,
) -> int:
    """Fill the columns ``run`` has and ``since`` had not (:func:`new_columns`) from
    ``_rescued`` values of the ledger up to snapshot ``end``; the number of rescued
    events considered."""
    refs = pipeline.refs(table)
    schema = run.schema
    columns = new_columns(run.schema, since)
    if not columns:
        return 0
    keys = [k.name for k in schema.key_columns]
    ledger = spark.read.format("iceberg").option("snapshot-id", end).load(refs.cdc.dotted)
    if c.RESCUED not in ledger.columns:
        return 0
    values = rescued_values(ledger, pipeline, table, schema, columns).persist()
    try:
        count = values.count()
        if count == 0:
            return 0
        view = f"icetide_fill_{table}"
        values.createOrReplaceTempView(view)
        on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
        sets = ", ".join(
            f"{quote(col.name)} = CASE WHEN s.{value_slot(col.id)} IS NULL "
            f"THEN t.{quote(col.name)} ELSE s.{value_slot(col.id)}.v END"
            for col in columns
        )
        statement = (
            f"MERGE INTO {refs.base} t USING {quote(view)} s "
            f"ON {on} AND t.{b.POSITION} = s.{c.POSITION}\n"
            f"WHEN MATCHED THEN UPDATE SET {sets}"
        )
        with_commit_properties(
            spark,
            {p.FILLED_PROPERTY: str(count), p.DATA_VERSION: str(schema.version)},
            lambda: spark.sql(statement),
        )
        spark.catalog.dropTempView(view)
        return count
    finally:
        values.unpersist()


def column_defaults(schema: TableSchema) -> dict[int, str]:
    """Column id → Spark SQL literal of each value column's constant source default."""
    found = {}
    for col in schema.value_columns:
        default = col.default
        if default is None or not default.constant or default.value is None:
            continue
        value = default.value
        if isinstance(value, bytes):
            found[col.id] = f"X'{value.hex()}'"
        else:
            text = value.isoformat() if hasattr(value, "isoformat") else str(value)
            found[col.id] = f"CAST({literal(text)} AS {sql_type(col.type)})"
    return found


def fill_defaults(
    spark: SparkSession,
    pipeline: Pipeline,
    table: str,
    run: TableContract,
    since: TableSchema,
    change_position: int | None,
    defaults: dict[int, str],
) -> int:
    """Set added columns with a source default (``defaults``: column id → Spark SQL
    literal) on the base rows older than the change, and read those only the source
    knows (a computed default) back from it by key
    (:func:`~icetide.merge.backfill.backfill_from_source`); the number of columns
    filled."""
    if change_position is None:
        return 0
    computed = backfill_from_source(spark, pipeline, table, run, since, change_position)
    refs = pipeline.refs(table)
    known = since.field_ids()
    columns = [
        col for col in run.schema.value_columns if col.id not in known and col.id in defaults
    ]
    for col in columns:
        spark.sql(
            f"UPDATE {refs.base} SET {quote(col.name)} = {defaults[col.id]} "
            f"WHERE {quote(col.name)} IS NULL AND {b.POSITION} < "
            f"CAST({literal(str(change_position))} AS {c.POSITION_SQL})"
        )
    return len(columns) + computed
