"""What a micro-batch's tasks saw of one table's projected messages, combined on the driver.

When a batch's tables are written by one Spark job (:mod:`icetide.ledger.table_files`),
each task projects and writes its part of each table and reports, with the files, what
the stage would otherwise learn from a Spark aggregate per table: the events by status
and reason, samples of the dead letters' message ids, the event columns the schema
lacks, and the merge's figures (:mod:`icetide.lake.ledger_figures`). A :class:`Tally`
travels from task to driver as JSON and tallies of one table are added up there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from icetide.lake.ledger_figures import arrow_figures, combine_figures
from icetide.ledger.decode import DEAD, EXTRA, REASON, ROW, STATUS
from icetide.schema.contract import ledger as c

SAMPLES = 10
"""Message ids kept per dead-letter reason, as the stage's own counts keep."""

First = tuple[Decimal | None, str | None, int | None]
"""The first event carrying unknown columns: its position, position text and source
time in milliseconds."""


@dataclass
class Tally:
    """One table's projected messages of a batch (or of one task's part of it)."""

    counts: dict[tuple[str, str | None], int] = field(default_factory=dict)
    """(status, reason) → events."""
    samples: dict[str, list[str]] = field(default_factory=dict)
    """Dead-letter reason → the first :data:`SAMPLES` message ids."""
    extra: dict[str, int] = field(default_factory=dict)
    """Event column the schema lacks → stored events carrying it."""
    first_extra: First | None = None
    figures: list[dict[str, Any]] = field(default_factory=list)
    """The figures of each part's stored rows (:func:`arrow_figures`), combined by
    :meth:`combined_figures`; empty when the figures cannot be computed here."""
    figures_known: bool = True

    @property
    def rows(self) -> int:
        """Events stored as ledger rows."""
        return sum(n for (status, _), n in self.counts.items() if status == ROW)

    def dead(self) -> list[tuple[str, int, list[str]]]:
        """(reason, events, samples) of the projection's dead letters."""
        return [
            (str(reason), n, self.samples.get(str(reason), []))
            for (status, reason), n in sorted(self.counts.items(), key=str)
            if status == DEAD
        ]

    def combined_figures(self) -> dict[str, Any] | None:
        """The figures of every stored row, or None when a part could not compute them
        (the merge computes them from the rows then)."""
        if not self.figures_known or not self.figures:
            return None
        return combine_figures(self.figures)

    def add(self, other: Tally) -> None:
        """Add ``other`` (another task's part of the same table's batch)."""
        for key, n in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + n
        for reason, ids in other.samples.items():
            kept = self.samples.setdefault(reason, [])
            kept.extend(ids[: SAMPLES - len(kept)])
        for name, n in other.extra.items():
            self.extra[name] = self.extra.get(name, 0) + n
        firsts = [f for f in (self.first_extra, other.first_extra) if f is not None]
        self.first_extra = min(firsts, key=_position_order) if firsts else None
        # Kept combined: a busy table adds a part for each Arrow batch of its messages.
        parts = self.figures + other.figures
        self.figures = [combine_figures(parts)] if len(parts) > 1 else parts
        self.figures_known = self.figures_known and other.figures_known

    def to_json(self) -> str:
        position, text, ts = self.first_extra or (None, None, None)
        return json.dumps(
            {
                "counts": [[s, r, n] for (s, r), n in self.counts.items()],
                "samples": self.samples,
                "extra": self.extra,
                "first_extra": None
                if self.first_extra is None
                else [None if position is None else str(position), text, ts],
                "figures": [_plain(f) for f in self.figures],
                "figures_known": self.figures_known,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Tally:
        """The tally :meth:`to_json` wrote.

        >>> t = Tally({(ROW, None): 3, (DEAD, "bad"): 1}, {"bad": ["m1"]}, {"x": 2},
        ...           (Decimal(7), "p7", 1000), [{"fig_first": Decimal(4)}])
        >>> back = Tally.from_json(t.to_json())
        >>> back == t, back.rows, back.dead()
        (True, 3, [('bad', 1, ['m1'])])
        """
        doc = json.loads(text)
        first = doc["first_extra"]
        return cls(
            counts={(s, r): int(n) for s, r, n in doc["counts"]},
            samples={r: list(ids) for r, ids in doc["samples"].items()},
            extra={k: int(v) for k, v in doc["extra"].items()},
            first_extra=None
            if first is None
            else (None if first[0] is None else Decimal(first[0]), first[1], first[2]),
            figures=[_decimals(f) for f in doc["figures"]],
            figures_known=bool(doc["figures_known"]),
        )


def tally_of(
    projected: pa.Table,
    primary_key: Sequence[str],
    bucket: Callable[[pa.Array], list[int | None]] | None,
) -> Tally:
    """The tally of one task's projected messages of a table
    (:func:`~icetide.ledger.decode.project_batches` output); ``bucket``: the base's
    bucketing of its key (None: the figures cannot be computed, the merge will)."""
    tally = Tally()
    status = projected.column(STATUS)
    groups = pa.table({"s": status, "r": projected.column(REASON)}).group_by(["s", "r"])
    for row in groups.aggregate([([], "count_all")]).to_pylist():
        tally.counts[(row["s"], row["r"])] = row["count_all"]
    dead = projected.filter(pc.equal(status, DEAD))
    for reason, message_id in zip(
        dead.column(REASON).to_pylist(), dead.column(c.MESSAGE_ID).to_pylist(), strict=True
    ):
        kept = tally.samples.setdefault(str(reason), [])
        if len(kept) < SAMPLES:
            kept.append(message_id)
    stored = projected.filter(pc.equal(status, ROW))
    carrying = stored.filter(pc.greater(pc.fill_null(pc.list_value_length(stored[EXTRA]), 0), 0))
    if len(carrying):
        for name in pc.list_flatten(carrying.column(EXTRA)).to_pylist():
            tally.extra[name] = tally.extra.get(name, 0) + 1
        tally.first_extra = min(_firsts(carrying), key=_position_order)
    if len(stored):
        if bucket is None:
            tally.figures_known = False
        else:
            tally.figures.append(arrow_figures(stored, primary_key, bucket))
    return tally


def _firsts(rows: pa.Table) -> Iterable[First]:
    ts = rows.column(c.SOURCE_TS).cast(pa.int64())  # microseconds
    for position, text, micros in zip(
        rows.column(c.POSITION).to_pylist(),
        rows.column(c.POSITION_TEXT).to_pylist(),
        ts.to_pylist(),
        strict=True,
    ):
        yield position, text, None if micros is None else micros // 1000


def _position_order(first: First) -> tuple[bool, Decimal]:
    """Known positions first, smallest first (Spark's ``min_by`` skips NULL positions)."""
    return (first[0] is None, first[0] if first[0] is not None else Decimal(0))


def _plain(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, Decimal) else v for k, v in figures.items()}


def _decimals(figures: dict[str, Any]) -> dict[str, Any]:
    positions = ("fig_truncate", "fig_first", "fig_last_tombstone")
    return {k: Decimal(v) if k in positions and v is not None else v for k, v in figures.items()}
