"""The old row of a key change whose delete was merged before its create: time travel.

When a key change's ``d`` (old key) and ``c`` (new key) land in different merges (a
landing file rolled between them, or Kafka partitions read apart), the merge that applied
the ``d`` already removed the old row, so neither the batch nor the mirror holds it. An
earlier snapshot of the base table still does: the newest one whose merge watermark (the
ledger snapshot it consumed, in its summary) was committed before the ``d`` reached the
ledger. Its row, plus the old key's ledger events merged after that snapshot (up to the
move), is the row as of the key change.

Only key changes found nowhere else come here, so other batches pay nothing. If
maintenance expired the snapshot (or the ledger snapshot its watermark names), the change
stays unrecovered and is dead-lettered as before.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icetide.merge.steps import EVENT_ROWS
from icetide.schema.contract import ledger as c
from icetide.schema.contract.base import POSITION, WATERMARK_PROPERTY
from icetide.schema.contract.names import TableName
from icetide.schema.quoting import literal


@dataclass(frozen=True)
class Lost:
    """A key change whose first key's row was found nowhere: where to look for it."""

    move: str
    """The key change's ledger message id."""
    key: tuple[Hashable, ...]
    """The first key of its lineage (the row's key before it moved)."""
    until: Decimal
    """The position the row left that key: values from before it only."""


@dataclass(frozen=True)
class BaseSnapshot:
    """A snapshot of the base table made by a merge, oldest first on its lineage."""

    snapshot_id: int
    watermark: int


def snapshot_before(
    removed_at: datetime, snapshots: Sequence[BaseSnapshot], ledger: dict[int, datetime]
) -> BaseSnapshot | None:
    """The newest base snapshot whose merge cannot have applied an event ingested at
    ``removed_at``: its watermark's ledger snapshot was committed before that.

    None when there is none left, or its watermark's ledger snapshot is gone (the events
    merged after it could not be read back).

    >>> t = datetime.fromisoformat
    >>> ledger = {7: t("2026-01-01T00:00:01"), 8: t("2026-01-01T00:00:03")}
    >>> snaps = [BaseSnapshot(100, 7), BaseSnapshot(101, 8)]
    >>> snapshot_before(t("2026-01-01T00:00:02"), snaps, ledger)
    BaseSnapshot(snapshot_id=100, watermark=7)
    >>> snapshot_before(t("2026-01-01T00:00:00"), snaps, ledger) is None
    True
    """
    chosen: BaseSnapshot | None = None
    for snapshot in snapshots:
        committed = ledger.get(snapshot.watermark)
        if committed is not None and committed >= removed_at:
            break
        chosen = snapshot
    if chosen is None or chosen.watermark not in ledger:
        return None
    return chosen


def _naive(ts: datetime) -> datetime:
    """Spark returns session-local naive timestamps; compare them as they come."""
    return ts.replace(tzinfo=None)


def recover(
    spark: SparkSession,
    base: TableName,
    ledger: TableName,
    start: int,
    history: DataFrame,
    lost: Sequence[Lost],
    keys: Sequence[T.StructField],
    columns: Sequence[str],
    found_schema: T.DataType,
) -> DataFrame | None:
    """Per recovered move, ``(_move, _base)`` as :func:`icetide.merge.inherit.inherit`
    reads the mirror: ``_base`` a struct of ``_present`` and the needed columns.

    ``found_schema`` is that struct's type. None when nothing could be recovered.
    """
    removals = _removal_times(history, lost, [k.name for k in keys])
    if not removals:
        return None
    snapshots = [
        BaseSnapshot(int(r[0]), int(r[1]))
        for r in spark.sql(
            f"SELECT s.snapshot_id, s.summary[{literal(WATERMARK_PROPERTY)}] FROM "
            f"{base}.snapshots s JOIN {base}.history h ON s.snapshot_id = h.snapshot_id "
            f"WHERE h.is_current_ancestor AND s.summary[{literal(WATERMARK_PROPERTY)}] "
            "IS NOT NULL ORDER BY h.made_current_at, s.committed_at"
        ).collect()
    ]
    commits = {
        int(r[0]): _naive(r[1])
        for r in spark.sql(f"SELECT snapshot_id, committed_at FROM {ledger}.snapshots").collect()
    }
    groups: dict[BaseSnapshot, list[Lost]] = {}
    for item in lost:
        removed_at = removals.get(item.move)
        chosen = None if removed_at is None else snapshot_before(removed_at, snapshots, commits)
        if chosen is not None:
            groups.setdefault(chosen, []).append(item)
    frames = [
        _recover_from(spark, base, ledger, start, snapshot, items, keys, columns)
        for snapshot, items in groups.items()
    ]
    if not frames:
        return None
    rows = reduce(DataFrame.unionByName, frames)
    values = [
        F.max_by(
            F.struct(F.col(name).alias("v")),
            F.when(~F.array_contains(F.col(c.UNAVAILABLE), name), F.col(c.POSITION)),
        ).alias(name)
        for name in columns
    ]
    recovered = rows.groupBy("_move").agg(*values) if values else rows.select("_move").distinct()
    fields = [F.lit(True).alias("_present")] + [
        F.col(name).getField("v").alias(name) for name in columns
    ]
    return recovered.select("_move", F.struct(*fields).cast(found_schema).alias("_base"))


def _removal_times(
    history: DataFrame, lost: Sequence[Lost], keys: Sequence[str]
) -> dict[str, datetime]:
    """When the ``d`` that removed each lost move's first key reached the ledger.

    That ``d`` is the other half of the move's own source event: same event, at or
    before the move's position.
    """
    wanted = reduce(
        lambda a, b: a | b,
        [
            reduce(
                lambda x, y: x & y,
                [F.col(k) == F.lit(v) for k, v in zip(keys, item.key, strict=True)],
            )
            & (F.col(c.POSITION) <= F.lit(item.until).cast(c.POSITION_SQL))
            for item in lost
        ],
    )
    rows = (
        history.where((F.col(c.OP) == "d") & wanted)
        .select(*keys, c.POSITION, c.INGESTED_AT)
        .collect()
    )
    times: dict[str, datetime] = {}
    for item in lost:
        event = item.until - item.until % EVENT_ROWS
        for r in rows:
            position = r[c.POSITION]
            same = tuple(r[k] for k in keys) == item.key
            if same and position - position % EVENT_ROWS == event and position <= item.until:
                times[item.move] = _naive(r[c.INGESTED_AT])
    return times


def _recover_from(
    spark: SparkSession,
    base: TableName,
    ledger: TableName,
    start: int,
    snapshot: BaseSnapshot,
    items: Sequence[Lost],
    keys: Sequence[T.StructField],
    columns: Sequence[str],
) -> DataFrame:
    """The rows of ``items``' first keys at ``snapshot`` and their ledger events merged
    after it, as ledger-like rows (``_move``, position, unavailable, the columns)."""
    targets = spark.createDataFrame(
        [(item.move, *item.key, item.until) for item in items],
        T.StructType(
            [
                T.StructField("_move", T.StringType(), False),
                *[T.StructField(f"_t_{k.name}", k.dataType, True) for k in keys],
                T.StructField("_until", T.DecimalType(38, 0), False),
            ]
        ),
    )
    names = [k.name for k in keys]
    match = [F.col(k) == F.col(f"_t_{k}") for k in names]

    then = spark.read.format("iceberg").option("snapshot-id", snapshot.snapshot_id)
    stored = then.load(base.dotted)
    present = set(stored.columns)
    stored_rows = stored.select(
        *names,
        F.col(POSITION).alias(c.POSITION),
        F.array().cast("array<string>").alias(c.UNAVAILABLE),
        *[F.col(n) if n in present else F.lit(None).alias(n) for n in columns],
    )
    merged = spark.read.format("iceberg")
    merged = merged.option("start-snapshot-id", snapshot.watermark).option("end-snapshot-id", start)
    events = merged.load(ledger.dotted)
    event_rows = events.where(F.col(c.OP) != "d").select(
        *names,
        c.POSITION,
        F.coalesce(F.col(c.UNAVAILABLE), F.array().cast("array<string>")).alias(c.UNAVAILABLE),
        *[F.col(c.AFTER).getField(n).alias(n) for n in columns],
    )
    both = stored_rows.unionByName(event_rows, allowMissingColumns=True)
    return (
        both.join(F.broadcast(targets), reduce(lambda a, b: a & b, match))
        .where(F.col(c.POSITION) < F.col("_until"))
        .select("_move", c.POSITION, c.UNAVAILABLE, *columns)
    )
