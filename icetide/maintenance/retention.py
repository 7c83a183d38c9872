"""Which snapshots expiry must keep: the oldest one each stage may still read.

Expiry removes snapshots committed before ``older_than`` (beyond the newest
``keep_last``). Stages read older snapshots than the current one:

* the merge reads the ledger incrementally from its watermark (a ledger snapshot named
  in the base table's newest merge snapshot) up to the ledger's current snapshot, which
  needs the watermark snapshot and every one after it;
* the merge finds its watermark (and the bootstrap its state) in the newest base
  snapshot carrying them; a compaction commits snapshots that carry neither, so that
  snapshot must stay until a later merge carries the watermark forward;
* key changes and deletes are looked up in snapshots inside ``merge.tombstone_retention``;
* the SCD type 2 history (``<table>_history``) finds its own watermark in its newest
  snapshot carrying it, as the base does, and a history behind the base (a merge stopped
  between the two commits) is caught up from the ledger after *that* watermark: the
  history keeps that snapshot, and the ledger keeps every snapshot after the older of the
  two watermarks. Without it an expiry could leave the history looking never seeded, and
  the merge would seed it again over the versions it holds.

So each table gets the earliest of: now minus ``maintenance.snapshots.max_age``, now minus
the tombstone window, and the commit time of each snapshot a stage needs.

>>> from datetime import datetime, timedelta, UTC
>>> now = datetime(2026, 1, 10, tzinfo=UTC)
>>> expire_before(now, [timedelta(days=5), timedelta(days=7)], [now - timedelta(days=9)])
datetime.datetime(2026, 1, 1, 0, 0, tzinfo=datetime.timezone.utc)
>>> expire_before(now, [timedelta(hours=1)], [])
datetime.datetime(2026, 1, 9, 23, 0, tzinfo=datetime.timezone.utc)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import TYPE_CHECKING

from icetide.lake.tables import (
    Snapshot,
    iceberg_table,
    lineage_of,
    lineage_snapshots,
    metadata_snapshots,
    newest_carrying,
    table_exists,
)
from icetide.schema.contract import history as h
from icetide.schema.contract.base import BOOTSTRAP_STATE, WATERMARK_PROPERTY
from icetide.schema.contract.names import TableName

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.config import Config


def expire_before(
    now: datetime, windows: Iterable[timedelta], needed: Iterable[datetime]
) -> datetime:
    """The cut-off for expiry: outside every window and no later than any needed snapshot."""
    return min([now - w for w in windows] + list(needed))


@dataclass(frozen=True)
class Keep:
    """The cut-off for one table, and why (for the report)."""

    table: TableName
    older_than: datetime | None
    """None: expire nothing (the ledger of a table never merged)."""
    reasons: tuple[str, ...]


def _millis_to_utc(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, UTC)


def snapshot_time(spark: SparkSession, table: TableName, snapshot_id: int) -> datetime | None:
    """When ``snapshot_id`` of ``table`` was committed; None when it is gone."""
    _, snapshots = metadata_snapshots(spark, iceberg_table(spark, table))
    found = [s for s in snapshots if s.snapshot_id == int(snapshot_id)]
    return _millis_to_utc(found[0].timestamp_ms) if found else None


def expiry_due(spark: SparkSession, table: TableName, older_than: datetime, keep_last: int) -> bool:
    """True when ``expire_snapshots`` with these arguments has a snapshot to expire: one
    committed before ``older_than`` that is not among the newest ``keep_last`` of the
    current lineage (which Iceberg keeps, the current one always). Asked of the table's
    metadata first, because the procedure costs Spark jobs even when it expires nothing
    (its reachable-files comparison), and most runs of a frequent maintenance have
    nothing to expire."""
    cut = older_than.timestamp() * 1000
    current, snapshots = metadata_snapshots(spark, iceberg_table(spark, table))
    kept = {s.snapshot_id for s in islice(lineage_of(current, snapshots), max(keep_last, 1))}
    return any(s.timestamp_ms < cut and s.snapshot_id not in kept for s in snapshots)


@dataclass(frozen=True)
class Lineages:
    """What the cut-offs of one table depend on, read from its tables' metadata once
    (:func:`read_lineages`) and decided on by :func:`plan_keeps` without Spark."""

    base: Sequence[Snapshot]
    """The base's current lineage, newest first (empty: no base yet)."""
    ledger_times: Mapping[int, int]
    """Every snapshot of the ledger in its metadata: id to commit time (ms)."""
    history: Sequence[Snapshot] | None = None
    """The history's current lineage, newest first; None: no history table."""


def read_lineages(
    spark: SparkSession, base: TableName, ledger: TableName, history: TableName | None = None
) -> Lineages:
    """Each table's metadata loaded once (no Spark job)."""
    ledger_times: dict[int, int] = {}
    if table_exists(spark, ledger):
        _, snapshots = metadata_snapshots(spark, iceberg_table(spark, ledger))
        ledger_times = {s.snapshot_id: s.timestamp_ms for s in snapshots}
    return Lineages(
        base=list(lineage_snapshots(spark, base)) if table_exists(spark, base) else [],
        ledger_times=ledger_times,
        history=(
            list(lineage_snapshots(spark, history))
            if history is not None and table_exists(spark, history)
            else None
        ),
    )


def keep_for(
    spark: SparkSession,
    config: Config,
    base: TableName,
    ledger: TableName,
    now: datetime,
    history: TableName | None = None,
) -> tuple[Keep, Keep, Keep | None]:
    """The expiry cut-offs of one table's base, ledger and history (None: ``history``
    is None or not created) tables: :func:`plan_keeps` over :func:`read_lineages`."""
    lineages = read_lineages(spark, base, ledger, history)
    return plan_keeps(
        lineages,
        (base, ledger, history),
        max_age=config.maintenance.snapshots.max_age,
        tombstone_window=config.merge.tombstone_retention,
        now=now,
    )


def plan_keeps(
    lineages: Lineages,
    tables: tuple[TableName, TableName, TableName | None],
    *,
    max_age: timedelta,
    tombstone_window: timedelta,
    now: datetime,
) -> tuple[Keep, Keep, Keep | None]:
    """The cut-offs of the ``tables`` (base, ledger, history) from their ``lineages``
    (see the module): the base keeps its newest watermark and bootstrap snapshots, the
    history its newest watermark snapshot, and the ledger every snapshot from the older
    of the two watermarks (all of it while the history holds none of the ledger, and
    all of it when no watermark is known or its snapshot is gone)."""
    base, ledger, history = tables
    windows = [max_age, tombstone_window]
    window_reasons = ("max_age", "merge.tombstone_retention")
    base_needed: list[datetime] = []
    reasons = list(window_reasons)
    marked = newest_carrying(lineages.base, WATERMARK_PROPERTY)
    for carrying, why in (
        (marked, "watermark"),
        (newest_carrying(lineages.base, BOOTSTRAP_STATE), "bootstrap"),
    ):
        if carrying is not None:
            base_needed.append(_millis_to_utc(carrying.timestamp_ms))
            reasons.append(f"newest {why} snapshot")
    base_keep = Keep(base, expire_before(now, windows, base_needed), tuple(reasons))
    watermarks = [int(marked.summary[WATERMARK_PROPERTY])] if marked is not None else []
    history_keep = None
    if history is not None and lineages.history is not None:
        carrying = newest_carrying(lineages.history, h.WATERMARK_PROPERTY)
        if carrying is None:  # created, never seeded: nothing it reads back
            history_keep = Keep(history, now - max_age, ("max_age",))
        else:
            history_keep = Keep(
                history,
                min(now - max_age, _millis_to_utc(carrying.timestamp_ms)),
                ("max_age", "newest history watermark snapshot"),
            )
            _, behind = h.history_watermark([carrying.summary])
            if behind is None:  # the history reads the ledger from its start next
                return (
                    base_keep,
                    Keep(ledger, None, ("the history holds no ledger snapshot yet",)),
                    history_keep,
                )
            watermarks.append(behind)
    moments = [lineages.ledger_times.get(w) for w in watermarks]
    if not moments or None in moments:
        # Never merged (or the watermark's snapshot is already gone, when the merge
        # replays the whole ledger): nothing is provably unneeded.
        return base_keep, Keep(ledger, None, ("no merge watermark",)), history_keep
    ledger_keep = Keep(
        ledger,
        expire_before(now, windows, [_millis_to_utc(m) for m in moments if m is not None]),
        window_reasons + tuple(f"watermark snapshot {w}" for w in watermarks),
    )
    return base_keep, ledger_keep, history_keep


def keep_plain(config: Config, table: TableName, now: datetime) -> Keep:
    """The cut-off of a table no stage reads back in time (the dead letters)."""
    return Keep(table, now - config.maintenance.snapshots.max_age, ("max_age",))
