"""Read PostgreSQL's logical replication stream (pgoutput) and emit Debezium change events.

:class:`PgOutputReader` streams a logical replication slot with psycopg2's
``LogicalReplicationConnection`` and the built-in ``pgoutput`` plugin (protocol 1),
decodes the binary messages itself, keeps only the configured ``schema.table`` pairs,
and yields one :class:`CaptureRecord` per change: its ``value`` is the envelope
Debezium's PostgreSQL connector writes (JSON converter, ``schemas.enable=false`` unless
``include_schema``), so :func:`icetide.events.envelope.decode_message` reads it like any
Debezium message::

    reader = PgOutputReader(server.dsn("shop"), ["public.customers"], slot="icetide")
    for record in reader:          # stops at the end of the WAL unless blocking=True
        transport.send(record)
    transport.flush()
    reader.acknowledge(reader.committed)   # only now may the server recycle that WAL

What is emitted, per pgoutput message:

* Insert / Update / Delete → ``c`` / ``u`` / ``d``. With ``REPLICA IDENTITY DEFAULT``
  an update's ``before`` is ``null`` and a delete's ``before`` holds the key columns only;
  with ``FULL`` both hold the whole old row. An update that changes the primary key
  becomes a ``d`` of the old key and a ``c`` of the new one, as Debezium does.
* A column whose value is an unchanged TOAST value (not sent by PostgreSQL) gets
  Debezium's placeholder ``__debezium_unavailable_value`` (see
  :func:`~icetide.sources.postgres_types.unavailable_value`), which the decoder reports
  in ``unavailable`` so the merge keeps the stored value; with ``FULL`` the old row
  holds the value and it is used instead.
* Truncate → one ``t`` event per captured table.
* A Relation message whose columns differ from the ones seen before in this session
  (DDL), and a table's first Relation message of the session (the table may have changed
  while capture was away) → a schema-change record (``{"source", "databaseName",
  "schemaName", "ddl": null, "tableChanges": [...]}``), just before the first change
  under that layout; the ledger compares it with the table's schema.

Positions: ``source.lsn`` is the LSN of the change's WAL record (what Debezium writes),
and :func:`icetide.events.position.lsn_position` packs it. Several records can share
one LSN: the rows of one multi-row WAL record (``COPY``), the ``d`` + ``c`` of a
key-changing update, the tables of one ``TRUNCATE``, a schema change and the change
after it. ``CaptureRecord.position`` numbers them (``index`` 0, 1, 2 … within one LSN),
so the positions a reader yields are distinct and increase within a transaction. The
decoder derives positions from ``source.lsn`` alone (index 0), which is enough for the
merge: the events sharing an LSN always belong to different keys (or tables), and the
events of one key have increasing LSNs because PostgreSQL's row locks order writers of a
row by commit. Transactions arrive in commit order, so events of *different* rows of
concurrent transactions can have decreasing LSNs, exactly as with Debezium.

Offsets (:class:`~icetide.capture.postgres.offset.LsnOffset`):
:attr:`PgOutputReader.committed` is the commit end LSN of the last transaction whose
records have all been yielded, or a later LSN the server vouched holds nothing more for
us (a keepalive while idle, the end-of-WAL marker). The
caller makes records durable, saves the offset, then calls :meth:`~PgOutputReader.acknowledge`,
which is the only place the slot's ``confirmed_flush_lsn`` moves (psycopg2 then also
moves it over WAL with nothing for us once everything received is acknowledged). A
restart streams from the slot's confirmed point and skips transactions that committed
before the offset it was given; a missing slot with an offset is a
:class:`~icetide.capture.errors.PositionLostError`.

The protocol's bytes are decoded by :mod:`~icetide.capture.postgres.pgoutput`; the slot,
the publication and the connections live in :mod:`~icetide.capture.postgres.slot`,
:mod:`~icetide.capture.postgres.publication` and
:mod:`~icetide.capture.postgres.connection`; the envelope is assembled by
:mod:`icetide.capture.envelope`. Bootstrap:
:func:`~icetide.capture.postgres.snapshot.exported_snapshot` creates the slot with an
exported snapshot, so a copy of the tables read in that snapshot plus the stream from
the slot's consistent point miss nothing and repeat nothing.
"""

from __future__ import annotations

import select
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import psycopg2
import psycopg2.extras

from icetide.capture.envelope import (
    COMMON_FIELDS,
    SourceBlock,
    SourceField,
    change_envelope,
    envelope_schema,
    record_key,
    schema_change_value,
)
from icetide.capture.errors import CaptureError, PositionLostError
from icetide.capture.json_text import dumps, fragments, string
from icetide.capture.postgres import pgoutput
from icetide.capture.postgres.connection import Dsn, connect, control, where
from icetide.capture.postgres.offset import LsnOffset
from icetide.capture.postgres.pgoutput import UNCHANGED
from icetide.capture.postgres.publication import ensure_publication, require_tables, split_table
from icetide.capture.postgres.settings import ServerInfo, check_server, read_settings
from icetide.capture.postgres.slot import (
    SlotStatus,
    advance_slot,
    check_slot_name,
    create_slot,
    slot_status,
    wait_inactive,
)
from icetide.capture.record import CaptureRecord, Heartbeat
from icetide.errors import IcetideError
from icetide.events.position import Position, format_lsn, lsn_position, parse_lsn
from icetide.sources.errors import SourceUnavailableError
from icetide.sources.postgres_catalog import resolve_type
from icetide.sources.postgres_types import (
    ColumnInfo,
    Converter,
    PgType,
    connect_schema,
    keeps_text,
    sql_type,
    unavailable_value,
    value_converter,
)

SOURCE = SourceBlock(
    "postgresql",
    "io.debezium.connector.postgresql.Source",
    (
        *COMMON_FIELDS,
        SourceField("schema", "string"),
        SourceField("table", "string"),
        SourceField("txId", "int64", optional=True),
        SourceField("lsn", "int64", optional=True),
        SourceField("xmin", "int64", optional=True),
    ),
)
"""The ``source`` block of Debezium's PostgreSQL connector (``xmin`` is always ``null``)."""
_MARKER_PREFIX = "icetide.capture.end"
CONFIRM_WAIT = 5.0
"""Seconds a closing stream waits for the server to apply its last acknowledgement."""
_NEW_TUPLE = 6
"""Where an Insert's TupleData, and an Update's without an old tuple, starts (after the
kind, the relation id and the ``N`` byte)."""


@dataclass
class _Relation:
    """A captured table as its latest Relation message describes it."""

    oid: int
    schema: str
    table: str
    identity: str
    """Replica identity: d(efault), n(othing), f(ull), i(ndex)."""
    columns: tuple[ColumnInfo, ...]
    converters: tuple[tuple[str, Converter], ...]
    key: tuple[str, ...]
    identity_columns: tuple[int, ...]
    pending_change: tuple[ColumnInfo, ...] | None = None
    """The previous layout, until the schema-change record for the new one is emitted."""
    _schema: dict[str, Any] | None = None
    _schema_json: str | None = None
    _row_reader: tuple[str, pgoutput.RowReader] | None = None

    def envelope_schema(self, server_name: str) -> dict[str, Any]:
        """The Connect schema of this table's envelopes (built once)."""
        if self._schema is None:
            self._schema = _envelope_schema(server_name, self.schema, self.table, self.columns)
        return self._schema

    def row_reader(self, codec: str) -> pgoutput.RowReader:
        """Reads a new row of only text values straight into its image (built once)."""
        if self._row_reader is None or self._row_reader[0] != codec:
            names = [name for name, _ in self.converters]
            converters = [None if keeps_text(c) else c for _, c in self.converters]
            self._row_reader = (codec, pgoutput.row_reader(names, converters, codec))
        return self._row_reader[1]

    def envelope_schema_json(self, server_name: str) -> str:
        """:meth:`envelope_schema` as JSON text (serialised once)."""
        if self._schema_json is None:
            self._schema_json = dumps(self.envelope_schema(server_name))
        return self._schema_json


@dataclass
class _Transaction:
    xid: int
    final_lsn: int
    ts_ms: int
    resume: LsnOffset
    skip: bool
    total: int = 0
    per_table: dict[tuple[str, str], int] = field(default_factory=dict)
    sources: dict[tuple[str, str], tuple[dict[str, Any], tuple[str, str, str]]] = field(
        default_factory=dict
    )
    """Per table: the ``source`` block with what is fixed for the transaction, and its
    text cut around ``sequence`` and ``lsn``, the values each change sets."""
    _id: str | None = None

    @property
    def id(self) -> str:
        if self._id is None:
            self._id = f"{self.xid}:{self.final_lsn}"
        return self._id

    def count(self, schema: str, table: str) -> tuple[int, int]:
        self.total += 1
        seen = self.per_table.get((schema, table), 0) + 1
        self.per_table[(schema, table)] = seen
        return self.total, seen


_COLUMNS_QUERY = """
SELECT a.attname, a.attnotnull,
       COALESCE(a.attnum = ANY(i.indkey), false) AS is_primary,
       format_type(a.atttypid, a.atttypmod), a.attndims
FROM pg_attribute a
LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
"""


class PgOutputReader:
    """Change events of ``tables`` (``"schema.table"``) from one PostgreSQL database.

    ``dsn`` is a libpq connection string (or psycopg2 keywords) naming the database.
    ``slot`` and ``publication`` are created when missing (the publication lists the
    tables; missing tables are added). ``start`` is the offset to resume from (``None``:
    the slot's confirmed point, a new slot starting now). ``blocking`` waits for new
    changes forever instead of stopping at the end of the WAL written before
    :meth:`open`. ``heartbeat_seconds`` yields a :class:`Heartbeat` whenever nothing
    arrived for that long. ``check_settings`` verifies the server first (see
    :mod:`icetide.capture.postgres.settings`).
    """

    def __init__(
        self,
        dsn: Dsn,
        tables: Iterable[str],
        *,
        start: LsnOffset | None = None,
        name: str = "icetide",
        slot: str = "icetide",
        publication: str = "icetide",
        blocking: bool = False,
        include_schema: bool = False,
        check_settings: bool = True,
        heartbeat_seconds: float | None = None,
        status_interval: float = 10.0,
        end_timeout: float = 60.0,
    ) -> None:
        self._dsn = dsn
        self._wanted = {split_table(t) for t in tables}
        if not self._wanted:
            raise CaptureError("no tables to capture", hint="list tables as schema.table")
        self.name = name
        self.slot = check_slot_name(slot)
        self.publication = publication
        self._start = start
        self._blocking = blocking
        self._include_schema = include_schema
        self._check = check_settings
        self._heartbeat = heartbeat_seconds
        self._status_interval = status_interval
        self._end_timeout = end_timeout
        self.info: ServerInfo | None = None
        self.start_offset: LsnOffset | None = None
        """Where this run started: the offset given, or the slot's confirmed point."""
        self.committed: LsnOffset | None = None
        """Just after the last complete transaction yielded (``None`` before one)."""
        self.acknowledged: LsnOffset | None = None
        """The last offset sent to the server with :meth:`acknowledge`."""
        self._ctl: Any = None
        self._repl: Any = None
        self._cursor: Any = None
        self._codec = "utf-8"
        self._relations: dict[int, _Relation | None] = {}
        self._layouts: dict[int, tuple[ColumnInfo, ...]] = {}
        self._types: dict[int, PgType] = {}
        self._tx: _Transaction | None = None
        self._skip_before = 0
        self._last_commit = 0
        self._last_lsn = -1
        self._index = 0
        self._marker: str | None = None
        self._end_lsn: int | None = None
        self._done = False

    @property
    def where(self) -> str:
        """``host:port/database`` of the server, for messages."""
        return where(self._dsn)

    # --- lifecycle ----------------------------------------------------------------------

    def open(self) -> PgOutputReader:
        """Check the server, ensure publication and slot, and start streaming (done by
        the first iteration too)."""
        if self._cursor is not None:
            return self
        self._ctl = control(self._dsn)
        try:
            self._prepare()
            self._start_stream()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Disconnect (the slot stays, at its confirmed point)."""
        self._await_confirmed()
        for conn in (self._repl, self._ctl):
            if conn is not None:
                try:
                    conn.close()
                except psycopg2.Error:
                    pass
        self._repl = self._ctl = self._cursor = None

    def _await_confirmed(self) -> None:
        """Before disconnecting a stream: wait (at most :data:`CONFIRM_WAIT` seconds) until
        the server has applied the last acknowledgement. The WAL sender reads feedback
        on its own time, so a capture that acknowledged and closed at once could leave
        the slot behind what it saved, and ``icetide status`` would report that WAL as
        unread for a moment."""
        if self._cursor is None or self._ctl is None or self.acknowledged is None:
            return
        deadline = time.monotonic() + CONFIRM_WAIT
        try:
            while True:
                status = slot_status(self._ctl, self.slot)
                confirmed = None if status is None else status.confirmed_flush_lsn
                if confirmed is None or confirmed >= self.acknowledged.lsn:
                    return
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.01)
        except psycopg2.Error:  # closing anyway: the slot keeps what it confirmed
            return

    def acknowledge(self, offset: LsnOffset) -> None:
        """Tell the server everything before ``offset`` is durable downstream: the slot's
        ``confirmed_flush_lsn`` moves there and the WAL before it may be recycled."""
        if self.acknowledged is not None and offset.lsn <= self.acknowledged.lsn:
            return
        self.acknowledged = offset
        if self._cursor is not None:
            try:
                self._cursor.send_feedback(
                    write_lsn=offset.lsn, flush_lsn=offset.lsn, apply_lsn=offset.lsn, force=True
                )
            except psycopg2.Error as exc:
                raise self._stream_error(exc) from exc
        elif self._ctl is None:
            advance_slot(self._dsn, self.slot, offset)

    def status(self) -> SlotStatus | None:
        """The slot's state now (lag, retained WAL), for ``icetide status``."""
        if self._ctl is None:
            ctl = control(self._dsn)
            try:
                return slot_status(ctl, self.slot)
            finally:
                ctl.close()
        return slot_status(self._ctl, self.slot)

    def columns(self, schema: str, table: str) -> tuple[ColumnInfo, ...] | None:
        """A captured table's columns as the latest Relation message in this session
        described them (``None`` before its first change); see
        :func:`~icetide.sources.postgres_types.infer_table_schema`."""
        for relation in self._relations.values():
            if relation is not None and (relation.schema, relation.table) == (schema, table):
                return relation.columns
        return None

    def __enter__(self) -> PgOutputReader:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[CaptureRecord | Heartbeat]:
        self.open()
        cursor = self._cursor
        now = time.monotonic()
        last_message = last_heartbeat = now
        try:
            while not self._done:
                message = cursor.read_message()
                if message is not None:
                    last_message = time.monotonic()
                    yield from self._handle(message.payload, message.data_start)
                    continue
                self._idle()
                if self._done:  # set by _idle(), which mypy's narrowing cannot see
                    break  # type: ignore[unreachable]
                now = time.monotonic()
                if not self._blocking and now - last_message > self._end_timeout:
                    raise CaptureError(
                        f"the stream from {self.where} stayed silent for "
                        f"{self._end_timeout:.0f}s before reaching the end of the WAL",
                        hint="the server may be overloaded (decoding a large transaction); "
                        "try again or raise end_timeout",
                    )
                wait = 1.0
                if self._heartbeat is not None:
                    due = max(last_message, last_heartbeat) + self._heartbeat
                    if now >= due:
                        yield Heartbeat()
                        last_heartbeat = time.monotonic()
                        continue
                    wait = min(wait, due - now)
                select.select([cursor], [], [], max(wait, 0.01))
        except psycopg2.Error as exc:
            raise self._stream_error(exc) from exc

    # --- setup --------------------------------------------------------------------------

    def _prepare(self) -> None:
        ctl = self._ctl
        where = f"the server at {self.where}"
        self.info = check_server(ctl, where) if self._check else read_settings(ctl)
        with ctl.cursor() as cur:
            cur.execute("SHOW server_encoding")
            encoding = str(cur.fetchone()[0]).upper()
        self._codec = pgoutput.python_codec(encoding)
        require_tables(ctl, sorted(self._wanted), self.where)
        ensure_publication(ctl, self.publication, self._wanted)
        status = slot_status(ctl, self.slot)
        if status is None:
            if self._start is not None:
                raise PositionLostError(
                    f"replication slot {self.slot!r} does not exist at {self.where}, so the "
                    f"changes since {self._start.text} are gone",
                    position=self._start.text,
                    hint="the slot was dropped (or never made here); run `icetide bootstrap` "
                    "again for these tables",
                )
            confirmed = create_slot(ctl, self.slot)
        else:
            if status.plugin != "pgoutput" or status.database != self.info.database:
                raise CaptureError(
                    f"replication slot {self.slot!r} at {self.where} belongs to plugin "
                    f"{status.plugin} in database {status.database}, not pgoutput in "
                    f"{self.info.database}",
                    hint="name another slot in the source's config",
                )
            status = wait_inactive(ctl, self.slot, status)
            if status is None:
                raise PositionLostError(
                    f"replication slot {self.slot!r} vanished at {self.where}",
                    position=self._start.text if self._start else "?",
                    hint="run `icetide bootstrap` again for these tables",
                )
            if status.active:
                raise SourceUnavailableError(
                    f"replication slot {self.slot!r} at {self.where} is in use by process "
                    f"{status.active_pid}",
                    hint="another capture is reading it; stop that one or wait",
                )
            confirmed = status.confirmed_flush_lsn or 0
        given = self._start.lsn if self._start is not None else 0
        # psycopg2 may have moved the slot past the saved offset over WAL holding nothing
        # for us (see the module docs), so the later of the two is where reading starts.
        self._skip_before = given
        self._last_commit = max(given, confirmed)
        self.start_offset = LsnOffset(self._last_commit)

    def _start_stream(self) -> None:
        version = self.info.version_num if self.info else 0
        end_by_marker = not self._blocking and version >= 140000
        options = {"proto_version": "1", "publication_names": self.publication}
        if end_by_marker:
            options["messages"] = "true"
        self._repl = connect(
            self._dsn, connection_factory=psycopg2.extras.LogicalReplicationConnection
        )
        cursor = self._repl.cursor()
        try:
            cursor.start_replication(
                slot_name=self.slot,
                decode=False,
                start_lsn=0,
                options=options,
                status_interval=self._status_interval,
            )
        except psycopg2.Error as exc:
            raise self._stream_error(exc) from exc
        self._cursor = cursor
        if self.acknowledged is not None:
            lsn = self.acknowledged.lsn
            cursor.send_feedback(write_lsn=lsn, flush_lsn=lsn, apply_lsn=lsn, force=True)
        if not self._blocking:
            with self._ctl.cursor() as cur:
                if end_by_marker:
                    self._marker = uuid.uuid4().hex
                    cur.execute(
                        "SELECT pg_logical_emit_message(false, %s, %s)::text",
                        (_MARKER_PREFIX, self._marker),
                    )
                else:
                    cur.execute("SELECT pg_current_wal_insert_lsn()::text")
                self._end_lsn = parse_lsn(str(cur.fetchone()[0]))

    def _stream_error(self, exc: psycopg2.Error) -> IcetideError:
        text = str(exc).strip()
        if "does not exist" in text and "slot" in text:
            position = self._start.text if self._start else "?"
            return PositionLostError(
                f"replication slot {self.slot!r} vanished at {self.where}: {text}",
                position=position,
                hint="run `icetide bootstrap` again for these tables",
            )
        if isinstance(exc, psycopg2.OperationalError) or self._repl is None or self._repl.closed:
            return SourceUnavailableError(
                f"lost the replication connection to {self.where}: {text}",
                hint="capture resumes from its last offset when restarted",
            )
        return CaptureError(f"reading the replication stream of {self.where} failed: {text}")

    # --- messages -----------------------------------------------------------------------

    def _idle(self) -> None:
        """Nothing buffered: the server has sent everything decoded so far."""
        wal_end = int(self._cursor.wal_end or 0)
        if self._tx is not None:
            return
        if wal_end > self._last_commit:
            # A keepalive's (or the last message's) WAL end, between transactions: every
            # transaction committed before it has been received.
            self._last_commit = wal_end
            self.committed = LsnOffset(wal_end)
        if self._marker is None and self._end_lsn is not None and wal_end >= self._end_lsn:
            self._done = True  # server without logical messages (< 14): end by keepalive

    def _handle(self, data: bytes, lsn: int) -> Sequence[CaptureRecord]:
        """The records of one message, in order (a list, not a generator: most messages
        give one record or none, and this runs for every message)."""
        kind = data[0]
        if kind == pgoutput.UPDATE or kind == pgoutput.INSERT or kind == pgoutput.DELETE:
            if self._tx is not None and self._tx.skip:
                return ()
            if kind == pgoutput.UPDATE:
                return self._update(data, lsn)
            if kind == pgoutput.INSERT:
                return self._insert(data, lsn)
            return self._delete(data, lsn)
        if kind == pgoutput.BEGIN:
            self._begin(data)
        elif kind == pgoutput.COMMIT:
            self._commit(data)
        elif kind == pgoutput.RELATION:
            self._relation(data)
        elif self._tx is not None and self._tx.skip:
            pass
        elif kind == pgoutput.TRUNCATE:
            return list(self._truncate(data, lsn))
        elif kind == pgoutput.MESSAGE:
            self._message(data)
        # Y (type), O (origin): nothing to emit; types are read from the catalog.
        return ()

    def _begin(self, data: bytes) -> None:
        begin = pgoutput.parse_begin(data)
        self._tx = _Transaction(
            begin.xid,
            begin.final_lsn,
            begin.ts_ms,
            LsnOffset(self._last_commit),
            skip=begin.final_lsn < self._skip_before,
        )

    def _commit(self, data: bytes) -> None:
        end_lsn = pgoutput.parse_commit(data)
        self._tx = None
        if end_lsn > self._last_commit:
            self._last_commit = end_lsn
            self.committed = LsnOffset(end_lsn)

    def _message(self, data: bytes) -> None:
        message = pgoutput.parse_message(data)
        if message.transactional or message.prefix != _MARKER_PREFIX or self._marker is None:
            return
        if message.content.decode() != self._marker:
            return
        lsn = message.lsn
        if self._tx is None and lsn > self._last_commit:
            self._last_commit = lsn
            self.committed = LsnOffset(lsn)
        self._done = True

    def _relation(self, data: bytes) -> None:
        message = pgoutput.parse_relation(data)
        oid, schema, table = message.oid, message.schema, message.table
        if (schema, table) not in self._wanted:
            self._relations[oid] = None
            return
        catalog = self._catalog_columns(oid)
        columns = tuple(
            ColumnInfo(
                name=c.name,
                type=self._type(c.type_oid),
                typmod=c.typmod,
                identity=c.identity,
                primary=catalog.get(c.name, (True, False, 0))[1],
                nullable=catalog.get(c.name, (True, False, 0))[0],
                dims=catalog.get(c.name, (True, False, 0))[2],
            )
            for c in message.columns
        )
        previous = self._layouts.get(oid)
        old = self._relations.get(oid)
        relation = _Relation(
            oid,
            schema,
            table,
            message.identity,
            columns,
            tuple((c.name, value_converter(c)) for c in columns),
            tuple(c.name for c in columns if c.primary),
            tuple(i for i, c in enumerate(columns) if c.identity),
        )
        if previous is None or previous != columns:
            # The first Relation of a table in this session too: the session cannot tell
            # whether the table changed while capture was away (or before its first
            # change here), so downstream compares with its schema (it is cheap: once per
            # table per session).
            relation.pending_change = previous or ()
        elif old is not None and old.pending_change is not None:
            relation.pending_change = old.pending_change
        self._relations[oid] = relation
        self._layouts[oid] = columns

    def _catalog_columns(self, oid: int) -> dict[str, tuple[bool, bool, int]]:
        """Column → (nullable, primary, declared array dimensions) from the catalog as it
        is now."""
        with self._ctl.cursor() as cur:
            cur.execute(_COLUMNS_QUERY, (oid,))
            return {
                str(n): (not notnull, bool(pk), int(dims or 0))
                for n, notnull, pk, _, dims in cur.fetchall()
            }

    def _type(self, oid: int) -> PgType:
        known = self._types.get(oid)
        if known is not None:
            return known
        found = resolve_type(self._ctl, oid)
        self._types[oid] = found
        return found

    # --- row events ---------------------------------------------------------------------

    def _image(
        self, relation: _Relation, values: list[Any], old: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        if UNCHANGED not in values:  # the usual row: no unchanged TOAST value to look up
            return {
                name: None if raw is None else convert(raw)
                for (name, convert), raw in zip(relation.converters, values, strict=True)
            }
        image: dict[str, Any] = {}
        for (name, convert), info, raw in zip(
            relation.converters, relation.columns, values, strict=True
        ):
            if raw is None:
                image[name] = None
            elif raw is UNCHANGED:
                # FULL identity sends the old row, detoasted: the value is right there.
                if old is not None and name in old and old[name] != unavailable_value(info):
                    image[name] = old[name]
                else:
                    image[name] = unavailable_value(info)
            else:
                image[name] = convert(raw)
        return image

    def _key_image(self, relation: _Relation, values: list[Any]) -> dict[str, Any]:
        """The replica-identity columns of a 'K' tuple (the other columns are null)."""
        image = {}
        for i in relation.identity_columns:
            name, convert = relation.converters[i]
            raw = values[i]
            image[name] = None if raw is None or raw is UNCHANGED else convert(raw)
        return image

    def _old_image(self, relation: _Relation, kind: int, values: list[Any]) -> dict[str, Any]:
        if kind == pgoutput.KEY:
            return self._key_image(relation, values)
        return self._image(relation, values)

    def _relation_for(self, data: bytes) -> _Relation | None:
        return self._relations.get(pgoutput.relation_oid(data))

    def _insert(self, data: bytes, lsn: int) -> list[CaptureRecord]:
        relation = self._relation_for(data)
        if relation is None:
            return []
        after = relation.row_reader(self._codec)(data, _NEW_TUPLE)
        if after is None:  # a NULL or an unchanged TOAST value
            after = self._image(relation, pgoutput.parse_insert(data, self._codec))
        records = self._pending_schema_change(relation, lsn)
        records.append(self._change("c", relation, None, after, lsn))
        return records

    def _update(self, data: bytes, lsn: int) -> list[CaptureRecord]:
        relation = self._relation_for(data)
        if relation is None:
            return []
        if data[_NEW_TUPLE - 1] == pgoutput.NEW:  # no old tuple: the new row only
            after = relation.row_reader(self._codec)(data, _NEW_TUPLE)
            if after is not None:
                records = self._pending_schema_change(relation, lsn)
                records.append(self._change("u", relation, None, after, lsn))
                return records
        old_kind, old_values, new_values = pgoutput.parse_update(data, self._codec)
        before = None if old_values is None else self._old_image(relation, old_kind, old_values)
        after = self._image(relation, new_values, before if old_kind == pgoutput.OLD else None)
        records = self._pending_schema_change(relation, lsn)
        key = relation.key
        if (
            before is not None
            and key
            and all(k in before for k in key)
            and any(before[k] != after[k] for k in key)
        ):
            # A new primary key is a new row: Debezium sends a delete of the old key and a
            # create of the new one, so each lands under its own key.
            records.append(self._change("d", relation, before, None, lsn))
            records.append(self._change("c", relation, None, after, lsn))
        else:
            records.append(self._change("u", relation, before, after, lsn))
        return records

    def _delete(self, data: bytes, lsn: int) -> list[CaptureRecord]:
        relation = self._relation_for(data)
        if relation is None:
            return []
        old_kind, values = pgoutput.parse_delete(data, self._codec)
        records = self._pending_schema_change(relation, lsn)
        before = self._old_image(relation, old_kind, values)
        records.append(self._change("d", relation, before, None, lsn))
        return records

    def _pending_schema_change(self, relation: _Relation, lsn: int) -> list[CaptureRecord]:
        """The schema-change record due before the relation's next change, if one is."""
        if relation.pending_change is None:
            return []
        return list(self._schema_change(relation, lsn))

    def _truncate(self, data: bytes, lsn: int) -> Iterator[CaptureRecord]:
        for oid in pgoutput.parse_truncate(data):
            relation = self._relations.get(oid)
            if relation is not None:
                yield self._change("t", relation, None, None, lsn)

    # --- records ------------------------------------------------------------------------

    def _position(self, lsn: int) -> Position:
        if lsn == self._last_lsn:
            self._index += 1
        else:
            self._last_lsn, self._index = lsn, 0
        return lsn_position(lsn, self._index)

    def _source(self, relation: _Relation, lsn: int, tx: _Transaction) -> dict[str, Any]:
        return SOURCE.values(
            name=self.name,
            ts_ms=tx.ts_ms,
            db=self.info.database if self.info else "",
            sequence=f'["{tx.resume.lsn}","{lsn}"]',
            schema=relation.schema,
            table=relation.table,
            txId=tx.xid,
            lsn=lsn,
        )

    def _change(
        self,
        op: str,
        relation: _Relation,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        lsn: int,
    ) -> CaptureRecord:
        tx = self._tx
        if tx is None:  # not expected: pgoutput wraps every change in B … C
            raise CaptureError(f"pgoutput sent a change at {format_lsn(lsn)} outside a transaction")
        total, in_table = tx.count(relation.schema, relation.table)
        # The block's fixed part is copied (dict) and reused (text) from the transaction's
        # template; only sequence and lsn are this change's own.
        base, (head, middle, tail) = self._source_template(relation, tx)
        source = base.copy()
        sequence = f'["{tx.resume.lsn}","{lsn}"]'
        source["sequence"], source["lsn"] = sequence, lsn
        schema = None
        if self._include_schema:
            schema = relation.envelope_schema(self.name), relation.envelope_schema_json(self.name)
        value, text = change_envelope(
            op,
            before,
            after,
            source,
            f"{head}{string(sequence)}{middle}{int(lsn)}{tail}",
            (tx.id, total, in_table),
            schema,
        )
        key = record_key(relation.key, before, after)
        return CaptureRecord(
            "change",
            relation.schema,
            relation.table,
            key,
            value,
            self._position(lsn),
            tx.resume,
            text,
        )

    def _source_template(
        self, relation: _Relation, tx: _Transaction
    ) -> tuple[dict[str, Any], tuple[str, str, str]]:
        """The relation's ``source`` block in ``tx`` and its text cut around ``sequence``
        and ``lsn`` (built once per table and transaction)."""
        cache_key = (relation.schema, relation.table)
        found = tx.sources.get(cache_key)
        if found is None:
            base = self._source(relation, 0, tx)
            head, middle, tail = fragments(base, ("sequence", "lsn"))
            found = tx.sources[cache_key] = (base, (head, middle, tail))
        return found

    def _schema_change(self, relation: _Relation, lsn: int) -> Iterator[CaptureRecord]:
        if relation.pending_change is None or self._tx is None:
            return
        relation.pending_change = None
        tx = self._tx
        payload = schema_change_value(
            self._source(relation, lsn, tx),
            self.info.database if self.info else "",
            relation.schema,
            None,
            [_table_change(self.info, relation)],
        )
        yield CaptureRecord(
            "schema_change",
            relation.schema,
            relation.table,
            None,
            payload,
            self._position(lsn),
            tx.resume,
        )


def _table_change(info: ServerInfo | None, relation: _Relation) -> dict[str, Any]:
    """A Debezium ``tableChanges`` entry describing the relation's new columns."""
    database = info.database if info else ""
    columns = []
    for position, column in enumerate(relation.columns, start=1):
        columns.append(
            {
                "name": column.name,
                "jsonType": connect_schema(column)["type"].upper(),
                "oid": column.type.oid,
                "typeName": column.type.name,
                "typeExpression": sql_type(column),
                "position": position,
                "optional": column.nullable,
                "primary": column.primary,
            }
        )
    return {
        "type": "ALTER",
        "id": f'"{database}"."{relation.schema}"."{relation.table}"',
        "table": {"primaryKeyColumnNames": list(relation.key), "columns": columns},
    }


def _envelope_schema(
    server: str, schema: str, table: str, columns: tuple[ColumnInfo, ...]
) -> dict[str, Any]:
    """The Connect schema Debezium's PostgreSQL connector gives a table's change events."""
    fields = [{**connect_schema(c), "field": c.name} for c in columns]
    return envelope_schema(f"{server}.{schema}.{table}", fields, SOURCE)
