"""The ledger table contract: what the ledger writes and the merge reads.

One row per change event: the primary-key columns at top level (typed), then the
metadata columns below. Metadata names start with ``_`` so they cannot collide with the
primary-key columns of ordinary tables.
"""

from __future__ import annotations

from icetide.schema.convert.spark import sql_type, struct_sql
from icetide.schema.model import TableSchema
from icetide.spark.sql import quote

OP = "_op"
AFTER = "_after"
BEFORE = "_before"
UNAVAILABLE = "_unavailable"
POSITION = "_position"
POSITION_TEXT = "_position_text"
SOURCE_TS = "_source_ts"
TX_ID = "_tx_id"
MESSAGE_ID = "_message_id"
INGESTED_AT = "_ingested_at"
META_COLUMNS = (
    OP,
    AFTER,
    BEFORE,
    UNAVAILABLE,
    POSITION,
    POSITION_TEXT,
    SOURCE_TS,
    TX_ID,
    MESSAGE_ID,
    INGESTED_AT,
)
POSITION_SQL = "DECIMAL(38,0)"
BATCH_PROPERTY = "icetide.ledger.batch-id"
QUERY_PROPERTY = "icetide.ledger.query-id"


def ledger_columns_sql(schema: TableSchema) -> list[str]:
    """Column definitions of ``<table>_cdc`` for ``schema``."""
    keys = [f"{quote(c.name)} {sql_type(c.type)}" for c in schema.key_columns]
    row = struct_sql(schema.columns)
    return keys + [
        f"{OP} STRING",
        f"{AFTER} {row}",
        f"{BEFORE} {row}",
        f"{UNAVAILABLE} ARRAY<STRING>",
        f"{POSITION} {POSITION_SQL}",
        f"{POSITION_TEXT} STRING",
        f"{SOURCE_TS} TIMESTAMP",
        f"{TX_ID} STRING",
        f"{MESSAGE_ID} STRING",
        f"{INGESTED_AT} TIMESTAMP",
    ]


def ledger_ddl(table: str, schema: TableSchema) -> str:
    """``CREATE TABLE`` for the ledger: append-only, partitioned by ingestion day."""
    columns = ",\n  ".join(ledger_columns_sql(schema))
    return (
        f"CREATE TABLE IF NOT EXISTS {table} (\n  {columns}\n) USING iceberg "
        f"PARTITIONED BY (days({INGESTED_AT})) "
        "TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none', "
        f"'icetide.kind'='ledger', 'icetide.schema-version'='{schema.version}')"
    )


UNAVAILABLE_VALUE_LOST = "unavailable_value_lost"
"""Dead-letter reason written by the merge: a primary-key change left unchanged-TOAST
columns out and the old row, which held their values, is in neither the batch nor the
mirror (see :mod:`icetide.merge.inherit`). The change is not applied."""

DLT_COLUMNS_SQL = [
    "message_id STRING",
    "source_table STRING",
    "reason STRING NOT NULL",
    "error STRING",
    "payload_b64 STRING",
    "ingested_at TIMESTAMP NOT NULL",
]


def dlt_ddl(table: str) -> str:
    """``CREATE TABLE`` for a dead-letter table."""
    columns = ",\n  ".join(DLT_COLUMNS_SQL)
    return (
        f"CREATE TABLE IF NOT EXISTS {table} (\n  {columns}\n) USING iceberg "
        "PARTITIONED BY (days(ingested_at)) "
        "TBLPROPERTIES ('format-version'='2', 'icetide.kind'='dead-letter')"
    )
