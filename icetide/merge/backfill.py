"""Phase 3 for a column whose old rows only the source knows: a keyed backfill.

``ADD COLUMN u CHAR(36) DEFAULT (uuid())``, ``… DEFAULT CURRENT_TIMESTAMP`` or a MySQL
``NOT NULL`` column with no default give every existing source row a value no change
event carries and no constant describes (each row may hold its own). So the base rows
older than the change are read back from the source by primary key, in chunks of keys,
and merged in with a guard: only a row still older than the change and still empty in
that column is written, so a row an event changed since (the event carries the whole
row) is never overwritten. Reading the source *now* can see a value newer than the base
row's other columns; the event that changed it is on its way and replaces the row.

Iceberg v3 ``initial-default`` would cover a constant default with no rewrite; the base
tables are format v2 and Spark 3.5's SQL cannot set it, so constants are written by
:func:`icetide.merge.converge.fill_defaults` and computed values here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from icetide.schema.contract import base as b
from icetide.schema.contract import ledger as c
from icetide.schema.contract.builder import TableContract
from icetide.schema.convert.spark import sql_type
from icetide.schema.model import TableSchema
from icetide.schema.quoting import literal, quote
from icetide.schema.types import Column
from icetide.sources.connect import connect_mysql, connect_postgres
from icetide.sources.quoting import mysql_qualified, mysql_quote, postgres_qualified, postgres_quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.config.sections import SourceConfig
    from icetide.pipeline import Pipeline

KEYS_PER_QUERY = 1_000


def source_valued_columns(schema: TableSchema, since: TableSchema) -> list[Column]:
    """The value columns added after ``since`` whose old source rows hold values only the
    source knows: a computed default, or required with no default (MySQL's implicit).
    A column the sink converts or retypes is left out (its values would need the
    conversion too)."""
    known = since.field_ids()
    converted = set(schema.sink.conversions) | set(schema.sink.types)
    return [
        col
        for col in schema.value_columns
        if col.id not in known
        and col.id not in converted
        and (
            (col.default is not None and not col.default.constant)
            or (col.default is None and not col.nullable)
        )
    ]


def _chunks(items: Sequence[tuple[Any, ...]], size: int) -> Iterator[Sequence[tuple[Any, ...]]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def read_by_key(
    source: SourceConfig,
    source_table: str,
    keys: Sequence[str],
    columns: Sequence[str],
    wanted: Sequence[tuple[Any, ...]],
) -> list[tuple[Any, ...]]:
    """``keys`` + ``columns`` of the source rows whose key is in ``wanted`` (those still
    there), read :data:`KEYS_PER_QUERY` keys per query."""
    if source.type == "mysql":
        conn = connect_mysql(source, autocommit=True)
        name, quoted = mysql_qualified(*source_table.split(".")), mysql_quote
    else:
        conn = connect_postgres(source)
        name, quoted = postgres_qualified(*source_table.split(".")), postgres_quote
    selected = ", ".join(quoted(n) for n in [*keys, *columns])
    key_list = ", ".join(quoted(k) for k in keys)
    found: list[tuple[Any, ...]] = []
    try:
        with conn.cursor() as cur:
            for chunk in _chunks(wanted, KEYS_PER_QUERY):
                row = "(" + ", ".join(["%s"] * len(keys)) + ")"
                cur.execute(
                    f"SELECT {selected} FROM {name} WHERE ({key_list}) IN "
                    f"({', '.join([row] * len(chunk))})",
                    [v for key in chunk for v in key],
                )
                found += [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()
    return found


def backfill_from_source(
    spark: SparkSession,
    pipeline: Pipeline,
    table: str,
    run: TableContract,
    since: TableSchema,
    change_position: int,
) -> int:
    """Fill the :func:`source_valued_columns` of the base rows older than the change from
    the source, by key; the number of columns filled (0: none to fill, or no source)."""
    columns = source_valued_columns(run.schema, since)
    source = pipeline.config.source_of(table)
    if not columns or source is None or source.type not in ("mysql", "postgres"):
        return 0
    refs = pipeline.refs(table)
    target = run.target
    keys = [target.find(k.id).name for k in run.schema.key_columns]
    stored = [target.find(col.id).name for col in columns]
    older = f"{b.POSITION} < CAST({literal(str(change_position))} AS {c.POSITION_SQL})"
    empty = " OR ".join(f"{quote(n)} IS NULL" for n in stored)
    wanted = [
        tuple(r)
        for r in spark.sql(
            f"SELECT {', '.join(quote(k) for k in keys)} FROM {refs.base} "
            f"WHERE {older} AND ({empty})"
        ).collect()
    ]
    if not wanted:
        return len(columns)
    source_keys = [k.name for k in run.schema.key_columns]
    rows = read_by_key(
        source,
        str(pipeline.config.table(table).source),
        source_keys,
        [col.name for col in columns],
        wanted,
    )
    if rows:
        shape = ", ".join(
            f"{quote(name)} {sql_type(col.type)}"
            for name, col in zip(
                [*keys, *stored],
                [*(target.find(k.id) for k in run.schema.key_columns), *columns],
                strict=True,
            )
        )
        view = f"icetide_backfill_{table}"
        spark.createDataFrame(rows, shape).createOrReplaceTempView(view)
        on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
        sets = ", ".join(f"{quote(n)} = coalesce(t.{quote(n)}, s.{quote(n)})" for n in stored)
        spark.sql(
            f"MERGE INTO {refs.base} t USING {quote(view)} s ON {on} AND t.{older}\n"
            f"WHEN MATCHED THEN UPDATE SET {sets}"
        )
        spark.catalog.dropTempView(view)
    return len(columns)
