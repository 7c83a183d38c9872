"""Schema changes on a live PostgreSQL with capture, ledger and merge running throughout:
capture turns the changed Relation message into a schema-change record, the ledger acts
on it, and every supported change converges with ``verify`` matching; a rename, which
pgoutput cannot tell from a drop plus an add, is held as ambiguous while the rest flows,
and so is a new column tagged sensitive; once approved (``icetide schema apply
--approve``) both converge, with the values written while they were held filled in."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.evolution.apply import evolution_dir
from icetide.evolution.audit import audit_path, read_audit
from icetide.evolution.classify import candidate_schema
from icetide.evolution.detect import capturing_source
from icetide.evolution.evidence import NO_EVIDENCE
from icetide.evolution.plan import build_plan
from icetide.evolution.policy import Policy
from icetide.evolution.queue import EvolutionQueue
from icetide.evolution.source_schema import read_source_schema
from icetide.schema.model import TableSchema
from tests.devservers.postgres import PostgresServer
from tests.integration.evolution.running import Running, write_config
from tests.integration.harness import REPO

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
    "ALTER TABLE t_default ADD COLUMN flag int NOT NULL DEFAULT 7, "
    "ADD COLUMN made uuid DEFAULT gen_random_uuid()",
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
    "ALTER TABLE t_rename ADD COLUMN ssn varchar(11)",
    "INSERT INTO t_rename VALUES (4, 't4', 4, 's4')",
    "UPDATE t_rename SET title = 't1', ssn = 's1' WHERE id = 1",
]
HELD = ["ambiguous:label>title", "sensitive:ssn"]
FLOWING = ["t_add", "t_default", "t_widen", "t_drop"]


def test_postgres_changes_converge_and_an_ambiguous_rename_is_held(
    tmp_path: Path, warehouse: Path, spark: SparkSession, postgres: PostgresServer
) -> None:
    run = next(_runs)
    db, slot = f"evopg{run}", f"evopg{run}_{os.getpid()}"
    postgres.create_database(db)
    for statement in TABLES:
        postgres.execute(statement, db)
    source = postgres.source_entry(db, slot, heartbeat="1s")
    tables = {t: f"public.{t}" for t in [*FLOWING, "t_rename"]}
    policy = {"t_rename": {"evolution": {"sensitive": ["ssn"]}}}
    config = write_config(tmp_path, warehouse, db, source, tables, policy)
    running = Running(spark, config)
    try:
        running.start()
        running.until_verified(list(tables))

        for statement in CHANGES:
            postgres.execute(statement, db)
        # The rename and the sensitive column are held with their reasons; t_rename keeps
        # version 1 and its events keep the new columns' values in _rescued.
        running.until(
            lambda: all(any(h in line for line in running.logs) for h in HELD), "both held"
        )
        ledger = running.merge_pipeline.refs("t_rename").cdc.sql
        running.until(
            lambda: spark.table(ledger).where('_rescued LIKE \'%"ssn":"s1"%\'').count() == 1,
            "the last event in the ledger",
        )
        v1 = running.merge_pipeline.schema("t_rename")
        assert v1.version == 1
        assert any("ambiguous" in line for line in running.logs if "t_rename" in line)
        assert spark.table(ledger).where('_rescued LIKE \'%"title":"t3"%\'').count() == 1

        # Approved by two `schema apply` processes at once, one change each (the rename
        # as a rename: the id is kept), while the other tables converge: they apply one
        # after the other, as if run in turn, and both changes converge with the values
        # written while they were held.
        codes = _approve_at_once(running, config, [f"{HELD[0]}=rename", HELD[1]])
        assert sorted(codes) == [0, 3]  # the first leaves the other's change held
        versions = {**dict.fromkeys(FLOWING, 2), "t_rename": 3}
        running.until(  # one wait for all: each turn merges every table anyway
            lambda: all(running.converged(t, v) for t, v in versions.items()),
            f"{versions} reached",
        )
        running.until_verified(list(tables))

        base = {t: spark.table(running.merge_pipeline.refs(t).base.sql) for t in tables}
        assert {r.id: r.note for r in base["t_add"].collect()} == {
            1: None,
            2: "n2",
            3: None,
            4: "n4",
        }
        assert {r.id: r.flag for r in base["t_default"].collect()} == {1: 7, 2: 7, 3: 7, 4: 3}
        made = [r.made for r in base["t_default"].collect()]
        assert None not in made and len(set(made)) == 4  # read back from the source by key
        widened = {r.id: (r.n, r.price, r.label) for r in base["t_widen"].collect()}
        assert widened[1][0] == 4398046511104
        assert widened[3] == (1099511627776, Decimal("1234567890.12"), "w" * 64)

        final = running.merge_pipeline.schema("t_rename")
        assert final in _in_turn(running, v1, [f"{HELD[0]}=rename", HELD[1]])
        assert final.find(v1.columns[1].id).name == "title"
        assert "sensitive" in next(c for c in final.columns if c.name == "ssn").tags
        log = audit_path(running.config.resolved_path(running.config.table("t_rename").schema_file))
        assert [r.version for r in read_audit(log)] == [2, 3]
        rows = {r.id: (r.title, r.ssn) for r in base["t_rename"].collect()}
        assert rows == {1: ("t1", "s1"), 2: ("l2", None), 3: ("t3", None), 4: ("t4", "s4")}
    finally:
        running.stop()
        postgres.drop_slot(slot, db)


def _approve_at_once(running: Running, config: Path, approvals: list[str]) -> list[int]:
    """One `icetide schema apply --approve` process per approval, started while the
    table's evolution lock is held here and released once every one waits for it (so
    they truly overlap); their exit codes."""
    table = "t_rename"
    lock = evolution_dir(running.config) / f"{table}.lock"
    command = [sys.executable, "-m", "icetide.cli", "schema", "apply", "-c", str(config)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with EvolutionQueue(evolution_dir(running.config)).lock(table):
        children = [
            subprocess.Popen(
                [*command, "--table", table, "--no-ddl", "--approve", a, "--by", f"p{i}"],
                env=env,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for i, a in enumerate(approvals)
        ]
        deadline = time.monotonic() + 120
        while not all(_holds_open(child.pid, lock) for child in children):
            assert all(child.poll() is None for child in children), [
                child.communicate()[0] for child in children
            ]
            assert time.monotonic() < deadline, "the apply processes never reached the lock"
            time.sleep(0.1)
    outputs = [child.communicate(timeout=300)[0] for child in children]
    codes = [child.returncode for child in children]
    assert all(code in (0, 3) for code in codes), outputs
    return codes


def _holds_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (it is at the lock, waiting or holding)."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if Path(os.readlink(fd)) == path.resolve():
                return True
        except OSError:
            continue
    return False


def _in_turn(running: Running, v1: TableSchema, approvals: list[str]) -> list[TableSchema]:
    """The schema the approvals give applied one after the other, in either order."""
    settings = running.config.table("t_rename")
    source = capturing_source(running.config, settings)
    fresh = read_source_schema(source, settings)
    policy = Policy.from_config(settings.evolution)
    results = []
    for order in (approvals, approvals[::-1]):
        schema = v1
        for approval in order:
            new = candidate_schema(schema, fresh, NO_EVIDENCE, sensitive=policy.sensitive)
            schema = build_plan(schema, new, NO_EVIDENCE, policy).with_approvals([approval]).target
        results.append(schema)
    return results
