"""Per table: how fresh the base table is, against its SLA, with the figures beside it.

Freshness is now minus the source commit time of the newest event the merge has
applied: the ledger rows up to the merge watermark's snapshot (Iceberg answers the
``max`` from file statistics, the ledger being append-only). A table with
``freshness_sla`` breaches it when that is larger; a table never merged has no
freshness, and breaches its SLA too (nothing of the source has arrived).

``observe_table`` also gathers what the metrics and the status page show beside it:
the lag in events, the files and snapshots of the base table, and where its latest
schema change is in its three phases (:mod:`icetide.observe.convergence`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pyspark.sql import functions as F

from icetide.lake.ledger_figures import EPOCH
from icetide.lake.progress import events_after, read_watermark
from icetide.lake.tables import (
    HeldTables,
    TableRefs,
    added_upper_bound,
    current_snapshot_id,
    iceberg_table,
    loaded_once,
    table_exists,
)
from icetide.maintenance.files import file_counts
from icetide.observe.convergence import table_convergence
from icetide.observe.display import Verdict, verdict
from icetide.schema.contract import ledger as c

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.config import Config
    from icetide.schema.contract.names import TableName

T = TypeVar("T")


@dataclass(frozen=True)
class TableHealth:
    """One table's freshness, SLA verdict and size figures at one moment."""

    table: str
    observed_at: str
    ledger_snapshot: int | None
    watermark: int | None
    lag_events: int
    newest_applied: str | None
    """Source commit time of the newest applied event (ISO, UTC)."""
    freshness_seconds: float | None
    sla_seconds: float | None
    breached: bool
    data_files: int
    delete_files: int
    snapshots: int
    dead_letters: dict[str, int]
    """Dead letters of the table by reason (its dead-letter table)."""
    schema_version: int | None = None
    schema_phase: str = "converged"
    """Where the table's latest runtime schema change is (``schema``, ``code``, ``data``
    or ``converged``; ``converged`` too when none ever happened)."""
    schema_change_version: int | None = None
    phase_seconds: dict[str, float | None] = field(default_factory=dict)
    """Seconds from that change at the source to each step reached
    (:meth:`~icetide.observe.convergence.Convergence.seconds`)."""
    convergence_breached: bool = False

    @property
    def verdict(self) -> Verdict:
        """``held`` (its schema change over the convergence SLA), ``stale`` or ``ok``."""
        return verdict(held=self.convergence_breached, breached=self.breached)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {**asdict(self), "verdict": self.verdict}

    def render(self) -> str:
        """One line for people."""
        fresh = (
            "never merged"
            if self.freshness_seconds is None
            else (f"{_human(self.freshness_seconds)} behind the source")
        )
        sla = "" if self.sla_seconds is None else f" (SLA {_human(self.sla_seconds)})"
        verdict = " BREACHED" if self.breached else (" ok" if self.sla_seconds else "")
        return f"freshness {self.table}: {fresh}{sla}{verdict}"


def _human(seconds: float) -> str:
    """``3725.0`` → ``1h 2m 5s``.

    >>> _human(3725.0), _human(0.4), _human(90061)
    ('1h 2m 5s', '0s', '1d 1h 1m 1s')
    """
    left = int(seconds)
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size}{unit}")
            left %= size
    return " ".join(parts)


_KEPT = 256
_by_snapshot: OrderedDict[tuple[str, str, int], Any] = OrderedDict()


def _of_snapshot(what: str, table: TableName, snapshot: int, compute: Callable[[], T]) -> T:
    """``compute``'s answer about one snapshot of ``table``, computed once: a snapshot's
    rows never change, and the observer asks again every few seconds, so between two
    commits it asks Spark nothing (the most recent answers are kept)."""
    key = (what, table.sql, snapshot)
    if key in _by_snapshot:
        _by_snapshot.move_to_end(key)
        return cast("T", _by_snapshot[key])
    value = compute()
    _by_snapshot[key] = value
    while len(_by_snapshot) > _KEPT:
        _by_snapshot.popitem(last=False)
    return value


_newest_seen: dict[str, tuple[int, datetime | None]] = {}
"""Ledger → the last watermark :func:`newest_applied` answered for, and its answer."""


def newest_applied(spark: SparkSession, refs: TableRefs, watermark: int | None) -> datetime | None:
    """Source commit time of the newest event merged so far (ledger up to the watermark).

    The first time, by a Spark job over the ledger as of the watermark. After a merge
    moved the watermark on, from the bounds the ledger's manifests keep for the files
    appended since the last answer (:func:`~icetide.lake.tables.added_upper_bound`),
    the larger of the two: the ledger only grows, and a job a table after every merge
    round was most of the observer's work (100 tables: 16 s of JVM CPU a look)."""
    if watermark is None:
        return None
    ledger = refs.cdc

    def compute() -> datetime | None:
        seen = _newest_seen.get(ledger.sql)
        if seen is not None:
            since, earlier = seen
            added = added_upper_bound(iceberg_table(spark, ledger), c.SOURCE_TS, watermark, since)
            if added.known:
                later = None if added.value is None else EPOCH + timedelta(microseconds=added.value)
                return max((t for t in (earlier, later) if t is not None), default=None)
        reader = spark.read.format("iceberg").option("snapshot-id", watermark)
        row = reader.load(ledger.dotted).agg(F.max(c.SOURCE_TS)).first()
        value = row[0] if row is not None else None
        if not isinstance(value, datetime):
            return None
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    value = _of_snapshot("newest_applied", ledger, watermark, compute)
    _newest_seen[ledger.sql] = (watermark, value)
    return value


def dead_letters_by_reason(spark: SparkSession, refs: TableRefs) -> dict[str, int]:
    """The table's dead letters counted by reason."""
    if not table_exists(spark, refs.dead_letters):
        return {}
    snapshot = current_snapshot_id(spark, refs.dead_letters)
    if snapshot is None:
        return {}

    def compute() -> dict[str, int]:
        rows = spark.table(refs.dead_letters.sql).groupBy("reason").count().collect()
        return {str(r["reason"]): int(r["count"]) for r in sorted(rows, key=lambda r: str(r[0]))}

    return dict(_of_snapshot("dead_letters", refs.dead_letters, snapshot, compute))


def observe_table(
    spark: SparkSession,
    config: Config,
    name: str,
    now: datetime | None = None,
    held: HeldTables | None = None,
) -> TableHealth:
    """Measure one table now: each of its tables loaded from the catalog once
    (:func:`~icetide.lake.tables.loaded_once`), however many things are asked of it;
    with ``held``, refreshed when held from an earlier look."""
    with loaded_once(held):
        return _observe_table(spark, config, name, now or datetime.now(UTC))


def _observe_table(spark: SparkSession, config: Config, name: str, now: datetime) -> TableHealth:
    refs = TableRefs.of(config, name)
    sla = config.table(name).freshness_sla
    has_base = table_exists(spark, refs.base)
    has_ledger = table_exists(spark, refs.cdc)
    watermark = read_watermark(spark, refs.base) if has_base else None
    end = current_snapshot_id(spark, refs.cdc) if has_ledger else None
    lag = 0
    if end is not None and end != watermark:
        lag = events_after(spark, refs.cdc, watermark, end)
    applied = newest_applied(spark, refs, watermark) if has_ledger else None
    freshness = (now - applied).total_seconds() if applied is not None else None
    breached = sla is not None and (freshness is None or freshness > sla.total_seconds())
    files = file_counts(spark, refs.base) if has_base else None
    change = table_convergence(spark, config, name) if has_ledger else None
    return TableHealth(
        table=name,
        observed_at=now.isoformat(timespec="seconds"),
        ledger_snapshot=end,
        watermark=watermark,
        lag_events=lag,
        newest_applied=applied.isoformat() if applied else None,
        freshness_seconds=round(freshness, 3) if freshness is not None else None,
        sla_seconds=sla.total_seconds() if sla is not None else None,
        breached=breached,
        data_files=files.data_files if files else 0,
        delete_files=files.delete_files if files else 0,
        snapshots=files.snapshots if files else 0,
        dead_letters=dead_letters_by_reason(spark, refs),
        schema_phase=change.phase if change else "converged",
        schema_change_version=change.version if change else None,
        phase_seconds=change.seconds() if change else {},
        convergence_breached=change.breached if change else False,
    )


def observe_all(
    spark: SparkSession, config: Config, held: HeldTables | None = None
) -> list[TableHealth]:
    """Every configured table, measured at the same moment (``held``: see
    :func:`observe_table`)."""
    now = datetime.now(UTC)
    return [observe_table(spark, config, t.name, now, held) for t in config.tables]
