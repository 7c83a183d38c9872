"""A machine lost under load: ``icetide run`` resumes on a new one from shared state only.

A pipeline on the REST catalog and the object store, capturing a MariaDB and a
PostgreSQL table into Kafka, with ``state: s3://…``. While a writer inserts, updates and
deletes in both tables, a column is added to the MariaDB table and the run applies it
(schema version 2) before the whole ``icetide run`` process tree (the run, its Spark
JVM, its capture children) is killed with SIGKILL and its folder deleted: config, state
folder, Spark checkpoint. A second ``icetide run`` starts in a new, empty folder holding
only the config and the schema files as first written (version 1); it finds capture's
offsets, the ledger's Kafka position and schema version 2 on the object store (and
says it rewrote the schema file from there). After the writes stop, PyIceberg, reading
through the REST catalog, finds each base equal to its source, row for row, the new
column included: nothing lost, nothing twice.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyarrow.fs import FileSelector
from pyiceberg.catalog import load_catalog

from icetide.capture.offsets import OffsetStore
from icetide.capture.runner import run_capture
from icetide.config import load_config
from icetide.demo.lakehouse import aws_bundle_jars
from icetide.devservers.mariadb import MariaDBServer
from icetide.devservers.objectstore import ObjectStoreServer, S3Endpoint
from icetide.devservers.rest_catalog import RestCatalogServer
from icetide.evolution.detect import capturing_source
from icetide.evolution.source_schema import read_source_schema
from icetide.schema.file import dump_schema_file
from icetide.state.s3 import s3_filesystem
from icetide.state.store import S3Store, StateStoreError
from tests.devservers.kafka import KafkaServer
from tests.devservers.postgres import PostgresServer
from tests.integration.test_cli_process import Child, child, wait_until
from tests.unit.pipeline.test_schema_state import (
    an_apply_cut_short_is_finished_elsewhere,
    machines_share_schema_versions,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
_runs = itertools.count(1)
TIMEOUT = 300.0
"""Seconds to wait for writes or for the bases: a few on a quiet machine; first merges
on a cold JVM took minutes with a load average of 35 on 2 cores (2026-12-02)."""
SETTLED = 5.0
"""Seconds a base's snapshot stays put before the comparison reads it whole."""
KEY_ENV = ("SHARED_STATE_S3_KEY", "SHARED_STATE_S3_SECRET")


class Writer:
    """A thread writing to both tables in turn until stopped: inserts, updates of recent
    rows, deletes of old ones; once :attr:`note` is set, MariaDB's rows get a ``note``
    too (the column added while the writes go on)."""

    def __init__(self, mariadb: MariaDBServer, db: str, postgres: PostgresServer, pgdb: str):
        self.mysql = mariadb.connect(db)
        self.pg = postgres.connect(pgdb)
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []
        self.statements = 0
        self.random = random.Random(11)
        self.ids = {"m_items": list[int](), "p_items": list[int]()}
        self.note = False
        self.thread = threading.Thread(target=self._loop, daemon=True, name="writer")

    def _loop(self) -> None:
        try:
            for n in itertools.count(1):
                if self.stopping.is_set():
                    return
                for table, conn in (("m_items", self.mysql), ("p_items", self.pg)):
                    self._write(table, conn, n)
                self.stopping.wait(0.1)
        except BaseException as exc:
            self.errors.append(exc)

    def _write(self, table: str, conn: Any, n: int) -> None:
        ids = self.ids[table]
        noted = self.note and table == "m_items"
        with conn.cursor() as cur:
            if n % 4 in (0, 1) or len(ids) < 5:
                if noted:
                    cur.execute(
                        f"INSERT INTO {table} (id, v, note) VALUES (%s, %s, %s)",
                        [n, f"v{n}", f"n{n}"],
                    )
                else:
                    cur.execute(f"INSERT INTO {table} (id, v) VALUES (%s, %s)", [n, f"v{n}"])
                ids.append(n)
            elif n % 4 == 2:
                target = self.random.choice(ids[-5:])
                if noted:
                    cur.execute(
                        f"UPDATE {table} SET v = %s, note = %s WHERE id = %s",
                        [f"u{n}", f"m{n}", target],
                    )
                else:
                    cur.execute(f"UPDATE {table} SET v = %s WHERE id = %s", [f"u{n}", target])
            else:
                cur.execute(f"DELETE FROM {table} WHERE id = %s", [ids.pop(0)])
        self.statements += 1

    def wait(self, statements: int) -> None:
        until = self.statements + statements
        wait_until(
            lambda: self.statements >= until or bool(self.errors), f"{statements} writes", TIMEOUT
        )
        assert not self.errors, self.errors

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=30)
        self.mysql.close()
        self.pg.close()
        assert not self.errors, self.errors


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (capture children run in sessions of their
    own, so a process group does not hold them), parents first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [pid]
    while queue:
        current = queue.pop(0)
        found.append(current)
        queue.extend(children.get(current, []))
    return found


def kill_tree(pid: int) -> list[int]:
    """SIGKILL ``pid`` and everything below it, parents first (nothing restarts a child)."""
    tree = descendants(pid)
    for member in tree:
        try:
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return tree


def pipeline_files(
    namespace: str,
    mariadb: MariaDBServer,
    db: str,
    postgres: PostgresServer,
    pgdb: str,
    slot: str,
    store: S3Endpoint,
    catalog: RestCatalogServer,
    kafka: KafkaServer,
) -> dict[str, str]:
    """The config and schema files (relative path → text): all a new machine is given."""
    my, pg = f"{namespace}_my", f"{namespace}_pg"
    doc = {
        "pipeline": namespace,
        "state_dir": "./state",
        "state": f"s3://warehouse/state/{namespace}",
        "catalog": {
            "name": "lake",
            "type": "rest",
            "uri": catalog.url,
            "warehouse": catalog.warehouse,
            "namespace": namespace,
            "properties": {
                "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
                "s3.endpoint": store.url,
                "s3.path-style-access": "true",
                "s3.access-key-id": "${" + KEY_ENV[0] + "}",
                "s3.secret-access-key": "${" + KEY_ENV[1] + "}",
                "client.region": store.region,
            },
        },
        "spark": {
            "master": "local[2]",
            "shuffle_partitions": 2,
            "extra_jars": [str(jar) for jar in aws_bundle_jars()],
        },
        "sources": [
            mariadb.source_entry(
                my, server_id=6100 + os.getpid() % 1000, heartbeat="1s", tables=["m_items"]
            ),
            postgres.source_entry(pgdb, slot, name=pg, heartbeat="1s", tables=["p_items"]),
        ],
        "transport": {
            "type": "kafka",
            "bootstrap_servers": kafka.bootstrap_servers,
            "topic_pattern": rf"{namespace}_(my|pg)\..*",
            "roll_interval": "1s",
        },
        "schedule": {"stream_interval": "1s", "merge_interval": "1s"},
        "artifacts": {"refresh": "off"},
        "tables": [
            {"name": "m_items", "source": f"{db}.m_items", "schema": "schemas/m_items.yaml"},
            {
                "name": "p_items",
                "source": "public.p_items",
                "schema": "schemas/p_items.yaml",
                "primary_key": ["id"],
            },
        ],
    }
    scratch = Path(f"/tmp/{namespace}-schemas-{os.getpid()}")
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        (scratch / "icetide.yaml").write_text(yaml.safe_dump(doc))
        config = load_config(scratch / "icetide.yaml")
        files = {"icetide.yaml": yaml.safe_dump(doc)}
        for table in config.tables:
            schema = read_source_schema(capturing_source(config, table), table)
            dump_schema_file(schema, scratch / "schemas" / f"{table.name}.yaml")
            files[f"schemas/{table.name}.yaml"] = (
                scratch / "schemas" / f"{table.name}.yaml"
            ).read_text()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return files


def lay_out(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder / "icetide.yaml"


@pytest.mark.long
def test_a_run_killed_with_its_folders_deleted_resumes_elsewhere_from_shared_state(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    object_store: ObjectStoreServer,
    rest_catalog: RestCatalogServer,
    kafka: KafkaServer,
    mariadb: MariaDBServer,
    postgres: PostgresServer,
) -> None:
    run = next(_runs)
    namespace, db, pgdb = f"shared{run}", f"shared{run}_db", f"shared{run}_pg"
    slot = f"shared{run}_{os.getpid()}"
    store = object_store.endpoint
    monkeypatch.setenv(KEY_ENV[0], store.access_key)
    monkeypatch.setenv(KEY_ENV[1], store.secret_key)
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"CREATE TABLE `{db}`.m_items (id INT PRIMARY KEY, v VARCHAR(20))")
    postgres.create_database(pgdb)
    postgres.execute("CREATE TABLE p_items (id int PRIMARY KEY, v varchar(20))", pgdb)
    files = pipeline_files(namespace, mariadb, db, postgres, pgdb, slot, store, rest_catalog, kafka)
    first, second = tmp_path / "first", tmp_path / "second"
    config = load_config(lay_out(first, files))
    # Empty tables: capture starts at the logs' ends (offsets saved on the object store).
    for source in config.sources:
        run_capture(config, source, follow=False, from_now=True)
    writer = Writer(mariadb, db, postgres, pgdb)
    args = ["run", "-c", "icetide.yaml", "--observe-interval", "3600"]
    try:
        writer.thread.start()
        with child(args, cwd=first) as killed:
            try:
                # A batch stored (and its Kafka position saved), the merge under way.
                killed.wait_for_line(r"^ledger batch \d+: [1-9]")
                writer.wait(10)
                # A column added at the source under load, applied by the run (schema
                # version 2 on the state location), written to before the kill.
                with mariadb.connect(db) as conn, conn.cursor() as cur:
                    cur.execute("INSERT INTO m_items (id, v) VALUES (0, 'before')")
                    cur.execute("ALTER TABLE m_items ADD COLUMN note VARCHAR(20)")
                # Capture, a ledger batch with the DDL, then the apply, all through the
                # REST catalog and the object store: on a loaded machine this wait once
                # ran past the usual 300 s (2026-12-03, the whole suite at load ~15).
                killed.wait_for_line(
                    r"^schema m_items: version 2 applied automatically", timeout=480
                )
                writer.note = True
                writer.wait(30)
            finally:
                tree = kill_tree(killed.proc.pid)
            assert killed.finish() == -signal.SIGKILL
            assert len(tree) >= 4, tree  # the run, its JVM, two capture children
        shutil.rmtree(first)  # config, state folder, Spark checkpoint: the machine is gone
        writer.wait(40)  # writes go on while no run is up
        second.mkdir()
        lay_out(second, files)  # a new machine: the config and schema files, nothing else
        with child(args, cwd=second) as resumed:
            try:
                # The schema file given is version 1; the state location has version 2.
                resumed.wait_for_line(
                    r"^schema m_items: .*m_items\.yaml written from the state location's "
                    r"history \(s3://.*\): its version 1 is older than version 2"
                )
                resumed.wait_for_line(r"ledger: no checkpoint; resuming Kafka at the position")
                writer.wait(40)
                writer.stop()
                _until_bases_equal_sources(rest_catalog, namespace, mariadb, db, postgres, pgdb)
            finally:
                kill_tree(resumed.proc.pid)
                resumed.finish()
            assert f"saved in s3://warehouse/state/{namespace}/ledger/kafka-offsets.json" in (
                resumed.output
            ), resumed.output[-3000:]
            _resumed_capture(resumed)
            # Version 2 was taken from the state location, not detected and applied again.
            assert "applied automatically" not in resumed.output, resumed.output[-3000:]
        # What a new machine used is on the object store; its own folder holds no offset.
        s3 = store.filesystem()
        for source in config.sources:
            key = f"warehouse/state/{namespace}/capture/{source.name}.offset.json"
            saved = s3.get_file_info(key)
            assert saved.size > 0, saved
        assert not list((second / "state").rglob("*.offset.json"))
    finally:
        writer.stopping.set()
        postgres.drop_slot(slot, pgdb)


def _resumed_capture(run: Child) -> None:
    """Both capture children of the second run started from a saved offset."""
    assert "has no saved offset" not in run.output, run.output[-3000:]
    assert "Traceback" not in run.output, run.output[-3000:]


def _until_bases_equal_sources(
    catalog: RestCatalogServer,
    namespace: str,
    mariadb: MariaDBServer,
    db: str,
    postgres: PostgresServer,
    pgdb: str,
) -> None:
    """PyIceberg, through the REST catalog, reads each base: every source row once."""
    reader = load_catalog("check", **catalog.pyiceberg_properties())
    columns = {"m_items": ("id", "v", "note"), "p_items": ("id", "v")}
    with mariadb.connect(db) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, v, note FROM m_items")
        sources = {"m_items": Counter(tuple(r) for r in cur.fetchall())}
    sources["p_items"] = Counter(
        tuple(r) for r in postgres.execute("SELECT id, v FROM p_items", pgdb)
    )
    assert all(len(rows) > 20 for rows in sources.values()), sources
    # A row from before the column came (the writer never touches id 0), and notes.
    assert sources["m_items"][(0, "before", None)] == 1, sources["m_items"]
    assert any(note is not None for _, _, note in sources["m_items"]), sources["m_items"]
    last: dict[str, Counter[tuple[Any, ...]]] = {}
    seen: dict[str, tuple[int | None, float]] = {}
    """Each base's snapshot and when it was first seen there: the bases are read whole
    only once none has moved for :data:`SETTLED` seconds (several merge intervals: the
    run has caught up), not at every merge commit while it catches up (reading every
    file of a base again and again through PyIceberg takes minutes on a loaded machine)."""
    compared: dict[str, int | None] = {}
    """The snapshot each base was last read whole at: a base that differed from its
    source is read again only once it has moved (a run still starting, its first batch
    not merged yet, leaves the old bases settled; reading them again and again took the
    cores that run needed)."""

    def equal() -> bool:
        now = time.monotonic()
        settled = True
        for table in sources:
            snapshot = reader.load_table(f"{namespace}.{table}").current_snapshot()
            at = None if snapshot is None else snapshot.snapshot_id
            if table not in seen or seen[table][0] != at:
                seen[table] = (at, now)
            settled = settled and now - seen[table][1] >= SETTLED
        if not settled or all(compared.get(t, -1) == seen[t][0] for t in sources):
            time.sleep(0.5)
            return False
        for table in sources:
            if compared.get(table, -1) == seen[table][0]:
                continue  # read whole at this snapshot already: ``last`` holds it
            names = columns[table]
            loaded = reader.load_table(f"{namespace}.{table}")
            if not set(names) <= {f.name for f in loaded.schema().fields}:
                return False  # the base has not taken the new column yet
            snapshot = loaded.current_snapshot()
            base = loaded.scan(selected_fields=names)
            last[table] = Counter(tuple(r[n] for n in names) for r in base.to_arrow().to_pylist())
            compared[table] = None if snapshot is None else snapshot.snapshot_id
        return last == sources

    try:
        wait_until(equal, "the bases to equal their sources", TIMEOUT)
    except AssertionError as exc:
        diff = {}
        for t in sources:
            missing, extra = (
                sources[t] - last.get(t, Counter()),
                last.get(t, Counter()) - sources[t],
            )
            diff[t] = (len(missing), sorted(missing)[:5], len(extra), sorted(extra)[:5])
        raise AssertionError(f"{exc}: (missing, extra) per table: {diff}") from None


def test_state_files_on_the_object_store_are_replaced_whole_and_a_refused_key_names_the_file(
    object_store: ObjectStoreServer,
) -> None:
    store = object_store.endpoint
    prefix = f"state/files{next(_runs)}"
    properties = {
        "s3.endpoint": store.url,
        "s3.path-style-access": "true",
        "s3.access-key-id": store.access_key,
        "s3.secret-access-key": store.secret_key,
        "client.region": store.region,
    }
    shared = S3Store(s3_filesystem(properties), "warehouse", prefix)
    offsets = OffsetStore(shared.file("capture/shop.offset.json"), source_type="mysql")
    assert offsets.source == "shop" and offsets.load() is None
    offsets.save({"file": "mysql-bin.000003", "pos": 4}, position="mysql-bin.000003:4")
    offsets.save({"file": "mysql-bin.000003", "pos": 1234}, position="mysql-bin.000003:1234")
    # Another reader (another machine) sees the last offset saved, whole.
    again = OffsetStore(
        S3Store(s3_filesystem(properties), "warehouse", prefix).file("capture/shop.offset.json")
    )
    assert again.load() == {"file": "mysql-bin.000003", "pos": 1234}
    listed = store.filesystem().get_file_info(FileSelector(f"warehouse/{prefix}", recursive=True))
    assert sorted(i.path for i in listed if i.is_file) == [
        f"warehouse/{prefix}/capture/shop.offset.json"
    ]
    bootstrap = shared.file("capture/shop.bootstrap.json")
    bootstrap.write(b"{}")
    bootstrap.delete()
    assert bootstrap.read() is None
    bootstrap.delete()  # absent: nothing to do

    refused = S3Store(
        s3_filesystem({**properties, "s3.secret-access-key": "wrong"}), "warehouse", prefix
    )
    with pytest.raises(StateStoreError) as error:
        refused.file("capture/shop.offset.json").read()
    assert error.value.where == f"s3://warehouse/{prefix}/capture/shop.offset.json"
    assert "wrong" not in str(error.value)


def test_schema_versions_and_apply_progress_are_shared_on_the_object_store(
    tmp_path: Path, object_store: ObjectStoreServer
) -> None:
    """The scenarios of tests/unit/pipeline/test_schema_state.py on ``s3://`` state."""
    store = object_store.endpoint
    extra = {
        "catalog": {
            "type": "rest",
            "uri": "http://127.0.0.1:9",
            "properties": {
                "s3.endpoint": store.url,
                "s3.path-style-access": "true",
                "s3.access-key-id": store.access_key,
                "s3.secret-access-key": store.secret_key,
                "client.region": store.region,
            },
        },
        "transport": {
            "type": "kafka",
            "bootstrap_servers": "127.0.0.1:9",
            "topic_pattern": "evo\\..*",
        },
    }
    run = next(_runs)
    machines_share_schema_versions(
        tmp_path / "versions", f"s3://warehouse/state/schemas{run}", extra
    )
    an_apply_cut_short_is_finished_elsewhere(
        tmp_path / "apply", f"s3://warehouse/state/apply{run}", extra
    )
    listed = store.filesystem().get_file_info(
        FileSelector(f"warehouse/state/schemas{run}", recursive=True)
    )
    assert sorted(i.path for i in listed if i.is_file) == [
        f"warehouse/state/schemas{run}/schemas/customers.audit.jsonl",
        f"warehouse/state/schemas{run}/schemas/customers.history.yaml",
    ]
