"""``icetide status``: per table, what the ledger holds, what the base mirrors, the lag."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import datetime

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.config import Config
from icetide.ledger import contract as c
from icetide.merge.stage import read_new_events, read_watermark
from icetide.observe.capture_lag import CaptureLag, capture_lag_by_table, render_capture_lags
from icetide.spark.tables import TableRefs, current_snapshot_id, table_exists


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
    capture: CaptureLag | None = None
    """The capture lag of the source capturing this table (see capture_lag.py)."""


def _count(spark: SparkSession, table: str) -> int:
    return int(spark.table(table).count()) if table_exists(spark, table) else 0


def table_status(spark: SparkSession, config: Config, name: str) -> TableStatus:
    """Read the status of one table from its three Iceberg tables."""
    refs = TableRefs.of(config, name)
    ledger_events = _count(spark, refs.cdc)
    watermark = read_watermark(spark, refs.base) if table_exists(spark, refs.base) else None
    end = current_snapshot_id(spark, refs.cdc) if table_exists(spark, refs.cdc) else None
    lag = 0
    last_commit: str | None = None
    if end is not None:
        if end != watermark:
            lag = int(read_new_events(spark, refs.cdc, watermark, end).count())
        row = spark.table(refs.cdc).agg(F.max(c.INGESTED_AT)).first()
        if row is not None and isinstance(row[0], datetime):
            last_commit = row[0].isoformat()
    return TableStatus(
        table=name,
        ledger_events=ledger_events,
        watermark=watermark,
        base_rows=_count(spark, refs.base),
        lag_events=lag,
        last_ledger_commit=last_commit,
        dead_letters=_count(spark, refs.dlt),
    )


def pipeline_status(spark: SparkSession, config: Config) -> list[TableStatus]:
    """Status of every configured table."""
    lags = capture_lag_by_table(config)
    rows = [table_status(spark, config, t.name) for t in config.tables]
    return [replace(r, capture=lags.get(r.table)) for r in rows]


def render_status(rows: list[TableStatus]) -> str:
    """A plain text table for people."""
    header = f"{'table':<20}{'ledger':>10}{'base rows':>11}{'lag':>8}{'dead':>7}  watermark"
    lines = [header]
    for r in rows:
        lines.append(
            f"{r.table:<20}{r.ledger_events:>10,}{r.base_rows:>11,}{r.lag_events:>8,}"
            f"{r.dead_letters:>7,}  {r.watermark if r.watermark is not None else '-'}"
        )
    capture = render_capture_lags(r.capture for r in rows)
    return "\n".join(lines) + (f"\n\n{capture}" if capture else "")


def status_dicts(rows: list[TableStatus]) -> list[dict[str, object]]:
    """The same rows as JSON-ready dicts."""
    return [asdict(r) for r in rows]
