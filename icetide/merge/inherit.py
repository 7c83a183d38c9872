"""Primary-key changes that left unchanged-TOAST columns out: the new key inherits them.

PostgreSQL with ``REPLICA IDENTITY DEFAULT`` sends an update that changes the primary key
without the TOASTed columns it did not touch. Capture (like Debezium) turns it into a
``d`` of the old key and a ``c`` of the new one at the same LSN, and the ``c`` carries the
``__debezium_unavailable_value`` placeholder for those columns (an update with a before
image of another key is the other form of the same change). "Keep the stored value"
means nothing for a key the mirror has never held, so a plain merge would insert NULLs.

icetide holds the old row, so the new key takes each unavailable column from the old
key *as of the key change*: the latest available value among the old key's events of the
batch before the change, else the old key's row in the base table. A chain (a→b, then
b→c, with b's other columns changed in between) is followed back to its first key, one
segment of positions per key. Only batches with such events pay for this (one small
collect of the moved keys, a join of the batch with their segments, a look-up of the
first keys in the base table).

When the old key's delete was merged in an earlier batch than the create, the old row
is read from an earlier snapshot of the base table (:mod:`icetide.merge.earlier`).

A key change whose values are found nowhere (the old row is neither in the batch nor in
the mirror nor in its retained snapshots, e.g. capture began after it was written and no
bootstrap copied it) is *not applied*: the new
key's row is not written from it, and the event goes to the dead-letter table with reason
:data:`~icetide.schema.contract.ledger.UNAVAILABLE_VALUE_LOST`. The old key's delete still
applies (the old row is gone at the source), and later events of the new key apply as
usual.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icetide.lake.ledger_figures import key_move
from icetide.merge.earlier import Lost, recover
from icetide.merge.steps import EVENT_ROWS
from icetide.schema.contract import ledger as c
from icetide.schema.contract.names import TableName
from icetide.schema.model import TableSchema

LOST = "_lost"
"""Unavailable columns of a key change whose value was found nowhere."""
OLD = "_old"
"""The key change's old key, a struct of the primary-key columns (null: not found)."""
_MOVE = "_move"
_LO = "_lo"
_HI = "_hi"
_ROOT = "_root"
_BASE = "_base"
_LOOKUP_LIMIT = 1000
"""Up to this many first keys are looked up with an ``IN`` filter Iceberg can prune by."""


def _seg(i: int) -> str:
    return f"_seg{i}"


def _event_of(position: Column) -> Column:
    return position - position % F.lit(EVENT_ROWS).cast(c.POSITION_SQL)


def find_moves(events: DataFrame, history: DataFrame | None, schema: TableSchema) -> DataFrame:
    """The batch's key moves, each with its old key in :data:`OLD`.

    A ``u`` names the old key in its before image; a ``c`` is paired with the ``d`` of the
    same source event (same LSN), found in the batch or, when the batch was cut between
    the two, among the deletes merged before.
    """
    keys = schema.primary_key
    moves = events.where(key_move(schema))
    old_of_update = F.struct(*[F.col(c.BEFORE).getField(k).alias(k) for k in keys])
    deletes = events.where(F.col(c.OP) == "d").select(*keys, c.POSITION)
    if history is not None:
        deletes = deletes.unionByName(history.where(F.col(c.OP) == "d").select(*keys, c.POSITION))
    deletes = deletes.select(
        _event_of(F.col(c.POSITION)).alias("_d_event"),
        F.col(c.POSITION).alias("_d_position"),
        F.struct(*[F.col(k) for k in keys]).alias("_d_key"),
    )
    creates = moves.where(F.col(c.OP) == "c").select(
        c.MESSAGE_ID, c.POSITION, _event_of(F.col(c.POSITION)).alias("_c_event")
    )
    paired = (
        creates.join(
            deletes,
            (F.col("_c_event") == F.col("_d_event")) & (F.col("_d_position") <= F.col(c.POSITION)),
        )
        .groupBy(c.MESSAGE_ID)
        .agg(F.max_by(F.col("_d_key"), F.col("_d_position")).alias("_paired"))
    )
    return (
        moves.join(paired, c.MESSAGE_ID, "left")
        .withColumn(OLD, F.when(F.col(c.OP) == "u", old_of_update).otherwise(F.col("_paired")))
        .drop("_paired")
    )


@dataclass(frozen=True)
class KeyMove:
    """One key change with placeholders: its ledger message, position and keys."""

    message_id: str
    position: Decimal
    new: tuple[Hashable, ...]
    old: tuple[Hashable, ...] | None


Segment = tuple[str, tuple[Hashable, ...], Decimal | None, Decimal, bool]


def lineage_segments(moves: Sequence[KeyMove]) -> list[Segment]:
    """Per move, the keys its row lived under before the move, with their position ranges.

    ``(move id, key, from, to, is first key)``: the row was key ``key`` from position
    ``from`` (inclusive; None = always) to ``to`` (exclusive). The first key's value falls
    back to the base table.

    >>> m = [KeyMove("m1", Decimal(10), ("b",), ("a",)), KeyMove("m2", Decimal(20), ("c",), ("b",))]
    >>> lineage_segments(m)[1:]
    [('m2', ('b',), Decimal('10'), Decimal('20'), False), ('m2', ('a',), None, Decimal('10'), True)]
    """
    into: dict[tuple[Hashable, ...], list[KeyMove]] = {}
    for move in sorted(moves, key=lambda m: m.position):
        into.setdefault(move.new, []).append(move)
    segments: list[Segment] = []
    for move in moves:
        key, until = move.old, move.position
        while key is not None:
            arrivals = into.get(key, [])
            i = bisect.bisect_left([m.position for m in arrivals], until)
            if i == 0:
                segments.append((move.message_id, key, None, until, True))
                break
            previous = arrivals[i - 1]
            segments.append((move.message_id, key, previous.position, until, False))
            key, until = previous.old, previous.position
    return segments


@dataclass(frozen=True)
class Inheritance:
    """The batch's key moves with their inherited values."""

    resolved: DataFrame
    """The move events (ledger columns) with every placeholder they could fill filled,
    plus :data:`OLD` and :data:`LOST` (empty when nothing is missing)."""
    columns: tuple[str, ...]
    """The columns that had placeholders in some move of the batch."""
    moves: DataFrame
    """The moves with their old keys, cached: read once for the driver, once for the join."""

    def release(self) -> None:
        """Drop the cached frames once the merge that used them is done."""
        self.resolved.unpersist()
        self.moves.unpersist()


def inherit(
    spark: SparkSession,
    events: DataFrame,
    history: DataFrame | None,
    base: TableName,
    schema: TableSchema,
    ledger: TableName | None = None,
    start: int | None = None,
    stored: DataFrame | None = None,
) -> Inheritance:
    """Fill the unavailable columns of the batch's key moves from their old keys.

    ``stored``: the base rows a first key is looked up in, when not the base table now
    (an as-of reads a snapshot of it, :mod:`icetide.merge.asof`).

    With the ``ledger`` and the batch's ``start`` snapshot, a move whose old key was
    deleted by an earlier merge is looked up in the base table as it was before; that
    costs one look at the cached moves when nothing is lost (the usual case).
    """
    keys = schema.primary_key
    moves = find_moves(events, history, schema).persist()
    collected = moves.select(c.MESSAGE_ID, c.POSITION, c.UNAVAILABLE, *keys, F.col(OLD)).collect()
    listed = [
        KeyMove(
            r[c.MESSAGE_ID],
            r[c.POSITION],
            tuple(r[k] for k in keys),
            None if r[OLD] is None else tuple(r[OLD]),
        )
        for r in collected
    ]
    needed = {name for r in collected for name in r[c.UNAVAILABLE]}
    columns = tuple(col.name for col in schema.value_columns if col.name in needed)

    key_fields = [
        T.StructField(_seg(i), events.schema[k].dataType, True) for i, k in enumerate(keys)
    ]
    segment_schema = T.StructType(
        [
            T.StructField(_MOVE, T.StringType(), False),
            *key_fields,
            T.StructField(_LO, T.DecimalType(38, 0), True),
            T.StructField(_HI, T.DecimalType(38, 0), False),
            T.StructField(_ROOT, T.BooleanType(), False),
        ]
    )
    lineage = lineage_segments(listed)
    rows = [(m, *key, lo, hi, root) for m, key, lo, hi, root in lineage]
    segments = F.broadcast(spark.createDataFrame(rows, segment_schema))

    living = events.where(F.col(c.OP) != "d")
    within = (
        reduce(lambda a, b: a & b, [living[k] == segments[_seg(i)] for i, k in enumerate(keys)])
        & (segments[_LO].isNull() | (living[c.POSITION] >= segments[_LO]))
        & (living[c.POSITION] < segments[_HI])
    )
    found = (
        living.join(segments, within)
        .groupBy(_MOVE)
        .agg(
            F.count(F.lit(1)).alias("_events"),
            *[
                F.max_by(
                    F.struct(F.col(c.AFTER).getField(name).alias("v")),
                    F.when(~F.array_contains(F.col(c.UNAVAILABLE), name), F.col(c.POSITION)),
                ).alias(f"_found_{i}")
                for i, name in enumerate(columns)
            ],
        )
    )

    roots = {key[0] for _, key, _, _, root in lineage if root}
    mirror = spark.table(base.sql) if stored is None else stored
    stored = mirror.select(
        *[F.col(k).alias(_seg(i)) for i, k in enumerate(keys)],
        # A present row gives a non-null struct even when no value column is needed.
        F.struct(F.lit(True).alias("_present"), *[F.col(name) for name in columns]).alias(_BASE),
    )
    if len(keys) == 1 and 0 < len(roots) <= _LOOKUP_LIMIT:
        stored = stored.where(F.col(_seg(0)).isin(list(roots)))
    root_segments = segments.where(F.col(_ROOT)).select(_MOVE, *[_seg(i) for i in range(len(keys))])
    first = root_segments.join(stored, [_seg(i) for i in range(len(keys))]).select(_MOVE, _BASE)

    resolved = _resolve(events, moves, found, first, columns, schema)
    if history is not None and ledger is not None and start is not None:
        lost = {r[0] for r in resolved.where(F.size(LOST) > 0).select(c.MESSAGE_ID).collect()}
        roots_lost = [Lost(m, key, hi) for m, key, _, hi, root in lineage if root and m in lost]
        recovered = (
            recover(
                spark,
                base,
                ledger,
                start,
                history,
                roots_lost,
                [events.schema[k] for k in keys],
                columns,
                first.schema[_BASE].dataType,
            )
            if roots_lost
            else None
        )
        if recovered is not None:
            resolved.unpersist()
            resolved = _resolve(events, moves, found, first.unionByName(recovered), columns, schema)
    return Inheritance(resolved, columns, moves)


def _resolve(
    events: DataFrame,
    moves: DataFrame,
    found: DataFrame,
    first: DataFrame,
    columns: tuple[str, ...],
    schema: TableSchema,
) -> DataFrame:
    """The moves with each placeholder filled from the batch (``found``) or the first
    key's stored row (``first``), cached; :data:`LOST` names the ones found nowhere."""
    joined = moves.join(found.withColumnRenamed(_MOVE, c.MESSAGE_ID), c.MESSAGE_ID, "left").join(
        first.withColumnRenamed(_MOVE, c.MESSAGE_ID), c.MESSAGE_ID, "left"
    )
    filled: dict[str, Column] = {}
    lost: list[Column] = []
    for i, name in enumerate(columns):
        value = F.coalesce(
            F.col(f"_found_{i}"),
            F.when(F.col(_BASE).isNotNull(), F.struct(F.col(_BASE).getField(name).alias("v"))),
        )
        missing = F.array_contains(F.col(c.UNAVAILABLE), name)
        filled[name] = F.when(missing & value.isNotNull(), value.getField("v")).otherwise(
            F.col(c.AFTER).getField(name)
        )
        lost.append(F.when(missing & value.isNull(), F.lit(name)))
    after = F.struct(
        *[
            filled.get(col.name, F.col(c.AFTER).getField(col.name)).alias(col.name)
            for col in schema.columns
        ]
    )
    lost_array = F.array_compact(F.array(*lost)) if lost else F.array().cast("array<string>")
    resolved = joined.select(
        *[col for col in events.columns if col not in (c.AFTER, c.UNAVAILABLE)],
        after.alias(c.AFTER),
        lost_array.alias(LOST),
        F.col(OLD),
    ).withColumn(c.UNAVAILABLE, F.col(LOST))
    return resolved.select(*events.columns, OLD, LOST).persist()


def applicable(resolved: DataFrame, schema: TableSchema) -> DataFrame:
    """The ledger events to merge in place of the batch's key moves.

    A filled move applies as it is. A move with values found nowhere does not, but its
    old key still goes: the ``d`` half of that form is its own event already, and an
    update whose before image holds the old key becomes a delete of that key.
    """
    keys = schema.primary_key
    filled = resolved.where(F.size(LOST) == 0)
    lost_updates = resolved.where((F.size(LOST) > 0) & (F.col(c.OP) == "u")).select(
        *[F.col(OLD).getField(k).alias(k) for k in keys],
        *[
            F.lit("d").alias(c.OP)
            if name == c.OP
            else F.lit(None).cast(resolved.schema[c.AFTER].dataType).alias(c.AFTER)
            if name == c.AFTER
            else F.array().cast("array<string>").alias(c.UNAVAILABLE)
            if name == c.UNAVAILABLE
            else F.col(name)
            for name in resolved.columns
            if name not in keys
        ],
    )
    return filled.unionByName(lost_updates)
