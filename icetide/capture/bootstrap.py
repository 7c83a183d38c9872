"""Bootstrap: copy each table into its empty base table, then hand off to the log.

The handoff is exact without locking the source and without one long transaction.

MySQL/MariaDB, by a low watermark:

1. record the log position *before* reading anything (the *low watermark* ``P``) and
   make it capture's start offset;
2. read the table with Spark's JDBC source in primary-key chunks, in parallel, while the
   source keeps taking writes; every row is stamped with position ``P``;
3. capture replays the log from ``P``. Every change after ``P`` has a larger position and
   carries the whole row (binlog ``FULL`` image), so the merge's version guard lets it
   replace whatever a chunk read; a key no change touched after ``P`` was read exactly.

So the base converges to the source as soon as the merge has applied the log up to
the source's current position — the argument of Netflix's DBLog, without its in-log
watermarks (the merge's version guard plays their part).

PostgreSQL, by the slot's exported snapshot:

1. ensure the publication, then create the replication slot with an exported snapshot;
   its *consistent point* ``C`` becomes capture's start offset, and the replication
   connection stays open (the snapshot lives only as long as it) until every table is
   read;
2. every JDBC partition imports that snapshot in the driver's transaction
   (``sessionInitStatement`` = ``SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ
   ONLY; SET TRANSACTION SNAPSHOT …``, see :attr:`PgSnapshot.init_statement`) and the
   chunk query refuses to return rows unless ``txid_current_snapshot()`` is the
   exported one, so a driver that ran the query outside that transaction fails loudly
   instead of copying later rows. The copy is the database exactly as of ``C``;
3. the slot streams exactly the transactions that commit after ``C``.

Snapshot rows are stamped with position **0**, not with ``C``: positions come from the
*change's* LSN, and a transaction that began before ``C`` and commits after it has
changes at LSNs below ``C`` — stamped ``C``, the copy would wrongly win over them. At 0,
every streamed change beats the copy, which is right because the stream holds only
changes the copy has not seen. (An unchanged TOAST value in such a change keeps the
copied value, which is the value the row had before the change.)

Resuming a PostgreSQL bootstrap: the exported snapshot died with the killed process, so
the missing chunks are read in a *new* snapshot (``pg_export_snapshot()`` on a plain
connection), still stamped 0, with the same slot and the same start offset ``C``. That is
still exact: a key that no transaction committing after ``C`` touched reads the same in
any snapshot taken after ``C``; a key that one did is overwritten by the stream's last
change of it (the stream from ``C`` still holds them all, and each carries the row). A
row moved between chunks by a key update is deleted and re-created by the stream. The
same reasoning lets a bootstrap start on an existing slot (capture already running, or a
table added later): its start offset is the saved offset, else the slot's confirmed
point read before the snapshot. Before taking such a snapshot the bootstrap waits for
the transactions that were running when the publication was ensured, because changes
written before a table joined the publication are not published. A resume whose slot is
gone is refused: the changes since ``C`` are lost and only a new bootstrap can help.

Both sources: while a bootstrap runs, the base table's newest ``icetide.bootstrap.state``
snapshot property is ``running`` and the merge leaves the table alone; chunks commit one
by one with ``icetide.bootstrap.chunk``, so a killed bootstrap resumes at the first chunk
not committed. Each table's chunk plan (key range and row count) is kept in the
bootstrap's state file, so a resume splits the keys exactly as the first run did.
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import psycopg2
import psycopg2.extensions
import pymysql
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icetide.capture.connect import jdbc_url, mysql_settings, postgres_dsn
from icetide.capture.errors import CaptureError, PositionLostError, SourceUnavailableError
from icetide.capture.postgres.catalog import (
    SESSION_SETTINGS,
    SOURCE_VALUES,
    SourceColumn,
    source_columns,
)
from icetide.capture.postgres.types import array_json_text
from icetide.capture.runner import offset_store
from icetide.config.model import Config, SourceConfig, TableConfig
from icetide.events.position import Position, binlog_position, format_lsn, lsn_position
from icetide.faults import crash_point
from icetide.schema.contract.base import BOOTSTRAP_CHUNK as CHUNK
from icetide.schema.contract.base import BOOTSTRAP_ID, POSITION, SOURCE_TS
from icetide.schema.contract.base import BOOTSTRAP_STATE as STATE
from icetide.schema.contract.names import TableName
from icetide.schema.convert.spark import sql_type
from icetide.schema.model import Column, TableSchema
from icetide.spark.commit import append_with_properties
from icetide.spark.progress import read_bootstrap_state
from icetide.spark.sql import quote as spark_quote
from icetide.spark.tables import TableRefs, latest_snapshot_property, table_exists

_NUMERIC = {"int", "long"}
Log = Callable[[str], None]


@dataclass(frozen=True)
class Watermark:
    """The low watermark: capture's start offset and the position rows are stamped with."""

    offset: dict[str, Any]
    position: Position


@dataclass(frozen=True)
class TableBootstrap:
    """What bootstrapping one table did."""

    table: str
    rows: int
    chunks: int
    skipped: int
    seconds: float

    def render(self) -> str:
        """One result line."""
        resumed = f", {self.skipped} already done" if self.skipped else ""
        return (
            f"bootstrap {self.table}: {self.rows:,} rows in {self.chunks} chunks{resumed} "
            f"({self.seconds:.1f}s)"
        )


# -- the low watermark ---------------------------------------------------------------------


def mysql_watermark(source: SourceConfig) -> Watermark:
    """The binlog position now: MariaDB's consistent-snapshot position, else the master's.

    ``binlog_snapshot_file``/``_position`` (MariaDB) are taken atomically with a
    consistent snapshot; MySQL's ``SHOW MASTER STATUS`` is read before any row, which is
    all the low-watermark argument needs.
    """
    try:
        conn = pymysql.connect(**mysql_settings(source), autocommit=True, connect_timeout=10)
    except pymysql.err.MySQLError as exc:
        raise SourceUnavailableError(
            f"cannot connect to source {source.name!r} at {source.host}:{source.resolved_port}: "
            f"{exc}",
            hint="check sources[].host, port, user and password",
        ) from exc
    try:
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
            status = {str(k): str(v) for k, v in cur.fetchall()}
            file, pos = status.get("Binlog_snapshot_file"), status.get("Binlog_snapshot_position")
            if not file:
                cur.execute("SHOW MASTER STATUS")
                row = cur.fetchone()
                if row is None:
                    raise CaptureError(
                        f"source {source.name!r} has no binary log",
                        hint="enable log_bin (see `icetide capture`'s settings check)",
                    )
                file, pos = str(row[0]), str(row[1])
            cur.execute("COMMIT")
    finally:
        conn.close()
    offset = {"file": file, "pos": int(str(pos)), "gtid": None}
    return Watermark(offset, binlog_position(str(file), int(str(pos)), 0))


# -- reading the source --------------------------------------------------------------------


def mysql_select_expression(column: Column, *, key: bool = False) -> str:
    """The SQL that reads ``column`` as text, bytes or a number Spark casts exactly.

    Date and time values go through text so no JVM time zone touches them; TIMESTAMP
    columns are read in UTC (the session's ``time_zone`` is set to ``+00:00``). Binary
    columns are read as ``CAST(… AS BINARY)``: the bytes of a BINARY/VARBINARY/BLOB
    unchanged, and a ``BIT(n)`` as its ``ceil(n/8)`` bytes, most significant first — the
    form capture's ``Bits`` values are stored in (the JDBC driver would hand a BIT(n)
    over as a 64-bit number, whose 8 bytes are not the column's value). A ``key`` column
    of an integer type is read as it is, so the chunk predicates on it use its index.

    >>> from icetide.schema.model import parse_type
    >>> mysql_select_expression(Column(1, "b`it", parse_type("binary")))
    'CAST(`b``it` AS BINARY)'
    """
    name = _mysql_quote(column.name)
    kind = column.type.name
    if kind == "timestamp" or kind == "timestamptz":
        return f"DATE_FORMAT({name}, '%Y-%m-%d %H:%i:%s.%f')"
    if kind == "date":
        return f"DATE_FORMAT({name}, '%Y-%m-%d')"
    if kind == "time":
        return (
            f"IF(MICROSECOND({name}) = 0, TIME_FORMAT({name}, '%H:%i:%s'), "
            f"TIME_FORMAT({name}, '%H:%i:%s.%f'))"
        )
    if kind == "boolean" or (kind in ("int", "long") and not key):
        # A number whatever the column: the driver hands YEAR over as a DATE.
        return f"CAST({name} AS SIGNED)"
    if kind in ("string", "json", "uuid"):
        return f"CAST({name} AS CHAR)"
    if kind == "binary":
        return f"CAST({name} AS BINARY)"
    return name


def read_name(schema: TableSchema, column: str) -> str:
    """The name a chunk query gives ``column``: ``c<position>``.

    Source column names can be anything (``dot.ted``, a quote, a backtick); Spark's JDBC
    source pastes the names of the columns it reads into its own SQL, quoted by its
    dialect (PostgreSQL's does not escape a ``"`` inside), and a dot in a DataFrame
    column name means a struct field. So the query renames every column to a plain name,
    the chunk predicates use those, and :func:`spark_cast` names them back.

    >>> from icetide.schema.model import parse_type
    >>> key = Column(1, "id", parse_type("int"), nullable=False)
    >>> columns = (key, Column(2, "dot.ted", parse_type("int")))
    >>> read_name(TableSchema("t", columns, ("id",)), "dot.ted")
    'c1'
    """
    names = [c.name for c in schema.columns]
    return f"c{names.index(column)}"


def spark_cast(column: Column, read_as: str | None = None) -> SparkColumn:
    """The read value (the frame's column ``read_as``, default ``column``'s own name) as
    the schema's Spark type, named as the column (timestamptz text is UTC)."""
    value = F.col(read_as) if read_as is not None else F.col(spark_quote(column.name))
    kind = column.type.name
    if kind == "timestamptz":
        return F.concat(value, F.lit("+00:00")).cast("timestamp").alias(column.name)
    if kind == "boolean":
        return (value != 0).alias(column.name)
    return value.cast(sql_type(column.type)).alias(column.name)


def _mysql_quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


@dataclass(frozen=True)
class Chunk:
    """One resumable piece of a table: a primary-key range read as ``parts`` partitions."""

    index: int
    predicates: tuple[str, ...]


def plan_chunks(
    key: str, low: int | None, high: int | None, rows: int, chunk_rows: int, parts: int
) -> list[Chunk]:
    """Split ``[low, high]`` of an integer key into chunks of about ``chunk_rows`` rows.

    The first and last chunks are open-ended so keys written outside the range while the
    bootstrap runs are read too (the log would bring them anyway).

    >>> [c.predicates for c in plan_chunks("`id`", 1, 100, 100, 50, 1)]
    [('`id` < 51',), ('`id` >= 51',)]
    """
    if low is None or high is None or rows == 0:
        return [Chunk(0, ("TRUE",))]
    count = max(1, math.ceil(rows / chunk_rows))
    span = high - low + 1
    bounds = [low + (span * i) // (count * parts) for i in range(count * parts + 1)]
    chunks: list[Chunk] = []
    for i in range(count):
        predicates = []
        for j in range(parts):
            n = i * parts + j
            lo, hi = bounds[n], bounds[n + 1]
            first, last = n == 0, n == count * parts - 1
            if first and last:
                predicates.append("TRUE")
            elif first:
                predicates.append(f"{key} < {hi}")
            elif last:
                predicates.append(f"{key} >= {lo}")
            else:
                predicates.append(f"{key} >= {lo} AND {key} < {hi}")
        chunks.append(Chunk(i, tuple(predicates)))
    return chunks


def _mysql_table(table: TableConfig) -> tuple[str, str]:
    db, _, name = str(table.source).rpartition(".")
    if not db:
        raise CaptureError(
            f"table {table.name!r}: source {table.source!r} names no database",
            hint="write the source as db.table for a MySQL source",
        )
    return db, name


def mysql_key_range(
    source: SourceConfig, table: TableConfig, key: str
) -> tuple[int | None, int | None, int]:
    """``MIN``, ``MAX`` of the integer key and the row count, to plan chunks."""
    db, name = _mysql_table(table)
    conn = pymysql.connect(**mysql_settings(source), autocommit=True, connect_timeout=10)
    try:
        with conn.cursor() as cur:
            q = _mysql_quote(key)
            cur.execute(
                f"SELECT MIN({q}), MAX({q}), COUNT(*) FROM {_mysql_quote(db)}.{_mysql_quote(name)}"
            )
            row = cur.fetchone()
    finally:
        conn.close()
    assert row is not None
    low, high, count = row
    return (None if low is None else int(low), None if high is None else int(high), int(count))


def read_chunk_mysql(
    spark: SparkSession,
    source: SourceConfig,
    table: TableConfig,
    schema: TableSchema,
    chunk: Chunk,
    fetch_size: int,
) -> DataFrame:
    """One chunk through Spark's JDBC source, one partition per predicate."""
    db, name = _mysql_table(table)
    select = ", ".join(
        f"{mysql_select_expression(c, key=c.name in schema.primary_key)} "
        f"AS {read_name(schema, c.name)}"
        for c in schema.columns
    )
    query = f"(SELECT {select} FROM {_mysql_quote(db)}.{_mysql_quote(name)}) AS icetide_chunk"
    properties = {
        "user": str(source.user),
        "password": str(source.password or ""),
        "driver": "org.mariadb.jdbc.Driver",
        "fetchsize": str(fetch_size),
        "sessionInitStatement": "SET time_zone = '+00:00'",
    }
    frame = spark.read.jdbc(
        jdbc_url(source, db), query, predicates=list(chunk.predicates), properties=properties
    )
    return frame.select(*[spark_cast(c, read_name(schema, c.name)) for c in schema.columns])


class TableReader(Protocol):
    """How the bootstrap reads one source's tables: key ranges and chunk frames."""

    def quote(self, identifier: str) -> str:
        """A quoted identifier, for chunk predicates."""
        ...

    def key_range(self, table: TableConfig, key: str) -> tuple[int | None, int | None, int]:
        """``MIN``, ``MAX`` of the integer key and the row count."""
        ...

    def chunk(
        self,
        spark: SparkSession,
        table: TableConfig,
        schema: TableSchema,
        chunk: Chunk,
        fetch_size: int,
    ) -> DataFrame:
        """One chunk as the schema's columns."""
        ...


class MySQLReader:
    """Reads tables of a MySQL/MariaDB source; no snapshot, the low watermark is enough."""

    def __init__(self, source: SourceConfig) -> None:
        self.source = source

    def quote(self, identifier: str) -> str:
        """A quoted identifier, for chunk predicates."""
        return _mysql_quote(identifier)

    def key_range(self, table: TableConfig, key: str) -> tuple[int | None, int | None, int]:
        """See :func:`mysql_key_range`."""
        return mysql_key_range(self.source, table, key)

    def chunk(
        self,
        spark: SparkSession,
        table: TableConfig,
        schema: TableSchema,
        chunk: Chunk,
        fetch_size: int,
    ) -> DataFrame:
        """See :func:`read_chunk_mysql`."""
        return read_chunk_mysql(spark, self.source, table, schema, chunk, fetch_size)


# -- PostgreSQL ----------------------------------------------------------------------------

_SNAPSHOT_NAME = re.compile(r"^[0-9A-Fa-f]+(-[0-9A-Fa-f]+)+$")
_SNAPSHOT_TEXT = re.compile(r"^\d+:\d+:[\d,]*$")
_GUARD = "icetide: this chunk was not read in the bootstrap snapshot"
_WAIT_LOG_SECONDS = 10.0

# time → isoformat(): "HH:MM:SS" without microseconds, else "HH:MM:SS.ffffff".
_PG_TIME = (
    "CASE WHEN extract(microseconds FROM {t})::bigint % 1000000 = 0 "
    "THEN to_char({t}, 'HH24:MI:SS') ELSE to_char({t}, 'HH24:MI:SS.US') END"
)
_PG_READ: dict[str, str] = {
    "boolean": "({c})::int",
    "int": "({c})::int",
    "long": "({c})::bigint",
    # Shortest exact text (PostgreSQL 12+, or 17 digits before): what capture parses too,
    # so a real column declared double holds the same double on both paths.
    "float": "({c})::text",
    "double": "({c})::text",
    "decimal": "({c})::text",
    # The type's output function, which is what capture receives: a cast to text is not
    # always that (char(n) loses its padding, inet shows its mask). format() of NULL is ''.
    "string": "CASE WHEN {c} IS NULL THEN NULL ELSE format('%s', {c}) END",
    "json": "({c})::text",
    "uuid": "({c})::text",
    "binary": "{c}",
    "date": "to_char({c}, 'YYYY-MM-DD')",
    "time": _PG_TIME.format(t="({c})"),
    "timestamp": "to_char({c}, 'YYYY-MM-DD HH24:MI:SS.US')",
    "timestamptz": "to_char(({c}) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')",
}
"""icetide type → the PostgreSQL expression (``{c}``: the quoted column) that reads it as
a number, bytes or text Spark casts exactly to the schema's Spark type."""


def postgres_select_expression(column: Column, source: SourceColumn | None = None) -> str:
    """The SQL that reads ``column`` as text, bytes or a number Spark casts exactly.

    Times of day become ``datetime.time.isoformat()`` text and instants UTC text, so no
    session or JVM time zone touches them. An array capture sends as a JSON array is
    read as its literal (``{a,"b c"}``, in the settings capture's session pins) and
    turned into the JSON text capture's changes leave in the base by
    :func:`postgres_array_column`.

    >>> from icetide.schema.model import parse_type
    >>> postgres_select_expression(Column(1, "at", parse_type("timestamptz")))
    'to_char(("at") AT TIME ZONE \\'UTC\\', \\'YYYY-MM-DD HH24:MI:SS.US\\')'
    """
    kind = column.type.name
    quoted = _pg_quote(column.name)
    if source is not None and source.json_array and kind == "json":
        return _PG_READ["string"].format(c=quoted)
    value = SOURCE_VALUES.get((kind, source.type_name)) if source else None
    return _PG_READ[kind].format(c=value.format(c=quoted) if value else quoted)


def postgres_array_column(column: Column, source: SourceColumn, read_as: str) -> SparkColumn:
    """The array literal read as ``read_as`` turned into the JSON text capture writes
    (:func:`~icetide.capture.postgres.types.array_json_text`, run by a Python UDF: the
    very conversion capture and the ledger apply, not a second implementation of it)."""
    kind = source.pg_type
    assert kind is not None

    def convert(text: str | None) -> str | None:
        return None if text is None else array_json_text(text, kind)

    return F.udf(convert, "string")(F.col(read_as)).alias(column.name)


def _pg_quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _pg_table(table: TableConfig) -> str:
    from icetide.capture.postgres.reader import split_table

    schema, name = split_table(str(table.source))
    return f"{_pg_quote(schema)}.{_pg_quote(name)}"


@dataclass(frozen=True)
class PgSnapshot:
    """A snapshot every chunk query imports: its name for ``SET TRANSACTION SNAPSHOT`` and
    its ``txid_current_snapshot()`` text, which the query checks it runs in."""

    name: str
    text: str

    def __post_init__(self) -> None:
        # Both are pasted into SQL: accept only the forms PostgreSQL produces.
        if not _SNAPSHOT_NAME.match(self.name) or not _SNAPSHOT_TEXT.match(self.text):
            raise CaptureError(f"unexpected snapshot {self.name!r} ({self.text!r})")

    @property
    def init_statement(self) -> str:
        """What each JDBC connection runs before its query (Spark's sessionInitStatement).

        Spark turns autocommit off before it runs this (PostgreSQL's dialect does, for a
        fetch size above 0, which the bootstrap always sets), so the driver has already
        sent its own ``BEGIN``: a ``BEGIN`` here would make the server log "there is
        already a transaction in progress" once per partition. ``SET TRANSACTION`` sets
        the isolation level and imports the snapshot in the driver's transaction; were
        the statement ever run outside one, ``SET TRANSACTION SNAPSHOT`` fails, and the
        chunk query's guard would catch a query in any other snapshot anyway. The
        ``SET LOCAL`` statements pin what capture's session pins, so values read as text (arrays,
        types declared ``string``) read as capture receives them.
        """
        settings = "; ".join(f"SET LOCAL {name} = '{value}'" for name, value in SESSION_SETTINGS)
        return (
            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY; "
            f"SET TRANSACTION SNAPSHOT '{self.name}'; {settings}"
        )

    def checked(self, expression: str) -> str:
        """``expression``, or an error when the query does not run in this snapshot.

        The check is a scalar sub-select, an InitPlan that PostgreSQL evaluates once, on
        the first row — not in Spark's ``WHERE 1=0`` schema probe, which runs without
        the session init statement. It wraps a column rather than filtering rows, so the
        chunk predicates on the key still use its index.
        """
        guard = (
            f"(SELECT CASE WHEN txid_current_snapshot()::text = '{self.text}' THEN true "
            f"ELSE ('{_GUARD}, but in ' || txid_current_snapshot()::text)::boolean END)"
        )
        return f"CASE WHEN {guard} THEN {expression} END"


def _pg_connect(source: SourceConfig) -> Any:
    try:
        return psycopg2.connect(postgres_dsn(source), connect_timeout=10)
    except psycopg2.OperationalError as exc:
        raise SourceUnavailableError(
            f"cannot connect to source {source.name!r} at {source.host}:"
            f"{source.resolved_port}: {str(exc).strip()}",
            hint="check sources[].host, port, user, password and database",
        ) from exc


class PostgresSnapshotReader:
    """Reads tables of a PostgreSQL source inside one imported snapshot.

    ``conn`` is a psycopg2 connection that has imported ``snapshot`` (see
    :func:`~icetide.capture.postgres.reader.import_snapshot`); the catalog and the key
    ranges are read through it, so they describe the same state as the chunks.
    """

    def __init__(self, source: SourceConfig, conn: Any, snapshot: PgSnapshot) -> None:
        self.source, self.conn, self.snapshot = source, conn, snapshot

    def quote(self, identifier: str) -> str:
        """A quoted identifier, for chunk predicates."""
        return _pg_quote(identifier)

    def source_columns(self, table: TableConfig) -> dict[str, SourceColumn]:
        """Column → its PostgreSQL type (domains resolved to their base type)."""
        from icetide.capture.postgres.reader import split_table

        schema, name = split_table(str(table.source))
        found = source_columns(self.conn, schema, name)
        if not found:
            raise CaptureError(
                f"table {table.name!r}: source table {table.source} not found in database "
                f"{self.source.database!r}",
                hint="check the table's source (schema.table) and the source's database",
            )
        return found

    def key_range(self, table: TableConfig, key: str) -> tuple[int | None, int | None, int]:
        """``min``, ``max`` of the integer key and the row count, in the snapshot."""
        q = _pg_quote(key)
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT min({q}), max({q}), count(*) FROM {_pg_table(table)}")
            low, high, count = cur.fetchone()
        return (None if low is None else int(low), None if high is None else int(high), int(count))

    def chunk(
        self,
        spark: SparkSession,
        table: TableConfig,
        schema: TableSchema,
        chunk: Chunk,
        fetch_size: int,
    ) -> DataFrame:
        """One chunk through Spark's JDBC source, every partition in the snapshot."""
        found = self.source_columns(table)
        missing = [c.name for c in schema.columns if c.name not in found]
        if missing:
            raise CaptureError(
                f"table {table.name!r}: source table {table.source} has no column(s) "
                f"{', '.join(missing)}",
                hint="the schema file names columns the source table does not have",
            )
        # One column (not the key, whose predicates must reach its index) carries the
        # snapshot check; Spark selects every schema column, so it always runs.
        values = [c for c in schema.columns if c.name not in schema.primary_key]
        guarded = (values or list(schema.columns))[0].name
        expressions = []
        for column in schema.columns:
            expression = postgres_select_expression(column, found[column.name])
            if column.name == guarded:
                expression = self.snapshot.checked(expression)
            expressions.append(f"{expression} AS {read_name(schema, column.name)}")
        query = f"(SELECT {', '.join(expressions)} FROM {_pg_table(table)}) AS icetide_chunk"
        properties = {
            "user": str(self.source.user),
            "password": str(self.source.password or ""),
            "driver": "org.postgresql.Driver",
            # Above 0, or Spark leaves autocommit on and the snapshot is not imported.
            "fetchsize": str(max(1, fetch_size)),
            "sessionInitStatement": self.snapshot.init_statement,
        }
        frame = spark.read.jdbc(
            jdbc_url(self.source), query, predicates=list(chunk.predicates), properties=properties
        )
        out = []
        for column in schema.columns:
            source, read_as = found[column.name], read_name(schema, column.name)
            if source.json_array and column.type.name == "json":
                out.append(postgres_array_column(column, source, read_as))
            else:
                out.append(spark_cast(column, read_as))
        return frame.select(*out)


def _snapshot_text(conn: Any, name: str) -> str:
    """Import snapshot ``name`` on ``conn`` (kept open by the caller) and read its text."""
    from icetide.capture.postgres.reader import import_snapshot

    import_snapshot(conn, name)
    with conn.cursor() as cur:
        cur.execute("SELECT txid_current_snapshot()::text")
        return str(cur.fetchone()[0])


def _wait_for_older_transactions(conn: Any, log: Log, what: str) -> None:
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
                log(
                    f"{what}: waiting {last_log - started:.0f}s for transactions older than "
                    "the publication to end"
                )
            time.sleep(0.05)


@contextmanager
def postgres_handoff(
    source: SourceConfig,
    tables: Sequence[str],
    state: dict[str, Any] | None,
    saved_offset: dict[str, Any] | None,
    log: Log,
) -> Iterator[tuple[dict[str, Any], PostgresSnapshotReader]]:
    """The bootstrap state and a reader in a snapshot whose handoff to capture is exact.

    No state and no slot: the slot is created with an exported snapshot, the consistent
    point is the start offset (a fresh bootstrap). Otherwise (a resume, or a slot that
    exists already) a new snapshot is exported from a plain connection; see the module
    docs for why that is exact. ``tables`` are all the source's tables (``schema.table``):
    the publication must cover every table capture reads. Connections stay open, and
    the snapshot alive, until the ``with`` block ends.
    """
    from icetide.capture.postgres.reader import (
        LsnOffset,
        ensure_publication,
        exported_snapshot,
        slot_status,
    )

    dsn, slot, what = postgres_dsn(source), str(source.slot), f"bootstrap {source.name}"
    with ExitStack() as stack:
        ctl = stack.enter_context(_closing(_pg_connect(source)))
        ctl.autocommit = True
        status = slot_status(ctl, slot)
        if state is not None and status is None:
            raise PositionLostError(
                f"bootstrap {state['id']} of source {source.name!r} cannot resume: replication "
                f"slot {slot!r} is gone, and with it the changes since {state['offset_text']}",
                position=str(state["offset_text"]),
                hint="start over: delete the bootstrap state file and the source's offset "
                "file under state_dir/capture, then run `icetide bootstrap --replace`",
            )
        if state is None and status is None:
            point = stack.enter_context(
                exported_snapshot(
                    dsn, slot=slot, publication=str(source.publication), tables=tables
                )
            )
            state = _new_state(LsnOffset(point.lsn).to_dict(), format_lsn(point.lsn), "slot")
            log(
                f"{what}: slot {slot} created at consistent point {format_lsn(point.lsn)}; "
                "reading the tables in its exported snapshot"
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
            _wait_for_older_transactions(ctl, log, what)
            if state is None:
                assert status is not None
                if saved_offset is not None:
                    offset = dict(saved_offset)
                else:
                    offset = LsnOffset(status.confirmed_flush_lsn or 0).to_dict()
                state = _new_state(offset, str(offset["lsn"]), "existing slot")
                log(f"{what}: slot {slot} exists; capture starts at {state['offset_text']}")
            exporter = stack.enter_context(_closing(_pg_connect(source)))
            exporter.set_session(isolation_level="REPEATABLE READ", readonly=True)
            with exporter.cursor() as cur:
                cur.execute("SELECT pg_export_snapshot()")
                name = str(cur.fetchone()[0])
            log(f"{what}: reading in a new snapshot {name}, stamped 0 like the first")
        reader_conn = stack.enter_context(_closing(_pg_connect(source)))
        snapshot = PgSnapshot(name, _snapshot_text(reader_conn, name))
        yield state, PostgresSnapshotReader(source, reader_conn, snapshot)


@contextmanager
def _closing(conn: Any) -> Iterator[Any]:
    try:
        yield conn
    finally:
        conn.close()


def _new_state(offset: dict[str, Any], offset_text: str, how: str) -> dict[str, Any]:
    """A PostgreSQL bootstrap's state: rows are stamped 0 (see the module docs)."""
    position = lsn_position(0)
    return {
        "id": uuid.uuid4().hex[:12],
        "offset": offset,
        "offset_text": offset_text,
        "position": position.key,
        "position_text": position.text,
        "snapshot": how,
        "started_at": datetime.now(UTC).isoformat(),
    }


# -- the bootstrap -------------------------------------------------------------------------


def _chunks_done(spark: SparkSession, base: TableName, bootstrap_id: str) -> set[int]:
    rows = spark.sql(
        f"SELECT summary['{CHUNK}'] FROM {base}.snapshots "
        f"WHERE summary['{BOOTSTRAP_ID}'] = '{bootstrap_id}' AND summary['{CHUNK}'] IS NOT NULL"
    ).collect()
    return {int(r[0]) for r in rows}


def _mark(spark: SparkSession, base: TableName, properties: dict[str, str]) -> None:
    append_with_properties(spark.table(base.sql).limit(0), base, properties)


class Bootstrap:
    """Copies the tables of one source into their base tables; see the module docs."""

    def __init__(
        self,
        spark: SparkSession,
        config: Config,
        schemas: dict[str, TableSchema],
        source: SourceConfig,
        *,
        chunk_rows: int = 200_000,
        parallelism: int = 2,
        fetch_size: int = 10_000,
        log: Log = print,
        between_chunks: Callable[[], None] = lambda: None,
    ) -> None:
        self.spark, self.config, self.schemas, self.source = spark, config, schemas, source
        self.chunk_rows, self.parallelism, self.fetch_size = chunk_rows, parallelism, fetch_size
        self.log = log
        self.between_chunks = between_chunks
        """Called before each chunk; the CLI's stop check raises there on Ctrl-C, which
        is safe because every chunk is its own commit and a rerun resumes at the next."""
        state_dir = config.resolved_path(config.state_dir) / "capture"
        self.state_file = state_dir / f"{source.name}.bootstrap.json"

    def run(
        self, tables: Sequence[str] | None = None, *, replace: bool = False
    ) -> list[TableBootstrap]:
        """Bootstrap ``tables`` (default: every table of the source)."""
        from icetide.merge.stage import MergeStage

        every = self.config.source_tables(self.source)
        chosen = [t for t in every if not tables or t.name in tables]
        store = offset_store(self.config, self.source)
        with ExitStack() as stack:
            state = self._load_state()
            resumed = state is not None
            reader: TableReader
            if self.source.type == "mysql":
                state = state or self._mysql_state()
                reader = MySQLReader(self.source)
            else:
                handoff = postgres_handoff(
                    self.source, [str(t.source) for t in every], state, store.load(), self.log
                )
                state, reader = stack.enter_context(handoff)
            if resumed:
                self.log(
                    f"bootstrap {self.source.name}: resuming {state['id']} "
                    f"(capture starts at {_offset_text(state)})"
                )
            else:
                self._save_state(state)
            if store.load() is None:
                store.save(state["offset"], position=_offset_text(state))
            merge = MergeStage(self.spark, self.config, self.schemas, self.log)
            results = []
            for table in chosen:
                refs = TableRefs.of(self.config, table.name)
                current = (
                    read_bootstrap_state(self.spark, refs.base)
                    if table_exists(self.spark, refs.base)
                    else None
                )
                if current == (state["id"], "done"):
                    continue
                if current is None or current[0] != state["id"]:
                    self._claim(merge, table, refs.base, state["id"], replace)
                results.append(self._copy(table, refs.base, state, reader))
                _mark(self.spark, refs.base, {BOOTSTRAP_ID: state["id"], STATE: "done"})
                self.log(results[-1].render())
        self.state_file.unlink(missing_ok=True)
        return results

    def _mysql_state(self) -> dict[str, Any]:
        watermark = mysql_watermark(self.source)
        self.log(f"bootstrap {self.source.name}: low watermark {watermark.position.text}")
        return {
            "id": uuid.uuid4().hex[:12],
            "offset": watermark.offset,
            "position": watermark.position.key,
            "position_text": watermark.position.text,
            "started_at": datetime.now(UTC).isoformat(),
        }

    def _claim(
        self, merge: Any, table: TableConfig, base: TableName, bootstrap_id: str, replace: bool
    ) -> None:
        """Make sure the base is empty (or dropped, with ``replace``) and mark it running."""
        if table_exists(self.spark, base):
            if replace:
                self.spark.sql(f"DROP TABLE {base} PURGE")
            elif self.spark.table(base.sql).limit(1).count() > 0:
                raise CaptureError(
                    f"base table {base} of {table.name!r} already has rows",
                    hint="bootstrap fills an empty mirror; pass --replace to drop and reload it",
                )
        merge.ensure_base(table.name)
        _mark(self.spark, base, {BOOTSTRAP_ID: bootstrap_id, STATE: "running"})

    def _plan(
        self, table: TableConfig, state: dict[str, Any], reader: TableReader, schema: TableSchema
    ) -> list[Chunk]:
        """The table's chunks, planned once per bootstrap: a resume must split the keys
        exactly as the first run did, or chunks would overlap or leave gaps."""
        key = schema.primary_key[0]
        plans = state.setdefault("plans", {})
        plan = plans.get(table.name)
        if plan is None:
            numeric = schema.key_columns[0].type.name in _NUMERIC
            low, high, count = reader.key_range(table, key) if numeric else (None, None, 1)
            plan = {
                "low": low,
                "high": high,
                "rows": count,
                "chunk_rows": self.chunk_rows,
                "parts": self.parallelism,
            }
            plans[table.name] = plan
            self._save_state(state)
        return plan_chunks(
            reader.quote(read_name(schema, key)),
            plan["low"],
            plan["high"],
            plan["rows"],
            plan["chunk_rows"],
            plan["parts"],
        )

    def _copy(
        self, table: TableConfig, base: TableName, state: dict[str, Any], reader: TableReader
    ) -> TableBootstrap:
        started = time.monotonic()
        schema = self.schemas[table.name]
        chunks = self._plan(table, state, reader, schema)
        done = _chunks_done(self.spark, base, state["id"])
        stamp = F.lit(str(state["position"])).cast("decimal(38,0)").alias(POSITION)
        loaded_at = F.lit(datetime.now(UTC).replace(tzinfo=None)).cast("timestamp").alias(SOURCE_TS)
        rows = 0
        for chunk in chunks:
            if chunk.index in done:
                continue
            self.between_chunks()
            frame = reader.chunk(self.spark, table, schema, chunk, self.fetch_size)
            frame = frame.select("*", stamp, loaded_at)
            tags = {BOOTSTRAP_ID: state["id"], CHUNK: str(chunk.index)}
            try:
                append_with_properties(frame, base, tags)
            except Exception as exc:
                if _GUARD in str(exc):
                    raise CaptureError(
                        f"bootstrap of {table.name!r}: the JDBC driver did not run the chunk "
                        "query in the imported snapshot, so the copy would not match the "
                        "handoff position; nothing of this chunk was committed",
                        hint="use the PostgreSQL JDBC driver (org.postgresql) 42.x; it runs "
                        "Spark's sessionInitStatement and the query in one transaction",
                    ) from exc
                raise
            crash_point("bootstrap.after_chunk")
            # The chunk's row count is in its commit's summary: no second JDBC read.
            summary = latest_snapshot_property(self.spark, base, CHUNK) or {}
            rows += int(summary.get("added-records", 0))
            self.log(
                f"bootstrap {table.name}: chunk {chunk.index + 1}/{len(chunks)}, "
                f"{rows:,} rows ({rows / max(time.monotonic() - started, 1e-9):,.0f} rows/s)"
            )
        return TableBootstrap(table.name, rows, len(chunks), len(done), time.monotonic() - started)

    def _load_state(self) -> dict[str, Any] | None:
        if not self.state_file.exists():
            return None
        try:
            data = json.loads(self.state_file.read_text())
        except (OSError, ValueError) as exc:
            raise CaptureError(
                f"bootstrap state {self.state_file} is unreadable: {exc}",
                hint="delete it to start the bootstrap over",
            ) from exc
        return dict(data)

    def _save_state(self, state: dict[str, Any]) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_file)


def _offset_text(state: dict[str, Any]) -> str:
    """Capture's start offset for people (MySQL states only have the watermark's text)."""
    return str(state.get("offset_text") or state["position_text"])
