"""Capture benchmark: icetide's change-log reader against the raw client library, one core.

MySQL (``--source mysql``): starts a private MariaDB, loads ``--rows`` rows into a 5-column
table (without logging them), runs one ``UPDATE`` of every row, and reads that transaction
from the binlog ``--repeat`` times per variant, alternating:

* raw: python-mysql-replication's ``BinLogStreamReader`` alone, touching every row event's
  ``rows`` (this parses the row images);
* icetide: ``BinlogReader`` producing ``CaptureRecord`` items and ``to_json()`` for each.

PostgreSQL (``--source postgres``): the same table and UPDATE in a private PostgreSQL,
read from a logical replication slot (pgoutput) per variant:

* raw: psycopg2's replication stream alone, every message's bytes, not decoded;
* icetide: ``PgOutputReader`` producing ``CaptureRecord`` items and ``to_json()`` for each.

A row event here is one changed row (one ``CaptureRecord``); the binlog packs many into one
binlog event. The reading process is pinned to one core (``--cpu``) and the server to the
others, so the rates are per core; CPU seconds (``time.process_time``) are printed too.
Prints medians and the ratio icetide/raw (above 1 means icetide reads faster than the
library alone). Machines here are small and shared: read the medians and ratios, not
single runs, and prefer the CPU figures when other work competes for the cores.

    python bench/capture_bench.py --rows 1000000 --repeat 3
    python bench/capture_bench.py --rows 100000 --profile 25   # plus a cProfile of icetide
    python bench/capture_bench.py --source postgres --rows 100000
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icetide.capture.mysql.reader import BinlogOffset, BinlogReader
from icetide.capture.record import CaptureRecord
from icetide.devservers.mariadb import MariaDBServer

# python-mysql-replication opens its schema connection with pymysql's deprecated "db" key.
warnings.filterwarnings("ignore", "'db' is deprecated", DeprecationWarning)

DB, TABLE = "bench", "accounts"
TABLE_DDL = f"""
CREATE TABLE {DB}.{TABLE} (
  id BIGINT NOT NULL PRIMARY KEY,
  owner VARCHAR(64) NOT NULL,
  balance DECIMAL(12,2) NOT NULL,
  status VARCHAR(16) NOT NULL,
  updated_at DATETIME(6) NOT NULL
) DEFAULT CHARSET=utf8mb4
"""
UPDATE_SQL = (
    f"UPDATE {DB}.{TABLE} SET balance = balance + 1, status = 'changed', "
    "updated_at = updated_at + INTERVAL 1 SECOND"
)
# Room for a million-row transaction; the server's defaults are sized for tests.
SERVER_OPTIONS = {"innodb-buffer-pool-size": "512M", "innodb-log-file-size": "256M"}
LOAD_CHUNK = 200_000


@dataclass(frozen=True)
class Run:
    """One timed read of the workload."""

    rows: int
    """Row events (changed rows) seen."""
    wall: float
    cpu: float


Variant = Callable[[], int]
"""Reads the whole workload once and returns how many row events it saw."""


# --- MySQL / MariaDB ---------------------------------------------------------------------------


def load_rows(server: MariaDBServer, rows: int) -> None:
    """Create the table and fill it, unlogged: only the UPDATE is in the binlog."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute(TABLE_DDL)
        # MariaDB's SEQUENCE engine makes the rows in the server: no client round trips.
        for first in range(1, rows + 1, LOAD_CHUNK):
            last = min(rows, first + LOAD_CHUNK - 1)
            cur.execute(
                f"INSERT INTO {DB}.{TABLE} SELECT seq, CONCAT('owner-', seq), "
                "(seq % 100000) / 100, 'active', "
                "TIMESTAMP'2024-01-01 00:00:00.123456' + INTERVAL seq SECOND "
                f"FROM mysql.seq_{first}_to_{last}"
            )


def update_all(server: MariaDBServer) -> tuple[BinlogOffset, int]:
    """Run the one big UPDATE; returns where it starts in the binlog and its row count."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
        assert row is not None, "the server has no binlog"
        start = BinlogOffset(str(row[0]), int(row[1]))
        changed = cur.execute(UPDATE_SQL)
    return start, int(changed)


def raw_binlog(server: MariaDBServer, start: BinlogOffset) -> Variant:
    """python-mysql-replication alone, with the stream settings BinlogReader uses."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import (
        DeleteRowsEvent,
        TableMapEvent,
        UpdateRowsEvent,
        WriteRowsEvent,
    )

    def read() -> int:
        stream = BinLogStreamReader(
            connection_settings=server.connection_settings(),
            server_id=4242,
            resume_stream=True,
            blocking=False,
            log_file=start.file,
            log_pos=start.pos,
            only_events=[TableMapEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
            only_schemas=[DB],
            only_tables=[TABLE],
            enable_logging=False,
        )
        seen = 0
        try:
            for event in stream:
                if not isinstance(event, TableMapEvent):
                    seen += len(event.rows)
        finally:
            stream.close()
        return seen

    return read


def icetide_binlog(server: MariaDBServer, start: BinlogOffset) -> Variant:
    """icetide's BinlogReader, serialising every record as a transport would."""

    def read() -> int:
        seen = 0
        with BinlogReader(
            server.connection_settings(), [f"{DB}.{TABLE}"], start=start, server_id=4243
        ) as reader:
            for record in reader:
                if isinstance(record, CaptureRecord) and record.kind == "change":
                    record.to_json()
                    seen += 1
        return seen

    return read


@contextlib.contextmanager
def mysql_source(args: argparse.Namespace) -> Iterator[tuple[int, dict[str, Variant]]]:
    """A MariaDB holding the update workload, and the two ways of reading it."""
    with MariaDBServer(options=SERVER_OPTIONS) as server:
        pin(server_pid(server), args.cpu)
        progress(f"loading {args.rows:,} rows")
        started = time.perf_counter()
        load_rows(server, args.rows)
        progress(f"  loaded in {time.perf_counter() - started:.1f}s; updating every row")
        started = time.perf_counter()
        start, changed = update_all(server)
        progress(f"  {changed:,} rows updated in {time.perf_counter() - started:.1f}s")
        yield changed, {"raw": raw_binlog(server, start), "icetide": icetide_binlog(server, start)}


def server_pid(server: MariaDBServer) -> int | None:
    return pid_in(Path(str(server.options["pid-file"])))


# --- PostgreSQL ---------------------------------------------------------------------------

PG_TABLE_DDL = f"""
CREATE TABLE public.{TABLE} (
  id bigint NOT NULL PRIMARY KEY,
  owner varchar(64) NOT NULL,
  balance numeric(12,2) NOT NULL,
  status varchar(16) NOT NULL,
  updated_at timestamp(6) NOT NULL
)
"""
PG_UPDATE_SQL = (
    f"UPDATE public.{TABLE} SET balance = balance + 1, status = 'changed', "
    "updated_at = updated_at + interval '1 second'"
)
PG_SETTINGS = {"shared_buffers": "256MB", "max_wal_size": "4GB"}
PUBLICATION = "bench"
PG_SLOTS = {"raw": "bench_raw", "icetide": "bench_icetide"}
PG_SILENCE = 120.0  # seconds without a message before the raw read gives up


def pg_prepare(server: Any, rows: int) -> int:
    """Load the rows, then publish the table and make one slot per variant before the
    UPDATE, so every read decodes exactly that transaction (no read acknowledges)."""
    server.create_database(DB)
    server.execute(PG_TABLE_DDL, DB)
    server.execute(
        f"INSERT INTO public.{TABLE} SELECT g, 'owner-' || g, (g %% 100000) / 100.0, 'active', "
        "timestamp '2024-01-01 00:00:00.123456' + g * interval '1 second' "
        "FROM generate_series(1, %s) g",
        DB,
        [rows],
    )
    server.execute(f"CREATE PUBLICATION {PUBLICATION} FOR TABLE public.{TABLE}", DB)
    for slot in PG_SLOTS.values():
        server.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", DB, [slot])
    conn = server.connect(DB)
    try:
        with conn.cursor() as cur:
            cur.execute(PG_UPDATE_SQL)
            return int(cur.rowcount)
    finally:
        conn.close()


def raw_pgoutput(server: Any) -> Variant:
    """psycopg2's replication stream alone: every pgoutput message's bytes, not decoded."""
    import select

    import psycopg2.extras

    def slot_free() -> None:
        # The server ends the last read's walsender a moment after its connection closes;
        # until then the slot is active and a new stream is refused (ObjectInUse).
        deadline = time.monotonic() + 30
        check = psycopg2.connect(server.dsn(DB))
        try:
            with check.cursor() as cur:
                while time.monotonic() < deadline:
                    cur.execute(
                        "SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                        (PG_SLOTS["raw"],),
                    )
                    if not cur.fetchone()[0]:
                        return
                    time.sleep(0.05)
        finally:
            check.close()

    def read() -> int:
        slot_free()
        conn = psycopg2.connect(
            server.dsn(DB), connection_factory=psycopg2.extras.LogicalReplicationConnection
        )
        seen = 0
        try:
            cursor = conn.cursor()
            cursor.start_replication(
                slot_name=PG_SLOTS["raw"],
                decode=False,
                options={"proto_version": "1", "publication_names": PUBLICATION},
            )
            while True:
                message = cursor.read_message()
                if message is None:
                    if not select.select([cursor], [], [], PG_SILENCE)[0]:
                        raise SystemExit(f"raw: no message for {PG_SILENCE:.0f}s")
                    continue
                kind = message.payload[0]
                if kind == 0x55:  # U
                    seen += 1
                elif kind == 0x43 and seen:  # the commit of the UPDATE
                    return seen
        finally:
            conn.close()

    return read


def icetide_pgoutput(server: Any) -> Variant:
    """icetide's PgOutputReader, serialising every record as a transport would."""
    from icetide.capture.postgres.reader import PgOutputReader

    def read() -> int:
        seen = 0
        with PgOutputReader(
            server.dsn(DB),
            [f"public.{TABLE}"],
            slot=PG_SLOTS["icetide"],
            publication=PUBLICATION,
        ) as reader:
            for record in reader:
                if isinstance(record, CaptureRecord) and record.kind == "change":
                    record.to_json()
                    seen += 1
        return seen

    return read


@contextlib.contextmanager
def postgres_source(args: argparse.Namespace) -> Iterator[tuple[int, dict[str, Variant]]]:
    """A PostgreSQL holding the update workload, and the two ways of reading it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' servers
    from tests.devservers.postgres import PostgresServer

    with PostgresServer(settings=PG_SETTINGS) as server:
        progress(f"loading {args.rows:,} rows and updating every one")
        started = time.perf_counter()
        changed = pg_prepare(server, args.rows)
        progress(f"  {changed:,} rows updated in {time.perf_counter() - started:.1f}s")
        # WAL senders start later, as children of the postmaster: they inherit its cores.
        pin(pid_in(server.data_dir / "postmaster.pid"), args.cpu)
        yield changed, {"raw": raw_pgoutput(server), "icetide": icetide_pgoutput(server)}


def pid_in(pid_file: Path) -> int | None:
    """The process id a server wrote to ``pid_file`` (its first line)."""
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


# --- measuring -------------------------------------------------------------------------------

SOURCES: dict[str, Callable[[argparse.Namespace], Any]] = {
    "mysql": mysql_source,
    "postgres": postgres_source,
}
"""``--source`` name → context manager yielding ``(expected rows, {variant: read})``; the
first variant is the baseline the others are compared with."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def pin(server: int | None, cpu: int) -> None:
    """Run this process on ``cpu`` only and the server (every thread) on the other cores.

    Call it once the server runs: a child started later would inherit the one core.
    """
    others = os.sched_getaffinity(0) - {cpu}
    if server is not None and others:
        for task in Path(f"/proc/{server}/task").iterdir():
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(task.name), others)
    os.sched_setaffinity(0, {cpu})


def timed(read: Variant) -> Run:
    wall, cpu = time.perf_counter(), time.process_time()
    rows = read()
    return Run(rows, time.perf_counter() - wall, time.process_time() - cpu)


def profile(read: Variant, top: int) -> str:
    """The ``top`` functions by own time of one read, as cProfile prints them."""
    profiler = cProfile.Profile()
    profiler.runcall(read)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", choices=sorted(SOURCES), default="mysql", help="database")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows updated")
    parser.add_argument("--repeat", type=int, default=3, help="reads per variant")
    parser.add_argument(
        "--cpu",
        type=int,
        default=max(os.sched_getaffinity(0)),
        help="core to run the readers on (default: the last one)",
    )
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="print a cProfile top N of icetide"
    )
    args = parser.parse_args(argv)
    with SOURCES[args.source](args) as (expected, variants):
        runs: dict[str, list[Run]] = {name: [] for name in variants}
        for i in range(args.repeat):
            order = list(variants) if i % 2 == 0 else list(reversed(variants))
            for name in order:  # alternate, so warm-up does not favour one side
                run = timed(variants[name])
                if run.rows != expected:
                    raise SystemExit(f"{name} saw {run.rows:,} row events, expected {expected:,}")
                runs[name].append(run)
                progress(
                    f"  run {i + 1} {name:<8} {run.wall:6.2f}s wall {run.cpu:6.2f}s cpu "
                    f"{run.rows / run.wall:9,.0f} row events/s"
                )
        if args.profile:
            progress(profile(variants["icetide"], args.profile))
    print(f"{args.source}: {expected:,} row events per read, core {args.cpu}")
    rate: dict[str, float] = {}
    cpu_rate: dict[str, float] = {}
    for name, done in runs.items():
        wall = statistics.median(r.wall for r in done)
        cpu = statistics.median(r.cpu for r in done)
        rate[name], cpu_rate[name] = expected / wall, expected / cpu
        print(
            f"{name:<8} median {wall:6.2f}s wall {cpu:6.2f}s cpu  "
            f"{rate[name]:9,.0f} row events/s  {cpu / expected * 1e6:6.1f} µs cpu/event"
        )
    base = next(iter(runs))
    for name in list(runs)[1:]:
        print(
            f"ratio {name}/{base}: {rate[name] / rate[base]:.2f} (wall), "
            f"{cpu_rate[name] / cpu_rate[base]:.2f} (cpu)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
