"""Schema changes under ``icetide run`` as people run it: one child process supervising
capture of a MariaDB and a PostgreSQL source, the ledger stream and the merge, while a
writer thread keeps inserting, updating and deleting in every table and the source
tables are altered one after another. Afterwards each base is compared with its source:
``verify`` row by row, and the values that matter read back by PyIceberg, an independent
reader, value by value.

The changes: a column dropped and added again under its name (a new column; the old
values kept aside as ``c__dropped_v<N>``), two columns swapping names (one statement, and
three RENAME statements in a row), a primary key dropped (by ``DROP PRIMARY KEY``, by
dropping its column, and behind a key pinned by ``primary_key:``: each holds only its
table, with the reason), timestamps and times going from millisecond to microsecond
precision on both engines, and an UPDATE written before an ``ADD COLUMN ... NOT NULL
DEFAULT`` arriving in the same micro-batch as rows written after it.

Before that, ``icetide run`` is started while a standalone ``icetide capture`` of one
source holds its landing lock: the run refuses at once, non-zero, saying what to do,
instead of restarting its capture child every second.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.artifacts.runtime import read_iceberg, table_metadata
from icetide.capture.runner import run_capture
from icetide.config import load_config
from icetide.devservers.mariadb import MariaDBServer
from icetide.events.position import format_lsn, parse_lsn
from icetide.evolution.detect import capturing_source
from icetide.evolution.source_schema import read_source_schema
from icetide.merge.asof import table_as_of
from icetide.merge.asof_plan import parse_target
from icetide.observe import checksum as ck
from icetide.observe.verify import TableVerdict, VerifyError, open_source, run_verify
from icetide.pipeline import Pipeline
from icetide.progress import Reporter
from icetide.schema.contract import ledger as c
from icetide.schema.convert.spark import sql_type
from icetide.schema.file import dump_schema_file
from icetide.schema.types import Column
from icetide.sources.quoting import mysql_quote, postgres_quote
from tests.devservers.postgres import PostgresServer
from tests.integration.test_cli_process import Child, child, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
_runs = itertools.count(1)
TIMEOUT = 240.0

MARIADB = {  # in merge order: the tables whose rows before a change matter first
    "t_readd": "CREATE TABLE {t} (id INT PRIMARY KEY, c VARCHAR(20), v INT)",
    "t_swap": "CREATE TABLE {t} (id INT PRIMARY KEY, x INT, y INT, p INT, q INT)",
    "t_tag": "CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(10))",
    "t_prec": "CREATE TABLE {t} (id INT PRIMARY KEY, dt DATETIME(3), tm TIME(3), "
    "ts TIMESTAMP(3) NULL DEFAULT NULL)",
    "t_nokey": "CREATE TABLE {t} (id INT NOT NULL, v INT, PRIMARY KEY (id))",
    "t_keycol": "CREATE TABLE {t} (id INT PRIMARY KEY, v INT)",
    "t_pinned": "CREATE TABLE {t} (id INT, region CHAR(2) NOT NULL, v INT, PRIMARY KEY (id))",
}
POSTGRES = {"p_prec": "CREATE TABLE {t} (id int PRIMARY KEY, ts timestamp(3), tm time(3))"}
FLOWING = ["t_readd", "t_swap", "t_tag", "t_prec", "p_prec"]
SEEDED_FIRST = FLOWING[:3]
"""Tables whose seed rows are in the base before any change: rows written before it."""
# The key is read from the source catalog, so its loss is seen; t_pinned's is pinned, and
# PostgreSQL's is given (as in running.write_config).
KEYS: dict[str, list[str] | None] = {"t_pinned": ["id"], "p_prec": ["id"]}
SEED_IDS = (1, 2, 3)
EPOCH = datetime(2024, 5, 6, 7, 8, 9)


# -- values the writer puts in --------------------------------------------------------------

Make = Callable[[int], object]


def fraction(n: int, micros: bool) -> int:
    """A second's fraction in microseconds: whole milliseconds, or never whole
    milliseconds (a value read as milliseconds, or rounded to them, then differs)."""
    value = (n * 7919) % 1_000_000
    if not micros:
        return value - value % 1000
    return value if value % 1000 else value + 1


def stamp(n: int, micros: bool) -> datetime:
    return EPOCH + timedelta(minutes=n, microseconds=fraction(n, micros))


def clock(n: int, micros: bool) -> timedelta:
    return timedelta(seconds=(n * 37) % 86_000, microseconds=fraction(n, micros))


def pg_clock(n: int, micros: bool) -> dtime:
    return (datetime.min + clock(n, micros)).time()


def ints(offset: int) -> Make:
    return lambda n: offset + n


def texts(prefix: str) -> Make:
    return lambda n: f"{prefix}{n}"


def prec_values(micros: bool) -> dict[str, Make]:
    return {
        "dt": lambda n: stamp(n, micros),
        "tm": lambda n: clock(n, micros),
        "ts": lambda n: stamp(n, micros),
    }


def pg_prec_values(micros: bool) -> dict[str, Make]:
    return {"ts": lambda n: stamp(n, micros), "tm": lambda n: pg_clock(n, micros)}


@dataclass
class Writes:
    """What the writer does to one table: columns it sets on insert (``update`` on
    update, default the same but the key), by ``key`` when there is one."""

    name: str
    postgres: bool
    insert: dict[str, Make]
    update: dict[str, Make] | None = None
    key: str | None = "id"
    next_id: int = 100
    inserted: list[int] = field(default_factory=list)
    statements: int = 0

    def quote(self, name: str) -> str:
        return postgres_quote(name) if self.postgres else mysql_quote(name)


SHAPES: dict[str, Callable[[], Writes]] = {
    "t_readd": lambda: Writes("t_readd", False, {"c": texts("c"), "v": ints(0)}),
    "t_swap": lambda: Writes(
        "t_swap", False, {"x": ints(1000), "y": ints(2000), "p": ints(3000), "q": ints(4000)}
    ),
    "t_nokey": lambda: Writes("t_nokey", False, {"v": ints(0)}),
    "t_keycol": lambda: Writes("t_keycol", False, {"v": ints(0)}),
    "t_pinned": lambda: Writes(
        "t_pinned", False, {"region": lambda n: "us", "v": ints(0)}, {"v": ints(0)}
    ),
    "t_prec": lambda: Writes("t_prec", False, prec_values(micros=False)),
    "t_tag": lambda: Writes("t_tag", False, {"v": texts("v")}),
    "p_prec": lambda: Writes("p_prec", True, pg_prec_values(micros=False)),
}


class Trickle:
    """A thread writing to every table in turn, a statement every few hundredths of a
    second: inserts, updates (of the seed rows too) and deletes of rows it inserted. A
    DDL goes through :meth:`alter`, between two of its statements, and changes what it
    writes from then on."""

    def __init__(self, mariadb: MariaDBServer, db: str, postgres: PostgresServer, pgdb: str):
        self.mysql = mariadb.connect(db)
        self.pg = postgres.connect(pgdb)
        self.writes = {name: make() for name, make in SHAPES.items()}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []
        self.rounds = 0
        self.n = 0
        self.random = random.Random(7)
        self.thread = threading.Thread(target=self._loop, daemon=True, name="trickle")

    def start(self) -> None:
        self.thread.start()

    def _loop(self) -> None:
        try:
            while not self.stopping.is_set():
                for name in self.writes:
                    with self.lock:
                        self._write(self.writes[name])
                    self.stopping.wait(0.12)
                self.rounds += 1
        except BaseException as exc:  # surfaced by wait_rounds and stop
            self.errors.append(exc)

    def _execute(self, w: Writes, statement: str, params: list[object] | None = None) -> None:
        with (self.pg if w.postgres else self.mysql).cursor() as cur:
            cur.execute(statement, params)

    def _write(self, w: Writes) -> None:
        self.n += 1
        n, op, table = self.n, w.statements % 5, w.quote(w.name)
        w.statements += 1
        if op in (0, 1) or w.key is None:
            columns = dict(w.insert)
            values = [make(n) for make in columns.values()]
            names = list(columns)
            if w.key is not None:
                names.insert(0, w.key)
                values.insert(0, w.next_id)
                w.inserted.append(w.next_id)
                w.next_id += 1
            listed = ", ".join(w.quote(x) for x in names)
            marks = ", ".join(["%s"] * len(names))
            self._execute(w, f"INSERT INTO {table} ({listed}) VALUES ({marks})", values)
        elif op in (2, 3):
            # Seed row 1 is left as written before the changes.
            target = self.random.choice([*SEED_IDS[1:], *w.inserted[-5:]])
            update = w.update if w.update is not None else w.insert
            sets = ", ".join(f"{w.quote(x)} = %s" for x in update)
            self._execute(
                w,
                f"UPDATE {table} SET {sets} WHERE {w.quote(w.key)} = %s",
                [*(make(n) for make in update.values()), target],
            )
        elif len(w.inserted) > 3:
            gone = w.inserted.pop(0)
            self._execute(w, f"DELETE FROM {table} WHERE {w.quote(w.key)} = %s", [gone])

    def alter(
        self, table: str, statements: list[str], read: str | None = None, **changes: Any
    ) -> list[tuple[Any, ...]]:
        """Run ``statements`` ({t} is the quoted table) between two writes, and from then
        on write as ``changes`` say (:class:`Writes` fields); the rows ``read`` (a query
        run just before the statements) returns."""
        w = self.writes[table]
        with self.lock:
            rows: list[tuple[Any, ...]] = []
            with (self.pg if w.postgres else self.mysql).cursor() as cur:
                if read is not None:
                    cur.execute(read.format(t=w.quote(table)))
                    rows = list(cur.fetchall())
                for statement in statements:
                    cur.execute(statement.format(t=w.quote(table)))
            for key, value in changes.items():
                setattr(w, key, value)
        return rows

    def wait_rounds(self, rounds: int) -> None:
        """Until every table had ``rounds`` more statements."""
        until = self.rounds + rounds
        poll(lambda: self.rounds >= until or bool(self.errors), f"{rounds} write rounds")
        assert not self.errors, self.errors

    def stop(self) -> None:
        if not self.stopping.is_set():
            self.stopping.set()
            if self.thread.is_alive():
                self.thread.join(timeout=60)
            self.mysql.close()
            self.pg.close()
        assert not self.errors, self.errors


def poll(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    """:func:`wait_until` with this file's timeout."""
    wait_until(condition, what, timeout)


# -- the pipeline ---------------------------------------------------------------------------


def write_pipeline(
    root: Path, warehouse: Path, namespace: str, sources: list[dict[str, Any]]
) -> Path:
    """Two sources in one pipeline file, schemas read from their catalogs (onboarding)."""
    tables = [
        {
            "name": name,
            "source": f"{namespace}.{name}" if name in MARIADB else f"public.{name}",
            "schema": f"schemas/{name}.yaml",
            "buckets": 2,
            "primary_key": KEYS.get(name),
        }
        for name in [*MARIADB, *POSTGRES]
    ]
    doc = {
        "pipeline": namespace,
        "state_dir": "./state",
        "catalog": {"name": "lake", "warehouse": str(warehouse), "namespace": namespace},
        "spark": {"master": "local[2]", "shuffle_partitions": 2},
        # Tables merged four at a time: one merge's commits overlap another's tasks.
        "merge": {"parallel_tables": 4},
        "sources": sources,
        "transport": {"type": "files", "path": "./landing", "roll_interval": "1s"},
        "schedule": {"stream_interval": "1s", "merge_interval": "1s"},
        "artifacts": {"refresh": "off"},
        "tables": tables,
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root / "icetide.yaml"
    path.write_text(yaml.safe_dump(doc))
    config = load_config(path)
    for table in config.tables:
        schema = read_source_schema(capturing_source(config, table), table)
        dump_schema_file(schema, root / "schemas" / f"{table.name}.yaml")
    return path


@contextmanager
def databases(mariadb: MariaDBServer, postgres: PostgresServer) -> Iterator[tuple[str, str, str]]:
    """A fresh MariaDB database and PostgreSQL database with the (empty) tables;
    (MariaDB database, PostgreSQL database, slot). The slot is dropped after."""
    run = next(_runs)
    db, pgdb, slot = f"live{run}", f"livepg{run}", f"live{run}_{os.getpid()}"
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {mysql_quote(db)}")
        for name, ddl in MARIADB.items():
            cur.execute(ddl.format(t=f"{mysql_quote(db)}.{mysql_quote(name)}"))
    postgres.create_database(pgdb)
    for name, ddl in POSTGRES.items():
        postgres.execute(ddl.format(t=postgres_quote(name)), pgdb)
    try:
        yield db, pgdb, slot
    finally:
        postgres.drop_slot(slot, pgdb)


def seed(mariadb: MariaDBServer, db: str, postgres: PostgresServer, pgdb: str) -> None:
    """Rows 1-3 of every table, written before any change (and after capture's start)."""
    rows = {
        name: [(i, *(m(i) for m in SHAPES[name]().insert.values())) for i in SEED_IDS]
        for name in SHAPES
    }
    rows["t_pinned"] = [(1, "us", 1), (2, "us", 2), (3, "eu", 3)]
    with mariadb.connect(db) as conn, conn.cursor() as cur:
        for name in MARIADB:
            columns = ["id", *SHAPES[name]().insert]
            listed = ", ".join(mysql_quote(x) for x in columns)
            marks = ", ".join(["%s"] * len(columns))
            cur.executemany(
                f"INSERT INTO {mysql_quote(name)} ({listed}) VALUES ({marks})", rows[name]
            )
    for name in POSTGRES:
        columns = ["id", *SHAPES[name]().insert]
        listed = ", ".join(postgres_quote(x) for x in columns)
        marks = ", ".join(["%s"] * len(columns))
        for row in rows[name]:
            postgres.execute(
                f"INSERT INTO {postgres_quote(name)} ({listed}) VALUES ({marks})", pgdb, row
            )


@pytest.mark.long
def test_schema_changes_under_icetide_run_with_writes_throughout(
    tmp_path: Path,
    warehouse: Path,
    spark: SparkSession,
    mariadb: MariaDBServer,
    postgres: PostgresServer,
) -> None:
    with databases(mariadb, postgres) as (db, pgdb, slot):
        sources = [
            mariadb.source_entry(
                db, server_id=5900 + os.getpid() % 1000, heartbeat="1s", tables=list(MARIADB)
            ),
            postgres.source_entry(pgdb, slot, heartbeat="1s", tables=list(POSTGRES)),
        ]
        path = write_pipeline(tmp_path, warehouse, db, sources)
        pipeline = Pipeline(load_config(path), reporter=Reporter(lambda _: None))
        # No bootstrap: every row comes through capture. PostgreSQL's capture starts
        # here (its slot made), MariaDB's in the standalone capture below.
        run_capture(pipeline.config, pipeline.config.source(pgdb), follow=False, from_now=True)
        _a_held_capture_lock_stops_run(
            path, pipeline, db, while_held=lambda: seed(mariadb, db, postgres, pgdb)
        )

        gate = tmp_path / "gate"  # faults.py's pause: hold one ledger batch, once armed
        gate.mkdir()
        args = ["run", "-c", str(path), "--observe-interval", "3600"]
        pause = {"ICETIDE_PAUSE": f"ledger.after_first_append:{gate}"}
        trickle = Trickle(mariadb, db, postgres, pgdb)
        with child(args, pause) as run:
            try:
                for table in SEEDED_FIRST:  # a timeout says what the run said meanwhile
                    run.wait_for_line(rf"^merge {table}: [1-9]")
                trickle.start()
                recorded: list[Recording] = []

                def record(point: str) -> None:
                    recorded.extend(_record(pipeline, db, pgdb, point))

                try:
                    dropped = _change_every_table(trickle, pipeline, run, gate, record)
                except AssertionError as exc:  # with what the run said meanwhile
                    raise AssertionError(f"{exc}\n" + "\n".join(run.lines[-60:])) from None
                trickle.wait_rounds(2)
                # Rows with microseconds written since t_prec's precision went up, enough
                # for the check at the end (how many rounds ran meanwhile depends on how
                # fast the run applied the changes).
                while len(_microseconds(_source_rows(mariadb, db, "t_prec", ["dt"]))) <= 3:
                    trickle.wait_rounds(1)
                record("D")
                trickle.stop()
                _until_verified(pipeline, spark, run)
                _as_of_each_recording(pipeline, spark, recorded)
                _held_with_their_reasons(pipeline, spark, run)
                _values_read_back(pipeline, spark, mariadb, db, postgres, pgdb, dropped)
            finally:
                trickle.stop()
                # SIGTERM first: its capture children (sessions of their own) stop with it
                # and let the replication slot go.
                run.proc.send_signal(signal.SIGTERM)
                code = run.finish()
            assert code == 0, run.output[-5000:]
        assert "Traceback" not in run.output, run.output[-5000:]


def _change_every_table(
    trickle: Trickle, pipeline: Pipeline, run: Child, gate: Path, record: Callable[[str], None]
) -> dict[int, str | None]:
    """The DDLs one after another, the writer writing between them; the t_readd values
    its DROP COLUMN took away (id → c). ``record`` reads the sources at their log
    positions (:func:`_record`) before the changes, between them and after them."""
    trickle.wait_rounds(1)
    record("A")
    # 1. c dropped (and, below, once that version is applied, c added again).
    before = trickle.alter(
        "t_readd",
        ["ALTER TABLE {t} DROP COLUMN c"],
        read="SELECT id, c FROM {t}",
        insert={"v": ints(0)},
    )
    trickle.wait_rounds(1)
    # 2. Columns trading names: x and y in one statement (MariaDB 10.11 refuses the form
    # through a temporary name in one statement: "Unknown column 'tmp'"), p and q in
    # three statements in a row.
    trickle.alter("t_swap", ["ALTER TABLE {t} RENAME COLUMN x TO y, RENAME COLUMN y TO x"])
    trickle.wait_rounds(1)
    # At once, with rows between them: whichever ledger batches the statements fall in,
    # each starts a version of its own, so every row is read by the names it was
    # written with.
    trickle.alter(
        "t_swap",
        [
            "ALTER TABLE {t} RENAME COLUMN p TO tmp",
            "ALTER TABLE {t} RENAME COLUMN q TO p",
            "ALTER TABLE {t} RENAME COLUMN tmp TO q",
        ],
    )
    trickle.wait_rounds(1)
    record("B")
    # 3. the key lost, three ways.
    trickle.alter("t_nokey", ["ALTER TABLE {t} DROP PRIMARY KEY"])
    trickle.alter("t_keycol", ["ALTER TABLE {t} DROP COLUMN id"], key=None)
    trickle.alter("t_pinned", ["ALTER TABLE {t} DROP PRIMARY KEY, ADD PRIMARY KEY (id, region)"])
    trickle.wait_rounds(1)
    # 5. millisecond → microsecond precision; the writer writes microseconds at once.
    trickle.alter(
        "t_prec",
        [
            "ALTER TABLE {t} MODIFY dt DATETIME(6), MODIFY tm TIME(6), "
            "MODIFY ts TIMESTAMP(6) NULL DEFAULT NULL"
        ],
        insert=prec_values(micros=True),
    )
    trickle.alter(
        "p_prec",
        ["ALTER TABLE {t} ALTER COLUMN ts TYPE timestamp(6), ALTER COLUMN tm TYPE time(6)"],
        insert=pg_prec_values(micros=True),
    )
    # 6. a widening: int to bigint, right after the renames.
    trickle.alter("t_swap", ["ALTER TABLE {t} MODIFY q BIGINT"])
    trickle.wait_rounds(1)
    record("C")
    # 1, continued: c back under its name once the drop is applied.
    poll(lambda: pipeline.schema("t_readd").version >= 2, "t_readd's drop applied")
    trickle.alter(
        "t_readd",
        ["ALTER TABLE {t} ADD COLUMN c VARCHAR(20)"],
        insert={"v": ints(0), "c": texts("new")},
    )
    trickle.wait_rounds(1)
    # 5a. A ledger batch is held (the pause) while an UPDATE, the ADD COLUMN and rows
    # after it land: the next batch takes them all.
    (gate / "armed").touch()
    poll(lambda: (gate / "paused").exists(), "a ledger batch held")
    trickle.alter(
        "t_tag",
        [
            "UPDATE {t} SET v = 'before' WHERE id = 1",
            "ALTER TABLE {t} ADD COLUMN tag VARCHAR(8) NOT NULL DEFAULT 'x'",
            "INSERT INTO {t} (id, v, tag) VALUES (1000, 'after', 'y')",
            "UPDATE {t} SET v = 'after2', tag = 'z' WHERE id = 2",
        ],
        insert={"v": texts("v"), "tag": texts("g")},
    )
    landing = pipeline.config.resolved_path(pipeline.config.transport.path)
    poll(lambda: _landed(landing, b'"after2"'), "t_tag's rows landed")
    (gate / "paused").unlink()
    return {int(i): v for i, v in before}


# -- the sources recorded at exact log positions, and the tables as of them ------------------

RECORDED = {
    "t_swap": "ABC",  # before the renames, between them and the widening, after it
    "t_tag": "CD",  # before and after its ADD COLUMN ... NOT NULL DEFAULT
    "t_prec": "D",  # microseconds written after the precision went up
    "p_prec": "AD",  # PostgreSQL: before and after the precision went up
}
"""Which tables are read at their log positions at each point (A before any change, B
after t_swap's renames, C after the widening and the precision changes, D at the end)."""


@dataclass(frozen=True)
class Recording:
    """One source table read at one exact log position, with the columns it had then."""

    table: str
    at: str
    """The position as ``icetide asof --at`` takes it."""
    columns: tuple[Column, ...]
    checksum: tuple[int, int]
    """``verify``'s (row count, sum of row hashes) over ``columns``."""
    rows: dict[int, tuple[Any, ...]]


def _record(pipeline: Pipeline, db: str, pgdb: str, point: str) -> list[Recording]:
    """Each recorded table as its source has it at one log position, while the writer
    writes. MariaDB: ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and, in it, the binlog
    file and offset the snapshot is consistent with (``binlog_snapshot_*``): every
    transaction committed before that offset is in the snapshot, none after. PostgreSQL:
    ``LOCK TABLE ... IN SHARE MODE`` before the transaction's first query (writers of the
    table wait, and no writer of it is open), then ``pg_current_wal_insert_lsn()`` and
    the rows: every change of the table is below that LSN, where the next WAL record
    goes, or written after the lock; the target is the LSN just below it."""
    config = pipeline.config
    found = []
    for source in (config.source(db), config.source(pgdb)):
        tables = [
            t
            for t, at in RECORDED.items()
            if point in at and t in (MARIADB if source.type == "mysql" else POSTGRES)
        ]
        if not tables:
            continue
        shapes = {t: read_source_schema(source, config.table(t)).columns for t in tables}
        conn = open_source(source)
        try:
            if source.type == "postgres":
                conn.conn.set_session(readonly=False)  # SHARE is refused read-only
            with conn.snapshot(), conn.conn.cursor() as cur:
                if source.type == "mysql":
                    cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
                    status = {str(k).lower(): v for k, v in cur.fetchall()}
                    at = f"{status['binlog_snapshot_file']}:{status['binlog_snapshot_position']}"
                else:
                    for t in tables:
                        cur.execute(f"LOCK TABLE {conn.table_sql(config.table(t))} IN SHARE MODE")
                    cur.execute("SELECT pg_current_wal_insert_lsn()::text")
                    # Where the next record goes: the changes recorded are below it.
                    at = format_lsn(parse_lsn(cur.fetchall()[0][0]) - 1)
                for t in tables:
                    quoted = conn.table_sql(config.table(t))
                    cur.execute(ck.checksum_sql(conn.dialect, quoted, shapes[t]))
                    count, total = cur.fetchall()[0]
                    listed = ", ".join(ck.quote_ident(conn.dialect, x.name) for x in shapes[t])
                    cur.execute(f"SELECT {listed} FROM {quoted}")
                    rows = {r[0]: tuple(r[1:]) for r in cur.fetchall()}
                    found.append(Recording(t, at, shapes[t], (int(count), int(total or 0)), rows))
        finally:
            conn.close()
    return found


def _as_of_each_recording(
    pipeline: Pipeline, spark: SparkSession, recorded: list[Recording]
) -> None:
    """``icetide asof`` at each recorded position gives the table the source had there:
    its columns then (names and types: before a rename, the old names; before a widening,
    the old type; before an ADD COLUMN, without it), the same keys, and ``verify``'s
    checksum over those columns equal to the source's."""
    assert len(recorded) == sum(map(len, RECORDED.values())), [(r.table, r.at) for r in recorded]
    versions: dict[str, set[int]] = {}
    for want in recorded:
        asof = table_as_of(spark, pipeline, want.table, parse_target(want.at))
        try:
            what = f"{want.table} at {want.at}: {asof.describe()}"
            frame = asof.frame.cache()
            shape = [(f.name, f.dataType.simpleString()) for f in frame.schema.fields[:-2]]
            then = [(x.name, sql_type(x.type).lower()) for x in want.columns]
            assert shape == then, (what, shape, then)
            named = frame.select(*(x.name for x in want.columns))
            got = {r[0]: tuple(r[1:]) for r in named.collect()}
            assert sorted(got) == sorted(want.rows), what
            if want.table in ("t_swap", "t_tag"):  # values both drivers read alike
                wrong = {k: (v, want.rows[k]) for k, v in got.items() if v != want.rows[k]}
                assert not wrong, (what, wrong)
            assert ck.spark_checksum(frame, want.columns) == want.checksum, what
            frame.unpersist()
            versions.setdefault(want.table, set()).add(asof.shape.version if asof.shape else 0)
        finally:
            asof.release()
    # Before and after the changes: older shapes were rebuilt, and the current one.
    assert all(len(versions[t]) == len(set(at)) for t, at in RECORDED.items()), versions


def _landed(landing: Path, text: bytes) -> bool:
    return any(
        text in p.read_bytes()
        for p in landing.rglob("*")
        if p.is_file() and not p.name.startswith((".", "_"))
    )


def _until_verified(pipeline: Pipeline, spark: SparkSession, run: Child) -> None:
    """Every changed table converged, as the run says (its log: free to read), then
    verified against its source; and the tables whose key change is held, which go on
    being merged by the key they have (their events carry it)."""

    def converged() -> bool:
        assert run.proc.poll() is None, run.output[-5000:]
        said = [
            f"schema {t}: data converged at version {pipeline.schema(t).version} (" for t in FLOWING
        ]
        return all(any(x.startswith(s) for x in run.lines) for s in said)

    try:
        poll(converged, f"{FLOWING} converged")
        timeout = TIMEOUT
    except AssertionError:
        timeout = 0.0  # verify once: its verdicts say what is wrong
    tables = [*FLOWING, "t_nokey", "t_pinned"]
    last: list[TableVerdict | VerifyError] = []

    def matches() -> bool:
        nonlocal last
        assert run.proc.poll() is None, run.output[-5000:]
        try:
            last = run_verify(pipeline, spark, tables)
        except VerifyError as exc:  # a schema file ahead of its base: not merged yet
            last = [exc]
            return False
        return all(isinstance(v, TableVerdict) and v.matches for v in last)

    try:
        poll(matches, f"verify of {tables}", timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{last}\n" + "\n".join(run.lines[-60:])) from None


def _held_with_their_reasons(pipeline: Pipeline, spark: SparkSession, run: Child) -> None:
    """Each table that lost its key is held at version 1 with a key_change reason, said
    in the run's log, while the others flowed (verified above, with writes after the
    holds); no dead letters but t_keycol's events, which lack their key."""
    for table, reason in {
        "t_nokey": f"held: the source table {pipeline.config.table('t_nokey').source} has "
        "no primary key; ",
        "t_keycol": f"held: the source table {pipeline.config.table('t_keycol').source} has "
        "no primary key; ",
        "t_pinned": "held until approved (`icetide schema apply --approve ID`): key_change: "
        "the source's primary key is now ['id', 'region'] while the table keeps ['id'] "
        "(pinned by primary_key: in the config)",
    }.items():
        said = [line for line in run.lines if line.startswith(f"schema {table}: held")]
        assert said and all(reason in line for line in said), (table, said or run.output)
        assert pipeline.schema(table).version == 1, table
    assert pipeline.schema("t_readd").version == 3
    unrouted = pipeline.config.dead_letter.unrouted_table
    for table in [*FLOWING, "t_nokey", "t_pinned", unrouted]:
        dead = spark.table(pipeline.refs(table).dead_letters.sql).collect()
        assert dead == [], (table, dead)
    # Written after its key column was dropped: they wait there.
    reasons = {r.reason for r in spark.table(pipeline.refs("t_keycol").dead_letters.sql).collect()}
    assert reasons == {"missing_key"}, reasons


def _microseconds(rows: dict[int, tuple[Any, ...]]) -> list[Any]:
    """The first column's values with microseconds (a ``DATETIME(6)``'s, not a ``(3)``'s)."""
    return [row[0] for row in rows.values() if row[0] is not None and row[0].microsecond % 1000]


def _source_rows(
    mariadb: MariaDBServer, db: str, table: str, columns: list[str]
) -> dict[int, tuple[Any, ...]]:
    listed = ", ".join(mysql_quote(x) for x in ["id", *columns])
    with mariadb.connect(db) as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(f"SELECT {listed} FROM {mysql_quote(table)}")
        return {r[0]: tuple(r[1:]) for r in cur.fetchall()}


def _base_rows(pipeline: Pipeline, table: str, columns: list[str]) -> dict[int, tuple[Any, ...]]:
    """The base's rows as PyIceberg reads them from the table's newest metadata file (in
    the Hadoop warehouse: ``<warehouse>/<namespace>/<table>``)."""
    catalog = pipeline.config.catalog
    folder = Path(str(catalog.warehouse)) / str(catalog.namespace) / table
    rows = read_iceberg(table_metadata(str(folder)), ["id", *columns]).to_pylist()
    return {r["id"]: tuple(r[x] for x in columns) for r in rows}


def _time_of_day(text: str | None) -> dtime | None:
    """A ``time`` column's value: icetide keeps a time of day as its ISO text (Spark has
    no time type), microseconds included."""
    return None if text is None else dtime.fromisoformat(text)


def _since_midnight(value: dtime | None) -> timedelta | None:
    """A time of day as the MySQL driver reads a TIME."""
    if value is None:
        return None
    return datetime.combine(EPOCH.date(), value) - datetime.combine(EPOCH.date(), dtime())


def _naive_utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


def _values_read_back(
    pipeline: Pipeline,
    spark: SparkSession,
    mariadb: MariaDBServer,
    db: str,
    postgres: PostgresServer,
    pgdb: str,
    dropped: dict[int, str | None],
) -> None:
    """PyIceberg reads what verify compared: microsecond values exactly, the swapped
    columns by name as the source shows them, the re-added column and its old values."""
    source = _source_rows(mariadb, db, "t_swap", ["x", "y", "p", "q"])
    assert _base_rows(pipeline, "t_swap", ["x", "y", "p", "q"]) == source
    assert source[1] == (2001, 1001, 4001, 3001), source  # a row written before the swaps

    # The precision changes were applied with their Debezium hints.
    for table, hints in {
        "t_prec": {"dt": ("Timestamp", "MicroTimestamp")},
        "p_prec": {"ts": ("Timestamp", "MicroTimestamp"), "tm": ("Time", "MicroTime")},
    }.items():
        first, now = pipeline.schemas.history(table).versions[0], pipeline.schema(table)
        for name, (was, then) in hints.items():
            hint = (
                first.sink.logical.get(first.by_name[name].id),
                now.sink.logical.get(now.by_name[name].id),
            )
            assert hint == (f"io.debezium.time.{was}", f"io.debezium.time.{then}"), hint
    source = _source_rows(mariadb, db, "t_prec", ["dt", "tm", "ts"])
    base = _base_rows(pipeline, "t_prec", ["dt", "tm", "ts"])
    as_source = {
        i: (dt, _since_midnight(_time_of_day(tm)), _naive_utc(ts))
        for i, (dt, tm, ts) in base.items()
    }
    assert as_source == source
    micro = _microseconds(source)
    assert len(micro) > 3, source  # values with microseconds were written after the change

    listed = ", ".join(postgres_quote(x) for x in ("id", "ts", "tm"))
    pg = {r[0]: (r[1], r[2]) for r in postgres.execute(f"SELECT {listed} FROM p_prec", pgdb)}
    base = _base_rows(pipeline, "p_prec", ["ts", "tm"])
    assert {i: (ts, _time_of_day(tm)) for i, (ts, tm) in base.items()} == pg
    assert any(ts is not None and ts.microsecond % 1000 for ts, _ in pg.values()), pg

    names = [c.name for c in pipeline.schema("t_readd").columns]
    assert names == ["id", "v", "c"], names
    source = _source_rows(mariadb, db, "t_readd", ["c", "v"])
    base = _base_rows(pipeline, "t_readd", ["c", "v", "c__dropped_v2"])
    assert {i: (cc, v) for i, (cc, v, _) in base.items()} == source
    # Row 1, written before the drop and untouched since: NULL in the new c, as at the
    # source, and its old value kept aside. (A change merged after the drop does not
    # write the dropped column, so a kept value is the row's last one merged before.)
    assert source[1] == (None, 1) and base[1] == (None, 1, "c1"), base[1]
    assert dropped[1] == "c1"
    new_rows = [i for i in base if i not in dropped]
    assert new_rows and all(base[i][2] is None for i in new_rows), base

    source = _source_rows(mariadb, db, "t_tag", ["v", "tag"])
    assert _base_rows(pipeline, "t_tag", ["v", "tag"]) == source
    assert source[1] == ("before", "x") and source[1000] == ("after", "y")
    # The UPDATE written before the ADD COLUMN and the rows after it: one ledger batch.
    ledger = spark.table(pipeline.refs("t_tag").cdc.sql)
    batches = (
        ledger.where(F.col(f"{c.AFTER}.v").isin("before", "after", "after2"))
        .select(c.INGESTED_AT)
        .distinct()
        .collect()
    )
    assert len(batches) == 1, batches


def _a_held_capture_lock_stops_run(
    path: Path, pipeline: Pipeline, source: str, while_held: Callable[[], None]
) -> None:
    """A standalone ``icetide capture`` of ``source`` (from the log's end) holds its
    landing lock: ``icetide run`` on the same pipeline refuses at once, non-zero, naming
    the lock and what to do, before it starts Spark or any capture child.
    ``while_held`` writes rows meanwhile: the standalone capture lands them."""
    landing = pipeline.config.resolved_path(pipeline.config.transport.path)
    lock = landing / f".{source}.lock"
    capture_args = ["capture", "--source", source, "--from-now", "-c", str(path)]
    with child(capture_args) as capture:
        poll(lambda: _locked(lock) or capture.proc.poll() is not None, "capture's lock")
        assert capture.proc.poll() is None, capture.output
        while_held()
        with child(["run", "-c", str(path), "--observe-interval", "3600"]) as run:
            code = run.finish()
        assert code == 2, run.output
        # Said at once, before Spark's start-up, and nothing started: no capture child
        # restarted in a loop, no clean stop's line.
        assert f"icetide: error: another capture of source {source!r} is writing to" in (
            run.output
        ), run.output
        assert "hint: run one `icetide capture` per source; stop the other one first" in (
            run.output
        ), run.output
        assert "starting Spark" not in run.output, run.output
        assert not [x for x in run.lines if re.search(r"capture \S+ failed", x)], run.output
        assert "icetide run stopped" not in run.output, run.output
        assert "Traceback" not in run.output, run.output
        capture.proc.send_signal(signal.SIGTERM)
        assert capture.finish() == 0, capture.output
        assert "Traceback" not in capture.output, capture.output


def _locked(path: Path) -> bool:
    """Whether some process holds a lock on ``path`` (``/proc/locks``)."""
    try:
        inode = path.stat().st_ino
    except FileNotFoundError:
        return False
    for line in Path("/proc/locks").read_text().splitlines():
        parts = line.split()
        if len(parts) > 5 and parts[5].rsplit(":", 1)[-1] == str(inode):
            return True
    return False
