"""A slot created with an exported snapshot, and reading a copy in that snapshot.

A bootstrap copies the tables as of the new slot's consistent point and capture then
streams from that point: the copy plus the stream miss nothing and repeat nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.extras

from icetide.capture.errors import CaptureError
from icetide.capture.postgres.connection import Dsn, connect, control, where
from icetide.capture.postgres.offset import LsnOffset
from icetide.capture.postgres.publication import ensure_publication, require_tables, split_table
from icetide.capture.postgres.settings import check_server
from icetide.capture.postgres.slot import check_slot_name, slot_status
from icetide.events.position import parse_lsn


@dataclass(frozen=True)
class SnapshotPoint:
    """A new slot's consistent point and the snapshot exported with it."""

    slot: str
    lsn: int
    snapshot: str
    """Pass to ``SET TRANSACTION SNAPSHOT`` (see :func:`import_snapshot`)."""

    @property
    def offset(self) -> LsnOffset:
        """Where capture starts after a copy read in :attr:`snapshot`."""
        return LsnOffset(self.lsn)


@contextmanager
def exported_snapshot(
    dsn: Dsn,
    *,
    slot: str,
    publication: str,
    tables: Iterable[str],
) -> Iterator[SnapshotPoint]:
    """Create ``slot`` with an exported snapshot, for a bootstrap copy.

    Ensures the publication first (so no change after the consistent point is left
    out), then runs ``CREATE_REPLICATION_SLOT … LOGICAL pgoutput EXPORT_SNAPSHOT`` on a
    replication connection that stays open, idle, for the ``with`` block: the snapshot
    exists only as long as that. Read every table *inside* the block, from another
    connection in a ``REPEATABLE READ`` transaction that starts with
    ``SET TRANSACTION SNAPSHOT '<snapshot>'`` (:func:`import_snapshot` does both); a
    transaction that imported the snapshot may go on after the block ends. Then start
    :class:`~icetide.capture.postgres.reader.PgOutputReader` from ``point.offset``::

        with exported_snapshot(dsn, slot="icetide", publication="icetide",
                               tables=["public.orders"]) as point:
            with psycopg2.connect(dsn) as copy:
                import_snapshot(copy, point.snapshot)
                ...  # SELECT the tables
        reader = PgOutputReader(dsn, ["public.orders"], start=point.offset)

    The slot must not exist yet (a slot's snapshot can only be had when it is created).
    """
    check_slot_name(slot)
    pairs = sorted({split_table(t) for t in tables})
    ctl = control(dsn)
    try:
        check_server(ctl, f"the server at {where(dsn)}")
        require_tables(ctl, pairs, where(dsn))
        ensure_publication(ctl, publication, pairs)
        if slot_status(ctl, slot) is not None:
            raise CaptureError(
                f"replication slot {slot!r} already exists: a snapshot can only be exported "
                "when the slot is created",
                hint="to bootstrap again, drop it first: "
                f"SELECT pg_drop_replication_slot('{slot}')",
            )
    finally:
        ctl.close()
    repl = connect(dsn, connection_factory=psycopg2.extras.LogicalReplicationConnection)
    try:
        cur = repl.cursor()
        try:
            cur.execute(f'CREATE_REPLICATION_SLOT "{slot}" LOGICAL pgoutput EXPORT_SNAPSHOT')
            row = cur.fetchone()
        except psycopg2.Error as exc:
            raise CaptureError(
                f"cannot create replication slot {slot!r} at {where(dsn)}: {str(exc).strip()}"
            ) from exc
        _, consistent_point, snapshot, _ = row
        yield SnapshotPoint(slot, parse_lsn(str(consistent_point)), str(snapshot))
    finally:
        repl.close()


def import_snapshot(conn: Any, snapshot: str) -> None:
    """Start a read-only ``REPEATABLE READ`` transaction on ``conn`` (a psycopg2
    connection, not autocommit) that sees exactly the exported ``snapshot``."""
    conn.rollback()
    conn.autocommit = False
    conn.set_session(isolation_level="REPEATABLE READ", readonly=True)
    with conn.cursor() as cur:
        cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot,))
