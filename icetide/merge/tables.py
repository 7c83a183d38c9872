"""The base table contract: the mirror's columns, layout and Iceberg properties."""

from __future__ import annotations

from typing import Literal

from icetide.schema.convert.spark import sql_type
from icetide.schema.model import TableSchema
from icetide.spark.sql import quote

POSITION = "_icetide_position"
SOURCE_TS = "_icetide_source_ts"
WATERMARK_PROPERTY = "icetide.merge.ledger-snapshot-id"
EVENTS_PROPERTY = "icetide.merge.events"
BOOTSTRAP_STATE = "icetide.bootstrap.state"
"""``running`` while a bootstrap fills the base (the merge waits), then ``done``."""
BOOTSTRAP_ID = "icetide.bootstrap.id"
BOOTSTRAP_CHUNK = "icetide.bootstrap.chunk"
Mode = Literal["merge-on-read", "copy-on-write"]


def base_ddl(table: str, schema: TableSchema, buckets: int, mode: Mode) -> str:
    """``CREATE TABLE`` for the mirror: ``bucket(N, pk)``, format v2, hash distribution.

    Non-key columns are nullable whatever the source says: a mirror must accept every
    row the source had, and required→optional is a safe evolution anyway.
    """
    keys = {c.name for c in schema.key_columns}
    columns = [
        f"{quote(c.name)} {sql_type(c.type)}" + (" NOT NULL" if c.name in keys else "")
        for c in schema.columns
    ]
    columns += [f"{POSITION} DECIMAL(38,0)", f"{SOURCE_TS} TIMESTAMP"]
    bucket_column = quote(schema.primary_key[0])
    body = ",\n  ".join(columns)
    return (
        f"CREATE TABLE IF NOT EXISTS {table} (\n  {body}\n) USING iceberg "
        f"PARTITIONED BY (bucket({buckets}, {bucket_column})) TBLPROPERTIES ("
        "'format-version'='2', "
        f"'write.delete.mode'='{mode}', 'write.update.mode'='{mode}', "
        f"'write.merge.mode'='{mode}', "
        "'write.distribution-mode'='hash', 'icetide.kind'='base', "
        f"'icetide.schema-version'='{schema.version}')"
    )


def identifier_fields_sql(table: str, schema: TableSchema) -> str:
    """Mark the primary key as Iceberg identifier fields (readers and Flink use them)."""
    return f"ALTER TABLE {table} SET IDENTIFIER FIELDS " + ", ".join(
        quote(k) for k in schema.primary_key
    )
