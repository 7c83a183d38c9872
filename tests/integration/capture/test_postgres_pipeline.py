"""PostgreSQL end to end: bootstrap in the slot's exported snapshot, capture, stream, merge,
verify — against a private PostgreSQL server.

The handoff must be exact: the copy is the database as of the slot's consistent point
(rows written later are *not* in it, in any table, even when written while the chunks
are being read), and everything after that point arrives through capture. The live test
writes all the time (statements, multi-row transactions, rollbacks, a key update, TOAST
values changed and left unchanged, an UPDATE of 3,000 rows during the bootstrap and
another while capture follows) and still ends with every base table equal to its source.
"""

from __future__ import annotations

import itertools
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.bootstrap import write as bootstrap_write
from icetide.bootstrap.plan import Chunk
from icetide.bootstrap.postgres import PgSnapshot, PostgresSnapshotReader
from icetide.bootstrap.run import Bootstrap
from icetide.capture.errors import PositionLostError
from icetide.capture.postgres.offset import LsnOffset
from icetide.capture.postgres.slot import slot_status
from icetide.capture.postgres.snapshot import exported_snapshot, import_snapshot
from icetide.capture.runner import offset_store, run_capture
from icetide.config import load_config, load_table_schemas
from icetide.lake.tables import latest_snapshot_property
from icetide.merge.asof import table_as_of
from icetide.merge.asof_plan import Target, Unreachable
from icetide.observe.verify import run_verify
from icetide.schema.contract.base import BOOTSTRAP_CHUNK, BOOTSTRAP_EXACT_FROM, POSITION
from icetide.schema.file import dump_schema_file, schema_from_dict
from tests.devservers.postgres import PostgresServer
from tests.integration.harness import Pipeline, killed_at

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DB = "shop"
SLOT = "icetide"
_namespaces = itertools.count()

SHOP_DDL = """
CREATE TABLE orders (
  id bigserial PRIMARY KEY, customer_id integer NOT NULL, total numeric(12,2) NOT NULL,
  status text NOT NULL, placed_at timestamp NOT NULL, updated_at timestamptz, ship_by time
);
CREATE TABLE customers (
  id integer PRIMARY KEY, name text NOT NULL, email text, balance numeric(12,2) NOT NULL,
  vip boolean NOT NULL, created_at timestamptz NOT NULL, birthday date
);
CREATE TABLE products (
  id integer PRIMARY KEY, name text NOT NULL, price numeric(10,2) NOT NULL,
  stock integer NOT NULL, description text, score double precision
);
-- Out of line and uncompressed: every description is a TOAST value.
ALTER TABLE products ALTER COLUMN description SET STORAGE EXTERNAL;
"""
SHOP_SEED = """
INSERT INTO orders (id, customer_id, total, status, placed_at, updated_at, ship_by)
SELECT g, 1 + g % 3000, (g % 500) + 0.99, 'new',
       timestamp '2024-02-01' + g * interval '1 minute 0.5 seconds',
       CASE WHEN g % 3 = 0 THEN timestamptz '2024-03-01 12:00:00+02' + g * interval '1 second' END,
       time '08:00' + g * interval '1.000001 seconds'
FROM generate_series(1, 12000) g;
SELECT setval('orders_id_seq', 12000);
INSERT INTO customers
SELECT g, 'customer ' || g, 'c' || g || '@example.com', (g % 1000) * 1.25, g % 7 = 0,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '37 minutes 0.123456 seconds',
       date '1970-01-01' + g
FROM generate_series(1, 3000) g;
INSERT INTO products
SELECT g, 'product ' || g, 9.99 + g, 100,
       (SELECT string_agg(md5(i::text || '-' || g), '') FROM generate_series(1, 320) i),
       g / 3.0
FROM generate_series(1, 200) g;
"""

SHOP_SCHEMAS: dict[str, dict[str, Any]] = {
    "orders": {
        "table": "orders",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {"id": 2, "name": "customer_id", "type": "int"},
            {"id": 3, "name": "total", "type": "decimal(12,2)"},
            {"id": 4, "name": "status", "type": "string"},
            {
                "id": 5,
                "name": "placed_at",
                "type": "timestamp",
                "logical": "io.debezium.time.MicroTimestamp",
            },
            {
                "id": 6,
                "name": "updated_at",
                "type": "timestamptz",
                "logical": "io.debezium.time.ZonedTimestamp",
            },
            {"id": 7, "name": "ship_by", "type": "time", "logical": "io.debezium.time.MicroTime"},
        ],
    },
    "customers": {
        "table": "customers",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "int", "nullable": False},
            {"id": 2, "name": "name", "type": "string"},
            {"id": 3, "name": "email", "type": "string"},
            {"id": 4, "name": "balance", "type": "decimal(12,2)"},
            {"id": 5, "name": "vip", "type": "boolean"},
            {
                "id": 6,
                "name": "created_at",
                "type": "timestamptz",
                "logical": "io.debezium.time.ZonedTimestamp",
            },
            {"id": 7, "name": "birthday", "type": "date", "logical": "io.debezium.time.Date"},
        ],
    },
    "products": {
        "table": "products",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "int", "nullable": False},
            {"id": 2, "name": "name", "type": "string"},
            {"id": 3, "name": "price", "type": "decimal(10,2)"},
            {"id": 4, "name": "stock", "type": "int"},
            {"id": 5, "name": "description", "type": "string"},
            {"id": 6, "name": "score", "type": "double"},
        ],
    },
}


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    with PostgresServer() as started:
        started.create_database(DB)
        yield started


def seed_shop(server: PostgresServer) -> None:
    server.execute(SHOP_DDL, DB)
    server.execute(SHOP_SEED, DB)


def make_pipeline(
    root: Path,
    warehouse: Path,
    server: PostgresServer,
    spark: SparkSession,
    schemas: dict[str, dict[str, Any]],
    *,
    database: str = DB,
    slot: str = SLOT,
    publication: str = "icetide",
) -> Pipeline:
    """A pipeline over ``schemas`` (table → schema dict), each read from public.<table>
    of ``database`` through ``slot`` and ``publication``."""
    for name, schema in schemas.items():
        dump_schema_file(schema_from_dict(schema), root / "schemas" / f"{name}.yaml")
    doc = {
        "pipeline": "pgshop",
        "state_dir": "./state",
        "catalog": {
            "name": "lake",
            "warehouse": str(warehouse),
            "namespace": f"pg{next(_namespaces)}",
        },
        "spark": {"master": "local[2]", "shuffle_partitions": 4},
        "sources": [
            server.source_entry(
                database, slot, name="shop", publication=publication, heartbeat="1s"
            )
        ],
        "transport": {"type": "files", "path": "./landing", "roll_interval": "2s"},
        "tables": [{"name": name, "source": f"public.{name}", "buckets": 2} for name in schemas],
    }
    path = root / "icetide.yaml"
    path.write_text(json.dumps(doc))
    config = load_config(path)
    return Pipeline(root, path, config, load_table_schemas(config), spark)


def assert_verified(pipe: Pipeline, spark: SparkSession) -> None:
    verdicts = run_verify(pipe.pipeline, spark, None)
    assert sorted(v.table for v in verdicts) == sorted(pipe.schemas)
    assert all(v.matches for v in verdicts), [v for v in verdicts if not v.matches]


def catch_up(pipe: Pipeline) -> None:
    """Capture to the end of the WAL, then stream and merge everything."""
    run_capture(pipe.config, pipe.config.sources[0], follow=False)
    pipe.stream()
    pipe.merge()


def confirmed_flush(server: PostgresServer) -> int:
    conn = server.connect(DB)
    try:
        status = slot_status(conn, SLOT)
    finally:
        conn.close()
    assert status is not None and status.confirmed_flush_lsn is not None
    return status.confirmed_flush_lsn


# -- the shop writer -----------------------------------------------------------------------


@dataclass
class Counts:
    statements: int = 0
    transactions: int = 0
    rollbacks: int = 0
    key_updates: int = 0
    toast_changes: int = 0
    toast_kept: int = 0
    big_updates: int = 0


class ShopWriter:
    """Changes the shop from a thread, cycling through every kind of change in turn."""

    def __init__(self, server: PostgresServer, seed: int) -> None:
        self.conn = server.connect(DB)
        self.counts = Counts()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="shop-writer", daemon=True)
        self._error: BaseException | None = None
        self._n = seed * 100_000
        self._customer = 10_000
        self._product = 1_000

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> Counts:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive()
        self.conn.close()
        if self._error is not None:
            raise self._error
        return self.counts

    def _loop(self) -> None:
        steps: list[Callable[[Any], None]] = [
            self._insert_order,
            self._update_order,
            self._multi_row,
            self._price,
            self._delete_order,
            self._insert_customer,
            self._update_customer,
            self._key_update,
            self._rollback,
            self._description,
            self._delete_customer,
            self._insert_product,
            self._delete_product,
        ]
        try:
            with self.conn.cursor() as cur:
                for step in itertools.cycle(steps):
                    if self._stop.is_set():
                        return
                    self._n += 1
                    step(cur)
                    time.sleep(0.01)
        except BaseException as exc:  # re-raised by stop()
            self._error = exc

    def _pick(self, modulus: int) -> int:
        return 1 + (self._n * 7919) % modulus

    def _run(self, cur: Any, sql: str, params: tuple[Any, ...] = ()) -> None:
        cur.execute(sql, params)
        self.counts.statements += 1

    def _insert_order(self, cur: Any) -> None:
        self._run(
            cur,
            "INSERT INTO orders (customer_id, total, status, placed_at, updated_at, ship_by) "
            "VALUES (%s, %s, 'new', localtimestamp, now(), localtime)",
            (self._pick(3000), Decimal(self._n % 900) / 4),
        )

    def _update_order(self, cur: Any) -> None:
        self._run(
            cur,
            "UPDATE orders SET status = 'paid', total = total + 1, updated_at = now() "
            "WHERE id = (SELECT id FROM orders WHERE id >= %s ORDER BY id LIMIT 1)",
            (self._pick(12_000),),
        )

    def _delete_order(self, cur: Any) -> None:
        self._run(
            cur,
            "DELETE FROM orders WHERE id = (SELECT id FROM orders WHERE id >= %s ORDER BY id "
            "LIMIT 1)",
            (self._pick(12_000),),
        )

    def _multi_row(self, cur: Any) -> None:
        customer, product = self._pick(3000), self._pick(200)
        cur.execute("BEGIN")
        cur.execute(
            "INSERT INTO orders (customer_id, total, status, placed_at) "
            "VALUES (%s, 19.99, 'new', localtimestamp)",
            (customer,),
        )
        cur.execute("UPDATE customers SET balance = balance - 19.99 WHERE id = %s", (customer,))
        # Leaves the TOASTed description unchanged: capture sends no value for it.
        cur.execute("UPDATE products SET stock = stock - 1 WHERE id = %s", (product,))
        cur.execute("COMMIT")
        self.counts.transactions += 1
        self.counts.toast_kept += 1

    def _price(self, cur: Any) -> None:
        self._run(cur, "UPDATE products SET price = price + 0.5 WHERE id = %s", (self._pick(200),))
        self.counts.toast_kept += 1

    def _description(self, cur: Any) -> None:
        self._run(
            cur,
            "UPDATE products SET description = %s WHERE id = %s",
            (secrets.token_hex(6000), self._pick(200)),
        )
        self.counts.toast_changes += 1

    def _insert_customer(self, cur: Any) -> None:
        self._customer += 1
        self._run(
            cur,
            "INSERT INTO customers VALUES (%s, %s, NULL, 0, true, now(), NULL)",
            (self._customer, f"new customer {self._customer} ✓"),
        )

    def _update_customer(self, cur: Any) -> None:
        self._run(
            cur,
            "UPDATE customers SET name = name || '+', vip = NOT vip WHERE id = %s",
            (self._pick(3000),),
        )

    def _delete_customer(self, cur: Any) -> None:
        self._run(cur, "DELETE FROM customers WHERE id = %s", (self._pick(3000),))

    def _key_update(self, cur: Any) -> None:
        self._run(
            cur,
            "UPDATE orders SET id = nextval('orders_id_seq') "
            "WHERE id = (SELECT id FROM orders WHERE id >= %s ORDER BY id LIMIT 1)",
            (self._pick(12_000),),
        )
        self.counts.key_updates += 1

    def _rollback(self, cur: Any) -> None:
        cur.execute("BEGIN")
        cur.execute("UPDATE customers SET name = 'rolled back' WHERE id = %s", (self._pick(3000),))
        cur.execute("DELETE FROM orders WHERE id = %s", (self._pick(12_000),))
        cur.execute("ROLLBACK")
        self.counts.rollbacks += 1

    def _insert_product(self, cur: Any) -> None:
        self._product += 1
        self._run(
            cur,
            "INSERT INTO products VALUES (%s, 'new product', 1.00, 5, %s, 0.1)",
            (self._product, secrets.token_hex(5000)),
        )

    def _delete_product(self, cur: Any) -> None:
        self._run(cur, "DELETE FROM products WHERE id = %s", (self._product,))


def big_update(server: PostgresServer, remainder: int) -> int:
    """One UPDATE of a quarter of the seeded orders (3,000 rows); the rows it changed."""
    conn = server.connect(DB)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "UPDATE orders SET status = 'reviewed ' || %s, updated_at = now() "
                "WHERE id <= 12000 AND id %% 4 = %s",
                (remainder, remainder),
            )
            return int(cur.rowcount)
    finally:
        conn.close()


# -- tests ---------------------------------------------------------------------------------


def test_bootstrap_during_writes_then_capture_makes_the_mirror_exact(
    tmp_path: Path, warehouse: Path, server: PostgresServer, spark: SparkSession
) -> None:
    seed_shop(server)
    pipe = make_pipeline(tmp_path, warehouse, server, spark, SHOP_SCHEMAS)
    source = pipe.config.sources[0]
    writer = ShopWriter(server, seed=1)
    big: list[int] = []

    def log(line: str) -> None:
        pipe.logs.append(line)
        if line.startswith("bootstrap orders: chunk 1/"):
            big.append(big_update(server, 1))  # between chunks: later chunks still see before

    writer.start()
    Bootstrap(spark, pipe.reporting(log), source, chunk_rows=4_000).run()
    start = LsnOffset.from_dict(offset_store(pipe.config, source).load() or {}).lsn
    failures: list[BaseException] = []
    stop = threading.Event()

    def follow() -> None:
        try:
            run_capture(pipe.config, source, follow=True, should_stop=stop.is_set)
        except BaseException as exc:  # re-raised below
            failures.append(exc)

    follower = threading.Thread(target=follow, name="capture", daemon=True)
    follower.start()
    big.append(big_update(server, 2))
    # A round while capture follows and the shop keeps writing, then the last one below.
    pipe.stream()
    pipe.merge()
    counts = writer.stop()
    stop.set()
    follower.join(timeout=60)
    assert not follower.is_alive() and not failures, failures
    catch_up(pipe)

    # The workload did everything the test is about, during bootstrap and capture.
    assert len(big) == 2 and min(big) > 1000  # the writer deletes and moves a few
    assert counts.transactions > 0 and counts.rollbacks > 0 and counts.key_updates > 0
    assert counts.toast_changes > 0 and counts.toast_kept > 0
    chunk_commits = spark.sql(
        f"SELECT count(*) FROM {pipe.refs('orders').base}.snapshots "
        f"WHERE summary['{BOOTSTRAP_CHUNK}'] IS NOT NULL"
    ).first()
    assert chunk_commits is not None and chunk_commits[0] >= 3  # 12,000+ rows, 4,000 a chunk
    ledger = spark.table(pipe.refs("orders").cdc.sql)
    assert ledger.where(F.col("_after.status") == "reviewed 2").count() >= big[1]
    assert ledger.where(F.col("_after.status") == "reviewed 1").count() >= big[0]

    assert_verified(pipe, spark)
    # Acknowledged: the slot moved past the bootstrap's consistent point, to where capture
    # saved its offset (only after the landing files were durable).
    saved = LsnOffset.from_dict(offset_store(pipe.config, source).load() or {}).lsn
    assert confirmed_flush(server) >= saved > start


def test_the_copy_is_the_database_at_the_consistent_point_and_later_rows_come_by_capture(
    tmp_path: Path, warehouse: Path, server: PostgresServer, spark: SparkSession
) -> None:
    seed_shop(server)
    pipe = make_pipeline(tmp_path, warehouse, server, spark, SHOP_SCHEMAS)
    source = pipe.config.sources[0]
    at_snapshot: dict[str, set[tuple[Any, ...]]] = {}

    def state_now() -> dict[str, set[tuple[Any, ...]]]:
        return {
            "orders": set(server.execute("SELECT id, status, total FROM orders", DB)),
            "customers": set(server.execute("SELECT id, name, balance FROM customers", DB)),
            "products": set(server.execute("SELECT id, price, description FROM products", DB)),
        }

    def log(line: str) -> None:
        pipe.logs.append(line)
        if "exported snapshot" in line:
            at_snapshot.update(state_now())
            # Right after the slot: none of these may be in any table's copy.
            server.execute(
                "BEGIN; INSERT INTO customers VALUES (100001, 'late', NULL, 1, false, now(), "
                "NULL); UPDATE customers SET name = 'changed' WHERE id = 1; "
                "DELETE FROM customers WHERE id = 2; DELETE FROM orders WHERE id = 11999; "
                "UPDATE products SET description = 'short now', price = 0 WHERE id = 200; "
                "COMMIT",
                DB,
            )
        elif line.startswith("bootstrap orders: chunk 1/"):
            # While the orders are being read: chunks still to come must not see this.
            big_update(server, 3)
            server.execute("UPDATE orders SET id = -7 WHERE id = 11000", DB)

    Bootstrap(spark, pipe.reporting(log), source, chunk_rows=3_000, parallelism=3).run()
    assert at_snapshot, pipe.logs
    copy = {
        "orders": {
            (r[0], r[1], r[2])
            for r in spark.table(pipe.refs("orders").base.sql)
            .select("id", "status", "total")
            .collect()
        },
        "customers": {
            (r[0], r[1], r[2])
            for r in spark.table(pipe.refs("customers").base.sql)
            .select("id", "name", "balance")
            .collect()
        },
        "products": {
            (r[0], r[1], r[2])
            for r in spark.table(pipe.refs("products").base.sql)
            .select("id", "price", "description")
            .collect()
        },
    }
    for table in copy:
        assert copy[table] == at_snapshot[table], table
    assert (100001, "late", Decimal("1.00")) not in copy["customers"]
    positions = spark.table(pipe.refs("orders").base.sql).agg(F.min(POSITION), F.max(POSITION))
    assert positions.first() == (0, 0)  # below every streamed change, see the module docs
    # Capture starts at the slot's consistent point, which nothing has consumed yet.
    start = LsnOffset.from_dict(offset_store(pipe.config, source).load() or {}).lsn
    assert confirmed_flush(server) == start

    catch_up(pipe)
    assert_verified(pipe, spark)
    base = {r[0]: r for r in spark.table(pipe.refs("customers").base.sql).collect()}
    assert base[100001]["name"] == "late" and base[1]["name"] == "changed" and 2 not in base
    _as_of_the_copy(pipe, spark, base)


def _as_of_the_copy(pipe: Pipeline, spark: SparkSession, base: dict[Any, Any]) -> None:
    """The copy is reachable by ``asof`` from the position read once it ended (its rows
    are stamped 0 and the slot's consistent point is before the writes made while it was
    read): there, the table as the source had it (nothing was written since, so the
    verified base); before it, refused, naming it."""
    summary = latest_snapshot_property(spark, pipe.refs("customers").base, BOOTSTRAP_EXACT_FROM)
    assert summary is not None
    exact = int(summary[BOOTSTRAP_EXACT_FROM])
    asof = table_as_of(spark, pipe.pipeline, "customers", Target("position", "x", Decimal(exact)))
    assert {r["id"]: r for r in asof.frame.collect()} == base
    with pytest.raises(Unreachable) as caught:
        table_as_of(spark, pipe.pipeline, "customers", Target("position", "x", Decimal(exact - 1)))
    assert caught.value.earliest == exact, caught.value.message


def _wait_for(server: PostgresServer, sql: str, params: tuple[Any, ...] = ()) -> None:
    deadline = time.monotonic() + 60
    while not server.execute(sql, DB, params):
        assert time.monotonic() < deadline, sql
        time.sleep(0.05)


_WALSENDER_WAITS = (
    "SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE a.backend_type = 'walsender' AND NOT l.granted AND l.locktype = 'transactionid' "
    "AND l.transactionid::text = %s"
)


def test_a_transaction_spanning_the_consistent_point_beats_the_copy(
    tmp_path: Path, warehouse: Path, server: PostgresServer, spark: SparkSession
) -> None:
    """A transaction that writes *before* the consistent point and commits after it is
    not in the copy, and its change's LSN is below the consistent point: stamped with
    the consistent point, the copy would win over it and the mirror keep the old row."""
    seed_shop(server)
    schemas = {"customers": SHOP_SCHEMAS["customers"]}
    pipe = make_pipeline(tmp_path, warehouse, server, spark, schemas)
    first, second, spanning = (server.connect(DB, autocommit=False) for _ in range(3))
    try:

        def xid(conn: Any, statement: str) -> str:
            with conn.cursor() as cur:
                cur.execute(statement)
                cur.execute("SELECT pg_current_xact_id()::xid::text")
                return str(cur.fetchone()[0])

        # The slot's snapshot builder waits for `first`, then for `second` (begun while it
        # waited); `spanning` begins after that, so it is decoded, not waited for.
        first_xid = xid(first, "UPDATE customers SET email = 'first' WHERE id = 3")
        failures: list[BaseException] = []

        def log(line: str) -> None:
            pipe.logs.append(line)
            if "exported snapshot" in line:
                spanning.commit()  # after the consistent point

        def bootstrap() -> None:
            try:
                Bootstrap(spark, pipe.reporting(log), pipe.config.sources[0]).run()
            except BaseException as exc:  # re-raised below
                failures.append(exc)

        worker = threading.Thread(target=bootstrap, name="bootstrap", daemon=True)
        worker.start()
        _wait_for(server, _WALSENDER_WAITS, (first_xid,))
        second_xid = xid(second, "UPDATE customers SET email = 'second' WHERE id = 4")
        first.commit()
        _wait_for(server, _WALSENDER_WAITS, (second_xid,))
        xid(spanning, "UPDATE customers SET name = 'spanning' WHERE id = 5")
        second.commit()
        worker.join(timeout=240)
        assert not worker.is_alive() and not failures, failures
    finally:
        for conn in (first, second, spanning):
            conn.close()

    base = pipe.refs("customers").base.sql
    copied = spark.table(base).where("id = 5").first()
    assert copied is not None and copied["name"] == "customer 5"  # not in the snapshot
    start = LsnOffset.from_dict(offset_store(pipe.config, pipe.config.sources[0]).load() or {})
    catch_up(pipe)
    event = (
        spark.table(pipe.refs("customers").cdc.sql)
        .where(F.col("_after.id") == 5)
        .select("_position")
        .first()
    )
    assert event is not None and event[0] < start.lsn * 10**6  # below the consistent point
    assert spark.table(base).where("id = 5").first()["name"] == "spanning"  # type: ignore[index]
    assert_verified(pipe, spark)


def test_a_bootstrap_on_a_slot_capture_already_reads_keeps_its_offset(
    tmp_path: Path, warehouse: Path, server: PostgresServer, spark: SparkSession
) -> None:
    """Capture started --from-now (it made the slot), changes were captured and more
    come during the bootstrap: the copy, read in a new snapshot, and the stream from the
    saved offset still make the mirror exact."""
    seed_shop(server)
    schemas = {"customers": SHOP_SCHEMAS["customers"]}
    pipe = make_pipeline(tmp_path, warehouse, server, spark, schemas)
    source = pipe.config.sources[0]
    run_capture(pipe.config, source, follow=False, from_now=True)
    server.execute("UPDATE customers SET name = 'captured before' WHERE id <= 10", DB)
    run_capture(pipe.config, source, follow=False)
    saved = offset_store(pipe.config, source).load()

    def log(line: str) -> None:
        pipe.logs.append(line)
        if "new snapshot" in line:
            server.execute("UPDATE customers SET name = 'during' WHERE id BETWEEN 5 AND 15", DB)

    Bootstrap(spark, pipe.reporting(log), source).run()
    assert any("slot icetide exists" in line for line in pipe.logs), pipe.logs
    assert offset_store(pipe.config, source).load() == saved  # capture's offset is kept
    catch_up(pipe)
    assert_verified(pipe, spark)


def test_a_query_outside_the_snapshot_is_refused(
    tmp_path: Path, warehouse: Path, server: PostgresServer, spark: SparkSession
) -> None:
    seed_shop(server)
    pipe = make_pipeline(tmp_path, warehouse, server, spark, SHOP_SCHEMAS)
    source = pipe.config.sources[0]
    table = pipe.config.table("customers")
    with exported_snapshot(
        server.dsn(DB), slot="guard", publication="guard", tables=["public.customers"]
    ) as point:
        conn = server.connect(DB, autocommit=False)
        try:
            import_snapshot(conn, point.snapshot)
            with conn.cursor() as cur:
                cur.execute("SELECT txid_current_snapshot()::text")
                text = cur.fetchone()[0]
            good = PostgresSnapshotReader(source, conn, PgSnapshot(point.snapshot, text))
            frame = good.chunk(spark, table, pipe.schemas["customers"], Chunk(0, ("TRUE",)), 100)
            assert len(frame.collect()) == 3000  # every column, as the bootstrap writes them
            xmin, xmax, _ = text.split(":")
            elsewhere = PgSnapshot(point.snapshot, f"{xmin}:{int(xmax) + 1}:")
            bad = PostgresSnapshotReader(source, conn, elsewhere)
            frame = bad.chunk(spark, table, pipe.schemas["customers"], Chunk(0, ("TRUE",)), 100)
            with pytest.raises(Exception, match="not read in the bootstrap snapshot"):
                frame.collect()
        finally:
            conn.close()


def test_a_killed_bootstrap_resumes_in_a_new_snapshot_and_a_lost_slot_is_refused(
    tmp_path: Path, warehouse: Path, server: PostgresServer, spark: SparkSession
) -> None:
    seed_shop(server)
    pipe = make_pipeline(tmp_path, warehouse, server, spark, SHOP_SCHEMAS)
    source = pipe.config.sources[0]
    with killed_at(bootstrap_write, "bootstrap.after_chunk"):  # the first chunk committed
        Bootstrap(spark, pipe.pipeline, source, chunk_rows=4000).run()
    pipe.logs.clear()  # what follows is about the resumed run
    state_file = pipe.config.resolved_path(pipe.config.state_dir) / "capture/shop.bootstrap.json"
    saved_state = state_file.read_text()  # the default state location: state_dir
    assert json.loads(saved_state)["plans"]["orders"]["rows"] == 12000
    # Between the kill and the resume: changes to keys in the chunk already copied
    # (1..4000) and in the chunks still to read, and a row moved from a missing chunk
    # into the copied one by a key update.
    server.execute(
        "UPDATE orders SET status = 'after kill' WHERE id IN (10, 5000, 11000); "
        "DELETE FROM orders WHERE id IN (20, 6000); "
        "UPDATE orders SET id = 3 * 1000000 WHERE id = 7000; "
        "UPDATE orders SET id = -1 WHERE id = 8000; "
        "INSERT INTO orders (customer_id, total, status, placed_at) "
        "SELECT 1, 1, 'late', localtimestamp FROM generate_series(1, 500)",
        DB,
    )
    Bootstrap(spark, pipe.pipeline, source, chunk_rows=4000).run()
    assert any("new snapshot" in line for line in pipe.logs), pipe.logs
    assert any("1 already done" in line for line in pipe.logs), pipe.logs
    catch_up(pipe)
    assert_verified(pipe, spark)
    base = spark.table(pipe.refs("orders").base.sql)
    assert base.count() == base.select("id").distinct().count()  # no chunk loaded twice

    # The same resume once the slot is gone: the changes since the start are lost.
    state_file.write_text(saved_state)
    server.drop_slot(SLOT, DB)
    with pytest.raises(PositionLostError, match="slot 'icetide' is gone"):
        Bootstrap(spark, pipe.pipeline, source).run()
