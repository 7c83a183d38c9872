"""The batch-end summary line: events per table, dead letters by reason with sample
message ids, and event columns the schema does not have (kept in ``_rescued``, counted);
and the lines a batch of many tables says while it stores them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PROGRESS_ROWS = "stored"
"""A long micro-batch's progress figure (:class:`BatchProgress`) mapping each table
stored since its last line to its row events."""
STORED_ROWS = ("events", PROGRESS_ROWS)
"""The figures of a ledger record that map tables to the row events it stored: the
micro-batch's own ``events`` (at its end, as every stage's record counts its events)
and :data:`PROGRESS_ROWS`."""

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

    :meth:`stored` counts one chunk (its tables' row events) and answers the line to
    report with its figures, when one is due: at most one every ``every`` seconds, and
    none for the last chunk (the batch's own line follows it). The figures name the
    tables stored since the last line (``stored``: table → row events), so that
    ``icetide run``'s merge visits them while the batch stores the rest. Times are the
    caller's (a monotonic clock), so the rule is checked without waiting.

    >>> progress = BatchProgress(7, tables=20, events=9_000, started=0.0, every=10.0)
    >>> progress.stored({"a": 6_000, "b": 0}, now=4.0) is None  # not yet due
    True
    >>> line, figures = progress.stored({"c": 2_500}, now=12.0)
    >>> line
    'ledger batch 7: 3 of 20 tables stored (8,500 of 9,000 events) in 12 s'
    >>> figures["stored"], figures["tables_stored"]
    ({'a': 6000, 'c': 2500}, 3)
    >>> progress.stored({f"t{i}": 25 for i in range(17)}, now=30.0) is None  # the last
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
    unsaid: dict[str, int] = field(default_factory=dict)
    """Tables with row events stored since the last line, and how many."""

    def stored(self, events: Mapping[str, int], now: float) -> tuple[str, dict[str, Any]] | None:
        """Count a chunk stored: ``events`` maps each of its tables to its row events.
        The line due and its figures (``storing``, not ``batch``: that key marks a
        stored batch), or None."""
        self.stored_tables += len(events)
        self.stored_events += sum(events.values())
        self.unsaid.update((table, n) for table, n in events.items() if n)
        since = self.started if self.last is None else self.last
        if self.stored_tables >= self.tables or now - since < self.every:
            return None
        self.last = now
        line = (
            f"ledger batch {self.batch_id}: {self.stored_tables:,} of {self.tables:,} tables "
            f"stored ({self.stored_events:,} of {self.events:,} events) "
            f"in {now - self.started:.0f} s"
        )
        figures = {
            "storing": self.batch_id,
            "tables_stored": self.stored_tables,
            "tables": self.tables,
            "events_stored": self.stored_events,
            "events_total": self.events,
            PROGRESS_ROWS: dict(sorted(self.unsaid.items())),
        }
        self.unsaid.clear()
        return line, figures
