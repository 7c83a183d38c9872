"""Schema changes on a live MariaDB with capture, ledger and merge running throughout:
every supported change converges in three phases with no restart, rows written with a
new column before the code knows it keep their values, and ``verify`` matches."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.devservers.mariadb import MariaDBServer
from icetide.faults import KILLED_EXIT_CODE
from icetide.observe.convergence import table_convergence
from icetide.observe.status import pipeline_status, render_status
from icetide.schema.contract import ledger as c
from icetide.schema.contract import phases as p
from icetide.spark.alter import table_properties
from tests.integration.evolution.running import Running, write_config
from tests.integration.harness import REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
_runs = itertools.count(1)

TABLES = {
    "t_add": "CREATE TABLE {db}.t_add (id INT PRIMARY KEY, name VARCHAR(32))",
    "t_default": "CREATE TABLE {db}.t_default (id INT PRIMARY KEY, v VARCHAR(10))",
    "t_widen": (
        "CREATE TABLE {db}.t_widen (id INT PRIMARY KEY, n INT, price DECIMAL(10,2), "
        "label VARCHAR(32))"
    ),
    "t_drop": "CREATE TABLE {db}.t_drop (id INT PRIMARY KEY, a INT, b VARCHAR(10))",
    "t_rename": "CREATE TABLE {db}.t_rename (id INT PRIMARY KEY, label VARCHAR(20), z INT)",
}
SEED = {
    "t_add": "INSERT INTO {db}.t_add VALUES (1,'a'),(2,'b'),(3,'c')",
    "t_default": "INSERT INTO {db}.t_default VALUES (1,'a'),(2,'b'),(3,'c')",
    "t_widen": "INSERT INTO {db}.t_widen VALUES (1,1,1.25,'x'),(2,2,2.50,'y')",
    "t_drop": "INSERT INTO {db}.t_drop VALUES (1,1,'b1'),(2,2,'b2')",
    "t_rename": "INSERT INTO {db}.t_rename VALUES (1,'l1',1),(2,'l2',2)",
}
CHANGES = [
    # an old-schema event still in flight when the DDL lands: written just before it
    "UPDATE {db}.t_add SET name = 'a2' WHERE id = 1",
    "ALTER TABLE {db}.t_add ADD COLUMN note VARCHAR(20)",
    "INSERT INTO {db}.t_add VALUES (4, 'd', 'n4')",
    "UPDATE {db}.t_add SET note = 'n2' WHERE id = 2",
    "ALTER TABLE {db}.t_default ADD COLUMN flag INT NOT NULL DEFAULT 7",
    "INSERT INTO {db}.t_default VALUES (4, 'd', 3)",
    "UPDATE {db}.t_default SET v = 'b2' WHERE id = 2",
    "ALTER TABLE {db}.t_widen MODIFY n BIGINT",
    "ALTER TABLE {db}.t_widen MODIFY price DECIMAL(12,2)",
    "ALTER TABLE {db}.t_widen MODIFY label VARCHAR(64)",
    "INSERT INTO {db}.t_widen VALUES (3, 1099511627776, 1234567890.12, '" + "w" * 64 + "')",
    "UPDATE {db}.t_widen SET n = 4398046511104 WHERE id = 1",
    "ALTER TABLE {db}.t_drop DROP COLUMN b",
    "INSERT INTO {db}.t_drop VALUES (3, 3)",
    "ALTER TABLE {db}.t_rename RENAME COLUMN label TO title",
    "INSERT INTO {db}.t_rename VALUES (3, 't3', 3)",
    "UPDATE {db}.t_rename SET title = 't1' WHERE id = 1",
]


def _run(server: MariaDBServer, statements: list[str], db: str) -> None:
    with server.connect() as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement.format(db=db))
        conn.commit()


def test_every_supported_change_converges_with_the_pipeline_running(
    tmp_path: Path, warehouse: Path, spark: SparkSession, mariadb: MariaDBServer
) -> None:
    db = f"evo{next(_runs)}"
    _run(mariadb, [f"CREATE DATABASE {db}", *TABLES.values(), *SEED.values()], db)
    source = {
        "name": db,
        "type": "mysql",
        "host": "127.0.0.1",
        "port": mariadb.port,
        "user": mariadb.user,
        "password": mariadb.password or None,
        "server_id": 4800 + next(_runs),
        "heartbeat": "1s",
    }
    config = write_config(tmp_path, warehouse, db, source, {t: f"{db}.{t}" for t in TABLES})
    running = Running(spark, config).start()
    try:
        tables = list(TABLES)
        running.until_verified(tables)
        assert all(running.converged(t, 1) for t in tables)

        _run(mariadb, CHANGES, db)
        for table in tables:
            running.until(lambda t=table: running.converged(t, 2), f"{table} at version 2")
        running.until_verified(tables)

        base = {t: running.spark.table(running.merge_pipeline.refs(t).base.sql) for t in tables}
        notes = {r.id: r.note for r in base["t_add"].collect()}
        assert notes == {1: None, 2: "n2", 3: None, 4: "n4"}
        # The values written before the code knew the column went through _rescued.
        ledger = running.spark.table(running.merge_pipeline.refs("t_add").cdc.sql)
        rescued = [r[c.RESCUED] for r in ledger.where(F.col(c.RESCUED).isNotNull()).collect()]
        assert any('"note":"n4"' in text for text in rescued), rescued
        flags = {r.id: r.flag for r in base["t_default"].collect()}
        assert flags == {1: 7, 2: 7, 3: 7, 4: 3}
        widened = {r.id: (r.n, r.price, r.label) for r in base["t_widen"].collect()}
        assert widened[1][0] == 4398046511104 and widened[3] == (
            1099511627776,
            Decimal("1234567890.12"),
            "w" * 64,
        )
        assert dict(base["t_widen"].dtypes)["n"] == "bigint"
        titles = {r.id: r.title for r in base["t_rename"].collect()}
        assert titles == {1: "t1", 2: "l2", 3: "t3"}
        assert "b" in base["t_drop"].columns  # soft drop: kept, no longer written
        assert running.merge_pipeline.schema("t_drop").version == 2

        # Each phase was timed from the change at the source.
        props = table_properties(spark, running.merge_pipeline.refs("t_add").cdc)
        assert int(props[p.SOURCE_TS]) <= int(props[p.DETECTED]) <= int(props[p.LEDGER_SWITCHED])
        # No dead letters: nothing was refused while the schema changed.
        for table in tables:
            assert spark.table(running.merge_pipeline.refs(table).dlt.sql).count() == 0

        # `icetide status` shows the phase and the timings, checked against the SLA.
        status = pipeline_status(spark, running.config)
        text = render_status(status)
        assert "t_add: schema version 2 converged" in text and "SLA BREACHED" not in text
        strict = running.config.model_copy(
            update={
                "schedule": running.config.schedule.model_copy(
                    update={"convergence_sla": timedelta(0)}
                )
            }
        )
        late = table_convergence(spark, strict, "t_add")
        assert late is not None and late.breached and late.seconds_to_data is not None

        _crash_between_phases_then_resume(running, mariadb, db, config)
    finally:
        running.stop()


def _crash_between_phases_then_resume(
    running: Running, server: MariaDBServer, db: str, config: Path
) -> None:
    """A merge process killed after phase 3 wrote its fill but before it recorded it:
    the next merge does it again, with nothing applied twice."""
    _run(
        server,
        [
            "ALTER TABLE {db}.t_add ADD COLUMN extra INT",
            "INSERT INTO {db}.t_add VALUES (5, 'e', 'n5', 50)",
            "UPDATE {db}.t_add SET extra = 10 WHERE id = 1",
        ],
        db,
    )
    refs = running.merge_pipeline.refs("t_add")

    def acked() -> bool:
        running.merger.merge_table("t_add")
        return running.phases("t_add")["merge"] == 3

    def switched() -> bool:
        return running.phases("t_add")["projection"] == 3

    _drive(running, acked, "merge acknowledges version 3")
    _drive(running, switched, "ledger projects version 3", merge=False)
    child = subprocess.run(
        [sys.executable, "-m", "icetide.cli", "merge", "--once", "-c", str(config)],
        env={**os.environ, "ICETIDE_FAULT": "merge.after_fill", "PYTHONPATH": str(REPO)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert child.returncode == KILLED_EXIT_CODE, child.stdout + child.stderr
    phases = running.phases("t_add")
    assert phases["data"] == 2, phases  # the fill committed, its record did not
    filled = {r.id: r.extra for r in running.spark.table(refs.base.sql).collect()}
    assert filled[5] == 50 and filled[1] == 10, filled

    running.until(lambda: running.converged("t_add", 3), "t_add at version 3 after the crash")
    running.until_verified(["t_add"])
    base = running.spark.table(refs.base.sql)
    assert base.count() == base.select("id").distinct().count() == 5
    assert {r.id: r.extra for r in base.collect()} == {1: 10, 2: None, 3: None, 4: None, 5: 50}


def _drive(running: Running, condition: object, what: str, merge: bool = True) -> None:
    import time

    deadline = time.monotonic() + 240
    while True:
        running.ledger.tick()
        if callable(condition) and condition():
            return
        assert time.monotonic() < deadline, f"timed out: {what}\n" + "\n".join(running.logs[-30:])
        time.sleep(0.5)
