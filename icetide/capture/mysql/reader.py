"""Read a MySQL/MariaDB binlog and turn every row change into a Debezium change event.

:class:`BinlogReader` follows the binlog with python-mysql-replication from a start
offset (file + position, or a GTID state), keeps only the configured ``db.table`` pairs,
and yields one :class:`CaptureRecord` per change: its ``value`` is the envelope Debezium's
MySQL connector writes (JSON converter, ``schemas.enable=false`` unless
``include_schema``), so :func:`icetide.events.envelope.decode_message` reads it like any
Debezium message::

    reader = BinlogReader(server.connection_settings(), ["shop.customers"])
    for record in reader:          # stops at the end of the log unless blocking=True
        transport.send(record.key, record.to_json())
    reader.committed               # where to start next time

What is emitted, per binlog event:

* row events → ``c`` / ``u`` / ``d``, one per row; an update that changes the primary key
  becomes a ``d`` of the old key and a ``c`` of the new one, as Debezium does;
* ``TRUNCATE TABLE`` → one ``t`` event (before and after ``null``);
* DDL on a captured table → a schema-change record (``{"source", "databaseName", "ddl",
  "tableChanges": []}``, which the decoder skips as ``schema_change``) and an entry in the
  :class:`~icetide.capture.mysql.history.DdlHistory`, whose ``columns`` entries come
  from the binlog's own table maps.

Positions: ``source.file``/``source.pos`` are the binlog file and the *start* offset of
the row event, ``source.row`` the row's index in it, so ``(file number, pos, row)`` — what
:func:`icetide.events.position.binlog_position` packs — is unique and increases along the
log, across file rotations too. ``source.gtid`` and ``transaction.id`` carry the GTID
(MariaDB ``domain-server-seq``, MySQL ``uuid:n``), or ``file:pos`` of the transaction
start when the server writes no GTIDs.

Offsets: every record carries ``resume``, the start of its transaction (file + position,
and the GTID state before it): restarting there replays the transaction, and duplicates
are harmless because the merge is version-guarded by position. :attr:`BinlogReader.committed`
is the offset just after the last complete transaction read — or, once the server rotated
to a new binlog file, the position in the new file after its header (format description,
GTID list, checkpoint). A transaction never spans two files, so nothing before that
position is left unread; a caught-up capture's saved offset then equals the server's
``SHOW MASTER STATUS`` instead of pointing at the end of the previous file.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    FormatDescriptionEvent,
    GtidEvent,
    HeartbeatLogEvent,
    MariadbBinLogCheckPointEvent,
    MariadbGtidEvent,
    MariadbGtidListEvent,
    PreviousGtidsEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from pymysqlreplication.gtid import Gtid, GtidSet
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

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
from icetide.capture.json_text import dumps, fragments
from icetide.capture.mysql.history import DdlHistory, HistoryEntry, parse_ddl
from icetide.capture.mysql.rows import RowDecoder, row_decoder
from icetide.capture.mysql.settings import ServerInfo, check_server, read_variables, server_info
from icetide.capture.mysql.types import (
    ColumnInfo,
    Converter,
    column_info,
    connect_schema,
    convert_row,
    nullable_flags,
    value_converter,
)
from icetide.capture.record import CaptureRecord, Heartbeat
from icetide.errors import IcetideError
from icetide.events.position import Position, binlog_position
from icetide.sources.connect import open_mysql
from icetide.sources.errors import SourceUnavailableError

SOURCE = SourceBlock(
    "mysql",
    "io.debezium.connector.mysql.Source",
    (
        *COMMON_FIELDS,
        SourceField("table", "string", optional=True),
        SourceField("server_id", "int64"),
        SourceField("gtid", "string", optional=True),
        SourceField("file", "string"),
        SourceField("pos", "int64"),
        SourceField("row", "int32"),
        SourceField("thread", "int64", optional=True),
        SourceField("query", "string", optional=True),
    ),
)
"""The ``source`` block of Debezium's MySQL connector (``sequence`` and ``query`` are
always ``null`` here)."""

_MARIADB_STANDALONE = 0x01  # GTID flag: a statement (DDL) with no BEGIN … COMMIT around it
_ROW_EVENTS = (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)
# What a server writes at the start of every binlog file, before any transaction.
_FILE_HEADER_EVENTS = (
    FormatDescriptionEvent,
    MariadbGtidListEvent,
    MariadbBinLogCheckPointEvent,
    PreviousGtidsEvent,
)
_LOST_POSITION = 1236  # ER_MASTER_FATAL_ERROR_READING_BINLOG: purged or unknown position
_CONNECTION_ERRORS = (2002, 2003, 2006, 2013)
# Rows of one event that binlog_position can number (its row field); it raises beyond.
_ROWS_PER_EVENT = 10**6
# The source block's values a row event sets (in declared order); the rest is fixed for
# a table within one transaction.
_EVENT_SOURCE_FIELDS = ("ts_ms", "server_id", "pos", "row")


@dataclass(frozen=True)
class BinlogOffset:
    """Where to (re)start reading: a transaction boundary in the binlog.

    ``file`` + ``pos`` when known; ``gtid`` is the server's GTID state *before* that
    boundary (MariaDB ``0-1-42,1-2-7``; MySQL an executed GTID set), used when there is
    no file. Persist it with :meth:`to_dict`.
    """

    file: str | None = None
    pos: int | None = None
    gtid: str | None = None

    @property
    def text(self) -> str:
        """``file:pos`` (and ``gtid``) for people."""
        parts = [f"{self.file}:{self.pos}"] if self.file else []
        if self.gtid is not None:
            parts.append(f"gtid {self.gtid or '(empty)'}")
        return ", ".join(parts) or "(current end of the log)"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"file": self.file, "pos": self.pos, "gtid": self.gtid}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BinlogOffset:
        """The offset :meth:`to_dict` wrote."""
        pos = data.get("pos")
        return cls(data.get("file"), None if pos is None else int(pos), data.get("gtid"))


@dataclass
class _Table:
    """A captured table as its latest table map describes it."""

    db: str
    table: str
    columns: tuple[ColumnInfo, ...]
    converters: tuple[tuple[ColumnInfo, Converter], ...]
    key: tuple[str, ...]
    decoder: RowDecoder | None = None
    """Reads row images without the library (``None``: a column type only it knows)."""
    _schema: dict[str, Any] | None = None
    _schema_json: str | None = None

    def envelope_schema(self, server_name: str) -> dict[str, Any]:
        """The Connect schema of this table's envelopes (built once)."""
        if self._schema is None:
            self._schema = _envelope_schema(server_name, self.db, self.table, self.columns)
        return self._schema

    def envelope_schema_json(self, server_name: str) -> str:
        """:meth:`envelope_schema` as JSON text (serialised once)."""
        if self._schema_json is None:
            self._schema_json = dumps(self.envelope_schema(server_name))
        return self._schema_json


@dataclass
class _Transaction:
    file: str
    pos: int
    gtid: str | None
    gtid_before: str | None
    open: bool = False
    """Inside BEGIN … COMMIT (or a MariaDB transactional GTID group)."""
    thread: int | None = None
    total: int = 0
    per_table: dict[tuple[str, str], int] = field(default_factory=dict)
    _resume: BinlogOffset | None = None
    sources: dict[tuple[Any, ...], tuple[dict[str, Any], tuple[str, ...]]] = field(
        default_factory=dict
    )
    """Per table (and file and thread): the ``source`` block with what is fixed for the
    transaction, and its text cut around the values each row event sets
    (:data:`_EVENT_SOURCE_FIELDS`)."""

    @property
    def resume(self) -> BinlogOffset:
        """Where to restart to see this transaction again (one object for all its records)."""
        if self._resume is None:
            self._resume = BinlogOffset(self.file, self.pos, self.gtid_before)
        return self._resume

    @property
    def id(self) -> str:
        return self.gtid or f"{self.file}:{self.pos}"

    def count(self, db: str, table: str) -> tuple[int, int]:
        self.total += 1
        seen = self.per_table.get((db, table), 0) + 1
        self.per_table[(db, table)] = seen
        return self.total, seen


class _GtidState:
    """The GTID state after the last committed transaction, in the server's own notation."""

    def __init__(self, flavor: str, initial: str | None) -> None:
        self.flavor = flavor
        self.known = initial is not None
        self._domains: dict[str, str] = {}
        self._set: Any = None
        if initial is None:
            return
        if flavor == "mariadb":
            for gtid in filter(None, (g.strip() for g in initial.split(","))):
                self._domains[gtid.split("-", 1)[0]] = gtid
        else:
            self._set = GtidSet(initial.replace("\n", "") or None)

    def text(self) -> str | None:
        if not self.known:
            return None
        if self.flavor == "mariadb":
            return ",".join(self._domains[d] for d in sorted(self._domains, key=int))
        return str(self._set)

    def add(self, gtid: str | None) -> None:
        if gtid is None or not self.known:
            return
        if self.flavor == "mariadb":
            self._domains[gtid.split("-", 1)[0]] = gtid
        else:
            self._set.merge_gtid(Gtid(gtid))


class BinlogReader:
    """Change events of ``tables`` (``"db.table"``) from the binlog of one server.

    ``connection`` holds pymysql keywords (host, port, user, password). ``start`` is
    where to begin (file + pos when given, else the GTID state, else the current end of
    the log). ``blocking`` waits for new events forever instead of stopping at the end
    of the log. ``history`` (a :class:`DdlHistory` or a path) records DDL and columns.
    ``check_settings`` verifies the server first (see
    :mod:`icetide.capture.mysql.settings`). ``server_id`` must be unique among the
    server's replicas (random by default).
    """

    def __init__(
        self,
        connection: Mapping[str, Any],
        tables: Iterable[str],
        *,
        start: BinlogOffset | None = None,
        name: str = "icetide",
        server_id: int | None = None,
        blocking: bool = False,
        include_schema: bool = False,
        history: DdlHistory | Path | None = None,
        check_settings: bool = True,
        heartbeat_seconds: float | None = None,
    ) -> None:
        self._connection = dict(connection)
        self._wanted = {_split_table(t) for t in tables}
        if not self._wanted:
            raise CaptureError("no tables to capture", hint="list tables as db.table")
        self.name = name
        self.server_id = server_id or random.randint(10_000, 2**31 - 1)
        self._start = start
        self._blocking = blocking
        self._include_schema = include_schema
        self.history = DdlHistory(history) if isinstance(history, Path) else history
        self._check = check_settings
        self._heartbeat = heartbeat_seconds
        self._stream: Any = None
        self.info: ServerInfo | None = None
        self._file = ""
        self._tables: dict[int, _Table] = {}
        self._tx: _Transaction | None = None
        self._gtids = _GtidState("mysql", None)
        self.start_offset: BinlogOffset | None = None
        self.committed: BinlogOffset | None = None
        """The offset just after the last complete transaction read (``None`` before one)."""

    @property
    def where(self) -> str:
        """``host:port`` of the server, for messages."""
        host = self._connection.get("host") or self._connection.get("unix_socket") or "?"
        port = self._connection.get("port")
        return f"{host}:{port}" if port else str(host)

    # --- lifecycle ----------------------------------------------------------------------

    def open(self) -> BinlogReader:
        """Check the server and position the stream (done by the first iteration too)."""
        if self._stream is not None:
            return self
        ctl = self._control_connection()
        try:
            variables = read_variables(ctl)
            self.info = (
                check_server(ctl, f"the server at {self.where}")
                if self._check
                else server_info(variables)
            )
            start = self._resolve_start(ctl, self.info)
        finally:
            ctl.close()
        self.start_offset = start
        self._gtids = _GtidState(self.info.flavor, start.gtid)
        self._file = start.file or ""
        by_gtid = start.file is None
        stream_settings = dict(self._connection)
        stream_settings.pop("database", None)
        self._stream = BinLogStreamReader(
            connection_settings=stream_settings,
            server_id=self.server_id,
            resume_stream=True,
            blocking=self._blocking,
            log_file=start.file,
            log_pos=start.pos,
            auto_position=start.gtid if by_gtid else None,
            is_mariadb=by_gtid and self.info.flavor == "mariadb",
            only_events=[
                RotateEvent,
                *_FILE_HEADER_EVENTS,
                MariadbGtidEvent,
                GtidEvent,
                QueryEvent,
                XidEvent,
                TableMapEvent,
                *_ROW_EVENTS,
                HeartbeatLogEvent,
            ],
            only_schemas=sorted({db for db, _ in self._wanted}),
            only_tables=sorted({table for _, table in self._wanted}),
            slave_heartbeat=self._heartbeat,
            enable_logging=False,
        )
        return self

    def close(self) -> None:
        """Disconnect from the server."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def acknowledge(self, offset: BinlogOffset) -> None:
        """Nothing to tell a MySQL server: it keeps binlogs by its own expiry settings."""

    def __enter__(self) -> BinlogReader:
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
        try:
            for event in self._stream:
                yield from self._handle(event)
        except pymysql.err.MySQLError as exc:
            raise self._stream_error(exc) from exc

    # --- setup --------------------------------------------------------------------------

    def _control_connection(self) -> Any:
        settings = {"charset": "utf8mb4", "autocommit": True, "connect_timeout": 10}
        settings.update(self._connection)
        return open_mysql(settings, where=f"the MySQL/MariaDB server at {self.where}")

    def _resolve_start(self, ctl: Any, info: ServerInfo) -> BinlogOffset:
        start = self._start
        with ctl.cursor() as cur:
            if start is not None and start.file and start.pos is not None:
                state = start.gtid
                if state is None and info.flavor == "mariadb":
                    cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (start.file, start.pos))
                    row = cur.fetchone()
                    state = None if row is None or row[0] is None else str(row[0])
                return BinlogOffset(start.file, start.pos, state)
            if start is not None and start.gtid is not None:
                if not info.gtid_enabled:
                    raise CaptureError(
                        f"cannot resume from GTID {start.gtid}: the server at {self.where} "
                        "writes no GTIDs (gtid_mode is OFF)",
                        hint="resume from a binlog file and position instead",
                    )
                return BinlogOffset(None, None, start.gtid)
            cur.execute("SHOW MASTER STATUS")
            row = cur.fetchone()
            if row is None:
                raise CaptureError(f"the server at {self.where} has no binary log")
            file, pos = str(row[0]), int(row[1])
            gtid: str | None = None
            if info.flavor == "mariadb":
                cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
                found = cur.fetchone()
                gtid = None if found is None or found[0] is None else str(found[0])
            elif info.gtid_enabled and len(row) > 4:
                gtid = str(row[4] or "").replace("\n", "")
            return BinlogOffset(file, pos, gtid)

    def _stream_error(self, exc: pymysql.err.MySQLError) -> IcetideError:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        start = self.start_offset.text if self.start_offset else "?"
        if code == _LOST_POSITION:
            return PositionLostError(
                f"the server at {self.where} cannot send the binlog from {start}: {exc}",
                position=start,
                hint="the binlog there was purged or never existed; run `icetide bootstrap` "
                "again for these tables, and keep binlogs longer (binlog_expire_logs_seconds)",
            )
        if code in _CONNECTION_ERRORS:
            return SourceUnavailableError(
                f"lost the connection to the server at {self.where}: {exc}",
                hint="capture resumes from its last offset when restarted",
            )
        return CaptureError(f"reading the binlog of {self.where} failed: {exc}")

    # --- events -------------------------------------------------------------------------

    def _handle(self, event: Any) -> Iterator[CaptureRecord | Heartbeat]:
        end = int(event.packet.log_pos or 0)
        start = end - int(event.packet.event_size) if end else 0
        if isinstance(event, RotateEvent):
            self._file = str(event.next_binlog)
            self._tables.clear()  # table ids are only valid within one binlog file
            # A real rotate (log_pos set) closes the old file; the one the server fakes
            # when a stream starts (log_pos 0) says where the stream is, not what was read.
            if end:
                self._advance(int(event.position), at=None)
        elif isinstance(event, _FILE_HEADER_EVENTS):
            if end:
                self._advance(end, at=start)
        elif isinstance(event, MariadbGtidEvent):
            standalone = bool(event.flags & _MARIADB_STANDALONE)
            self._begin(start, str(event.gtid), is_open=not standalone)
        elif isinstance(event, GtidEvent):
            self._begin(start, str(event.gtid), is_open=False)  # BEGIN or a DDL follows
        elif isinstance(event, TableMapEvent):
            self._table_map(event, start)
        elif isinstance(event, _ROW_EVENTS):
            yield from self._rows(event, start)
        elif isinstance(event, XidEvent):
            self._commit(end)
        elif isinstance(event, QueryEvent):
            yield from self._query(event, start, end)
        elif isinstance(event, HeartbeatLogEvent):
            yield Heartbeat()

    def _advance(self, pos: int, *, at: int | None) -> None:
        """Move :attr:`committed` to ``pos`` in the current file across events that
        carry no rows, when that skips nothing: no transaction is open, and (unless
        ``at`` is None, after a rotation) the event starts where the offset already is."""
        if self._tx is not None and self._tx.open:
            return
        if at is not None:
            known = self.committed or self.start_offset
            if known is None or known.file != self._file or known.pos is None or known.pos > at:
                return
        self.committed = BinlogOffset(self._file, pos, self._gtids.text())

    def _begin(self, pos: int, gtid: str | None, *, is_open: bool) -> _Transaction:
        self._tx = _Transaction(self._file, pos, gtid, self._gtids.text(), open=is_open)
        return self._tx

    def _current_tx(self, pos: int) -> _Transaction:
        # Without a GTID or BEGIN (not expected in ROW format) the event is its own start.
        return self._tx if self._tx is not None else self._begin(pos, None, is_open=True)

    def _commit(self, end: int) -> None:
        tx, self._tx = self._tx, None
        if tx is not None:
            self._gtids.add(tx.gtid)
        self.committed = BinlogOffset(self._file, end, self._gtids.text())

    def _query(self, event: Any, start: int, end: int) -> Iterator[CaptureRecord]:
        sql = str(event.query).strip()
        word = sql.split(None, 1)[0].upper() if sql else ""
        if word == "BEGIN":
            tx = self._tx if self._tx is not None and not self._tx.open else None
            tx = tx or self._begin(start, None, is_open=True)
            tx.open, tx.thread = True, int(event.slave_proxy_id)
            return
        if word in ("COMMIT", "ROLLBACK") and len(sql.split()) == 1:
            self._commit(end)
            return
        standalone = self._tx is None or not self._tx.open
        tx = self._current_tx(start)
        if tx.thread is None:
            tx.thread = int(event.slave_proxy_id)
        schema = event.schema
        default_db = schema.decode("utf-8", "replace") if isinstance(schema, bytes) else schema
        yield from self._statement(sql, default_db or None, event, start, tx)
        if standalone:
            self._commit(end)

    def _statement(
        self, sql: str, default_db: str | None, event: Any, start: int, tx: _Transaction
    ) -> Iterator[CaptureRecord]:
        parsed = parse_ddl(sql, default_db)
        if parsed is None:
            return
        position = binlog_position(self._file, start, 0)
        ts_ms = int(event.timestamp) * 1000
        for db, table in parsed.tables:
            if db is None or (db, table) not in self._wanted:
                continue
            source = self._source(db, table, ts_ms, start, 0, tx, event.packet.server_id)
            if parsed.kind == "truncate":
                yield self._change("t", db, table, None, None, None, source, position, tx)
                continue
            if self.history is not None:
                self.history.record(
                    HistoryEntry("ddl", db, table, position.text, position.key, tx.gtid, ts_ms, sql)
                )
            # Forget the table's layout: the next table map describes the new one.
            self._tables = {k: t for k, t in self._tables.items() if (t.db, t.table) != (db, table)}
            payload = schema_change_value(source, db, None, sql, [])
            yield CaptureRecord("schema_change", db, table, None, payload, position, tx.resume)

    def _table_map(self, event: Any, start: int) -> None:
        db, table = str(event.schema), str(event.table)
        if (db, table) not in self._wanted:
            return
        flags = nullable_flags(event.null_bitmask, len(event.columns))
        columns = tuple(column_info(c, n) for c, n in zip(event.columns, flags, strict=True))
        known = self._tables.get(event.table_id)
        if known is not None and known.columns == columns:
            return
        converters = tuple((c, value_converter(c)) for c in columns)
        key = tuple(c.name for c in columns if c.primary)
        decoder = row_decoder(event.columns, columns)
        self._tables[event.table_id] = _Table(db, table, columns, converters, key, decoder)
        if self.history is not None:
            position = binlog_position(self._file, start, 0)
            self.history.record(
                HistoryEntry(
                    "columns",
                    db,
                    table,
                    position.text,
                    position.key,
                    self._tx.gtid if self._tx else None,
                    int(event.timestamp) * 1000,
                    None,
                    tuple(c.signature() for c in columns),
                )
            )

    def _rows(self, event: Any, start: int) -> Iterator[CaptureRecord]:
        table = self._tables.get(event.table_id)
        if table is None:
            return
        tx = self._current_tx(start)
        images = self._images(event, table)
        db, name, key, file = table.db, table.table, table.key, self._file
        # One source block and position per event; each record gets a copy with its row,
        # and the block's text is the event's head, the row number and the fixed tail.
        ts_ms = int(event.timestamp) * 1000
        server_id = int(event.packet.server_id)
        base, (f_ts, f_server, f_pos, f_row, tail) = self._source_template(db, name, tx)
        source = base.copy()
        source["ts_ms"], source["server_id"], source["pos"] = ts_ms, server_id, start
        head = f"{f_ts}{ts_ms}{f_server}{server_id}{f_pos}{start}{f_row}"
        first = binlog_position(file, start, 0)
        prefix = f"{file}:{start}:"
        update = isinstance(event, UpdateRowsEvent)
        op = "u" if update else "c" if isinstance(event, WriteRowsEvent) else "d"
        change = self._change
        for row_index in range(len(images) // 2 if update else len(images)):
            row_source = source.copy()
            row_source["row"] = row_index
            text = f"{head}{row_index}{tail}"
            position = (
                Position(first.key + row_index, "binlog", prefix + str(row_index))
                if row_index < _ROWS_PER_EVENT
                else binlog_position(file, start, row_index)
            )
            if not update:
                image = images[row_index]
                before, after = (None, image) if op == "c" else (image, None)
                yield change(op, db, name, table, before, after, row_source, position, tx, text)
                continue
            before, after = images[2 * row_index], images[2 * row_index + 1]
            if key and any(before[k] != after[k] for k in key):
                # A new primary key is a new row: Debezium sends a delete of the old
                # key and a create of the new one, so each lands under its own key.
                yield change("d", db, name, table, before, None, row_source, position, tx, text)
                yield change("c", db, name, table, None, after, row_source, position, tx, text)
            else:
                yield change("u", db, name, table, before, after, row_source, position, tx, text)

    def _source_template(
        self, db: str, table: str, tx: _Transaction
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The table's ``source`` block in ``tx`` with placeholders for what each row
        event sets, and its text cut around those (built once per table and
        transaction: the rest of the block is the same for all its rows)."""
        cache_key = (db, table, self._file, tx.thread)
        found = tx.sources.get(cache_key)
        if found is None:
            base = self._source(db, table, 0, 0, 0, tx, 0)
            found = tx.sources[cache_key] = (base, fragments(base, _EVENT_SOURCE_FIELDS))
        return found

    def _images(self, event: Any, table: _Table) -> list[dict[str, Any]]:
        """The event's row images as Debezium JSON objects (an update: before, after, …)."""
        if table.decoder is not None:
            images = table.decoder.images(event)
            if images is not None:
                return images
        columns = table.converters
        if isinstance(event, UpdateRowsEvent):
            return [
                image
                for row in event.rows
                for image in (
                    convert_row(row["before_values"], columns, row["before_none_sources"]),
                    convert_row(row["after_values"], columns, row["after_none_sources"]),
                )
            ]
        return [convert_row(row["values"], columns, row["none_sources"]) for row in event.rows]

    def _source(
        self,
        db: str,
        table: str,
        ts_ms: int,
        pos: int,
        row: int,
        tx: _Transaction,
        server_id: int,
    ) -> dict[str, Any]:
        return SOURCE.values(
            name=self.name,
            ts_ms=ts_ms,
            db=db,
            table=table,
            server_id=int(server_id),
            gtid=tx.gtid,
            file=self._file,
            pos=pos,
            row=row,
            thread=tx.thread,
        )

    def _change(
        self,
        op: str,
        db: str,
        name: str,
        table: _Table | None,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        source: dict[str, Any],
        position: Position,
        tx: _Transaction,
        source_json: str | None = None,
    ) -> CaptureRecord:
        """A change record; ``source_json`` is ``source``'s text when the caller has it."""
        total, in_table = tx.count(db, name)
        schema = None
        if self._include_schema and table is not None:
            schema = table.envelope_schema(self.name), table.envelope_schema_json(self.name)
        value, text = change_envelope(
            op,
            before,
            after,
            source,
            dumps(source) if source_json is None else source_json,
            (tx.id, total, in_table),
            schema,
        )
        key = record_key(table.key, before, after) if table is not None else None
        return CaptureRecord("change", db, name, key, value, position, tx.resume, text)


def _split_table(name: str) -> tuple[str, str]:
    db, dot, table = name.strip().partition(".")
    if not dot or not db or not table:
        raise CaptureError(
            f"table {name!r} must be written db.table", hint="e.g. inventory.customers"
        )
    return db.strip("`"), table.strip("`")


def _envelope_schema(
    server: str, db: str, table: str, columns: tuple[ColumnInfo, ...]
) -> dict[str, Any]:
    """The Connect schema Debezium's MySQL connector gives a table's change events."""
    fields = [{**connect_schema(c), "field": c.name} for c in columns]
    return envelope_schema(f"{server}.{db}.{table}", fields, SOURCE)
