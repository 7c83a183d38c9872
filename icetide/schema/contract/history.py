"""The history table contract (``<table>_history``, SCD type 2): what the merge keeps
when a table is configured with ``history: scd2`` and what its readers query.

One row per version of each source row: every column of the table's schema (the key
among them), then the interval it held, in source commit time and in the typed source
position (the ledger's packed ``DECIMAL(38,0)``, :mod:`icetide.events.position`).
``[_from_position, _to_position)`` is half-open; the row's present version has
``_to_position`` NULL and ``_is_current`` true.

Layout: partitioned like the base (``bucket(N, first key)``), so a merge reads and
rewrites only the buckets its keys fall in and one key's history is one bucket, and each
file sorted by key then ``_from_position``, so a key's versions are adjacent and a
query's key or position predicate skips row groups by their bounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from icetide.schema.contract import base as b
from icetide.schema.contract import ledger as c
from icetide.schema.convert.spark import sql_type
from icetide.schema.quoting import quote

if TYPE_CHECKING:
    from icetide.schema.contract.builder import TableContract
    from icetide.schema.contract.names import TableName

SUFFIX = "_history"
VALID_FROM = "_valid_from"
VALID_TO = "_valid_to"
FROM_POSITION = "_from_position"
TO_POSITION = "_to_position"
IS_CURRENT = "_is_current"
OP = "_op"
"""The op of the change that opened the version (``c``, ``u``, ``r``)."""
INHERITED = "_inherited"
"""The columns whose values the version took from the version before it (unchanged
PostgreSQL TOAST values): kept so a late event falling before it can give them again.
Stored as the JSON text of the names' array, NULL when there are none (nearly every
version): a column of a nested type makes Iceberg's Spark reader read every column of
a scan row by row instead of in vectorized batches, and the merge reads the history's
open versions whole to end them (measured: bench/results/merge-history.md). A history
created when it was stored as ``ARRAY<STRING>`` keeps that type, and is read and written
as it is (:func:`icetide.merge.history.inherited_names`)."""
INHERITED_SQL = "STRING"
META_COLUMNS_SQL = (
    f"{VALID_FROM} TIMESTAMP",
    f"{VALID_TO} TIMESTAMP",
    f"{FROM_POSITION} {c.POSITION_SQL} NOT NULL",
    f"{TO_POSITION} {c.POSITION_SQL}",
    f"{IS_CURRENT} BOOLEAN NOT NULL",
    f"{OP} STRING NOT NULL",
    f"{INHERITED} {INHERITED_SQL}",
)
META_COLUMNS = tuple(s.split(" ")[0] for s in META_COLUMNS_SQL)
WATERMARK_PROPERTY = "icetide.history.ledger-snapshot-id"
"""Snapshot property of every history commit: the last ledger snapshot whose events the
history holds (the same meaning as the base's
:data:`~icetide.schema.contract.base.WATERMARK_PROPERTY`). ``none``: it holds the base
as it was before any merge (a bootstrap's copy), and the ledger from its start is to come."""
NO_WATERMARK = "none"


def history_watermark(summaries: Iterable[Mapping[str, str]]) -> tuple[bool, int | None]:
    """``(seeded, watermark)`` from the history's snapshot summaries, newest first:
    whether it has been seeded, and the last ledger snapshot it holds (None: none yet,
    the ledger from its start comes next). The newest summary carrying
    :data:`WATERMARK_PROPERTY` tells; a compaction's commit carries none.

    >>> history_watermark([{}, {WATERMARK_PROPERTY: "7"}, {WATERMARK_PROPERTY: "3"}])
    (True, 7)
    >>> history_watermark([{WATERMARK_PROPERTY: NO_WATERMARK}])
    (True, None)
    >>> history_watermark([{}])
    (False, None)
    """
    for summary in summaries:
        value = summary.get(WATERMARK_PROPERTY)
        if value is not None:
            return True, None if value == NO_WATERMARK else int(value)
    return False, None


def history_ddl(contract: TableContract, table: TableName) -> str:
    """``CREATE TABLE`` for the history of ``contract``'s table (see the module)."""
    keys = set(contract.target.key_ids)
    columns = [
        f"{quote(col.name)} {sql_type(col.type)}" + (" NOT NULL" if col.id in keys else "")
        for col in contract.target.columns
    ]
    body = ",\n  ".join([*columns, *META_COLUMNS_SQL])
    settings = contract.settings
    mode = settings.mode
    retry = "".join(f"'{key}'='{value}', " for key, value in b.COMMIT_RETRY.items())
    first = quote(contract.target.primary_key[0])
    return (
        f"CREATE TABLE IF NOT EXISTS {table} (\n  {body}\n) USING iceberg "
        f"PARTITIONED BY (bucket({settings.buckets}, {first})) TBLPROPERTIES ("
        f"'format-version'='{settings.format_version}', "
        f"'write.delete.mode'='{mode}', 'write.update.mode'='{mode}', "
        f"'write.merge.mode'='{mode}', "
        f"'write.distribution-mode'='hash', '{c.KIND_PROPERTY}'='history', "
        "'write.delete.parquet.compression-codec'='snappy', "
        f"{retry}'{c.SCHEMA_VERSION_PROPERTY}'='{contract.target.version}')"
    )


def sort_order_sql(contract: TableContract, table: TableName) -> str:
    """Each bucket written by one task (hash), its files sorted by key, then version
    start (see the module)."""
    keys = ", ".join(quote(k) for k in contract.target.primary_key)
    return (
        f"ALTER TABLE {table} WRITE DISTRIBUTED BY PARTITION "
        f"LOCALLY ORDERED BY {keys}, {FROM_POSITION}"
    )
