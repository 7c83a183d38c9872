"""As of positions recorded on a live MariaDB and a live PostgreSQL: the acceptance test.

The test drives the writes itself (inserts, updates, deletes, a key change, a deleted
key inserted again, a statement changing several rows), so between two transactions
the source is quiet; there it records the table's rows together with the log position
a user would copy: ``SHOW MASTER STATUS`` (``file:offset``, just after the last commit)
and, for PostgreSQL, the LSN just below ``pg_current_wal_insert_lsn()`` (every change of
the last commit is below where the next WAL record goes). Capture, the ledger stream
and the merge run in rounds, so recordings fall before the first merge (an as-of from an
empty table and the ledger), between merges (from a merge snapshot and the events after
it) and after the last merge with later events in the ledger only. ``table_as_of`` at
each recorded position must give the recorded rows, and ``verify``'s checksum of them.
One recording is also asked one event early, which must differ: the recorded positions
are tight (and every recording is followed by a transaction the ledger holds, so one
event late differs too).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.capture.runner import run_capture
from icetide.config import load_config, load_table_schemas
from icetide.devservers.mariadb import MariaDBServer
from icetide.events.position import format_lsn, parse_lsn
from icetide.merge.asof import table_as_of
from icetide.merge.asof_plan import Target, parse_target
from icetide.observe import checksum as ck
from icetide.observe.compare import compare_rows
from icetide.observe.verify import open_source
from icetide.schema.contract import ledger as c
from icetide.sources.quoting import mysql_quote
from tests.devservers.postgres import PostgresServer
from tests.integration.evolution.running import write_config
from tests.integration.harness import Pipeline, assert_matches

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
_runs = itertools.count(1)

TABLE = "items"
DDL = {
    "mysql": "CREATE TABLE {t} (id INT PRIMARY KEY, name VARCHAR(20), qty INT, price DECIMAL(8,2))",
    "postgres": "CREATE TABLE {t} (id int PRIMARY KEY, name varchar(20), qty int, "
    "price numeric(8,2))",
}

RECORD, MERGE, STREAM = "record", "merge", "stream"
SCRIPT: list[str | tuple[str, ...]] = [
    # Each tuple is one transaction on the table ``{t}``; the words are what the test
    # does between them.
    ("INSERT INTO {t} VALUES (1, 'a', 1, 1.50), (2, 'b', 2, 2.50), (3, 'c', 3, 3.50)",),
    ("INSERT INTO {t} VALUES (4, 'd', 4, 4.50)", "UPDATE {t} SET qty = 10 WHERE id = 1"),
    RECORD,  # before any merge: an empty table and the ledger
    ("UPDATE {t} SET id = 20 WHERE id = 2",),  # a key change
    ("DELETE FROM {t} WHERE id = 3",),
    ("UPDATE {t} SET name = 'dd', price = 4.75 WHERE id = 4",),
    RECORD,  # before any merge, after a key change and a delete
    ("INSERT INTO {t} VALUES (3, 'c again', 30, 3.25)",),  # the deleted key again
    MERGE,
    ("UPDATE {t} SET qty = qty + 1",),  # one statement, several rows
    RECORD,  # between merges: the first merge's snapshot and the events after it
    ("DELETE FROM {t} WHERE id = 20", "INSERT INTO {t} VALUES (5, 'e', 5, 5.50)"),
    MERGE,
    ("UPDATE {t} SET id = 6 WHERE id = 5", "UPDATE {t} SET qty = 0 WHERE id = 1"),
    RECORD,  # after the last merge; the events after it are in the ledger only
    ("DELETE FROM {t} WHERE id = 1", "UPDATE {t} SET price = 9.99 WHERE id = 4"),
    STREAM,
]
SHARP = 2
"""The recording also asked one event early (the one between merges)."""


@dataclass(frozen=True)
class Recording:
    """The source table at one log position, in the form ``icetide asof --at`` takes."""

    at: str
    rows: dict[tuple[Any, ...], dict[str, Any]]
    checksum: tuple[int, int]
    """``verify``'s (row count, sum of row hashes)."""


@contextmanager
def live_source(
    engine: str, mariadb: MariaDBServer, postgres: PostgresServer
) -> Iterator[tuple[dict[str, Any], str]]:
    """A fresh database holding the empty table, as a ``sources:`` entry, and the
    table's source name; PostgreSQL's slot is dropped after."""
    run = next(_runs)
    db = f"asof{run}"
    if engine == "mysql":
        with mariadb.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {mysql_quote(db)}")
            cur.execute(DDL[engine].format(t=f"{mysql_quote(db)}.{TABLE}"))
        yield mariadb.source_entry(db, server_id=6100 + os.getpid() % 1000 + run), f"{db}.{TABLE}"
        return
    slot = f"{db}_{os.getpid()}"
    postgres.create_database(db)
    postgres.execute(DDL[engine].format(t=TABLE), db)
    entry = postgres.source_entry(db, slot)
    try:
        yield entry, f"public.{TABLE}"
    finally:
        postgres.drop_slot(slot, db)


def record(pipe: Pipeline) -> Recording:
    """The table's rows, their checksum and the log position, read while no one writes."""
    source = pipe.config.sources[0]
    schema = pipe.schemas[TABLE]
    conn = open_source(source)
    try:
        with conn.snapshot(), conn.conn.cursor() as cur:
            if source.type == "mysql":
                cur.execute("SHOW MASTER STATUS")
                file, offset = cur.fetchall()[0][:2]
                at = f"{file}:{offset}"
            else:
                cur.execute("SELECT pg_current_wal_insert_lsn()::text")
                at = format_lsn(parse_lsn(cur.fetchall()[0][0]) - 1)
            quoted = conn.table_sql(pipe.config.table(TABLE))
            cur.execute(ck.checksum_sql(conn.dialect, quoted, schema.columns))
            count, total = cur.fetchall()[0]
            names = [x.name for x in schema.columns]
            cur.execute(f"SELECT {', '.join(names)} FROM {quoted}")
            rows = {(r[0],): dict(zip(names, r, strict=True)) for r in cur.fetchall()}
    finally:
        conn.close()
    return Recording(at, rows, (int(count), int(total or 0)))


def write(pipe: Pipeline, statements: tuple[str, ...]) -> None:
    """One transaction of ``statements`` on the source."""
    conn = open_source(pipe.config.sources[0])
    try:
        if pipe.config.sources[0].type == "postgres":
            conn.conn.set_session(readonly=False)
        table = conn.table_sql(pipe.config.table(TABLE))
        with conn.conn.cursor() as cur:
            if pipe.config.sources[0].type == "mysql":
                cur.execute("START TRANSACTION")
            for statement in statements:
                cur.execute(statement.format(t=table))
        conn.conn.commit()
    finally:
        conn.close()


def as_of(pipe: Pipeline, spark: SparkSession, target: Target) -> tuple[list[dict[str, Any]], str]:
    """The table's rows as of ``target``, and what the as-of said it did."""
    asof = table_as_of(spark, pipe.pipeline, TABLE, target)
    try:
        return [r.asDict() for r in asof.frame.collect()], asof.describe()
    finally:
        asof.release()


@pytest.mark.parametrize("engine", ["mysql", "postgres"])
def test_as_of_each_recorded_live_position_is_the_table_recorded_there(
    engine: str,
    tmp_path: Path,
    warehouse: Path,
    spark: SparkSession,
    mariadb: MariaDBServer,
    postgres: PostgresServer,
) -> None:
    with live_source(engine, mariadb, postgres) as (entry, source_table):
        namespace = f"asof_live_{engine}{next(_runs)}"
        path = write_config(tmp_path, warehouse, namespace, entry, {TABLE: source_table})
        config = load_config(path)
        pipe = Pipeline(tmp_path, path, config, load_table_schemas(config), spark)
        source = config.sources[0]
        run_capture(config, source, follow=False, from_now=True)

        def catch_up() -> None:
            run_capture(config, source, follow=False)
            pipe.stream()

        recorded: list[Recording] = []
        for step in SCRIPT:
            if step == RECORD:
                recorded.append(record(pipe))
            elif step == MERGE:
                catch_up()
                pipe.merge()
            elif step == STREAM:
                catch_up()
            else:
                assert isinstance(step, tuple)
                write(pipe, step)

        schema = pipe.schemas[TABLE]
        checked, sums, starts = [], [], []
        for want in recorded:
            asof = table_as_of(spark, pipe.pipeline, TABLE, parse_target(want.at))
            try:
                what = f"{TABLE} at {want.at} ({asof.describe()})"
                frame = asof.frame.cache()
                compared = compare_rows(schema, want.rows, [r.asDict() for r in frame.collect()])
                compared.table = what
                checked.append(compared)
                sums.append((what, ck.spark_checksum(frame, schema.columns), want.checksum))
                frame.unpersist()
                starts.append(asof.plan.start is not None)
            finally:
                asof.release()
        assert_matches(checked)
        assert all(got == want for _, got, want in sums), sums  # verify's checksums agree
        # Two before the first merge (from an empty table), two from merge snapshots.
        assert starts == [False, False, True, True], starts

        # One event early (just below the last change before a recording) is not the
        # recorded table: the recordings are tight. One event late is not either: every
        # recording is followed by a transaction the ledger holds.
        sharp = recorded[SHARP]
        target = parse_target(sharp.at).position
        last = (
            spark.table(pipe.refs(TABLE).cdc.sql)
            .where(F.col(c.POSITION) <= F.lit(target).cast(c.POSITION_SQL))
            .agg(F.max(c.POSITION))
            .first()
        )
        assert last is not None and last[0] is not None, sharp.at
        early = Decimal(last[0]) - 1
        rows, said = as_of(pipe, spark, Target("position", str(early), early))
        assert not compare_rows(schema, sharp.rows, rows).matches, said
