"""``icetide status``: per table, what the ledger holds, what the base mirrors, the lag,
the freshness against its SLA; worst first, as on the status page.

Also what would otherwise go unseen: event columns the schema lacks (counted per table
from the ledger's snapshot summaries), events no table takes (the unrouted dead-letter
table) and landing files changed after they were read (the ledger's state folder).
The JSON rows keep their keys; these come as added keys.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.config import Config
from icetide.lake.progress import events_after, read_watermark
from icetide.lake.tables import (
    TableRefs,
    current_snapshot_id,
    lineage_summaries,
    loaded_once,
    table_exists,
)
from icetide.ledger.landing import Change, changed_files
from icetide.observe import display
from icetide.observe.capture_lag import CaptureLag, capture_lag_by_table, render_capture_lags
from icetide.observe.convergence import Convergence, render_convergence, table_convergence
from icetide.observe.display import Verdict
from icetide.observe.freshness import newest_applied
from icetide.schema.contract import ledger as c
from icetide.schema.contract.base import STRATEGY_PROPERTY
from icetide.schema.contract.names import TableName
from icetide.schema.quoting import literal


@dataclass(frozen=True)
class TableStatus:
    """The health of one table's pipeline."""

    table: str
    ledger_events: int
    watermark: int | None
    base_rows: int
    lag_events: int
    last_ledger_commit: str | None
    dead_letters: int
    extra_columns: dict[str, int] = field(default_factory=dict)
    """Event columns not in the schema → events that carried them (kept in ``_rescued``)."""
    convergence: Convergence | None = None
    """The latest schema change's phase and timings (None: the table never changed)."""
    capture: CaptureLag | None = None
    """The capture lag of the source capturing this table (see capture_lag.py)."""
    merge_strategy: str | None = None
    """How the last merge joined its batch with the base, and why (its snapshot summary)."""
    freshness_seconds: float | None = None
    """Now minus the source commit time of the newest merged event (None: never merged)."""
    sla_seconds: float | None = None
    """The table's ``freshness_sla`` (None: none set)."""
    breached: bool = False
    """Stale beyond its SLA (or never merged, with an SLA)."""

    @property
    def verdict(self) -> Verdict:
        """``held`` (a schema change over its convergence SLA), ``stale`` or ``ok``:
        the order ``status`` lists the tables in (:mod:`icetide.observe.display`)."""
        late = self.convergence is not None and self.convergence.breached
        return display.verdict(held=late, breached=self.breached)

    def rank(self) -> tuple[int, float, str]:
        """The sort key that lists the worst table first."""
        return display.rank_key(self.table, self.verdict, self.freshness_seconds)


@dataclass(frozen=True)
class PipelineNotes:
    """What ``status`` shows for the whole pipeline, below the per-table rows."""

    unrouted_table: str
    unrouted_dead_letters: int
    changed_files: list[Change]


@dataclass(frozen=True)
class PipelineStatus:
    """Every table's row, plus what belongs to the pipeline as a whole."""

    tables: list[TableStatus]
    notes: PipelineNotes


def _count(spark: SparkSession, table: TableName) -> int:
    return int(spark.table(table.sql).count()) if table_exists(spark, table) else 0


def table_status(
    spark: SparkSession,
    config: Config,
    name: str,
    capture: CaptureLag | None = None,
    now: datetime | None = None,
) -> TableStatus:
    """Read the status of one table from its three Iceberg tables, each loaded from the
    catalog once (:func:`~icetide.lake.tables.loaded_once`)."""
    with loaded_once():
        return _table_status(spark, config, name, capture, now or datetime.now(UTC))


def _table_status(
    spark: SparkSession, config: Config, name: str, capture: CaptureLag | None, now: datetime
) -> TableStatus:
    refs = TableRefs.of(config, name)
    ledger_events = _count(spark, refs.cdc)
    watermark = read_watermark(spark, refs.base) if table_exists(spark, refs.base) else None
    end = current_snapshot_id(spark, refs.cdc) if table_exists(spark, refs.cdc) else None
    lag = 0
    last_commit: str | None = None
    if end is not None:
        if end != watermark:
            lag = events_after(spark, refs.cdc, watermark, end)
        row = spark.table(refs.cdc.sql).agg(F.max(c.INGESTED_AT)).first()
        if row is not None and isinstance(row[0], datetime):
            last_commit = row[0].isoformat()
    applied = newest_applied(spark, refs, watermark) if end is not None else None
    freshness = (now - applied).total_seconds() if applied is not None else None
    sla = config.table(name).freshness_sla
    return TableStatus(
        table=name,
        ledger_events=ledger_events,
        watermark=watermark,
        base_rows=_count(spark, refs.base),
        lag_events=lag,
        last_ledger_commit=last_commit,
        dead_letters=_count(spark, refs.dead_letters),
        extra_columns=extra_columns(spark, refs.cdc),
        capture=capture,
        merge_strategy=last_merge_strategy(spark, refs.base),
        convergence=table_convergence(spark, config, name),
        freshness_seconds=round(freshness, 3) if freshness is not None else None,
        sla_seconds=sla.total_seconds() if sla is not None else None,
        breached=sla is not None and (freshness is None or freshness > sla.total_seconds()),
    )


def last_merge_strategy(spark: SparkSession, base: TableName) -> str | None:
    """The strategy the newest merge of ``base`` recorded, with its reason."""
    if not table_exists(spark, base):
        return None
    for summary in lineage_summaries(spark, base):
        if STRATEGY_PROPERTY in summary:
            return summary[STRATEGY_PROPERTY]
    return None


def extra_columns(spark: SparkSession, ledger: TableName) -> dict[str, int]:
    """Sum of the extra-column counts in the ledger's snapshot summaries (one per batch)."""
    if not table_exists(spark, ledger):
        return {}
    rows = spark.sql(
        f"SELECT summary[{literal(c.EXTRA_COLUMNS_PROPERTY)}] AS extra FROM {ledger}.snapshots "
        f"WHERE summary[{literal(c.EXTRA_COLUMNS_PROPERTY)}] IS NOT NULL"
    ).collect()
    total: dict[str, int] = {}
    for row in rows:
        try:
            counts = json.loads(row.extra)
        except ValueError:
            continue
        for column, n in counts.items() if isinstance(counts, dict) else ():
            total[str(column)] = total.get(str(column), 0) + int(n)
    return dict(sorted(total.items()))


def pipeline_notes(spark: SparkSession, config: Config) -> PipelineNotes:
    """Unrouted dead letters and changed landing files, for the whole pipeline."""
    unrouted = TableRefs.of(config, config.dead_letter.unrouted_table).dead_letters
    changes = (
        changed_files(config.resolved_path(config.state_dir))
        if config.transport.type == "files"
        else []
    )
    return PipelineNotes(
        unrouted_table=str(config.dead_letter.unrouted),
        unrouted_dead_letters=_count(spark, unrouted),
        changed_files=changes,
    )


def pipeline_status(
    spark: SparkSession, config: Config, pattern: str | None = None, limit: int | None = None
) -> PipelineStatus:
    """Status of the configured tables whose names match ``pattern`` (all by default),
    worst first (:func:`~icetide.observe.display.rank_key`), at most ``limit`` of them;
    and of the pipeline as a whole. Only the matching tables are read."""
    lags = capture_lag_by_table(config)
    now = datetime.now(UTC)
    names = [t.name for t in config.tables if display.matches(t.name, pattern)]
    rows = [table_status(spark, config, n, lags.get(n), now) for n in names]
    shown, _ = display.select(rows, lambda r: r.table, TableStatus.rank, None, limit)
    return PipelineStatus(shown, pipeline_notes(spark, config))


def render_status(status: PipelineStatus) -> str:
    """A plain text table for people, worst first, then the capture lags and the
    pipeline's notes."""
    rows = status.tables
    header = (
        f"{'table':<20}{'freshness':>20}{'ledger':>10}{'base rows':>11}"
        f"{'lag':>8}{'dead':>7}  watermark"
    )
    lines = [header]
    for r in rows:
        lines.append(
            f"{r.table:<20}{freshness_text(r):>20}{r.ledger_events:>10,}"
            f"{r.base_rows:>11,}{r.lag_events:>8,}{r.dead_letters:>7,}  "
            f"{r.watermark if r.watermark is not None else '-'}"
        )
    lines.extend(f"{r.table}: last merge by {r.merge_strategy}" for r in rows if r.merge_strategy)
    lines.extend(render_extra_columns(rows))
    lines.extend(render_convergence([r.convergence for r in rows if r.convergence]))
    lines.extend(render_notes(status.notes))
    capture = render_capture_lags(r.capture for r in rows)
    return "\n".join(lines) + (f"\n\n{capture}" if capture else "")


def freshness_text(row: TableStatus) -> str:
    """``8 h 56 min``, ``never merged``; the verdict after it when not ok (``2 h STALE``).

    >>> freshness_text(TableStatus("t", 0, None, 0, 0, None, 0, freshness_seconds=7260.0))
    '2 h 1 min'
    >>> freshness_text(TableStatus("t", 0, None, 0, 0, None, 0, breached=True))
    'never merged STALE'
    """
    text = (
        "never merged" if row.freshness_seconds is None else display.duration(row.freshness_seconds)
    )
    return text if row.verdict == "ok" else f"{text} {row.verdict.upper()}"


def render_extra_columns(rows: list[TableStatus]) -> list[str]:
    """One line per table whose events carry columns its schema lacks."""
    return [
        f"{r.table}: event columns not in the schema, kept in _rescued: "
        + ", ".join(f"{k} ({n:,} events)" for k, n in r.extra_columns.items())
        for r in rows
        if r.extra_columns
    ]


def render_notes(notes: PipelineNotes) -> list[str]:
    """The pipeline-wide lines: unrouted dead letters, changed landing files."""
    lines = []
    if notes.unrouted_dead_letters:
        lines.append(
            f"unrouted dead letters: {notes.unrouted_dead_letters:,} in {notes.unrouted_table} "
            "(events no configured table takes, or too broken to tell)"
        )
    if notes.changed_files:
        names = ", ".join(c.file for c in notes.changed_files[:5])
        more = len(notes.changed_files) - 5
        lines.append(
            f"WARNING {len(notes.changed_files):,} landing file(s) changed after they were "
            f"read, changes never read: {names}" + (f" and {more:,} more" if more > 0 else "")
        )
    return lines


def status_dicts(status: PipelineStatus) -> list[dict[str, object]]:
    """The same rows as JSON-ready dicts, worst first (docs/operations.md lists the
    fields; a test keeps that list complete).

    Pipeline-wide notes come as added keys on every row (``unrouted_dead_letters``,
    ``landing_changed_files``), so the output stays the list of table rows it always was.
    """
    notes = {
        "unrouted_dead_letters": status.notes.unrouted_dead_letters,
        "landing_changed_files": [c.file for c in status.notes.changed_files],
    }
    return [{**asdict(r), "verdict": r.verdict, **notes} for r in status.tables]
