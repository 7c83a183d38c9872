"""The logical replication slot capture reads: create, inspect, wait for, advance.

The slot is where the server keeps WAL for capture: its ``confirmed_flush_lsn`` moves
only when capture acknowledges an offset (see :mod:`~icetide.capture.postgres.reader`),
and its lag is what ``icetide status`` reports. ``conn`` arguments are autocommit
psycopg2 connections (:func:`~icetide.capture.postgres.connection.control`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import psycopg2

from icetide.capture.errors import CaptureError, PositionLostError
from icetide.capture.postgres.connection import Dsn, control, where
from icetide.capture.postgres.offset import LsnOffset
from icetide.events.position import format_lsn, parse_lsn

ACTIVE_WAIT = 10.0
"""Seconds to wait for a just-closed stream's WAL sender to let go of the slot."""
_SLOT_NAME = re.compile(r"^[a-z0-9_]{1,63}$")


@dataclass(frozen=True)
class SlotStatus:
    """A replication slot as ``pg_replication_slots`` shows it, with the lag in bytes."""

    slot: str
    plugin: str | None
    database: str | None
    active: bool
    active_pid: int | None
    restart_lsn: int | None
    confirmed_flush_lsn: int | None
    current_lsn: int
    wal_status: str | None

    @property
    def lag_bytes(self) -> int:
        """WAL written since the slot's confirmed point: what capture still has to read
        and acknowledge."""
        return max(self.current_lsn - (self.confirmed_flush_lsn or self.current_lsn), 0)

    @property
    def retained_bytes(self) -> int:
        """WAL the server keeps on disk for this slot (since its restart LSN)."""
        return max(self.current_lsn - (self.restart_lsn or self.current_lsn), 0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for ``icetide status``."""

        def lsn(value: int | None) -> str | None:
            return None if value is None else format_lsn(value)

        return {
            "slot": self.slot,
            "plugin": self.plugin,
            "database": self.database,
            "active": self.active,
            "active_pid": self.active_pid,
            "restart_lsn": lsn(self.restart_lsn),
            "confirmed_flush_lsn": lsn(self.confirmed_flush_lsn),
            "current_lsn": lsn(self.current_lsn),
            "lag_bytes": self.lag_bytes,
            "retained_bytes": self.retained_bytes,
            "wal_status": self.wal_status,
        }


_SLOT_QUERY = """
SELECT s.plugin, s.database, s.active, s.active_pid, s.restart_lsn::text,
       s.confirmed_flush_lsn::text, pg_current_wal_insert_lsn()::text, s.wal_status
FROM pg_replication_slots s WHERE s.slot_name = %s
"""


def _lsn_or_none(text: str | None) -> int | None:
    return None if text is None else parse_lsn(text)


def check_slot_name(slot: str) -> str:
    """``slot`` if PostgreSQL accepts it as a slot name, else a :class:`CaptureError`.

    >>> check_slot_name("icetide_1")
    'icetide_1'
    """
    if not _SLOT_NAME.match(slot):
        raise CaptureError(
            f"replication slot name {slot!r} is not valid",
            hint="use up to 63 lower-case letters, digits and underscores",
        )
    return slot


def slot_status(conn: Any, slot: str) -> SlotStatus | None:
    """The slot's state (``None`` if there is no such slot); ``conn`` is a plain
    psycopg2 connection to the server."""
    with conn.cursor() as cur:
        cur.execute(_SLOT_QUERY, (slot,))
        row = cur.fetchone()
    if row is None:
        return None
    plugin, database, active, pid, restart, confirmed, current, wal_status = row
    return SlotStatus(
        slot,
        plugin,
        database,
        bool(active),
        pid,
        _lsn_or_none(restart),
        _lsn_or_none(confirmed),
        parse_lsn(current),
        wal_status,
    )


def slot_lag(conn: Any, slot: str) -> int:
    """Bytes of WAL between the slot's confirmed point and the server's current WAL
    position (``pg_current_wal_insert_lsn() - confirmed_flush_lsn``)."""
    status = slot_status(conn, slot)
    if status is None:
        raise CaptureError(f"there is no replication slot {slot!r}")
    return status.lag_bytes


def create_slot(conn: Any, slot: str) -> int:
    """Create the logical slot ``slot`` for pgoutput; its consistent point (an LSN)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')",
            (slot,),
        )
        return parse_lsn(str(cur.fetchone()[0]))


def wait_inactive(conn: Any, slot: str, status: SlotStatus | None) -> SlotStatus | None:
    """The slot's state once no stream holds it, or after :data:`ACTIVE_WAIT` seconds
    (then still active); ``None`` if it vanished. A stream that just closed leaves its
    WAL sender exiting for a moment, holding the slot."""
    deadline = time.monotonic() + ACTIVE_WAIT
    while status is not None and status.active and time.monotonic() < deadline:
        time.sleep(0.1)
        status = slot_status(conn, slot)
    return status


def advance_slot(dsn: Dsn, slot: str, offset: LsnOffset) -> None:
    """Move an idle slot's confirmed point to ``offset`` (never backwards), without a
    stream: what :meth:`~icetide.capture.postgres.reader.PgOutputReader.acknowledge`
    does after the reader is closed."""
    ctl = control(dsn)
    try:
        status = wait_inactive(ctl, slot, slot_status(ctl, slot))
        if status is None:
            raise PositionLostError(
                f"replication slot {slot!r} does not exist at {where(dsn)}",
                position=offset.text,
                hint="run `icetide bootstrap` again for these tables",
            )
        if (status.confirmed_flush_lsn or 0) >= offset.lsn:
            return
        with ctl.cursor() as cur:
            cur.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, offset.text))
    except psycopg2.Error as exc:
        raise CaptureError(
            f"cannot move replication slot {slot!r} at {where(dsn)} to {offset.text}: "
            f"{str(exc).strip()}"
        ) from exc
    finally:
        ctl.close()
