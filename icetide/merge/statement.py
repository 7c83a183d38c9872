"""The version-guarded MERGE statement, generated from the schema."""

from __future__ import annotations

from icetide.ledger import contract as c
from icetide.merge.steps import value_slot
from icetide.merge.tables import POSITION, SOURCE_TS
from icetide.schema.model import TableSchema
from icetide.spark.sql import quote


def merge_sql(base: str, source: str, schema: TableSchema) -> str:
    """MERGE the deduplicated batch ``source`` into ``base``.

    An event applies only when its position is newer than the row's, so redelivered or
    replayed events are no-ops; a value slot that is null keeps the stored value.
    """
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in schema.primary_key)
    newer = f"s.{c.POSITION} > t.{POSITION}"
    updates = [
        f"{quote(col.name)} = CASE WHEN s.{value_slot(col.id)} IS NULL "
        f"THEN t.{quote(col.name)} ELSE s.{value_slot(col.id)}.v END"
        for col in schema.value_columns
    ] + [f"{POSITION} = s.{c.POSITION}", f"{SOURCE_TS} = s.{c.SOURCE_TS}"]
    names = [quote(col.name) for col in schema.columns] + [POSITION, SOURCE_TS]
    values = [
        f"s.{quote(col.name)}" if col.name in schema.primary_key else f"s.{value_slot(col.id)}.v"
        for col in schema.columns
    ] + [f"s.{c.POSITION}", f"s.{c.SOURCE_TS}"]
    return (
        f"MERGE INTO {base} t USING {source} s ON {on}\n"
        f"WHEN MATCHED AND s.{c.OP} = 'd' AND {newer} THEN DELETE\n"
        f"WHEN MATCHED AND {newer} THEN UPDATE SET {', '.join(updates)}\n"
        f"WHEN NOT MATCHED AND s.{c.OP} <> 'd' THEN INSERT ({', '.join(names)}) "
        f"VALUES ({', '.join(values)})"
    )


def naive_merge_sql(base: str, ledger_view: str, schema: TableSchema) -> str:
    """The baseline from the design: window dedupe + MERGE over the raw ledger rows.

    Not used by icetide; benchmarks run it to measure what the real merge gains.
    """
    keys = ", ".join(quote(k) for k in schema.primary_key)
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in schema.primary_key)
    cols = [quote(col.name) for col in schema.columns]
    picked = ", ".join(
        f"{c.AFTER}.{quote(col.name)} AS {quote(col.name)}"
        if col.name not in schema.primary_key
        else quote(col.name)
        for col in schema.columns
    )
    dedup = (
        f"SELECT {picked}, {c.OP}, {c.POSITION}, {c.SOURCE_TS} FROM ("
        f"SELECT *, ROW_NUMBER() OVER (PARTITION BY {keys} ORDER BY {c.POSITION} DESC) rn "
        f"FROM {ledger_view}) WHERE rn = 1"
    )
    sets = ", ".join(f"{n} = s.{n}" for n in cols)
    return (
        f"MERGE INTO {base} t USING ({dedup}) s ON {on}\n"
        f"WHEN MATCHED AND s.{c.OP} = 'd' THEN DELETE\n"
        f"WHEN MATCHED THEN UPDATE SET {sets}, {POSITION} = s.{c.POSITION}, "
        f"{SOURCE_TS} = s.{c.SOURCE_TS}\n"
        f"WHEN NOT MATCHED AND s.{c.OP} <> 'd' THEN INSERT ({', '.join(cols)}, {POSITION}, "
        f"{SOURCE_TS}) VALUES ({', '.join('s.' + n for n in cols)}, s.{c.POSITION}, "
        f"s.{c.SOURCE_TS})"
    )
