"""The batch-end summary line: events per table, dead letters by reason with sample
message ids, and event columns the schema does not have (kept in ``_rescued``, counted)."""

from __future__ import annotations

from dataclasses import dataclass, field


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
