"""What every capture reader hands to a transport, whatever the source database.

A reader (:class:`~icetide.capture.mysql.reader.BinlogReader`,
:class:`~icetide.capture.postgres.reader.PgOutputReader`) yields :class:`CaptureRecord`
items, and :class:`Heartbeat` items while the log is quiet so the caller can roll files
and save offsets on time. Its ``committed`` offset is where to restart after everything
yielded so far is durable; :meth:`ChangeReader.acknowledge` tells the server (a
PostgreSQL slot) that the log before an offset may be recycled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from icetide.capture.json_text import dumps
from icetide.events.position import Position

RecordKind = Literal["change", "schema_change"]


class Offset(Protocol):
    """A resumable place in a source's log; persisted as JSON through :meth:`to_dict`."""

    @property
    def text(self) -> str:
        """The offset for people (``mysql-bin.000003:1234``, ``0/16B3748``)."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form that the reader's offset class reads back."""
        ...


@dataclass(frozen=True, init=False)
class CaptureRecord:
    """One message for the transport: a change event or a schema change."""

    kind: RecordKind
    db: str
    """The database (MySQL) or schema (PostgreSQL) of the table."""
    table: str
    key: dict[str, Any] | None
    """Primary-key column → JSON value (the message key); ``None`` for truncates, DDL and
    tables without a primary key."""
    value: dict[str, Any]
    """The Debezium envelope (``{"schema", "payload"}`` when schemas are included)."""
    position: Position
    resume: Offset
    """Where to restart to see this record again: the start of its transaction."""
    text: str | None = field(default=None, compare=False, repr=False)
    """``value`` as JSON text when the reader assembled it already (from texts it keeps
    per table and transaction); :meth:`to_json` returns it instead of serialising
    ``value`` again. It is that serialisation, byte for byte."""

    def __init__(
        self,
        kind: RecordKind,
        db: str,
        table: str,
        key: dict[str, Any] | None,
        value: dict[str, Any],
        position: Position,
        resume: Offset,
        text: str | None = None,
    ) -> None:
        # A reader makes one record per row: the fields are set as one namespace, not
        # through object.__setattr__ each, as a frozen dataclass's own __init__ does.
        object.__setattr__(
            self,
            "__dict__",
            {
                "kind": kind,
                "db": db,
                "table": table,
                "key": key,
                "value": value,
                "position": position,
                "resume": resume,
                "text": text,
            },
        )

    @property
    def qualified(self) -> str:
        """``db.table``."""
        return f"{self.db}.{self.table}"

    def to_json(self) -> str:
        """The value as compact JSON text, what :func:`decode_message` reads."""
        return self.text if self.text is not None else dumps(self.value)

    def key_json(self) -> str | None:
        """The key as compact JSON text."""
        if self.key is None:
            return None
        return dumps(self.key)


@dataclass(frozen=True)
class Heartbeat:
    """The log had nothing new for a while: a chance to roll files and save offsets."""


class ChangeReader(Protocol):
    """A source's change log as an iterator of records, with resumable offsets."""

    @property
    def committed(self) -> Offset | None:
        """Just after the last complete transaction yielded (``None`` before one)."""
        ...

    def open(self) -> ChangeReader:
        """Check the server and position the stream."""
        ...

    def close(self) -> None:
        """Disconnect."""
        ...

    def __iter__(self) -> Any:
        """``CaptureRecord`` items, and ``Heartbeat`` items when the log is quiet."""
        ...

    def acknowledge(self, offset: Any) -> None:
        """Everything before ``offset`` (an offset this reader gave as ``committed``) is
        durable downstream; the server may free the log before it."""
        ...
