"""Schema changes on a live MariaDB with capture, ledger and merge running throughout:
every supported change converges in three phases with no restart, rows written with a
new column before the code knows it keep their values, and ``verify`` matches."""

from __future__ import annotations

import hashlib
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.cli.main import main
from icetide.devservers.mariadb import MariaDBServer
from icetide.faults import KILLED_EXIT_CODE
from icetide.lake.alter import table_properties
from icetide.lake.tables import TableRefs, current_snapshot_id, iceberg_table
from icetide.ledger.phases import generations
from icetide.merge.stage import MergeStage
from icetide.observe.convergence import table_convergence
from icetide.observe.status import pipeline_status, render_status
from icetide.schema.contract import ledger as c
from icetide.schema.contract import phases as p
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
    "t_sink": "CREATE TABLE {db}.t_sink (id INT PRIMARY KEY, email VARCHAR(40), created_ms BIGINT)",
    "t_narrow": "CREATE TABLE {db}.t_narrow (id INT PRIMARY KEY, n BIGINT, s VARCHAR(10))",
    "t_v3": "CREATE TABLE {db}.t_v3 (id INT PRIMARY KEY, v VARCHAR(10))",
    "t_key": "CREATE TABLE {db}.t_key (id INT, region CHAR(2) NOT NULL, v INT, PRIMARY KEY (id))",
}
# Iceberg names and conversions: bootstrap, ledger and verify apply the same ones.
SINKS = {
    "t_sink": {
        "columns": {
            "email": {"name": "email_hash", "convert": "sha256"},
            "created_ms": {"name": "created_at", "convert": "epoch_millis_to_timestamp"},
        }
    }
}
CHANGING = ["t_add", "t_default", "t_widen", "t_drop", "t_rename", "t_v3"]
CHANGED_TO = {"t_widen": 3}
"""The version each changing table reaches when not 2: a version per DDL statement (of
t_widen's three, ``MODIFY label VARCHAR(64)`` keeps the icetide type: no version)."""
SEED = {
    "t_add": "INSERT INTO {db}.t_add VALUES (1,'a'),(2,'b'),(3,'c')",
    "t_default": "INSERT INTO {db}.t_default VALUES (1,'a'),(2,'b'),(3,'c')",
    "t_widen": "INSERT INTO {db}.t_widen VALUES (1,1,1.25,'x'),(2,2,2.50,'y')",
    "t_drop": "INSERT INTO {db}.t_drop VALUES (1,1,'b1'),(2,2,'b2')",
    "t_rename": "INSERT INTO {db}.t_rename VALUES (1,'l1',1),(2,'l2',2)",
    # 99: an epoch beyond the timestamp range, which the bootstrap dead-letters
    "t_sink": "INSERT INTO {db}.t_sink VALUES (1,'a@x',1700000000123),(2,'b@x',0),"
    "(99,'bad',99999999999999999)",
    "t_narrow": "INSERT INTO {db}.t_narrow VALUES "
    + ",".join(f"({i},{i * 10},'s{i}')" for i in range(1, 13)),
    "t_v3": "INSERT INTO {db}.t_v3 VALUES (1,'a'),(2,'b'),(3,'c')",
    "t_key": "INSERT INTO {db}.t_key VALUES (1,'us',1),(2,'us',2),(3,'eu',3)",
}
# Three re-snapshot chunks of t_narrow (ids 1-4, 5-8, 9-): one per merge round.
SETTINGS: dict[str, dict[str, Any]] = {
    "t_narrow": {"merge": {"resnapshot_chunk_rows": 4}},
    # A format-v3 base: the constant default becomes Iceberg's initial-default.
    "t_v3": {"format_version": 3},
    # Its key is read from the catalog, so the new key is seen when the DDL lands.
    "t_key": {"primary_key": None},
}
CHANGES = [
    # an old-schema event still in flight when the DDL lands: written just before it
    "UPDATE {db}.t_add SET name = 'a2' WHERE id = 1",
    "ALTER TABLE {db}.t_add ADD COLUMN note VARCHAR(20)",
    "INSERT INTO {db}.t_add VALUES (4, 'd', 'n4')",
    "UPDATE {db}.t_add SET note = 'n2' WHERE id = 2",
    # a constant default, and a computed one: each old row holds its own value
    "ALTER TABLE {db}.t_default ADD COLUMN flag INT NOT NULL DEFAULT 7, "
    "ADD COLUMN made CHAR(36) DEFAULT UUID()",
    "INSERT INTO {db}.t_default (id, v, flag) VALUES (4, 'd', 3)",
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
    "DELETE FROM {db}.t_sink WHERE id = 99",
    "INSERT INTO {db}.t_sink VALUES (3, 'c@x', 1700000000999)",
    "UPDATE {db}.t_sink SET email = 'a2@x' WHERE id = 1",
    "ALTER TABLE {db}.t_v3 ADD COLUMN flag INT NOT NULL DEFAULT 7",
    "INSERT INTO {db}.t_v3 (id, v) VALUES (4, 'd')",
    # held until approved (at the end of the test), then re-snapshotted
    "ALTER TABLE {db}.t_narrow MODIFY n INT",
    "ALTER TABLE {db}.t_key DROP PRIMARY KEY, ADD PRIMARY KEY (id, region)",
]


def _run(server: MariaDBServer, statements: list[str], db: str) -> None:
    with server.connect() as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement.format(db=db))
        conn.commit()


@pytest.mark.long
def test_every_supported_change_converges_with_the_pipeline_running(
    tmp_path: Path, warehouse: Path, spark: SparkSession, mariadb: MariaDBServer
) -> None:
    db = f"evo{next(_runs)}"
    _run(mariadb, [f"CREATE DATABASE {db}", *TABLES.values(), *SEED.values()], db)
    source = mariadb.source_entry(db, server_id=4800 + next(_runs), heartbeat="1s")
    sources = {t: f"{db}.{t}" for t in TABLES}
    config = write_config(tmp_path, warehouse, db, source, sources, SETTINGS, sinks=SINKS)
    running = Running(spark, config).start()
    try:
        tables = list(TABLES)
        running.until_verified(CHANGING)
        assert all(running.converged(t, 1) for t in tables)
        # The bootstrap copied t_sink converted; the row it could not convert is a dead
        # letter, and verify (converting the source the same way) sees it missing.
        sink_refs = running.merge_pipeline.refs("t_sink")
        dead = spark.table(sink_refs.dead_letters.sql).collect()
        assert [(d.reason, d.message_id.endswith("/99")) for d in dead] == [
            ("conversion_failed", True)
        ], dead
        (verdict,) = running.verify(["t_sink"])
        assert not verdict.matches and (verdict.missing, verdict.different) == (1, 0), verdict

        _run(mariadb, CHANGES, db)
        # The merge is held until the ledger has stored the row written with the new
        # column, so that row is stored before the merge acknowledges the column (phase
        # 2): its value must then be kept in _rescued (asserted below). Without the hold
        # the order is a race the merge often wins, and the row is projected directly.
        add_ledger = running.spark.table(running.merge_pipeline.refs("t_add").cdc.sql)
        _drive(
            running,
            lambda: add_ledger.where(F.col(f"{c.AFTER}.id") == 4).count() > 0,
            "t_add's row 4 in the ledger",
        )
        # One wait for them all (each turn merges every table anyway): a wait per table
        # took a turn at least per table even when it had converged already.
        running.until(
            lambda: all(running.converged(t, CHANGED_TO.get(t, 2)) for t in CHANGING),
            f"{CHANGING} at their new versions",
        )
        running.until_verified(tables)
        hashed = {r.id: r.email_hash for r in spark.table(sink_refs.base.sql).collect()}
        emails = {1: "a2@x", 2: "b@x", 3: "c@x"}
        assert hashed == {i: hashlib.sha256(e.encode()).hexdigest() for i, e in emails.items()}

        base = {t: running.spark.table(running.merge_pipeline.refs(t).base.sql) for t in tables}
        notes = {r.id: r.note for r in base["t_add"].collect()}
        assert notes == {1: None, 2: "n2", 3: None, 4: "n4"}
        # The values written before the code knew the column went through _rescued.
        ledger = running.spark.table(running.merge_pipeline.refs("t_add").cdc.sql)
        rescued = [r[c.RESCUED] for r in ledger.where(F.col(c.RESCUED).isNotNull()).collect()]
        assert any('"note":"n4"' in text for text in rescued), rescued
        flags = {r.id: r.flag for r in base["t_default"].collect()}
        assert flags == {1: 7, 2: 7, 3: 7, 4: 3}
        made = [r.made for r in base["t_default"].collect()]
        assert None not in made and len(set(made)) == 4  # read back by key (verify too)
        widened = {r.id: (r.n, r.price, r.label) for r in base["t_widen"].collect()}
        assert widened[1][0] == 4398046511104 and widened[3] == (
            1099511627776,
            Decimal("1234567890.12"),
            "w" * 64,
        )
        assert dict(base["t_widen"].dtypes)["n"] == "bigint"
        # v3: the old rows read flag's initial-default and were not rewritten for it:
        # each is still read from the data file the bootstrap wrote.
        assert {r.id: r.flag for r in base["t_v3"].collect()} == {1: 7, 2: 7, 3: 7, 4: 7}
        v3 = running.merge_pipeline.refs("t_v3").base
        field = iceberg_table(spark, v3).schema().findField("flag")
        assert (field.initialDefault(), field.writeDefault()) == (7, 7)
        copied = spark.sql(
            f"SELECT e.data_file.file_path AS f FROM {v3.sql}.entries e "
            f"JOIN {v3.sql}.snapshots s ON e.snapshot_id = s.snapshot_id "
            "WHERE s.summary['icetide.bootstrap.chunk'] IS NOT NULL"
        ).collect()
        read_from = {r.id: r._file for r in base["t_v3"].select("id", "_file").collect()}
        assert {read_from[i] for i in (1, 2, 3)} <= {r.f for r in copied}, read_from
        titles = {r.id: r.title for r in base["t_rename"].collect()}
        assert titles == {1: "t1", 2: "l2", 3: "t3"}
        assert "b" in base["t_drop"].columns  # soft drop: kept, no longer written
        assert running.merge_pipeline.schema("t_drop").version == 2

        # Each phase was timed from the change at the source.
        props = table_properties(spark, running.merge_pipeline.refs("t_add").cdc)
        assert int(props[p.SOURCE_TS]) <= int(props[p.DETECTED]) <= int(props[p.LEDGER_SWITCHED])
        # No dead letters: nothing was refused while the schema changed.
        for table in CHANGING:
            assert spark.table(running.merge_pipeline.refs(table).dead_letters.sql).count() == 0

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
        _narrowing_approved_then_resnapshot(running, lambda s: _run(mariadb, s, db), config)
    finally:
        running.stop()


def _crash_between_phases_then_resume(
    running: Running, server: MariaDBServer, db: str, config: Path
) -> None:
    """The change lands inside one micro-batch: rows written before and after the ADD
    COLUMN reach the ledger in one batch, split nothing and duplicate nothing. Then a
    merge process killed after phase 3 wrote its fill but before it recorded it: the
    next merge does it again, with nothing applied twice."""
    refs = running.merge_pipeline.refs("t_add")
    running.pause_ledger()
    since = current_snapshot_id(running.spark, refs.cdc)
    _run(
        server,
        [
            "UPDATE {db}.t_add SET name = 'c3' WHERE id = 3",  # before the DDL
            "ALTER TABLE {db}.t_add ADD COLUMN extra INT",
            "INSERT INTO {db}.t_add VALUES (5, 'e', 'n5', 50)",
            "UPDATE {db}.t_add SET extra = 10, name = 'last' WHERE id = 1",
        ],
        db,
    )
    deadline = time.monotonic() + 120
    while not running.landed('"last"'):
        assert time.monotonic() < deadline, "capture did not land the batch"
        time.sleep(0.2)
    running.resume_ledger()

    def acked() -> bool:
        running.merger.merge_table("t_add")
        return running.phases("t_add")["merge"] == 3

    def switched() -> bool:
        return running.phases("t_add")["projection"] == 3

    _drive(running, acked, "merge acknowledges version 3")
    _drive(running, switched, "ledger projects version 3")
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
    assert {r.id: r.name for r in base.collect()} == {1: "last", 2: "b", 3: "c3", 4: "d", 5: "e"}
    # One micro-batch held the rows on both sides of the DDL: one ledger append, each
    # event once.
    appends = running.spark.sql(
        f"SELECT summary['added-records'] AS n FROM {refs.cdc.sql}.snapshots "
        f"WHERE operation = 'append' AND committed_at > "
        f"(SELECT committed_at FROM {refs.cdc.sql}.snapshots WHERE snapshot_id = {since})"
    ).collect()
    assert [int(r.n) for r in appends] == [3], appends


def _drive(running: Running, condition: object, what: str) -> None:
    """Tick the ledger's schema phases until ``condition`` holds. No merge runs here, so
    the base tables stay where they are meanwhile (the merge is held)."""
    deadline = time.monotonic() + 240
    while True:
        started = time.monotonic()
        running.ledger.tick()
        if callable(condition) and condition():
            return
        assert time.monotonic() < deadline, f"timed out: {what}\n" + "\n".join(running.logs[-30:])
        # Capture and the ledger stream go on in their own threads: leave them at least as
        # much time as the check took (a merge and a verify are Spark jobs).
        time.sleep(max(0.1, time.monotonic() - started))


def _narrowing_approved_then_resnapshot(
    running: Running, write: Callable[[list[str]], None], config: Path
) -> None:
    """A narrowing is held; once approved, the merge re-snapshots t_narrow chunk by
    chunk while capture and the ledger keep running, writes go on to t_narrow and t_add
    between the chunks, and t_add's merge goes on between them too. Each chunk is its
    own commit and every round starts from what the tables and the state file say (as a
    merge restarted after a kill between chunks would), so nothing is copied twice."""
    table = "t_narrow"
    refs = running.merge_pipeline.refs(table)
    # Its narrowing landed with the other changes: held, the table still at version 1.
    # t_key's new primary key (id, region) is held with its reason too.
    moved = "key_change: the primary key changes from ['id'] to ['id', 'region']"
    running.until(
        lambda: all(any(held in line for line in running.logs) for held in ("narrow:n", moved)),
        "narrow:n and key_change held",
    )
    assert running.converged(table, 1) and running.converged("t_key", 1)
    # Events of both tables in their ledgers, then every one of them by message id: the
    # ledger is never purged.
    write(
        [
            "UPDATE {db}.t_narrow SET s = 'pre' WHERE id = 1",
            "UPDATE {db}.t_key SET v = 7 WHERE id = 3",
        ]
    )

    def ledgered(name: str) -> bool:
        return running.spark.table(running.merge_pipeline.refs(name).cdc.sql).count() > 0

    _drive(running, lambda: ledgered(table) and ledgered("t_key"), "events in both ledgers")
    before = {
        name: {
            r[0]
            for r in running.spark.table(running.merge_pipeline.refs(name).cdc.sql)
            .select("_message_id")
            .collect()
        }
        for name in (table, "t_key")
    }
    assert all(before.values())
    for name, change in ((table, "narrow:n"), ("t_key", "key_change")):
        approve = ["schema", "apply", "-c", str(config), "--table", name, "--no-ddl"]
        assert main([*approve, "--approve", change, "--by", "ana"]) == 0

    # The ledger recreates its tables in the new layout at its next batch boundary.
    def ledgers_at_2() -> bool:
        return all(running.phases(name)["ledger"] == 2 for name in (table, "t_key"))

    _drive(running, ledgers_at_2, "ledgers at 2")
    assert dict(running.spark.table(refs.cdc.sql).select("_after.n").dtypes)["n"] == "int"
    # The old layout's events are kept as a generation, every one of them, not purged.
    for name in (table, "t_key"):
        ledger = running.merge_pipeline.refs(name).cdc
        [kept] = generations(running.spark, ledger)
        assert kept.name == f"{ledger.name}_g1"
        ids = {r[0] for r in running.spark.table(kept.sql).select("_message_id").collect()}
        assert ids == before[name], name
    key = running.merge_pipeline.refs("t_key")
    assert "region" in running.spark.table(key.cdc.sql).columns  # a key column: top level
    # The first merge round starts the re-snapshot: the base, rebuilt at version 2,
    # holds the first chunk and is marked running.
    running.merger.merge_table(table)
    assert dict(running.spark.table(refs.base.sql).dtypes)["n"] == "int"
    assert _chunks(running, refs.base) == [0]
    during = table_convergence(running.spark, running.config, table)
    assert during is not None and (during.version, during.phase) == (2, "schema")
    assert "re-snapshot from the source under way" in during.render()
    write(
        [
            "UPDATE {db}.t_narrow SET s = 'u2' WHERE id = 2",  # its chunk is copied
            "UPDATE {db}.t_narrow SET s = 'u10' WHERE id = 10",  # its chunk is not yet
            "DELETE FROM {db}.t_narrow WHERE id = 6",
            "INSERT INTO {db}.t_narrow VALUES (40, 400, 'new')",  # past the planned range
            "INSERT INTO {db}.t_add (id, name) VALUES (6, 'while')",
            # t_key's re-snapshot waits for t_narrow's; a key only (id, region) tells apart
            "INSERT INTO {db}.t_key VALUES (1, 'eu', 10)",
            "UPDATE {db}.t_key SET v = 20 WHERE id = 2",
        ]
    )
    # The other tables keep flowing while t_narrow's re-snapshot waits between chunks.
    add = running.merge_pipeline.refs("t_add").base.sql

    def merged_elsewhere() -> bool:
        running.merger.merge_table("t_add")
        return running.spark.table(add).where("id = 6").count() == 1

    _drive(running, merged_elsewhere, "t_add merged during the re-snapshot")
    assert _chunks(running, refs.base) == [0]
    # A new merge (a restarted process) resumes at the next chunk; writes go on.
    running.merger = MergeStage(running.spark, running.merge_pipeline)
    running.merger.merge_table(table)
    assert _chunks(running, refs.base) == [0, 1]
    write(["UPDATE {db}.t_narrow SET s = 'u3' WHERE id = 3"])

    def caught_up() -> bool:  # only these tables' merges: the others have no news
        for name in (table, "t_add", "t_key"):
            running.merger.merge_table(name)
        return (
            running.converged(table, 2)
            and running.converged("t_key", 2)
            and all(v.matches for v in running.verify([table, "t_add", "t_key"]))
        )

    _drive(running, caught_up, "t_narrow and t_key rebuilt at version 2 and verified")
    assert _chunks(running, refs.base) == [0, 1, 2]
    after = table_convergence(running.spark, running.config, table)
    assert after is not None and after.phase == "converged" and not after.resnapshot
    base = running.spark.table(refs.base.sql)
    assert base.count() == base.select("id").distinct().count() == 12
    rows = {r.id: (r.n, r.s) for r in base.collect()}
    assert rows[2] == (20, "u2") and rows[10] == (100, "u10") and rows[3] == (30, "u3")
    assert 6 not in rows and rows[40] == (400, "new")
    assert running.spark.table(refs.dead_letters.sql).count() == 0
    assert any(f"re-snapshot {table} (schema version 2): rebuilt" in x for x in running.logs)
    _key_rebuilt(running, write, key)


def _key_rebuilt(running: Running, write: Callable[[list[str]], None], key: TableRefs) -> None:
    """t_key, re-snapshotted under its new key (id, region): the base declares it, and
    the merge matches by it, so an update of (1, 'eu') leaves (1, 'us') alone."""
    assert _chunks(running, key.base) == [0]
    fields = iceberg_table(running.spark, key.base).schema().identifierFieldNames()
    assert sorted(fields) == ["id", "region"]
    write(
        [
            "UPDATE {db}.t_key SET v = 11 WHERE id = 1 AND region = 'eu'",
            "INSERT INTO {db}.t_key VALUES (2, 'eu', 22)",
        ]
    )

    def merged() -> bool:
        running.merger.merge_table("t_key")
        return all(v.matches for v in running.verify(["t_key"]))

    _drive(running, merged, "t_key merged under its new key and verified")
    base = running.spark.table(key.base.sql)
    rows = {(r.id, r.region): r.v for r in base.collect()}
    assert rows == {
        (1, "us"): 1,
        (1, "eu"): 11,
        (2, "us"): 20,
        (2, "eu"): 22,
        (3, "eu"): 7,
    }  # 7: written before the key change
    assert base.count() == len(rows)
    assert running.spark.table(key.dead_letters.sql).count() == 0


def _chunks(running: Running, base: object) -> list[int]:
    """The re-snapshot chunks committed to ``base``, in commit order (each once)."""
    rows = running.spark.sql(
        f"SELECT summary['icetide.bootstrap.chunk'] AS i FROM {base}.snapshots "
        "WHERE summary['icetide.bootstrap.chunk'] IS NOT NULL ORDER BY committed_at"
    ).collect()
    return [int(r.i) for r in rows]
