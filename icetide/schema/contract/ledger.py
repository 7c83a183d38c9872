"""The ledger table contract: what the ledger writes and the merge reads.

One row per change event: the primary-key columns at top level (typed), then the
metadata columns below. Metadata names start with ``_`` so they cannot collide with the
primary-key columns of ordinary tables. ``_after`` and ``_before`` are structs of every
schema column. The dead-letter table's columns are here too: the ledger writes most of
its rows.
"""

from __future__ import annotations

SUFFIX = "_cdc"
"""A ledger table's name: its base table's name and this (``orders`` → ``orders_cdc``); no
configured table may end with it."""

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
SCHEMA_VERSION = "_schema_version"
"""The version of the table's schema whose columns a ledger row's values were projected
onto (the running code's version; columns it did not know yet are in ``_rescued``)."""
RESCUED = "_rescued"
"""JSON ``{"after": {...}, "before": {...}}`` of the event fields the running schema did
not know (like Spark's ``_rescued_data``), or null: no value is lost while code lags a
source schema change; data convergence fills the mirror from it."""
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
    SCHEMA_VERSION,
    RESCUED,
)
ADDED_LATER = {SCHEMA_VERSION: "INT", RESCUED: "STRING"}
"""Ledger columns a ledger made by an older release lacks, with their SQL types: the
stage adds them when it starts (``TableContract.ledger_upgrades``)."""
STAMPED = (INGESTED_AT, SCHEMA_VERSION)
"""The ledger columns stamped once per append, the same on every row of it: the ingestion
time (the projection step adds it, ledger/decode.py) and the schema version (the stage);
the decoder fills the others from each message."""
ROW_IMAGES = (AFTER, BEFORE)
"""The struct columns holding a full row image each."""
POSITION_SQL = "DECIMAL(38,0)"
BATCH_PROPERTY = "icetide.ledger.batch-id"
QUERY_PROPERTY = "icetide.ledger.query-id"
SCHEMA_VERSION_PROPERTY = "icetide.schema-version"
KIND_PROPERTY = "icetide.kind"
EXTRA_COLUMNS_PROPERTY = "icetide.ledger.extra-columns"
"""Snapshot property of a ledger append: JSON ``{column: events}`` of the event columns
the table's schema does not have (their values are in ``_rescued`` until it has them)."""

UNAVAILABLE_VALUE_LOST = "unavailable_value_lost"
"""Dead-letter reason written by the merge: a primary-key change left unchanged-TOAST
columns out and the old row, which held their values, is in neither the batch nor the
mirror (see :mod:`icetide.merge.inherit`). The change is not applied."""

DLT_INGESTED_AT = "ingested_at"
"""The dead-letter tables' ingestion time, which they are partitioned by (days)."""
DLT_COLUMNS_SQL = (
    "message_id STRING",
    "source_table STRING",
    "reason STRING NOT NULL",
    "error STRING",
    "payload_b64 STRING",
    f"{DLT_INGESTED_AT} TIMESTAMP NOT NULL",
)
