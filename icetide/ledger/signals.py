"""Signs, seen by the ledger, that a source table's schema changed.

The ledger is where every event passes, so it is where a change is noticed, per table:

* ``ddl``: a schema-change message with the DDL text (MySQL/MariaDB capture, Debezium's
  MySQL schema-change topic);
* ``relation``: a schema-change message with the columns in ``tableChanges`` and no DDL
  (PostgreSQL capture emits one when a Relation message shows other columns);
* ``unknown_fields``: row events carrying fields the schema does not know (any source,
  the inline Debezium schema of files/Kafka events included); their values are kept in
  ``_rescued`` meanwhile.

The stage hands them, after the batch is stored, to whoever acts on them (the evolution
layer's detector, wired by the CLI); the ledger itself only reports them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from icetide.events.envelope import decode_document, parse_json
from icetide.events.model import Skipped

SignalKind = Literal["ddl", "relation", "unknown_fields"]


@dataclass(frozen=True)
class ChangeSignal:
    """One sign of a schema change of ``table`` (an icetide table name)."""

    table: str
    kind: SignalKind
    ddl: str | None = None
    columns: tuple[str, ...] = ()
    """Column names the message lists (``relation``) or the unknown fields."""
    position: int | None = None
    position_text: str | None = None
    source_ts_ms: int | None = None
    """Commit time at the source of the DDL (or of the first event showing the change)."""


OnSignals = Callable[[Sequence[ChangeSignal]], None]
"""What the ledger stage calls with a batch's signals, after the batch is stored."""


def schema_change_signal(table: str, text: str) -> ChangeSignal | None:
    """The signal of one schema-change message (its JSON text), or None if it is not one."""
    decoded = decode_document(parse_json(text))
    if not isinstance(decoded, Skipped) or decoded.kind != "schema_change":
        return None
    detail: dict[str, Any] = decoded.detail
    position = detail.get("position")
    source_ts = detail.get("source_ts")
    columns: list[str] = []
    for change in detail.get("tableChanges") or []:
        found = ((change or {}).get("table") or {}).get("columns") or []
        columns += [str(col.get("name")) for col in found if isinstance(col, dict)]
    ddl = detail.get("ddl")
    return ChangeSignal(
        table,
        "ddl" if ddl else "relation",
        ddl if isinstance(ddl, str) else None,
        tuple(columns),
        position.key if position is not None else None,
        position.text if position is not None else None,
        int(source_ts.timestamp() * 1000) if source_ts is not None else None,
    )
