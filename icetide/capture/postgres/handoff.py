"""The PostgreSQL side of a bootstrap's hand-off to capture: a snapshot on the slot.

A fresh bootstrap creates the replication slot with an exported snapshot: the slot's
*consistent point* ``C`` becomes capture's start offset, the copy is read in the
snapshot (the database exactly as of ``C``), and the slot streams exactly the
transactions that commit after ``C``. The replication connection stays open, and the
snapshot alive, until every table is read.

A resumed bootstrap, or one that starts on a slot that exists already, reads in a *new*
snapshot exported from a plain connection (``pg_export_snapshot()``), with the slot and
start offset it had (or the saved offset, else the slot's confirmed point). Before that
it waits for the transactions that were running when the publication was ensured,
because changes written before a table joined the publication are not published. Why
that is still exact is told in :mod:`icetide.bootstrap`. A resume whose slot is gone is
refused: the changes since ``C`` are lost and only a new bootstrap can help.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from icetide.capture.errors import CaptureError, PositionLostError
from icetide.capture.postgres.offset import LsnOffset
from icetide.capture.postgres.publication import ensure_publication
from icetide.capture.postgres.slot import slot_status
from icetide.capture.postgres.snapshot import exported_snapshot, import_snapshot
from icetide.config.sections import SourceConfig
from icetide.events.position import format_lsn
from icetide.progress import Reporter
from icetide.sources.connect import connect_postgres, postgres_dsn

_WAIT_LOG_SECONDS = 10.0


@dataclass(frozen=True)
class Resuming:
    """The bootstrap being resumed: its id and capture's start offset, for messages."""

    bootstrap_id: str
    offset_text: str


@dataclass(frozen=True)
class CaptureStart:
    """Where capture starts after a copy read in the hand-off's snapshot."""

    offset: dict[str, Any]
    text: str
    how: str
    """``slot`` (the slot was created with the snapshot) or ``existing slot``."""


@dataclass(frozen=True)
class SnapshotHandoff:
    """A connection inside the snapshot the copy is read in, and capture's start."""

    start: CaptureStart | None
    """``None`` when resuming: capture's start is the one the first run recorded."""
    conn: Any
    """A psycopg2 connection that has imported :attr:`snapshot`: the catalog and the
    key ranges read through it describe the same state as the copy."""
    snapshot: str
    """The snapshot's name, for ``SET TRANSACTION SNAPSHOT``."""
    snapshot_text: str
    """Its ``txid_current_snapshot()`` text, by which a query can check it runs in it."""


def _wait_for_older_transactions(conn: Any, reporter: Reporter, what: str) -> None:
    """Wait until every transaction running now has ended (``conn`` is autocommit).

    A table's changes are published only from when it joined the publication: a
    transaction that wrote before that and commits after a new snapshot would be in
    neither the copy nor the stream. Creating a slot waits the same way.
    """
    with conn.cursor() as cur:
        cur.execute("SELECT txid_snapshot_xmax(txid_current_snapshot())")
        horizon = int(cur.fetchone()[0])
        started = last_log = time.monotonic()
        while True:
            cur.execute("SELECT txid_snapshot_xmin(txid_current_snapshot())")
            if int(cur.fetchone()[0]) >= horizon:
                return
            if time.monotonic() - last_log > _WAIT_LOG_SECONDS:
                last_log = time.monotonic()
                reporter.report(
                    "bootstrap",
                    f"{what}: waiting {last_log - started:.0f}s for transactions older than "
                    "the publication to end",
                )
            time.sleep(0.05)


@contextmanager
def postgres_handoff(
    source: SourceConfig,
    tables: Sequence[str],
    resuming: Resuming | None,
    saved_offset: dict[str, Any] | None,
    reporter: Reporter,
) -> Iterator[SnapshotHandoff]:
    """A connection in a snapshot whose hand-off to capture is exact, and capture's start.

    Not resuming and no slot: the slot is created with an exported snapshot, its
    consistent point is the start offset (a fresh bootstrap). Otherwise (a resume, or a
    slot that exists already) a new snapshot is exported from a plain connection; see
    the module docs for why that is exact. ``tables`` are all the source's tables
    (``schema.table``): the publication must cover every table capture reads.
    Connections stay open, and the snapshot alive, until the ``with`` block ends.
    """
    slot, what = str(source.slot), f"bootstrap {source.name}"
    start: CaptureStart | None = None
    with ExitStack() as stack:
        ctl = stack.enter_context(_closing(connect_postgres(source)))
        ctl.autocommit = True
        status = slot_status(ctl, slot)
        if resuming is not None and status is None:
            raise PositionLostError(
                f"bootstrap {resuming.bootstrap_id} of source {source.name!r} cannot resume: "
                f"replication slot {slot!r} is gone, and with it the changes since "
                f"{resuming.offset_text}",
                position=resuming.offset_text,
                hint="start over: delete the bootstrap state file and the source's offset "
                "file under state_dir/capture, then run `icetide bootstrap --replace`",
            )
        if resuming is None and status is None:
            point = stack.enter_context(
                exported_snapshot(
                    postgres_dsn(source),
                    slot=slot,
                    publication=str(source.publication),
                    tables=tables,
                )
            )
            start = CaptureStart(LsnOffset(point.lsn).to_dict(), format_lsn(point.lsn), "slot")
            reporter.report(
                "bootstrap",
                f"{what}: slot {slot} created at consistent point {format_lsn(point.lsn)}; "
                "reading the tables in its exported snapshot",
            )
            name = point.snapshot
        else:
            database = str(source.database or "postgres")
            if status is not None and (status.plugin, status.database) != ("pgoutput", database):
                raise CaptureError(
                    f"replication slot {slot!r} of source {source.name!r} belongs to plugin "
                    f"{status.plugin} in database {status.database}, not pgoutput in {database}",
                    hint="name another slot in the source's config",
                )
            ensure_publication(ctl, str(source.publication), tables)
            _wait_for_older_transactions(ctl, reporter, what)
            if resuming is None:
                assert status is not None
                if saved_offset is not None:
                    offset = dict(saved_offset)
                else:
                    offset = LsnOffset(status.confirmed_flush_lsn or 0).to_dict()
                start = CaptureStart(offset, str(offset["lsn"]), "existing slot")
                reporter.report(
                    "bootstrap", f"{what}: slot {slot} exists; capture starts at {start.text}"
                )
            exporter = stack.enter_context(_closing(connect_postgres(source)))
            exporter.set_session(isolation_level="REPEATABLE READ", readonly=True)
            with exporter.cursor() as cur:
                cur.execute("SELECT pg_export_snapshot()")
                name = str(cur.fetchone()[0])
            reporter.report(
                "bootstrap", f"{what}: reading in a new snapshot {name}, stamped 0 like the first"
            )
        reader = stack.enter_context(_closing(connect_postgres(source)))
        yield SnapshotHandoff(start, reader, name, _snapshot_text(reader, name))


def _snapshot_text(conn: Any, name: str) -> str:
    """Import snapshot ``name`` on ``conn`` (kept open by the caller) and read its text."""
    import_snapshot(conn, name)
    with conn.cursor() as cur:
        cur.execute("SELECT txid_current_snapshot()::text")
        return str(cur.fetchone()[0])


@contextmanager
def _closing(conn: Any) -> Iterator[Any]:
    try:
        yield conn
    finally:
        conn.close()
