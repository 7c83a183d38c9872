"""Several DDL statements of one table in one ledger micro-batch, rows written between
them: each statement starts a schema version of its own, so every row is read by the
names the source had when it was written (a swap through a temporary name, a column
added and then renamed), and the mirror equals the source."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.devservers.mariadb import MariaDBServer
from icetide.evolution.detect import Detector
from icetide.lake.alter import table_properties
from icetide.ledger.signals import ChangeSignal
from icetide.schema.contract import phases as p
from tests.integration.evolution.running import Running, write_config
from tests.integration.test_cli_process import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
_runs = itertools.count(1)

TABLES = {
    "t_swap": "CREATE TABLE {db}.t_swap (id INT PRIMARY KEY, p INT, q VARCHAR(10))",
    "t_added": "CREATE TABLE {db}.t_added (id INT PRIMARY KEY, v INT)",
    "t_prec": "CREATE TABLE {db}.t_prec (id INT PRIMARY KEY, dt DATETIME(3))",
}
SEED = [
    "INSERT INTO {db}.t_swap VALUES (1, 10, 'q1')",
    "INSERT INTO {db}.t_added VALUES (1, 10)",
    "INSERT INTO {db}.t_prec VALUES (1, '2026-01-02 03:04:05.123')",
]
# While the ledger is paused: its next micro-batch holds all of these.
CHANGES = [
    "ALTER TABLE {db}.t_swap RENAME COLUMN p TO tmp",
    "INSERT INTO {db}.t_swap (id, tmp, q) VALUES (2, 20, 'q2')",
    "ALTER TABLE {db}.t_swap RENAME COLUMN q TO p",
    "INSERT INTO {db}.t_swap (id, tmp, p) VALUES (3, 30, 'q3')",
    "ALTER TABLE {db}.t_swap RENAME COLUMN tmp TO q",
    "INSERT INTO {db}.t_swap (id, q, p) VALUES (4, 40, 'q4')",
    "UPDATE {db}.t_swap SET q = 11 WHERE id = 1",
    "ALTER TABLE {db}.t_added ADD COLUMN c INT",
    "INSERT INTO {db}.t_added VALUES (2, 20, 200)",
    "ALTER TABLE {db}.t_added RENAME COLUMN c TO d",
    "INSERT INTO {db}.t_added VALUES (3, 30, 300)",
    # The second statement's version is the catalog's; the first one's (microseconds
    # from here on) comes from the statement alone.
    "ALTER TABLE {db}.t_prec MODIFY dt DATETIME(6)",
    "INSERT INTO {db}.t_prec VALUES (2, '2026-01-02 03:04:05.123456')",
    "ALTER TABLE {db}.t_prec ADD COLUMN z INT",
    "INSERT INTO {db}.t_prec VALUES (3, '2026-01-02 03:04:05.654321', 3)",
    "INSERT INTO {db}.t_added (id, v) VALUES (9, 999999)",  # the last: seen landed
]


def _run(server: MariaDBServer, statements: list[str], db: str) -> None:
    with server.connect() as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement.format(db=db))
        conn.commit()


def _converged(running: Running, table: str) -> bool:
    """Every stage at the newest version, past the first."""
    phases = running.phases(table)
    return len(set(phases.values())) == 1 and (phases["file"] or 0) > 1


def test_each_statement_of_a_batch_starts_its_own_version(
    tmp_path: Path, warehouse: Path, spark: SparkSession, mariadb: MariaDBServer
) -> None:
    db = f"stmts{next(_runs)}"
    _run(mariadb, [f"CREATE DATABASE {db}", *TABLES.values(), *SEED], db)
    source = mariadb.source_entry(db, server_id=4700 + next(_runs), heartbeat="1s")
    config = write_config(tmp_path, warehouse, db, source, {t: f"{db}.{t}" for t in TABLES})
    running = Running(spark, config).start()
    try:
        running.until_verified(list(TABLES))
        running.pause_ledger()
        _run(mariadb, CHANGES, db)
        wait_until(lambda: running.landed("999999"), "the last change landed")
        running.resume_ledger()
        running.until(lambda: all(_converged(running, t) for t in TABLES), "the new versions")
        running.until_verified(list(TABLES))

        pipeline = running.merge_pipeline
        swap = pipeline.schemas.history("t_swap")
        # Three statements, three versions: tmp and q; tmp and p; q and p (ids swapped).
        assert [[c.name for c in v.columns] for v in swap.versions] == [
            ["id", "p", "q"],
            ["id", "tmp", "q"],
            ["id", "tmp", "p"],
            ["id", "q", "p"],
        ]
        first, last = swap.versions[0], swap.versions[-1]
        assert last.by_name["q"].id == first.by_name["p"].id
        assert last.by_name["p"].id == first.by_name["q"].id
        positions = p.read_version_positions(
            table_properties(spark, pipeline.refs("t_swap").cdc).get(p.VERSION_POSITIONS)
        )
        assert sorted(positions) == [2, 3, 4] and positions[2] < positions[3] < positions[4]
        rows = {r.id: (r.q, r.p) for r in spark.table(pipeline.refs("t_swap").base.sql).collect()}
        assert rows == {1: (11, "q1"), 2: (20, "q2"), 3: (30, "q3"), 4: (40, "q4")}
        added = {r.id: r.d for r in spark.table(pipeline.refs("t_added").base.sql).collect()}
        assert added == {1: None, 2: 200, 3: 300, 9: None}
        assert [[c.name for c in v.columns] for v in pipeline.schemas.history("t_added").versions][
            1:
        ] == [["id", "v", "c"], ["id", "v", "d"]]
        micros = {
            r.id: r.dt.microsecond for r in spark.table(pipeline.refs("t_prec").base.sql).collect()
        }
        assert micros == {1: 123000, 2: 123456, 3: 654321}

        # The batch read again (a crash before the ledger saved its position): its
        # statements are in the schema already, and replayed on the newest shape they
        # would rename again.
        statements = [s.format(db=db) for s in CHANGES if s.startswith("ALTER TABLE {db}.t_swap")]
        again = [
            ChangeSignal("t_swap", "ddl", ddl=ddl, position=positions[version])
            for version, ddl in zip((2, 3, 4), statements, strict=True)
        ]
        assert Detector(spark, running.ledger_pipeline).detect("t_swap", again) is None
        assert len(running.ledger_pipeline.schemas.history("t_swap").versions) == 4
    finally:
        running.stop()
