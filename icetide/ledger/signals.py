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

Schemas the messages carry themselves (a registry schema id, an inline Debezium
``schema`` block) are handed over *before* the batch is projected
(:class:`CarriedSchema`, ``on_versions``): the evolution layer walks the versions they
bring and answers which ones the table refuses, whose records become dead letters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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


def seen_line(signal: ChangeSignal, acted_on: bool) -> str:
    """The log line of one schema-change signal: what was seen, and, when nothing acts on
    it (no ``sources:`` to read the table's schema from), that nothing was done, so a
    snapshot's ``DROP TABLE IF EXISTS`` does not read as a dropped table.

    >>> s = ChangeSignal("t", "ddl", "DROP TABLE IF EXISTS `shop`.`t`", position_text="b.1:4")
    >>> print(seen_line(s, acted_on=False).split("; ")[1])
    nothing done: no sources: entry to read t's schema from (new columns come from the \
messages' own schemas)
    """
    what = signal.ddl or ", ".join(signal.columns)
    if acted_on:
        return (
            f"schema {signal.table}: change seen at {signal.position_text} ({signal.kind}: {what})"
        )
    kind = {"ddl": "DDL", "relation": "a relation"}.get(signal.kind, signal.kind)
    return (
        f"schema {signal.table}: {kind} seen at {signal.position_text} ({what}); nothing "
        f"done: no sources: entry to read {signal.table}'s schema from (new columns come "
        "from the messages' own schemas)"
    )


OnSignals = Callable[[Sequence[ChangeSignal]], None]
"""What the ledger stage calls with a batch's signals, after the batch is stored."""


@dataclass(frozen=True)
class CarriedSchema:
    """A schema a batch's row events of ``table`` were written with, carried by the
    messages themselves: a registry schema id, or an inline Debezium ``schema`` block.

    ``key`` is :func:`~icetide.ledger.decode.schema_key`; ``subject`` the registry subject
    (TopicNameStrategy: ``<topic>-value``); ``text`` the inline row struct (Connect JSON);
    ``first`` orders schemas by their first message in the batch.
    """

    table: str
    key: str
    subject: str | None = None
    schema_id: int | None = None
    text: str | None = None
    first: int = 0


Refusal = tuple[str, str]
"""(dead-letter reason, error text) for the messages of a refused schema."""
OnVersions = Callable[[Sequence[CarriedSchema]], Mapping[str, Mapping[str, Refusal]]]
"""What the ledger stage calls, before projecting a batch, with the message-carried
schemas it has not seen taken; it applies what it can (new schema versions) and returns,
per table, the schema keys whose messages go to the dead-letter table instead."""


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
