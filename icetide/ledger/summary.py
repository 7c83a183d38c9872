"""The batch-end summary line: events per table, dead letters by reason with sample
message ids, and event columns the schema does not have (kept in ``_rescued``, counted)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PROGRESS_SECONDS = 15.0
"""A micro-batch storing its tables in chunks says how far it is at most this often. At
a thousand tables one micro-batch can store for many minutes (bench/results/tables.md),
and its one line came only at its end."""


@dataclass
class BatchSummary:
    """What one ledger batch did, per table and per dead-letter reason."""

    batch_id: int
    rows: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    dead: dict[str, int] = field(default_factory=dict)
    samples: dict[str, list[str]] = field(default_factory=dict)
    extra_columns: dict[str, dict[str, int]] = field(default_factory=dict)
    """Table → event column not in its schema → stored events that carried it."""
    dead_by_table: dict[str, dict[str, int]] = field(default_factory=dict)
    """Table (``""`` for unrouted events) → reason → dead letters (for metrics)."""

    def add_dead(
        self, reason: str, count: int, samples: list[str], table: str | None = None
    ) -> None:
        """Count ``count`` dead letters for ``reason`` (of ``table``, None when unrouted),
        keeping up to 10 sample ids."""
        self.dead[reason] = self.dead.get(reason, 0) + count
        by_reason = self.dead_by_table.setdefault(table or "", {})
        by_reason[reason] = by_reason.get(reason, 0) + count
        kept = self.samples.setdefault(reason, [])
        kept.extend(s for s in samples if s not in kept)
        del kept[10:]

    def absorb(self, part: BatchSummary) -> None:
        """Add what ``part`` counted: one table's share of this batch, stored in a thread
        of its own (its ``skipped`` is not counted: the batch counts those itself)."""
        self.rows.update(part.rows)
        for table, reasons in part.dead_by_table.items():
            for reason, count in reasons.items():
                self.add_dead(reason, count, part.samples.get(reason, []), table or None)
        self.extra_columns.update(part.extra_columns)

    def render(self) -> str:
        """One log line, e.g. ``ledger batch 3: 120 events (customers 100, …)``."""
        total = sum(self.rows.values())
        parts = [f"ledger batch {self.batch_id}: {total} events"]
        if self.rows:
            parts[0] += " (" + ", ".join(f"{t} {n}" for t, n in sorted(self.rows.items())) + ")"
        if self.skipped:
            parts.append(
                "skipped " + ", ".join(f"{k} {n}" for k, n in sorted(self.skipped.items()))
            )
        if self.dead:
            reasons = [
                f"{reason} {count} [{', '.join(self.samples.get(reason, []))}]"
                for reason, count in sorted(self.dead.items())
            ]
            parts.append("dead letters: " + "; ".join(reasons))
        for table, columns in sorted(self.extra_columns.items()):
            if columns:
                listed = ", ".join(f"{k} {n}" for k, n in sorted(columns.items()))
                parts.append(
                    f"{table}: columns not in the schema, kept in _rescued: {listed} "
                    "(the mirror gets them once the schema has them)"
                )
        return "; ".join(parts)


@dataclass
class BatchProgress:
    """How far a micro-batch of many tables is in storing them, counted chunk by chunk.

    :meth:`stored` counts one chunk and answers the line to report, when one is due: at
    most one every ``every`` seconds, and none for the last chunk (the batch's own line
    follows it). Times are the caller's (a monotonic clock), so the rule is checked
    without waiting.

    >>> progress = BatchProgress(7, tables=20, events=9_000, started=0.0, every=10.0)
    >>> progress.stored(8, 6_000, now=4.0) is None  # not yet due
    True
    >>> progress.stored(8, 2_500, now=12.0)
    'ledger batch 7: 16 of 20 tables stored (8,500 of 9,000 events) in 12 s'
    >>> progress.stored(4, 500, now=30.0) is None  # the last chunk: the batch line says it
    True
    """

    batch_id: int
    tables: int
    events: int
    started: float
    every: float = PROGRESS_SECONDS
    stored_tables: int = 0
    stored_events: int = 0
    last: float | None = None
    """When the last line was due (None: none yet; the first counts from ``started``)."""

    def stored(self, tables: int, events: int, now: float) -> str | None:
        """Count a chunk of ``tables`` stored with ``events`` row events; the line due."""
        self.stored_tables += tables
        self.stored_events += events
        since = self.started if self.last is None else self.last
        if self.stored_tables >= self.tables or now - since < self.every:
            return None
        self.last = now
        return (
            f"ledger batch {self.batch_id}: {self.stored_tables:,} of {self.tables:,} tables "
            f"stored ({self.stored_events:,} of {self.events:,} events) "
            f"in {now - self.started:.0f} s"
        )

    def figures(self) -> dict[str, Any]:
        """The line's figures (``storing``, not ``batch``: that key marks a stored batch)."""
        return {
            "storing": self.batch_id,
            "tables_stored": self.stored_tables,
            "tables": self.tables,
            "events_stored": self.stored_events,
            "events_total": self.events,
        }
