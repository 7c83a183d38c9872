"""The change-event model every stage downstream of capture speaks."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from icetide.events.position import Position

Op = Literal["c", "u", "d", "r", "t"]
ROW_OPS: tuple[str, ...] = ("c", "u", "d", "r", "t")
UNAVAILABLE = "__debezium_unavailable_value"
"""Debezium's placeholder for an unchanged PostgreSQL TOAST value: keep the stored one."""


@dataclass(frozen=True)
class SourceTable:
    """Where an event came from: database, schema (PostgreSQL) and table."""

    database: str | None
    schema: str | None
    table: str

    @property
    def qualified(self) -> str:
        """``db.table`` for MySQL, ``schema.table`` for PostgreSQL, ``table`` otherwise."""
        prefix = self.schema or self.database
        return f"{prefix}.{self.table}" if prefix else self.table


@dataclass(frozen=True)
class ChangeEvent:
    """One row change (or truncate) decoded from a Debezium envelope.

    ``before``/``after`` hold column values already decoded from their logical types
    when the envelope carried a schema, raw JSON values otherwise (see
    :func:`icetide.events.project.project_row`). ``unavailable`` names the columns of
    ``after`` whose value is the unchanged-TOAST placeholder; they are absent from
    ``after`` and must keep the stored value.
    """

    op: Op
    source: SourceTable | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    position: Position | None
    source_ts: datetime | None
    event_ts: datetime | None
    tx_id: str | None
    unavailable: frozenset[str] = frozenset()
    connector: str | None = None
    snapshot: bool = False
    typed: bool = False
    """The images were decoded by the message's own schema (inline Connect schema or
    registry), not left as schemaless JSON: a string there is text."""


@dataclass(frozen=True)
class Skipped:
    """A message that is valid but carries no row change (tombstone, transaction marker,
    heartbeat, logical message, schema change); ``kind`` says which."""

    kind: str
    detail: dict[str, Any] = field(default_factory=dict)


Decoded = ChangeEvent | Skipped
