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
  :func:`~icetide.capture.postgres.types.unavailable_value`), which the decoder reports
  in ``unavailable`` so the merge keeps the stored value; with ``FULL`` the old row
  holds the value and it is used instead.
* Truncate → one ``t`` event per captured table.
* A Relation message whose columns differ from the ones seen before in this session
  (DDL) → a schema-change record (``{"source", "databaseName", "schemaName", "ddl":
  null, "tableChanges": [...]}``), just before the first change under the new layout.

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

Offsets (:class:`LsnOffset`): :attr:`PgOutputReader.committed` is the commit end LSN of
the last transaction whose records have all been yielded, or a later LSN the server
vouched holds nothing more for us (a keepalive while idle, the end-of-WAL marker). The
caller makes records durable, saves the offset, then calls :meth:`~PgOutputReader.acknowledge`,
which is the only place the slot's ``confirmed_flush_lsn`` moves (psycopg2 then also
moves it over WAL with nothing for us once everything received is acknowledged). A
restart streams from the slot's confirmed point and skips transactions that committed
before the offset it was given; a missing slot with an offset is a
:class:`~icetide.capture.errors.PositionLostError`.

Bootstrap: :func:`exported_snapshot` creates the slot with an exported snapshot, so a
copy of the tables read in that snapshot plus the stream from the slot's consistent
point miss nothing and repeat nothing.
"""

from __future__ import annotations

import codecs
import re
import select
import struct
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import psycopg2
import psycopg2.extensions
import psycopg2.extras
from psycopg2 import sql

from icetide import __version__
from icetide.capture.connect_schema import SourceField, envelope_schema
from icetide.capture.errors import (
    CaptureError,
    PositionLostError,
    ServerSettingsError,
    SourceUnavailableError,
)
from icetide.capture.postgres.catalog import SESSION_SETTINGS, resolve_type
from icetide.capture.postgres.settings import ServerInfo, check_server, check_tables, read_settings
from icetide.capture.postgres.types import (
    ColumnInfo,
    Converter,
    PgType,
    connect_schema,
    sql_type,
    unavailable_value,
    value_converter,
)
from icetide.capture.record import CaptureRecord, Heartbeat
from icetide.events.position import Position, format_lsn, lsn_position, parse_lsn

CONNECTOR = "postgresql"

# Settings that shape the text pgoutput writes; types.py parses exactly these forms.
SESSION_OPTIONS = " ".join(f"-c {name}={value}" for name, value in SESSION_SETTINGS)
_MARKER_PREFIX = "icetide.capture.end"
_PG_EPOCH_MS = 946_684_800_000  # 2000-01-01 in Unix milliseconds
_SLOT_NAME = re.compile(r"^[a-z0-9_]{1,63}$")
_UNCHANGED = object()  # pgoutput 'u': an unchanged TOAST value that was not sent
_BEGIN = struct.Struct(">QqI")
_COMMIT = struct.Struct(">BQQq")
_ORIGIN_LSN = struct.Struct(">Q")
_REL_HEAD = struct.Struct(">I")
_INT16 = struct.Struct(">H")
_INT32 = struct.Struct(">I")
_COL_TAIL = struct.Struct(">Ii")
_TRUNCATE = struct.Struct(">IB")
_MESSAGE = struct.Struct(">BQ")
_ACTIVE_WAIT = 10.0  # seconds to wait for a just-closed stream's WAL sender to let go


# --- offsets and slot status -----------------------------------------------------------------


@dataclass(frozen=True, order=True)
class LsnOffset:
    """Where to (re)start reading: an LSN. Transactions that committed before it are done.

    >>> LsnOffset.from_dict(LsnOffset(23803720).to_dict())
    LsnOffset(lsn=23803720)
    >>> LsnOffset(23803720).text
    '0/16B3748'
    """

    lsn: int

    @property
    def text(self) -> str:
        """The LSN as PostgreSQL writes it (``0/16B3748``)."""
        return format_lsn(self.lsn)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"lsn": self.text}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LsnOffset:
        """The offset :meth:`to_dict` wrote (an integer LSN is accepted too)."""
        value = data.get("lsn")
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(value)
        if isinstance(value, str):
            try:
                return cls(parse_lsn(value))
            except ValueError:
                pass
        raise CaptureError(
            f"offset {dict(data)!r} has no usable 'lsn'",
            hint='an offset looks like {"lsn": "0/16B3748"}',
        )


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
       s.confirmed_flush_lsn::text, pg_current_wal_lsn()::text, s.wal_status
FROM pg_replication_slots s WHERE s.slot_name = %s
"""


def _lsn_or_none(text: str | None) -> int | None:
    return None if text is None else parse_lsn(text)


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
    position (``pg_current_wal_lsn() - confirmed_flush_lsn``)."""
    status = slot_status(conn, slot)
    if status is None:
        raise CaptureError(f"there is no replication slot {slot!r}")
    return status.lag_bytes


# --- tables, publication, slot ---------------------------------------------------------------


def split_table(name: str) -> tuple[str, str]:
    """``schema.table`` (or ``table`` in ``public``, or ``db.schema.table``) → pair.

    >>> split_table("shop.orders"), split_table("orders"), split_table('db."Sales".x')
    (('shop', 'orders'), ('public', 'orders'), ('Sales', 'x'))
    """
    parts = [p.strip().strip('"') for p in name.strip().split(".")]
    if not all(parts) or not 1 <= len(parts) <= 3:
        raise CaptureError(
            f"table {name!r} must be written schema.table", hint="e.g. public.customers"
        )
    return ("public", parts[0]) if len(parts) == 1 else (parts[-2], parts[-1])


def ensure_publication(
    conn: Any, publication: str, tables: Iterable[str | tuple[str, str]]
) -> None:
    """Create ``publication`` for ``tables``, or add the ones it lacks (idempotent).

    A new publication publishes partitions' changes under their partitioned table
    (``publish_via_partition_root``), so capturing a partitioned table by its own name
    works. ``conn`` is an autocommit psycopg2 connection by a user owning the tables.
    """
    wanted = sorted({split_table(t) if isinstance(t, str) else t for t in tables})
    names = sql.SQL(", ").join(sql.Identifier(s, t) for s, t in wanted)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT puballtables, pubviaroot FROM pg_publication WHERE pubname = %s",
            (publication,),
        )
        row = cur.fetchone()
        if row is None:
            cur.execute(
                sql.SQL(
                    "CREATE PUBLICATION {} FOR TABLE {} WITH (publish_via_partition_root = true)"
                ).format(sql.Identifier(publication), names)
            )
            return
        all_tables, via_root = row
        if not via_root:
            _refuse_partitioned(cur, publication, wanted)
        if all_tables:
            return
        cur.execute(
            "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
            (publication,),
        )
        present = {(str(s), str(t)) for s, t in cur.fetchall()}
        missing = [pair for pair in wanted if pair not in present]
        if missing:
            cur.execute(
                sql.SQL("ALTER PUBLICATION {} ADD TABLE {}").format(
                    sql.Identifier(publication),
                    sql.SQL(", ").join(sql.Identifier(s, t) for s, t in missing),
                )
            )


def _refuse_partitioned(cur: Any, publication: str, wanted: Sequence[tuple[str, str]]) -> None:
    """Without ``publish_via_partition_root`` a partitioned table's changes arrive under
    its partitions' names and would be dropped: say how to fix the publication."""
    cur.execute(
        "SELECT n.nspname, c.relname FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind = 'p' AND (n.nspname, c.relname) IN "
        "(SELECT * FROM unnest(%s::text[], %s::text[]))",
        ([s for s, _ in wanted], [t for _, t in wanted]),
    )
    partitioned = [f"{s}.{t}" for s, t in cur.fetchall()]
    if partitioned:
        quoted = sql.Identifier(publication).as_string(cur)
        raise ServerSettingsError(
            f"publication {publication} sends the changes of partitioned "
            f"table{'s' if len(partitioned) > 1 else ''} {', '.join(partitioned)} under "
            "the partitions' names, so capture would not see them",
            problems=[f"publication {publication} has publish_via_partition_root = false"],
            fix=[f"ALTER PUBLICATION {quoted} SET (publish_via_partition_root = true);"],
            hint="run the statement above as the publication's owner, then capture again",
        )


def python_codec(encoding: str) -> str:
    """The Python codec of a PostgreSQL server encoding (pgoutput sends text in it).

    >>> python_codec("UTF8"), python_codec("WIN1252"), python_codec("LATIN1")
    ('utf-8', 'cp1252', 'latin1')
    """
    name = encoding.strip().upper()
    special = {"UTF8": "utf-8", "SQL_ASCII": "utf-8", "KOI8R": "koi8_r", "KOI8U": "koi8_u"}
    if name in special:
        return special[name]
    candidate = "cp" + name[3:] if name.startswith("WIN") else name.lower()
    try:
        codecs.lookup(candidate)
    except LookupError:
        raise CaptureError(
            f"the database's encoding {encoding} has no Python codec",
            hint="capture supports UTF8 and the common single-byte encodings",
        ) from None
    return candidate


def _check_slot_name(slot: str) -> str:
    if not _SLOT_NAME.match(slot):
        raise CaptureError(
            f"replication slot name {slot!r} is not valid",
            hint="use up to 63 lower-case letters, digits and underscores",
        )
    return slot


def _session_dsn(dsn: str | Mapping[str, Any]) -> str:
    """``dsn`` with :data:`SESSION_OPTIONS` added to its ``options``."""
    params = dict(psycopg2.extensions.parse_dsn(dsn) if isinstance(dsn, str) else dsn)
    params = {k: str(v) for k, v in params.items() if v is not None}
    params["options"] = (params.get("options", "") + " " + SESSION_OPTIONS).strip()
    return psycopg2.extensions.make_dsn(**params)


def _plain_dsn(dsn: str | Mapping[str, Any]) -> str:
    if isinstance(dsn, str):
        return dsn
    return psycopg2.extensions.make_dsn(**{k: str(v) for k, v in dsn.items() if v is not None})


def _where(dsn: str | Mapping[str, Any]) -> str:
    params = psycopg2.extensions.parse_dsn(_plain_dsn(dsn))
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    return f"{host}:{port}/{params.get('dbname') or params.get('user') or ''}"


def _connect(dsn: str | Mapping[str, Any], **kwargs: Any) -> Any:
    try:
        conn = psycopg2.connect(_session_dsn(dsn), **kwargs)
    except psycopg2.OperationalError as exc:
        raise SourceUnavailableError(
            f"cannot connect to the PostgreSQL server at {_where(dsn)}: {str(exc).strip()}",
            hint="check host, port, user, password and database, that the server runs, and "
            "that pg_hba.conf admits this user (replication connections too)",
        ) from exc
    return conn


def _control(dsn: str | Mapping[str, Any]) -> Any:
    conn = _connect(dsn)
    conn.autocommit = True
    return conn


def advance_slot(dsn: str | Mapping[str, Any], slot: str, offset: LsnOffset) -> None:
    """Move an idle slot's confirmed point to ``offset`` (never backwards), without a
    stream: what :meth:`PgOutputReader.acknowledge` does after the reader is closed."""
    ctl = _control(dsn)
    try:
        deadline = time.monotonic() + _ACTIVE_WAIT
        while True:
            status = slot_status(ctl, slot)
            if status is None:
                raise PositionLostError(
                    f"replication slot {slot!r} does not exist at {_where(dsn)}",
                    position=offset.text,
                    hint="run `icetide bootstrap` again for these tables",
                )
            if not status.active or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if (status.confirmed_flush_lsn or 0) >= offset.lsn:
            return
        with ctl.cursor() as cur:
            cur.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, offset.text))
    except psycopg2.Error as exc:
        raise CaptureError(
            f"cannot move replication slot {slot!r} at {_where(dsn)} to {offset.text}: "
            f"{str(exc).strip()}"
        ) from exc
    finally:
        ctl.close()


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
    dsn: str | Mapping[str, Any],
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
    :class:`PgOutputReader` from ``point.offset``::

        with exported_snapshot(dsn, slot="icetide", publication="icetide",
                               tables=["public.orders"]) as point:
            with psycopg2.connect(dsn) as copy:
                import_snapshot(copy, point.snapshot)
                ...  # SELECT the tables
        reader = PgOutputReader(dsn, ["public.orders"], start=point.offset)

    The slot must not exist yet (a slot's snapshot can only be had when it is created).
    """
    _check_slot_name(slot)
    pairs = sorted({split_table(t) for t in tables})
    ctl = _control(dsn)
    try:
        check_server(ctl, f"the server at {_where(dsn)}")
        _require_tables(ctl, pairs, _where(dsn))
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
    repl = _connect(dsn, connection_factory=psycopg2.extras.LogicalReplicationConnection)
    try:
        cur = repl.cursor()
        try:
            cur.execute(f'CREATE_REPLICATION_SLOT "{slot}" LOGICAL pgoutput EXPORT_SNAPSHOT')
            row = cur.fetchone()
        except psycopg2.Error as exc:
            raise CaptureError(
                f"cannot create replication slot {slot!r} at {_where(dsn)}: {str(exc).strip()}"
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


def _require_tables(ctl: Any, pairs: Sequence[tuple[str, str]], where: str) -> None:
    found = check_tables(ctl, pairs, f"the server at {where}")
    missing = [f"{s}.{t}" for s, t in pairs if (s, t) not in found]
    if missing:
        raise CaptureError(
            f"table{'s' if len(missing) > 1 else ''} {', '.join(missing)} not found at {where}",
            hint="check the table names (schema.table) and the database in the connection",
        )


# --- pgoutput decoding --------------------------------------------------------------------------


def _cstring(data: bytes, pos: int) -> tuple[str, int]:
    end = data.index(0, pos)
    return data[pos:end].decode(), end + 1


def parse_tuple(data: bytes, pos: int, codec: str = "utf-8") -> tuple[list[Any], int]:
    """A pgoutput TupleData at ``pos``: the column values (text, ``None`` for NULL, the
    unchanged-TOAST sentinel for ``u``) and the position after it.

    >>> parse_tuple(b"\\x00\\x02t\\x00\\x00\\x00\\x0242n", 0)
    (['42', None], 10)
    """
    (count,) = _INT16.unpack_from(data, pos)
    pos += 2
    values: list[Any] = []
    append = values.append
    unpack = _INT32.unpack_from
    for _ in range(count):
        kind = data[pos]
        pos += 1
        if kind == 0x74:  # 't'
            (size,) = unpack(data, pos)
            pos += 4
            append(data[pos : pos + size].decode(codec))
            pos += size
        elif kind == 0x6E:  # 'n'
            append(None)
        elif kind == 0x75:  # 'u'
            append(_UNCHANGED)
        else:
            raise CaptureError(f"pgoutput sent a column value of unknown kind {chr(kind)!r}")
    return values, pos


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

    def envelope_schema(self, server_name: str) -> dict[str, Any]:
        """The Connect schema of this table's envelopes (built once)."""
        if self._schema is None:
            self._schema = _envelope_schema(server_name, self.schema, self.table, self.columns)
        return self._schema


@dataclass
class _Transaction:
    xid: int
    final_lsn: int
    ts_ms: int
    resume: LsnOffset
    skip: bool
    total: int = 0
    per_table: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.xid}:{self.final_lsn}"

    def count(self, schema: str, table: str) -> tuple[int, int]:
        self.total += 1
        seen = self.per_table.get((schema, table), 0) + 1
        self.per_table[(schema, table)] = seen
        return self.total, seen


_COLUMNS_QUERY = """
SELECT a.attname, a.attnotnull,
       COALESCE(a.attnum = ANY(i.indkey), false) AS is_primary,
       format_type(a.atttypid, a.atttypmod)
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
        dsn: str | Mapping[str, Any],
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
        self.slot = _check_slot_name(slot)
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
        return _where(self._dsn)

    # --- lifecycle ----------------------------------------------------------------------

    def open(self) -> PgOutputReader:
        """Check the server, ensure publication and slot, and start streaming (done by
        the first iteration too)."""
        if self._cursor is not None:
            return self
        self._ctl = _control(self._dsn)
        try:
            self._prepare()
            self._start_stream()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Disconnect (the slot stays, at its confirmed point)."""
        for conn in (self._repl, self._ctl):
            if conn is not None:
                try:
                    conn.close()
                except psycopg2.Error:
                    pass
        self._repl = self._ctl = self._cursor = None

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
            ctl = _control(self._dsn)
            try:
                return slot_status(ctl, self.slot)
            finally:
                ctl.close()
        return slot_status(self._ctl, self.slot)

    def columns(self, schema: str, table: str) -> tuple[ColumnInfo, ...] | None:
        """A captured table's columns as the latest Relation message in this session
        described them (``None`` before its first change); see
        :func:`~icetide.capture.postgres.types.infer_table_schema`."""
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
                if self._done:
                    break
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
        self._codec = python_codec(encoding)
        _require_tables(ctl, sorted(self._wanted), self.where)
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
            with ctl.cursor() as cur:
                cur.execute(
                    "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')",
                    (self.slot,),
                )
                created = parse_lsn(str(cur.fetchone()[0]))
            status = slot_status(ctl, self.slot)
            confirmed = created
        else:
            if status.plugin != "pgoutput" or status.database != self.info.database:
                raise CaptureError(
                    f"replication slot {self.slot!r} at {self.where} belongs to plugin "
                    f"{status.plugin} in database {status.database}, not pgoutput in "
                    f"{self.info.database}",
                    hint="name another slot in the source's config",
                )
            deadline = time.monotonic() + _ACTIVE_WAIT
            while status is not None and status.active and time.monotonic() < deadline:
                time.sleep(0.1)  # a stream just closed: its WAL sender is still exiting
                status = slot_status(ctl, self.slot)
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
        self._repl = _connect(
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

    def _stream_error(self, exc: psycopg2.Error) -> CaptureError:
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

    def _handle(self, data: bytes, lsn: int) -> Iterator[CaptureRecord]:
        kind = data[0]
        if kind == 0x42:  # B
            self._begin(data)
        elif kind == 0x43:  # C
            self._commit(data)
        elif kind == 0x52:  # R
            self._relation(data)
        elif self._tx is not None and self._tx.skip:
            return
        elif kind == 0x49:  # I
            yield from self._insert(data, lsn)
        elif kind == 0x55:  # U
            yield from self._update(data, lsn)
        elif kind == 0x44:  # D
            yield from self._delete(data, lsn)
        elif kind == 0x54:  # T
            yield from self._truncate(data, lsn)
        elif kind == 0x4D:  # M
            self._message(data)
        # Y (type), O (origin): nothing to emit; types are read from the catalog.

    def _begin(self, data: bytes) -> None:
        final_lsn, ts, xid = _BEGIN.unpack_from(data, 1)
        self._tx = _Transaction(
            xid,
            final_lsn,
            ts // 1000 + _PG_EPOCH_MS,
            LsnOffset(self._last_commit),
            skip=final_lsn < self._skip_before,
        )

    def _commit(self, data: bytes) -> None:
        _, _, end_lsn, _ = _COMMIT.unpack_from(data, 1)
        self._tx = None
        if end_lsn > self._last_commit:
            self._last_commit = end_lsn
            self.committed = LsnOffset(end_lsn)

    def _message(self, data: bytes) -> None:
        flags, lsn = _MESSAGE.unpack_from(data, 1)
        prefix, pos = _cstring(data, 10)
        if flags & 1 or prefix != _MARKER_PREFIX or self._marker is None:
            return
        (size,) = _INT32.unpack_from(data, pos)
        if data[pos + 4 : pos + 4 + size].decode() != self._marker:
            return
        if self._tx is None and lsn > self._last_commit:
            self._last_commit = lsn
            self.committed = LsnOffset(lsn)
        self._done = True

    def _relation(self, data: bytes) -> None:
        (oid,) = _REL_HEAD.unpack_from(data, 1)
        schema, pos = _cstring(data, 5)
        table, pos = _cstring(data, pos)
        identity = chr(data[pos])
        (count,) = _INT16.unpack_from(data, pos + 1)
        pos += 3
        raw = []
        for _ in range(count):
            flags = data[pos]
            name, pos = _cstring(data, pos + 1)
            type_oid, typmod = _COL_TAIL.unpack_from(data, pos)
            pos += 8
            raw.append((name, bool(flags & 1), type_oid, typmod))
        if (schema, table) not in self._wanted:
            self._relations[oid] = None
            return
        catalog = self._catalog_columns(oid)
        columns = tuple(
            ColumnInfo(
                name=name,
                type=self._type(type_oid),
                typmod=typmod,
                identity=is_identity,
                primary=catalog.get(name, (True, False))[1],
                nullable=catalog.get(name, (True, False))[0],
            )
            for name, is_identity, type_oid, typmod in raw
        )
        previous = self._layouts.get(oid)
        old = self._relations.get(oid)
        relation = _Relation(
            oid,
            schema,
            table,
            identity,
            columns,
            tuple((c.name, value_converter(c)) for c in columns),
            tuple(c.name for c in columns if c.primary),
            tuple(i for i, c in enumerate(columns) if c.identity),
        )
        if previous is not None and previous != columns:
            relation.pending_change = previous
        elif old is not None and old.pending_change is not None:
            relation.pending_change = old.pending_change
        self._relations[oid] = relation
        self._layouts[oid] = columns

    def _catalog_columns(self, oid: int) -> dict[str, tuple[bool, bool]]:
        """Column → (nullable, primary) from the catalog as it is now."""
        with self._ctl.cursor() as cur:
            cur.execute(_COLUMNS_QUERY, (oid,))
            return {str(n): (not notnull, bool(pk)) for n, notnull, pk, _ in cur.fetchall()}

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
        image: dict[str, Any] = {}
        for (name, convert), info, raw in zip(
            relation.converters, relation.columns, values, strict=True
        ):
            if raw is None:
                image[name] = None
            elif raw is _UNCHANGED:
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
            image[name] = None if raw is None or raw is _UNCHANGED else convert(raw)
        return image

    def _old_image(self, relation: _Relation, kind: int, values: list[Any]) -> dict[str, Any]:
        return self._key_image(relation, values) if kind == 0x4B else self._image(relation, values)

    def _relation_for(self, data: bytes) -> _Relation | None:
        (oid,) = _REL_HEAD.unpack_from(data, 1)
        return self._relations.get(oid)

    def _insert(self, data: bytes, lsn: int) -> Iterator[CaptureRecord]:
        relation = self._relation_for(data)
        if relation is None:
            return
        values, _ = parse_tuple(data, 6, self._codec)
        yield from self._schema_change(relation, lsn)
        yield self._change("c", relation, None, self._image(relation, values), lsn)

    def _update(self, data: bytes, lsn: int) -> Iterator[CaptureRecord]:
        relation = self._relation_for(data)
        if relation is None:
            return
        pos = 5
        old_kind = data[pos]
        old_values: list[Any] | None = None
        if old_kind in (0x4B, 0x4F):  # K / O
            old_values, pos = parse_tuple(data, pos + 1, self._codec)
        new_values, _ = parse_tuple(data, pos + 1, self._codec)
        before = None if old_values is None else self._old_image(relation, old_kind, old_values)
        after = self._image(relation, new_values, before if old_kind == 0x4F else None)
        yield from self._schema_change(relation, lsn)
        key = relation.key
        if (
            before is not None
            and key
            and all(k in before for k in key)
            and any(before[k] != after[k] for k in key)
        ):
            # A new primary key is a new row: Debezium sends a delete of the old key and a
            # create of the new one, so each lands under its own key.
            yield self._change("d", relation, before, None, lsn)
            yield self._change("c", relation, None, after, lsn)
        else:
            yield self._change("u", relation, before, after, lsn)

    def _delete(self, data: bytes, lsn: int) -> Iterator[CaptureRecord]:
        relation = self._relation_for(data)
        if relation is None:
            return
        old_kind = data[5]
        values, _ = parse_tuple(data, 6, self._codec)
        yield from self._schema_change(relation, lsn)
        before = self._old_image(relation, old_kind, values)
        yield self._change("d", relation, before, None, lsn)

    def _truncate(self, data: bytes, lsn: int) -> Iterator[CaptureRecord]:
        count, _ = _TRUNCATE.unpack_from(data, 1)
        oids = struct.unpack_from(f">{count}I", data, 6)
        for oid in oids:
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
        return {
            "version": __version__,
            "connector": CONNECTOR,
            "name": self.name,
            "ts_ms": tx.ts_ms,
            "snapshot": "false",
            "db": self.info.database if self.info else "",
            "sequence": f'["{tx.resume.lsn}","{lsn}"]',
            "schema": relation.schema,
            "table": relation.table,
            "txId": tx.xid,
            "lsn": lsn,
            "xmin": None,
        }

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
        payload: dict[str, Any] = {
            "before": before,
            "after": after,
            "source": self._source(relation, lsn, tx),
            "op": op,
            "ts_ms": int(time.time() * 1000),
            "transaction": {
                "id": tx.id,
                "total_order": total,
                "data_collection_order": in_table,
            },
        }
        image = after if after is not None else before
        key = None
        if relation.key and image is not None and all(k in image for k in relation.key):
            key = {k: image[k] for k in relation.key}
        value = payload
        if self._include_schema:
            value = {"schema": relation.envelope_schema(self.name), "payload": payload}
        return CaptureRecord(
            "change", relation.schema, relation.table, key, value, self._position(lsn), tx.resume
        )

    def _schema_change(self, relation: _Relation, lsn: int) -> Iterator[CaptureRecord]:
        if relation.pending_change is None or self._tx is None:
            return
        relation.pending_change = None
        tx = self._tx
        payload = {
            "source": self._source(relation, lsn, tx),
            "ts_ms": int(time.time() * 1000),
            "databaseName": self.info.database if self.info else "",
            "schemaName": relation.schema,
            "ddl": None,
            "tableChanges": [_table_change(self.info, relation)],
        }
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


_SOURCE_FIELDS: tuple[SourceField, ...] = (
    ("version", "string", False),
    ("connector", "string", False),
    ("name", "string", False),
    ("ts_ms", "int64", False),
    ("snapshot", "string", True),
    ("db", "string", False),
    ("sequence", "string", True),
    ("schema", "string", False),
    ("table", "string", False),
    ("txId", "int64", True),
    ("lsn", "int64", True),
    ("xmin", "int64", True),
)


def _envelope_schema(
    server: str, schema: str, table: str, columns: tuple[ColumnInfo, ...]
) -> dict[str, Any]:
    """The Connect schema Debezium's PostgreSQL connector gives a table's change events."""
    fields = [{**connect_schema(c), "field": c.name} for c in columns]
    return envelope_schema(
        f"{server}.{schema}.{table}",
        fields,
        "io.debezium.connector.postgresql.Source",
        _SOURCE_FIELDS,
    )
