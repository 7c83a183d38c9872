"""The merge's pure DataFrame steps, each ``(DataFrame, MergeContext) -> DataFrame``.

Composed in one visible list in :data:`PREPARE_STEPS`: ledger events in, one row per
primary key out, ready for the version-guarded MERGE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from icetide.lake.ledger_figures import key_changed, key_move
from icetide.schema.contract import ledger as c
from icetide.schema.contract.builder import value_slot
from icetide.schema.model import TableSchema
from icetide.schema.quoting import qualified, quote

EVENT_ROWS = 10**6
"""Positions pack the rows of one source event as ``event * 10**6 + index``
(:mod:`icetide.events.position`): a key change's ``d`` and ``c`` share the event part."""


@dataclass(frozen=True)
class MergeContext:
    """What the steps need besides the frame itself."""

    schema: TableSchema
    history: DataFrame | None = None
    truncated_before: Decimal | None = None
    has_unavailable: bool = True
    """False when no event of the batch has an unchanged-TOAST placeholder: one
    newest event per key, kept whole, then replaces a ``max_by`` per column."""
    moves: DataFrame | None = None
    """The batch's key changes with placeholders, filled in by
    :func:`icetide.merge.inherit.inherit`; None when the batch has none."""
    key_changes: bool = True
    """False when no update of the batch changes its primary key (the ledger's figures
    say so): the batch is then read without ``_before``, see :func:`split_key_changes`."""


def inherit_unavailable(events: DataFrame, ctx: MergeContext) -> DataFrame:
    """Key changes with placeholders become their filled-in form from ``ctx.moves``;
    the ones whose values were found nowhere are not there (they were dead-lettered)."""
    if ctx.moves is None:
        return events
    return events.where(~key_move(ctx.schema)).unionByName(ctx.moves.select(*events.columns))


def split_key_changes(events: DataFrame, ctx: MergeContext) -> DataFrame:
    """An update that changes the primary key is a delete of the old key plus the update.

    A batch the ledger's figures clear of key changes (``ctx.key_changes`` False) is
    passed through without ``_before``: Iceberg reads a scan column by column
    (vectorized) only when every column it reads is of a primitive type, and
    ``_before``'s old key is read from a struct (measured: docs/merge-performance.md,
    "The keys read column by column"). ``_after`` keeps the batch's own scan row by row
    either way, but the DELETE's read of the keys (:func:`changed_keys`) becomes columnar.
    """
    if not ctx.key_changes:
        keys = [quote(k) for k in ctx.schema.primary_key]
        return events.select(*keys, c.OP, c.AFTER, c.UNAVAILABLE, c.POSITION, c.SOURCE_TS)
    return split_all_key_changes(events, ctx.schema)


def split_all_key_changes(events: DataFrame, schema: TableSchema) -> DataFrame:
    """:func:`split_key_changes` for events that may change their key.

    One pass over ``events``: each row comes out once, and a key change a second time
    flagged as its old key's delete (an explode of ``[false, true-if-key-changed]``),
    so the ledger is read once, not once per half. Only the flag is exploded: the row
    image is passed through as a column, not copied into a struct per output row and
    out again (measured: docs/merge-performance.md, "The batch's deduplication without a
    sort aggregate").
    """
    keys = list(schema.primary_key)
    flag = "_icetide_old_key"
    flagged = events.select(
        "*", F.explode(F.array(F.lit(False), F.when(key_changed(schema), True))).alias(flag)
    ).where(F.col(flag).isNotNull())
    old = F.col(flag)
    return flagged.select(
        *[
            F.when(old, old_k).otherwise(F.col(quote(k))).alias(k)
            for k, old_k in zip(keys, _old_key(events, keys), strict=True)
        ],
        F.when(old, F.lit("d")).otherwise(F.col(c.OP)).alias(c.OP),
        F.when(~old, F.col(c.AFTER)).alias(c.AFTER),
        F.when(old, F.array().cast("array<string>"))
        .otherwise(F.col(c.UNAVAILABLE))
        .alias(c.UNAVAILABLE),
        c.POSITION,
        c.SOURCE_TS,
    )


def _old_key(events: DataFrame, keys: list[str]) -> list[Column]:
    """A key change's old key: ``_before``'s key fields, typed as the event's keys (in
    the order of ``keys``, unnamed)."""
    return [F.col(qualified(c.BEFORE, k)).cast(events.schema[k].dataType) for k in keys]


def add_remembered_deletes(events: DataFrame, ctx: MergeContext) -> DataFrame:
    """Add earlier deletes of the batch's keys, so a late older event cannot resurrect a row."""
    if ctx.history is None:
        return events
    keys = events.select(*[quote(k) for k in ctx.schema.primary_key]).distinct()
    # The history's own key changes, whatever the batch's figures say.
    remembered = split_all_key_changes(tombstone_rows(ctx.history, ctx.schema), ctx.schema).where(
        F.col(c.OP) == "d"
    )
    # The history may be read at a snapshot from before a schema change (its row images
    # lack the new fields): those fields are NULL in a remembered delete.
    return events.unionByName(
        remembered.join(keys, list(ctx.schema.primary_key), "left_semi"), allowMissingColumns=True
    )


def tombstone_rows(history: DataFrame, schema: TableSchema) -> DataFrame:
    """The history with only what a remembered delete is made of: keys, op, position and
    source time, and the before image's keys (for a key change's old-key delete).

    A delete's row image and placeholders never reach the MERGE (only a living event
    gives values), so they are nulled here, and the history scan, the largest read of a
    merge, does not read them from the ledger's files. ``_before`` is cut to its keys
    without a test of the struct itself: :func:`key_changed` needs every old key
    present, which a null image never has.
    """
    keys = list(schema.primary_key)
    return history.select(
        *[quote(k) for k in keys],
        c.OP,
        F.lit(None).cast(history.schema[c.AFTER].dataType).alias(c.AFTER),
        F.struct(*[F.col(qualified(c.BEFORE, k)).alias(k) for k in keys]).alias(c.BEFORE),
        F.array().cast("array<string>").alias(c.UNAVAILABLE),
        c.POSITION,
        c.SOURCE_TS,
    )


def drop_truncated(events: DataFrame, ctx: MergeContext) -> DataFrame:
    """Drop row events older than the newest truncate, and the truncate markers."""
    rows = events.where(F.col(c.OP) != "t")
    if ctx.truncated_before is None:
        return rows
    return rows.where(F.col(c.POSITION) > F.lit(ctx.truncated_before).cast(c.POSITION_SQL))


def _latest_event() -> list[Column]:
    """Per key: the newest position, and the op and source time of that event."""
    return [
        F.max(c.POSITION).alias(c.POSITION),
        F.max_by(F.col(c.OP), F.col(c.POSITION)).alias(c.OP),
        F.max_by(F.col(c.SOURCE_TS), F.col(c.POSITION)).alias(c.SOURCE_TS),
    ]


def dedupe_latest(events: DataFrame, ctx: MergeContext) -> DataFrame:
    """One row per key: the latest op and position, and per column the latest *available*
    value (an unchanged-TOAST placeholder is not available, so the stored value stays)."""
    if not ctx.has_unavailable:
        return _dedupe_whole_rows(events, ctx)
    slots = []
    for col in ctx.schema.value_columns:
        available = F.when(
            (F.col(c.OP) != "d") & ~F.array_contains(F.col(c.UNAVAILABLE), col.name),
            F.col(c.POSITION),
        )
        value = F.struct(F.col(qualified(c.AFTER, col.name)).alias("v"))
        slots.append(F.max_by(value, available).alias(value_slot(col.id)))
    return events.groupBy(*[quote(k) for k in ctx.schema.primary_key]).agg(*_latest_event(), *slots)


def _dedupe_whole_rows(events: DataFrame, ctx: MergeContext) -> DataFrame:
    """:func:`dedupe_latest` when every value is available: the latest event wins whole.

    The newest event per key by a window ranking each key's events newest first, kept
    where it ranks first. Spark plans it as a sort and a per-key limit before the shuffle
    and after it (``WindowGroupLimit``), no aggregation: a ``max_by`` of the whole event
    cannot be a hash aggregate (its buffer holds the row image), so it was a sort
    aggregate, which evaluates its buffers row by row outside generated code (measured:
    docs/merge-performance.md, "The batch's deduplication without a sort aggregate"). When
    the latest event is a delete its values are never read (the MERGE deletes, or inserts
    nothing), so they are left NULL.
    """
    keys = [quote(k) for k in ctx.schema.primary_key]
    newest_first = Window.partitionBy(*keys).orderBy(F.col(c.POSITION).desc())
    rank = "_icetide_rank"
    latest = events.withColumn(rank, F.row_number().over(newest_first)).where(F.col(rank) == 1)
    image = F.when(F.col(c.OP) != "d", F.col(c.AFTER))
    slots = [
        F.when(image.isNotNull(), F.struct(image.getField(col.name).alias("v"))).alias(
            value_slot(col.id)
        )
        for col in ctx.schema.value_columns
    ]
    return latest.select(*keys, c.POSITION, c.OP, c.SOURCE_TS, *slots)


def changed_keys(events: DataFrame, schema: TableSchema, key_changes: bool = True) -> DataFrame:
    """Every key the batch's row events name: each event's own and, for a key change,
    the old one (``key_changes`` False: the ledger's figures say no update changes its
    key, and ``_before`` is not read, which lets Iceberg read the keys columnar). For an
    in-order batch these are the base rows the batch replaces or removes
    (``delete_insert``'s DELETE, :mod:`icetide.merge.strategy`); a key whose events a
    truncate dropped is named too, and its row is gone anyway.

    Only key columns are read from the ledger (the old ones from ``_before``), not the
    row images the deduplication reads: 0.1 s less of a 1.8 s merge at 5M rows, 1%.
    Each key once: the DELETE broadcasts them, and a hot key's events would repeat it
    (20 events a key: 6% faster with the distinct, measured; no change at 3 a key).
    """
    keys = list(schema.primary_key)
    rows = events.where(F.col(c.OP) != "t")
    if not key_changes:
        return rows.select(*[quote(k) for k in keys]).distinct()
    itself = F.struct(*[F.col(quote(k)).alias(k) for k in keys])
    old = F.struct(*[o.alias(k) for k, o in zip(keys, _old_key(events, keys), strict=True)])
    key = "_key"
    return (
        rows.select(F.explode(F.array(itself, F.when(key_changed(schema), old))).alias(key))
        .where(F.col(key).isNotNull())
        .select(*[F.col(key).getField(k).alias(k) for k in keys])
        .distinct()
    )


Step = Callable[[DataFrame, MergeContext], DataFrame]
PREPARE_STEPS: tuple[Step, ...] = (
    inherit_unavailable,
    split_key_changes,
    add_remembered_deletes,
    drop_truncated,
    dedupe_latest,
)


def prepare(events: DataFrame, ctx: MergeContext) -> DataFrame:
    """Run :data:`PREPARE_STEPS` over raw ledger events."""
    return reduce(lambda frame, step: step(frame, ctx), PREPARE_STEPS, events)
