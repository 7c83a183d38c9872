"""Bootstrap: copy each table into its empty base table, then hand off to the log.

The handoff is exact without locking the source and without one long transaction:

1. record the log position *before* reading anything (the *low watermark* ``P``) and
   make it capture's start offset;
2. read the table with Spark's JDBC source in primary-key chunks, in parallel, while the
   source keeps taking writes; every row is stamped with position ``P``;
3. capture replays the log from ``P``. Every change after ``P`` has a larger position and
   carries the whole row (binlog ``FULL`` image), so the merge's version guard lets it
   replace whatever a chunk read; a key no change touched after ``P`` was read exactly.

So the base converges to the source as soon as the merge has applied the log up to
the source's current position — the argument of Netflix's DBLog, without its in-log
watermarks (the merge's version guard plays their part). While a bootstrap runs, the
base table's newest ``icetide.bootstrap.state`` snapshot property is ``running`` and the
merge leaves the table alone; chunks commit one by one with ``icetide.bootstrap.chunk``,
so a killed bootstrap resumes at the first chunk not committed.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pymysql
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icetide.capture.connect import jdbc_url, mysql_settings
from icetide.capture.errors import CaptureError, SourceUnavailableError
from icetide.capture.runner import offset_store
from icetide.config.model import Config, SourceConfig, TableConfig
from icetide.events.position import Position, binlog_position
from icetide.faults import crash_point
from icetide.merge.stage import read_bootstrap_state
from icetide.merge.tables import BOOTSTRAP_CHUNK as CHUNK
from icetide.merge.tables import BOOTSTRAP_ID, POSITION, SOURCE_TS
from icetide.merge.tables import BOOTSTRAP_STATE as STATE
from icetide.schema.model import Column, TableSchema
from icetide.schema.spark_types import sql_type
from icetide.spark.tables import TableRefs, table_exists

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


def mysql_select_expression(column: Column) -> str:
    """The SQL that reads ``column`` as text or a number Spark casts exactly.

    Date and time values go through text so no JVM time zone touches them; TIMESTAMP
    columns are read in UTC (the session's ``time_zone`` is set to ``+00:00``).
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
    if kind == "boolean":
        return f"CAST({name} AS SIGNED)"
    if kind in ("string", "json", "uuid"):
        return f"CAST({name} AS CHAR)"
    return name


def spark_cast(column: Column) -> SparkColumn:
    """The read value as the schema's Spark type (timestamptz text is UTC)."""
    value = F.col(column.name)
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
        f"{mysql_select_expression(c)} AS {_mysql_quote(c.name)}" for c in schema.columns
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
    return frame.select(*[spark_cast(c) for c in schema.columns])


# -- the bootstrap -------------------------------------------------------------------------


def _chunks_done(spark: SparkSession, base: str, bootstrap_id: str) -> set[int]:
    rows = spark.sql(
        f"SELECT summary['{CHUNK}'] FROM {base}.snapshots "
        f"WHERE summary['{BOOTSTRAP_ID}'] = '{bootstrap_id}' AND summary['{CHUNK}'] IS NOT NULL"
    ).collect()
    return {int(r[0]) for r in rows}


def _mark(spark: SparkSession, base: str, properties: dict[str, str]) -> None:
    writer = spark.table(base).limit(0).writeTo(base)
    for key, value in properties.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    writer.append()


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
    ) -> None:
        if source.type != "mysql":
            raise CaptureError(
                f"bootstrap of PostgreSQL source {source.name!r} is not built yet",
                hint="start capture with `icetide capture --from-now` on empty tables",
            )
        self.spark, self.config, self.schemas, self.source = spark, config, schemas, source
        self.chunk_rows, self.parallelism, self.fetch_size = chunk_rows, parallelism, fetch_size
        self.log = log
        state_dir = config.resolved_path(config.state_dir) / "capture"
        self.state_file = state_dir / f"{source.name}.bootstrap.json"

    def run(
        self, tables: Sequence[str] | None = None, *, replace: bool = False
    ) -> list[TableBootstrap]:
        """Bootstrap ``tables`` (default: every table of the source)."""
        from icetide.merge.stage import MergeStage

        chosen = [
            t for t in self.config.source_tables(self.source) if not tables or t.name in tables
        ]
        state = self._load_state()
        if state is None:
            watermark = mysql_watermark(self.source)
            state = {
                "id": uuid.uuid4().hex[:12],
                "offset": watermark.offset,
                "position": watermark.position.key,
                "position_text": watermark.position.text,
                "started_at": datetime.now(UTC).isoformat(),
            }
            self._save_state(state)
            self.log(f"bootstrap {self.source.name}: low watermark {watermark.position.text}")
        else:
            self.log(
                f"bootstrap {self.source.name}: resuming {state['id']} at {state['position_text']}"
            )
        store = offset_store(self.config, self.source)
        if store.load() is None:
            store.save(state["offset"], position=state["position_text"])
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
            results.append(self._copy(table, refs.base, state))
            _mark(self.spark, refs.base, {BOOTSTRAP_ID: state["id"], STATE: "done"})
            self.log(results[-1].render())
        self.state_file.unlink(missing_ok=True)
        return results

    def _claim(
        self, merge: Any, table: TableConfig, base: str, bootstrap_id: str, replace: bool
    ) -> None:
        """Make sure the base is empty (or dropped, with ``replace``) and mark it running."""
        if table_exists(self.spark, base):
            if replace:
                self.spark.sql(f"DROP TABLE {base} PURGE")
            elif self.spark.table(base).limit(1).count() > 0:
                raise CaptureError(
                    f"base table {base} of {table.name!r} already has rows",
                    hint="bootstrap fills an empty mirror; pass --replace to drop and reload it",
                )
        merge.ensure_base(table.name)
        _mark(self.spark, base, {BOOTSTRAP_ID: bootstrap_id, STATE: "running"})

    def _copy(self, table: TableConfig, base: str, state: dict[str, Any]) -> TableBootstrap:
        started = time.monotonic()
        schema = self.schemas[table.name]
        key = schema.primary_key[0]
        numeric = schema.key_columns[0].type.name in _NUMERIC
        low, high, count = mysql_key_range(self.source, table, key) if numeric else (None, None, 1)
        chunks = plan_chunks(_mysql_quote(key), low, high, count, self.chunk_rows, self.parallelism)
        done = _chunks_done(self.spark, base, state["id"])
        stamp = F.lit(str(state["position"])).cast("decimal(38,0)").alias(POSITION)
        loaded_at = F.lit(datetime.now(UTC).replace(tzinfo=None)).cast("timestamp").alias(SOURCE_TS)
        rows = 0
        for chunk in chunks:
            if chunk.index in done:
                continue
            frame = read_chunk_mysql(
                self.spark, self.source, table, schema, chunk, self.fetch_size
            ).select("*", stamp, loaded_at)
            frame = frame.cache()
            n = frame.count()
            writer = frame.writeTo(base)
            for k, v in {BOOTSTRAP_ID: state["id"], CHUNK: str(chunk.index)}.items():
                writer = writer.option(f"snapshot-property.{k}", v)
            writer.append()
            frame.unpersist()
            crash_point("bootstrap.after_chunk")
            rows += n
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
