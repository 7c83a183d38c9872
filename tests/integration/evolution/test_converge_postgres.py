"""Schema changes on a live PostgreSQL with capture, ledger and merge running throughout:
capture turns the changed Relation message into a schema-change record, the ledger acts
on it, and every supported change converges with ``verify`` matching; a rename, which
pgoutput cannot tell from a drop plus an add, is held as ambiguous while the rest flows."""

from __future__ import annotations

import itertools
import os
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.devservers.postgres import PostgresServer
from tests.integration.evolution.running import Running, write_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
_runs = itertools.count(1)

TABLES = [
    "CREATE TABLE t_add (id int PRIMARY KEY, name varchar(32))",
    "CREATE TABLE t_default (id int PRIMARY KEY, v varchar(10))",
    "CREATE TABLE t_widen (id int PRIMARY KEY, n int, price numeric(10,2), label varchar(32))",
    "CREATE TABLE t_drop (id int PRIMARY KEY, a int, b varchar(10))",
    "CREATE TABLE t_rename (id int PRIMARY KEY, label varchar(20), z int)",
    "INSERT INTO t_add VALUES (1,'a'),(2,'b'),(3,'c')",
    "INSERT INTO t_default VALUES (1,'a'),(2,'b'),(3,'c')",
    "INSERT INTO t_widen VALUES (1,1,1.25,'x'),(2,2,2.50,'y')",
    "INSERT INTO t_drop VALUES (1,1,'b1'),(2,2,'b2')",
    "INSERT INTO t_rename VALUES (1,'l1',1),(2,'l2',2)",
]
CHANGES = [
    "UPDATE t_add SET name = 'a2' WHERE id = 1",
    "ALTER TABLE t_add ADD COLUMN note varchar(20)",
    "INSERT INTO t_add VALUES (4, 'd', 'n4')",
    "UPDATE t_add SET note = 'n2' WHERE id = 2",
    "ALTER TABLE t_default ADD COLUMN flag int NOT NULL DEFAULT 7",
    "INSERT INTO t_default VALUES (4, 'd', 3)",
    "UPDATE t_default SET v = 'b2' WHERE id = 2",
    "ALTER TABLE t_widen ALTER COLUMN n TYPE bigint, ALTER COLUMN price TYPE numeric(12,2), "
    "ALTER COLUMN label TYPE varchar(64)",
    "INSERT INTO t_widen VALUES (3, 1099511627776, 1234567890.12, '" + "w" * 64 + "')",
    "UPDATE t_widen SET n = 4398046511104 WHERE id = 1",
    "ALTER TABLE t_drop DROP COLUMN b",
    "INSERT INTO t_drop VALUES (3, 3)",
    "ALTER TABLE t_rename RENAME COLUMN label TO title",
    "INSERT INTO t_rename VALUES (3, 't3', 3)",
]
FLOWING = ["t_add", "t_default", "t_widen", "t_drop"]


def test_postgres_changes_converge_and_an_ambiguous_rename_is_held(
    tmp_path: Path, warehouse: Path, spark: SparkSession, postgres: PostgresServer
) -> None:
    run = next(_runs)
    db, slot = f"evopg{run}", f"evopg{run}_{os.getpid()}"
    postgres.create_database(db)
    for statement in TABLES:
        postgres.execute(statement, db)
    source = {
        "name": db,
        "type": "postgres",
        "host": "127.0.0.1",
        "port": postgres.port,
        "user": "postgres",
        "database": db,
        "slot": slot,
        "publication": slot,
        "heartbeat": "1s",
    }
    tables = {t: f"public.{t}" for t in [*FLOWING, "t_rename"]}
    running = Running(spark, write_config(tmp_path, warehouse, db, source, tables))
    try:
        running.start()
        running.until_verified(list(tables))

        for statement in CHANGES:
            postgres.execute(statement, db)
        for table in FLOWING:
            running.until(lambda t=table: running.converged(t, 2), f"{table} at version 2")
        running.until_verified(FLOWING)

        base = {t: spark.table(running.merge_pipeline.refs(t).base.sql) for t in tables}
        assert {r.id: r.note for r in base["t_add"].collect()} == {
            1: None,
            2: "n2",
            3: None,
            4: "n4",
        }
        assert {r.id: r.flag for r in base["t_default"].collect()} == {1: 7, 2: 7, 3: 7, 4: 3}
        widened = {r.id: (r.n, r.price, r.label) for r in base["t_widen"].collect()}
        assert widened[1][0] == 4398046511104
        assert widened[3] == (1099511627776, Decimal("1234567890.12"), "w" * 64)
        # The rename is held with its reason; the table keeps version 1 and its events
        # keep the new column's values in _rescued.
        assert running.merge_pipeline.schema("t_rename").version == 1
        assert any("t_rename" in line and "held" in line for line in running.logs)
        assert any("ambiguous" in line for line in running.logs if "t_rename" in line)
        cdc = spark.table(running.merge_pipeline.refs("t_rename").cdc.sql)
        assert cdc.where('_rescued LIKE \'%"title":"t3"%\'').count() == 1
    finally:
        running.stop()
        postgres.drop_slot(slot, db)
