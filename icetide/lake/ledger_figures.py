"""The figures a merge needs before it plans a batch, recorded by the ledger.

In the spark package because both stages use it: the ledger writes the figures, the
merge reads them (the merge does not import the ledger stage).

A merge must know, before it prepares a batch, its event count, its newest truncate,
the columns some event left out (unchanged TOAST), whether a key change lacks values,
whether any update changes its key at all, the base buckets its keys fall in, and
whether the deletes and truncates merged before it (the tombstone history) hold
anything. Computing them from the ledger costs a Spark job per merge (two stages, a
scan of the batch and of the history's truncates).

The ledger already aggregates every micro-batch it appends (counts and dead-letter
samples), so it computes these figures in the same aggregate and writes them, as JSON,
into the summary of the snapshot that appends the events (:data:`FIGURES_PROPERTY`):
the figures and the rows they describe commit together, so a crash cannot leave one
without the other. The merge reads them from the ledger's metadata (no Spark job) with
:func:`batch_figures`, and falls back to computing them when any snapshot it would read
lacks them (written before this, or by another writer such as a dead-letter replay).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F

from icetide.lake.tables import Snapshot
from icetide.schema.contract import ledger as c
from icetide.schema.model import TableSchema
from icetide.schema.quoting import qualified, quote

FIGURES_PROPERTY = "icetide.merge.figures"
"""Ledger snapshot property: the figures of the events that snapshot appends (JSON)."""
FIGURES_FORMAT = 1
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(moment: datetime) -> int:
    """``moment`` (timezone-aware) in microseconds since the epoch, as Spark stores a
    timestamp: the ingestion times the ledger records and the merge's cutoff compare
    exactly as the history scan's filter does."""
    return (moment - EPOCH) // timedelta(microseconds=1)


def key_changed(schema: TableSchema) -> Column:
    """True for an update whose before image has a different primary key."""
    before = [F.col(qualified(c.BEFORE, k)) for k in schema.primary_key]
    present = reduce(lambda a, b: a & b, [b.isNotNull() for b in before])
    differs = reduce(
        lambda a, b: a | b,
        [~F.col(qualified(c.BEFORE, k)).eqNullSafe(F.col(quote(k))) for k in schema.primary_key],
    )
    return (F.col(c.OP) == "u") & F.col(c.BEFORE).isNotNull() & present & differs


def key_move(schema: TableSchema) -> Column:
    """True for a key change whose after image has unchanged-TOAST placeholders
    (see :mod:`icetide.merge.inherit`).

    A ``c`` never has them unless it is the create half of a key change: an insert sends
    every value.
    """
    has_placeholders = F.coalesce(F.size(c.UNAVAILABLE) > 0, F.lit(False))
    return has_placeholders & ((F.col(c.OP) == "c") | key_changed(schema))


def tombstone(schema: TableSchema) -> Column:
    """True for a ledger row the merge's tombstone history keeps: a delete, a truncate,
    or a key change (whose old key is deleted)."""
    return F.col(c.OP).isin("d", "t") | key_changed(schema)


def bucket_of(catalog: str, buckets: int, column: str) -> Column:
    """Iceberg's ``bucket(buckets, column)``, the base's partition of a key."""
    return F.expr(f"{quote(catalog)}.system.bucket({buckets}, {column})")


def figure_aggregates(schema: TableSchema, catalog: str, buckets: int) -> list[Column]:
    """Aggregate expressions over ledger rows (``schema``: the ledger's own layout) that
    :func:`figures_json` turns into the snapshot property. Rows that are not appended
    must be filtered out (or made NULL) by the caller."""
    first = schema.primary_key[0]
    old = F.when(key_changed(schema), bucket_of(catalog, buckets, qualified(c.BEFORE, first)))
    return [
        F.max(F.when(F.col(c.OP) == "t", F.col(c.POSITION))).alias("fig_truncate"),
        F.array_distinct(F.flatten(F.collect_set(c.UNAVAILABLE))).alias("fig_unavailable"),
        F.sum(F.when(key_move(schema), 1).otherwise(0)).alias("fig_moves"),
        F.sum(F.when(key_changed(schema), 1).otherwise(0)).alias("fig_key_changes"),
        F.sum(F.when(tombstone(schema), 1).otherwise(0)).alias("fig_tombstones"),
        F.array_union(
            F.collect_set(bucket_of(catalog, buckets, quote(first))), F.collect_set(old)
        ).alias("fig_buckets"),
        F.min(F.col(c.POSITION)).alias("fig_first"),
        F.max(F.when(tombstone(schema), F.col(c.POSITION))).alias("fig_last_tombstone"),
    ]


FIGURE_KEYS = (
    "fig_truncate",
    "fig_unavailable",
    "fig_moves",
    "fig_key_changes",
    "fig_tombstones",
    "fig_buckets",
    "fig_first",
    "fig_last_tombstone",
)
"""The figures :func:`figure_aggregates` computes, by name; :func:`arrow_figures` gives
the same keys, so :func:`figures_json` takes either."""

Bucketing = Callable[[pa.Array], list[int | None]]
"""Iceberg's ``bucket(n, …)`` of each value of an Arrow array (:func:`arrow_bucket`)."""


def arrow_bucket(buckets: int, iceberg_type: Any) -> Bucketing:
    """Iceberg's ``bucket(buckets, …)`` of an Arrow array of ``iceberg_type`` (a PyIceberg
    type), by PyIceberg's transform: the value :func:`bucket_of` gives in Spark, for
    times, dates and timestamps as the integers Iceberg hashes.

    >>> from pyiceberg.types import IntegerType, StringType
    >>> arrow_bucket(16, IntegerType())(pa.array([1, -5, None], pa.int32()))
    [4, 14, None]
    >>> arrow_bucket(16, StringType())(pa.array(["héllo", ""]))
    [8, 0]
    """
    from pyiceberg.transforms import BucketTransform

    hash_one = BucketTransform(buckets).transform(iceberg_type)

    def bucket(values: pa.Array) -> list[int | None]:
        if pa.types.is_timestamp(values.type) or pa.types.is_time(values.type):
            values = values.cast(pa.int64())
        elif pa.types.is_date(values.type):
            values = values.cast(pa.int32())
        return [None if v is None else hash_one(v) for v in values.to_pylist()]

    return bucket


def arrow_key_changed(rows: pa.Table, primary_key: Sequence[str]) -> pa.Array:
    """:func:`key_changed` of each of ``rows`` (ledger rows in Arrow)."""
    before = rows.column(c.BEFORE).combine_chunks()
    changed = pc.and_(pc.equal(rows.column(c.OP).combine_chunks(), "u"), before.is_valid())
    differs = pa.repeat(pa.scalar(False), len(rows))
    for key in primary_key:
        old = pc.struct_field(before, key)
        changed = pc.and_(changed, old.is_valid())
        same = pc.fill_null(pc.equal(old, rows.column(key).combine_chunks()), False)
        differs = pc.or_(differs, pc.invert(same))
    return pc.fill_null(pc.and_(changed, differs), False)


def arrow_figures(rows: pa.Table, primary_key: Sequence[str], bucket: Bucketing) -> dict[str, Any]:
    """:func:`figure_aggregates` of ``rows`` (the appended ledger rows of one task, in
    Arrow), by the same rules: the same keys, to be combined across tasks with
    :func:`combine_figures`."""
    op = rows.column(c.OP).combine_chunks()
    position = rows.column(c.POSITION).combine_chunks()
    unavailable = rows.column(c.UNAVAILABLE).combine_chunks()
    changed = arrow_key_changed(rows, primary_key)
    placeholders = pc.greater(pc.fill_null(pc.list_value_length(unavailable), 0), 0)
    move = pc.and_(placeholders, pc.or_(pc.equal(op, "c"), changed))
    gone = pc.fill_null(pc.or_(pc.is_in(op, pa.array(["d", "t"])), changed), False)
    first = primary_key[0]
    old = pc.struct_field(rows.column(c.BEFORE).combine_chunks(), first).filter(changed)
    touched = {*bucket(rows.column(first).combine_chunks()), *bucket(old)}
    return {
        "fig_truncate": pc.max(position.filter(pc.fill_null(pc.equal(op, "t"), False))).as_py(),
        "fig_unavailable": sorted(set(pc.list_flatten(unavailable).drop_null().to_pylist())),
        "fig_moves": pc.sum(pc.cast(pc.fill_null(move, False), pa.int64())).as_py() or 0,
        "fig_key_changes": pc.sum(pc.cast(changed, pa.int64())).as_py() or 0,
        "fig_tombstones": pc.sum(pc.cast(gone, pa.int64())).as_py() or 0,
        "fig_buckets": sorted(b for b in touched if b is not None),
        "fig_first": pc.min(position).as_py(),
        "fig_last_tombstone": pc.max(position.filter(gone)).as_py(),
    }


def combine_figures(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The figures of the rows of all ``parts`` (:func:`arrow_figures` of each task's).

    >>> a = {"fig_truncate": None, "fig_unavailable": ["x"], "fig_moves": 1,
    ...      "fig_key_changes": 0, "fig_tombstones": 2, "fig_buckets": [3],
    ...      "fig_first": Decimal(5), "fig_last_tombstone": Decimal(6)}
    >>> b = {**a, "fig_truncate": Decimal(9), "fig_unavailable": ["y"], "fig_buckets": [1],
    ...      "fig_first": Decimal(2), "fig_last_tombstone": None}
    >>> f = combine_figures([a, b])
    >>> f["fig_truncate"], f["fig_unavailable"], f["fig_buckets"], f["fig_first"], f["fig_moves"]
    (Decimal('9'), ['x', 'y'], [1, 3], Decimal('2'), 2)
    """

    def extreme(key: str, pick: Callable[[list[Any]], Any]) -> Any:
        present = [Decimal(p[key]) for p in parts if p[key] is not None]
        return pick(present) if present else None

    return {
        "fig_truncate": extreme("fig_truncate", max),
        "fig_unavailable": sorted({n for p in parts for n in p["fig_unavailable"]}),
        "fig_moves": sum(int(p["fig_moves"]) for p in parts),
        "fig_key_changes": sum(int(p["fig_key_changes"]) for p in parts),
        "fig_tombstones": sum(int(p["fig_tombstones"]) for p in parts),
        "fig_buckets": sorted({int(b) for p in parts for b in p["fig_buckets"]}),
        "fig_first": extreme("fig_first", min),
        "fig_last_tombstone": extreme("fig_last_tombstone", max),
    }


def figures_json(row: Any, version: int, buckets: int, ingested_at_us: int) -> str:
    """The property value for one append, from the row :func:`figure_aggregates` made
    (or the mapping :func:`combine_figures` made)."""
    truncate, first, last_tombstone = (
        row["fig_truncate"],
        row["fig_first"],
        row["fig_last_tombstone"],
    )
    return json.dumps(
        {
            "format": FIGURES_FORMAT,
            "version": version,
            "ingested_at_us": ingested_at_us,
            "truncate": None if truncate is None else str(truncate),
            "unavailable": sorted(row["fig_unavailable"] or ()),
            "moves": int(row["fig_moves"] or 0),
            "key_changes": int(row["fig_key_changes"] or 0),
            "tombstones": int(row["fig_tombstones"] or 0),
            "buckets": buckets,
            "touched": sorted(int(b) for b in row["fig_buckets"] or () if b is not None),
            "first": None if first is None else str(first),
            "last_tombstone": None if last_tombstone is None else str(last_tombstone),
        },
        sort_keys=True,
    )


@dataclass(frozen=True)
class BatchFigures:
    """What the ledger's summaries say of one batch and of the history before it."""

    count: int
    truncate: Decimal | None
    """The batch's newest truncate."""
    earlier: Decimal | None
    """The newest truncate in the retained history."""
    unavailable: frozenset[str]
    moves: bool
    touched: tuple[int, ...]
    history_tombstones: int | None
    """Rows of the retained history the merge's tombstone scan would keep; None when
    not counted (the merge computed the figures from the rows, without the ledger's:
    only the history's truncates are read then)."""
    first: Decimal | None = None
    """The batch's oldest position; None when a snapshot of the batch did not record it."""
    last_tombstone: Decimal | None = None
    """The newest position among the retained history's tombstones (None: it holds none)."""
    positions_recorded: bool = False
    """Whether every snapshot read recorded ``first`` and ``last_tombstone`` (written
    before they were, they are unknown)."""
    key_changes: bool = True
    """Whether an update of the batch changes its primary key (True where a snapshot of
    the batch was written before the ledger counted them: unknown)."""

    def in_order(self, base_newest: Decimal | None) -> bool:
        """Whether every event of the batch is newer than every row of the base (whose
        newest position is ``base_newest``, None for an empty base) and every tombstone
        the merge would remember.

        Then the version guard holds for every event and no remembered delete can win
        over one: the merge may skip both (the in-order path, the usual case of a
        source read in order). Unknown positions answer False.

        >>> f = BatchFigures(2, None, None, frozenset(), False, (), 1, Decimal(9),
        ...                  Decimal(5), True)
        >>> f.in_order(Decimal(8)), f.in_order(Decimal(9)), f.in_order(None)
        (True, False, True)
        >>> BatchFigures(2, None, None, frozenset(), False, (), 1, Decimal(4),
        ...              Decimal(5), True).in_order(None)  # a late event after a delete
        False
        """
        if not self.positions_recorded or self.first is None:
            return False
        newest = [p for p in (base_newest, self.last_tombstone) if p is not None]
        return not newest or self.first > max(newest)


def batch_figures(
    lineage: Sequence[Snapshot],
    start: int | None,
    end: int,
    cutoff_us: int,
    version: int,
    buckets: int,
) -> BatchFigures | None:
    """The figures of the events after snapshot ``start`` up to ``end`` and of the
    history at ``start`` ingested at or after ``cutoff_us``, from ``lineage`` (every
    snapshot of the ledger's metadata); None when a snapshot it needs has no figures
    (or figures of another layout ``version`` or bucket count), or when the lineage is
    not whole back to the cutoff: the caller computes them from the data then.

    >>> def snap(i, parent, op="append", n=1, **fig):
    ...     summary = {"operation": op, "added-records": str(n)}
    ...     if fig:
    ...         base = {"format": 1, "version": 1, "ingested_at_us": i, "truncate": None,
    ...                 "unavailable": [], "moves": 0, "tombstones": 0, "buckets": 4,
    ...                 "touched": []}
    ...         summary[FIGURES_PROPERTY] = json.dumps({**base, **fig})
    ...     return Snapshot(i, parent, summary, timestamp_ms=i)
    >>> lineage = [snap(1, None, tombstones=2, truncate="7"), snap(2, 1, n=3, touched=[1]),
    ...            snap(3, 2, n=2, touched=[2], unavailable=["b"])]
    >>> f = batch_figures(lineage, 1, 3, 0, 1, 4)
    >>> f.count, f.earlier, f.truncate, sorted(f.unavailable), f.touched, f.history_tombstones
    (5, Decimal('7'), None, ['b'], (1, 2), 2)
    >>> batch_figures(lineage, 1, 3, 2000, 1, 4).history_tombstones  # history before the cutoff
    0
    >>> batch_figures([snap(1, None), *lineage[1:]], 1, 3, 0, 1, 4) is None  # no figures
    True
    >>> batch_figures(lineage[1:], 1, 3, 0, 1, 4) is None  # snapshot 1 expired
    True
    >>> f.positions_recorded, f.key_changes  # written before either was recorded
    (False, True)
    >>> ordered = [snap(1, None, tombstones=1, first="3", last_tombstone="7"),
    ...            snap(2, 1, first="9", last_tombstone=None, key_changes=0),
    ...            snap(3, 2, first="8", last_tombstone="8", key_changes=0)]
    >>> f = batch_figures(ordered, 1, 3, 0, 1, 4)
    >>> f.first, f.last_tombstone, f.positions_recorded, f.key_changes
    (Decimal('8'), Decimal('7'), True, False)
    """
    by_id = {s.snapshot_id: s for s in lineage}
    figures: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    count = 0
    in_batch = True
    current: int | None = end
    seen: set[int] = set()
    while current is not None:
        snapshot = by_id.get(current)
        if snapshot is None or current in seen:
            return None  # expired (its figures gone) or a malformed lineage
        seen.add(current)
        if current == start:
            in_batch = False
        operation = snapshot.summary.get("operation")
        added = int(snapshot.summary.get("added-records", "0") or 0)
        parsed = _figures_of(snapshot.summary)
        if not in_batch and snapshot.timestamp_ms * 1000 < cutoff_us:
            break  # it and everything older were ingested before the cutoff
        if operation == "replace" or (operation == "append" and not added):
            pass  # no new rows (a rewrite of files, or an empty append)
        elif operation != "append" or parsed is None:
            return None  # rows removed, or rows without figures
        elif in_batch:
            if parsed.get("version") != version or parsed.get("buckets") != buckets:
                return None
            figures.append(parsed)
            count += added
        elif int(parsed["ingested_at_us"]) >= cutoff_us:
            history.append(parsed)
        current = snapshot.parent_id
    if in_batch and start is not None:
        return None  # ``start`` is not an ancestor of ``end``
    walked = [*figures, *history]
    return BatchFigures(
        count=count,
        truncate=_max_decimal(f["truncate"] for f in figures),
        earlier=_max_decimal(f["truncate"] for f in history),
        unavailable=frozenset(n for f in figures for n in f["unavailable"]),
        moves=any(int(f["moves"]) for f in figures),
        touched=tuple(sorted({int(b) for f in figures for b in f["touched"]})),
        history_tombstones=sum(int(f["tombstones"]) for f in history),
        first=_min_decimal(f.get("first") for f in figures),
        last_tombstone=_max_decimal(f.get("last_tombstone") for f in history),
        positions_recorded=all("first" in f and "last_tombstone" in f for f in walked),
        key_changes=any(int(f.get("key_changes", 1)) for f in figures),
    )


def _figures_of(summary: Mapping[str, str]) -> dict[str, Any] | None:
    text = summary.get(FIGURES_PROPERTY)
    if text is None:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) and parsed.get("format") == FIGURES_FORMAT else None


def _min_decimal(values: Any) -> Decimal | None:
    present = [Decimal(v) for v in values if v is not None]
    return min(present) if present else None


def _max_decimal(values: Any) -> Decimal | None:
    present = [Decimal(v) for v in values if v is not None]
    return max(present) if present else None
