"""The real Debezium connectors on Kafka Connect → Kafka → icetide → base tables equal to
their source, for every converter and connector setting icetide documents.

The Debezium MariaDB and PostgreSQL connectors run in the run's one Kafka Connect worker
(the ``connect`` fixture, jars from Maven Central), with the settings a new user gives
them: defaults, then one setting changed at a time. Several connectors read the same
database, each under its own ``topic.prefix``, which is the name of an icetide source
with ``debezium:`` (the connector's settings as declared to icetide; icetide itself
captures nothing). The tables take a snapshot (``op=r``), then a live workload: inserts,
updates, deletes (and their tombstones), a primary-key update, a multi-row transaction,
and the decimal values whose base64 reads as a number (``"1234"`` is -26588.24 at scale
2) or as a float (``"1E10"``). Every base table is then compared with its source by
``icetide verify`` (count and checksum) and, for the decimals and floats, value by value
through PyIceberg, an independent reader.

What these tests hold icetide to (each failed before the fix):

* JsonConverter with schemas on names floating types ``double``/``float``: read, not a
  stage failure;
* schemaless JSON under Debezium's default ``decimal.handling.mode=precise``: base64
  decimals stored as their value, never as the number their base64 text looks like;
* ``string``, ``double`` and ``time.precision.mode=connect`` read as declared.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession

from icetide.artifacts.runtime import read_iceberg, table_metadata
from icetide.cli.stages import ledger_stage
from icetide.config import load_config, load_table_schemas
from icetide.devservers.mariadb import MariaDBServer
from icetide.evolution.onboard import onboard
from icetide.observe.verify import render_verdicts, run_verify
from icetide.sources.quoting import mysql_quote
from tests.devservers.connect import (
    JSON_CONVERTER,
    MARIADB_CONNECTOR,
    POSTGRES_CONNECTOR,
    ConnectWorker,
)
from tests.devservers.kafka import KafkaServer
from tests.devservers.postgres import PostgresServer
from tests.integration.capture.test_both_paths import MYSQL_EXTRA, mysql_insert
from tests.integration.capture.test_mysql_capture import ALL_TYPES_DDL, FULL_ROW
from tests.integration.harness import Pipeline

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore:'db' is deprecated:DeprecationWarning"),
]

_runs = itertools.count(1)
SENTINEL = 10**6
"""The key (``id``, or ``order_id``) of the row each table gets last: once it is on every
topic, all is there."""
SCHEMALESS = {
    "key.converter": JSON_CONVERTER,
    "key.converter.schemas.enable": "false",
    "value.converter": JSON_CONVERTER,
    "value.converter.schemas.enable": "false",
}
TRICKY = [
    Decimal("-26588.24"),  # base64 "1234": all digits
    Decimal("-28637.56"),  # base64 "1E10": a float
    Decimal("0.00"),
    Decimal("99999999.99"),
]


@dataclass(frozen=True)
class Feed:
    """One Debezium connector: its server name (``topic.prefix``), the tables it
    captures, its settings, and the same settings as declared to icetide."""

    server: str
    tables: tuple[str, ...]
    settings: dict[str, str] = field(default_factory=dict)
    declared: dict[str, str] = field(default_factory=dict)


EXAMPLES = Path(__file__).parents[3] / "docs" / "examples" / "debezium"


def example(name: str) -> dict[str, str]:
    """A connector config of docs/debezium.md, as the docs give it."""
    config = json.loads((EXAMPLES / name).read_text())
    assert isinstance(config, dict)
    return config


def _consume_until_sentinels(kafka: KafkaServer, topics: list[str], timeout: float) -> None:
    """Read ``topics`` from the start until each holds its sentinel row's event."""
    consumer = Consumer(
        {"bootstrap.servers": kafka.bootstrap_servers, "group.id": "sentinel", "log_level": 0}
    )
    waiting = set(topics)
    deadline = time.monotonic() + timeout
    try:
        consumer.assign([TopicPartition(t, 0, 0) for t in topics])
        while waiting:
            assert time.monotonic() < deadline, f"no sentinel on {sorted(waiting)}"
            message = consumer.poll(0.5)
            if message is None or message.error() or not message.value():
                continue
            value = json.loads(message.value())
            payload = value.get("payload", value) if isinstance(value, dict) else {}
            after = (payload or {}).get("after") or {}
            if SENTINEL in (after.get("id"), after.get("order_id")):
                waiting.discard(message.topic())
    finally:
        consumer.close()


def _pipeline(
    root: Path,
    warehouse: Path,
    spark: SparkSession,
    kafka: KafkaServer,
    namespace: str,
    sources: list[dict[str, Any]],
    feeds: list[Feed],
    db: str,
) -> Pipeline:
    """A pipeline reading every feed's topics: one icetide table per (feed, table),
    schema files written by ``onboard`` from the source catalog (as a user would)."""
    tables = [
        {"name": f"{f.server}_{t}", "source": f"{db}.{t}", "buckets": 2}
        for f in feeds
        for t in f.tables
    ]
    doc = {
        "pipeline": namespace,
        "state_dir": "./state",
        "catalog": {"name": "lake", "warehouse": str(warehouse), "namespace": namespace},
        "spark": {"master": "local[2]", "shuffle_partitions": 4},
        "transport": {
            "type": "kafka",
            "bootstrap_servers": kafka.bootstrap_servers,
            # Row, schema-change, transaction and heartbeat topics of every feed.
            "topic_pattern": r"(__debezium-heartbeat\.)?("
            + "|".join(f.server for f in feeds)
            + r")(\..+)?",
        },
        "sources": sources,
        "tables": tables,
    }
    path = root / "icetide.yaml"
    path.write_text(json.dumps(doc))
    config = load_config(path)
    onboard(config, spark=lambda: spark)
    return Pipeline(root, path, config, load_table_schemas(config), spark)


def _run_feeds(
    connect: ConnectWorker, kafka: KafkaServer, feeds: list[Feed], base: dict[str, str]
) -> None:
    for feed in feeds:
        connect.add(feed.server, {**base, "topic.prefix": feed.server, **feed.settings})
    for feed in feeds:
        connect.wait_running(feed.server)


def _assert_equal_to_source(pipe: Pipeline, decimals: dict[str, list[Any]]) -> None:
    """``verify`` says every base equals its source; PyIceberg reads ``decimals``
    (icetide table → the source's rows of its decimal/float columns, by id) back the same."""
    verdicts = run_verify(pipe.pipeline, pipe.session, None)
    assert len(verdicts) == len(pipe.config.tables)
    assert all(v.matches for v in verdicts), render_verdicts(verdicts)
    for table, rows in decimals.items():
        location = pipe.session.sql(f"DESCRIBE TABLE EXTENDED {pipe.refs(table).base.sql}")
        where = next(r.data_type for r in location.collect() if r.col_name == "Location")
        columns = list(rows[0]) if rows else ["id"]
        folder = where.removeprefix("file://").removeprefix("file:")
        read = read_iceberg(table_metadata(folder), columns).to_pylist()
        assert sorted(read, key=lambda r: r["id"]) == rows, table


# -- MariaDB -------------------------------------------------------------------------------

NUMS_DDL = """
CREATE TABLE {db}.nums (
  id INT PRIMARY KEY, d2 DECIMAL(10,2), d3 DECIMAL(10,3), d6 DECIMAL(10,6),
  dbl DOUBLE, flt FLOAT, note VARCHAR(20)
)"""
TIMES_DDL = """
CREATE TABLE {db}.times (
  id INT PRIMARY KEY, dt0 DATETIME, dt3 DATETIME(3), t0 TIME, t3 TIME(3), d DATE,
  ts3 TIMESTAMP(3) NULL DEFAULT NULL
)"""
ITEMS_DDL = """
CREATE TABLE {db}.items (
  order_id INT, line INT, qty INT, price DECIMAL(12,2), PRIMARY KEY (order_id, line)
)"""


def _mariadb_rows(cur: Any, db: str, first: int, count: int) -> None:
    for n in range(first, first + count):
        d2 = TRICKY[n % len(TRICKY)]
        cur.execute(
            f"INSERT INTO {db}.nums VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (n, d2, d2 / 10, d2 / 10000, n / 3, n * 1.25, f"n{n}"),
        )
        cur.execute(
            f"INSERT INTO {db}.times VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (
                n,
                f"2024-02-29 10:11:{n % 60:02d}",
                f"1969-12-31 23:59:59.{n % 1000:03d}",
                f"{n % 24:02d}:00:01",
                f"12:34:56.{n % 1000:03d}",
                f"20{n % 100:02d}-01-02",
                f"2038-01-19 03:14:07.{n % 1000:03d}",
            ),
        )
        cur.execute(f"INSERT INTO {db}.items VALUES (%s, 1, %s, %s)", (n, n, d2))


def _mariadb_all_types(cur: Any, db: str) -> None:
    """The all-types table of the both-paths test (every type, hostile column names)."""
    cur.execute(ALL_TYPES_DDL.format(db=db))
    for name, sql_type, _, _ in MYSQL_EXTRA:
        cur.execute(f"ALTER TABLE {db}.all_types ADD COLUMN {mysql_quote(name)} {sql_type}")
    hostile = {"dot.ted": 7, "sp ace": "s p", 'qu"ote': 'say "hi"', "MiXed": -1}
    # BIGINT UNSIGNED beyond 2^63-1 needs bigint.unsigned.handling.mode=precise (the
    # connector's default, long, wraps it): within range here.
    rows = [
        {**FULL_ROW, "c_big_u": 2**63 - 1, "c_bit8": 6, "c_bit64": 2**64 - 1, **hostile},
        {"id": 2, "c_set": "", "c_notnull": "", "c_bit": 0, "c_bit8": 0},
        {**FULL_ROW, "id": 3, "c_big_u": 0, "c_bit1": 0, "c_bit": 1023, "c_float": -3.4e38},
    ]
    for row in rows:
        cur.execute(*mysql_insert(db, row, "all_types"))


def test_real_debezium_mariadb_every_converter_and_setting(
    tmp_path: Path,
    warehouse: Path,
    spark: SparkSession,
    mariadb: MariaDBServer,
    kafka: KafkaServer,
    connect: ConnectWorker,
) -> None:
    run = next(_runs)
    db = f"dbz{run}"
    feeds = [
        # JsonConverter with schemas on, every Debezium default: the DOUBLE columns.
        Feed(f"m{run}js", ("all_types", "nums", "times", "items")),
        # Schemaless, Debezium's default decimal.handling.mode=precise (base64).
        Feed(f"m{run}jp", ("all_types", "nums", "items"), SCHEMALESS),
        Feed(
            f"m{run}jt",
            ("all_types", "nums"),
            {**SCHEMALESS, "decimal.handling.mode": "string", "binary.handling.mode": "base64"},
            {"decimal_handling_mode": "string"},
        ),
        Feed(
            f"m{run}jd",
            ("nums",),
            {**SCHEMALESS, "decimal.handling.mode": "double"},
            {"decimal_handling_mode": "double"},
        ),
        # Lossless only up to milliseconds: the times table has no finer column.
        Feed(
            f"m{run}jc",
            ("times",),
            {**SCHEMALESS, "time.precision.mode": "connect"},
            {"time_precision_mode": "connect"},
        ),
    ]
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        for ddl in (NUMS_DDL, TIMES_DDL, ITEMS_DDL):
            cur.execute(ddl.format(db=db))
        _mariadb_all_types(cur, db)
        _mariadb_rows(cur, db, 1, 40)  # the snapshot's rows
    base = {
        **example("mariadb-connector.json"),  # the documented example, on the test servers
        "database.port": str(mariadb.port),
        "database.user": mariadb.user,
        "database.password": mariadb.password,
        "database.include.list": db,
        "schema.history.internal.kafka.bootstrap.servers": kafka.bootstrap_servers,
        "heartbeat.interval.ms": "500",
    }
    assert base["connector.class"] == MARIADB_CONNECTOR
    for number, feed in enumerate(feeds):
        feed.settings.update(
            {
                "database.server.id": str(6000 + run * 10 + number),
                "schema.history.internal.kafka.topic": f"{feed.server}-history",
                "table.include.list": ",".join(f"{db}.{t}" for t in feed.tables),
            }
        )
    sources = [
        mariadb.source_entry(
            f.server, tables=[f"{f.server}_{t}" for t in f.tables], debezium=f.declared
        )
        for f in feeds
    ]
    try:
        _run_feeds(connect, kafka, feeds, base)
        with mariadb.connect() as conn, conn.cursor() as cur:  # the live workload
            _mariadb_rows(cur, db, 41, 30)
            cur.execute(f"UPDATE {db}.nums SET d2 = -d2, note = 'flipped' WHERE id % 3 = 0")
            cur.execute(f"DELETE FROM {db}.nums WHERE id % 7 = 0")
            cur.execute(f"UPDATE {db}.items SET order_id = order_id + 1000 WHERE order_id < 5")
            cur.execute(f"UPDATE {db}.all_types SET c_double = 1e-300, c_dec = 0 WHERE id = 2")
            cur.execute(f"DELETE FROM {db}.all_types WHERE id = 3")
            conn.begin()
            for n in range(2000, 2500):  # one multi-row transaction
                cur.execute(f"INSERT INTO {db}.items VALUES (%s, %s, %s, %s)", (n % 70, n, n, n))
            conn.commit()
            cur.execute(f"INSERT INTO {db}.nums VALUES ({SENTINEL}, 1.5, 1, 1, 1, 1, 'end')")
            cur.execute(f"INSERT INTO {db}.times (id) VALUES ({SENTINEL})")
            cur.execute(f"INSERT INTO {db}.items VALUES ({SENTINEL}, 1, 1, 1)")
            cur.execute(f"INSERT INTO {db}.all_types (id, c_notnull) VALUES ({SENTINEL}, 'e')")
        topics = [f"{f.server}.{db}.{t}" for f in feeds for t in f.tables]
        _consume_until_sentinels(kafka, topics, timeout=180)
        pipe = _pipeline(tmp_path, warehouse, spark, kafka, db, sources, feeds, db)
        # The ledger as `icetide run` builds it: it walks the schemas messages carry.
        ledger_stage(spark, pipe.pipeline).start(once=True).awaitTermination()
        pipe.merge()
    finally:
        for feed in feeds:
            connect.remove(feed.server)
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT id, d2, d3, d6, dbl, flt FROM {db}.nums ORDER BY id")
        nums = [
            {"id": r[0], "d2": r[1], "d3": r[2], "d6": r[3], "dbl": r[4], "flt": r[5]}
            for r in cur.fetchall()
        ]
    assert any(r["d2"] == Decimal("-26588.24") for r in nums)
    # Nothing was dead-lettered: every message of every feed reached its ledger.
    for table in pipe.config.tables:
        assert pipe.dead_letters(pipe.refs(table.name).dead_letters) == [], table.name
    _assert_equal_to_source(
        pipe, {f"{f.server}_nums": _floats_as_stored(nums) for f in feeds if "nums" in f.tables}
    )


def _floats_as_stored(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A FLOAT column holds a float32: compare the value a float32 reads back as."""
    import struct

    out = []
    for row in rows:
        flt = row["flt"]
        single = None if flt is None else struct.unpack("<f", struct.pack("<f", flt))[0]
        out.append({**row, "flt": single})
    return out


# -- PostgreSQL ----------------------------------------------------------------------------

PG_TIMES_DDL = """
CREATE TABLE times (
  id integer PRIMARY KEY, ts0 timestamp(0), ts3 timestamp(3), t3 time(3), d date,
  tz3 timestamptz(3)
)"""
PG_NUMS_DDL = """
CREATE TABLE nums (
  id integer PRIMARY KEY, d2 numeric(10,2), d6 numeric(10,6), free numeric,
  dbl double precision, note text
)"""


def _drop_slot_once_idle(postgres: PostgresServer, slot: str, db: str) -> None:
    """A removed connector's task lets go of its slot a moment later."""
    deadline = time.monotonic() + 30
    while True:
        try:
            postgres.drop_slot(slot, db)
            return
        except Exception:  # still active
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


# Columns of the both-paths table whose values Debezium 3.4 sends in a form no consumer
# can mirror exactly (docs/debezium.md): bit strings as bytes, multi-dimensional arrays
# (Debezium's are one-dimensional: {{1,2},{3,4}} arrives as [null, null]), interval, bit
# and domain arrays as nulls, numeric[] elements without their trailing zeros (1.50 as
# 1.5), time[] and timetz[] elements cut to milliseconds and seconds. Every other array
# is a list of its element and mirrored, floats, timestamps and numeric(p,s) included.
NOT_MIRRORED = {
    "c_bit10",
    "c_varbit",
    "c_grid",
    "c_intervals",
    "c_bits",
    "c_posints",
    "c_nums",
    "c_times",
    "c_timetzs",
}
PG_ARRAYS_AND_TOAST = """
UPDATE paths SET c_ints = '{1,NULL,-3}', c_texts = '{solo,"a,b","q\\"uote",é✓,NULL,""}',
  c_floats = '{5e-324,4,-0,NaN,Infinity,0.1,1e300}', c_reals = '{1.1,-0,3.4e38}',
  c_decs = '{1.5,-0.0001,NULL}',
  c_bools = '{t,f,NULL}', c_dates = '{2024-02-29,1970-01-01}',
  c_ts3s = '{"2024-02-29 10:11:12.345","1969-12-31 23:59:59.999"}',
  c_tstzs = '{"2024-06-30 23:30:00.25+05:30"}', c_bytes = '{"\\\\x00ff",NULL}',
  c_uuids = '{A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11}',
  c_jsonbs = ARRAY['{"k": [1, 2.50]}'::jsonb], c_moods = '{happy,sad}',
  c_json_arr = '{5,6}',
  c_toast = repeat('toast ✓ ', 4000),
  c_toast_arr = ARRAY[repeat('x', 6000), repeat('y', 6000)],
  "sp ace" = 's p', "qu""ote" = 'say "hi"', "MiXed" = -1
WHERE id = 1;
UPDATE paths SET c_ints = '[0:1]={7,8}', c_texts = '{}' WHERE id = 2;
"""
"""The both-paths test's array and TOAST values (its PG_VALUES) of the mirrored columns."""


def _pg_both_paths_table(cur: Any) -> None:
    """The all-types table of the both-paths test (``paths``: every type, arrays, hostile
    names, TOAST values kept out of line), without :data:`NOT_MIRRORED`."""
    from icetide.sources.quoting import postgres_quote
    from tests.integration.capture.test_both_paths import PG_EXTRA, TYPES_ROWS, TYPES_TABLE

    cur.execute(TYPES_TABLE.format(name="paths"))
    for column, sql_type, *_ in PG_EXTRA:
        if column not in NOT_MIRRORED:
            cur.execute(f"ALTER TABLE paths ADD COLUMN {postgres_quote(column)} {sql_type}")
    for column in ("c_toast", "c_toast_arr"):
        cur.execute(f"ALTER TABLE paths ALTER COLUMN {column} SET STORAGE EXTERNAL")
    cur.execute(TYPES_ROWS.format(name="paths"))
    cur.execute(PG_ARRAYS_AND_TOAST)


def _pg_rows(cur: Any, first: int, count: int) -> None:
    for n in range(first, first + count):
        d2 = TRICKY[n % len(TRICKY)]
        cur.execute(
            "INSERT INTO nums VALUES (%s, %s, %s, %s, %s, %s)",
            (n, d2, d2 / 10000, d2 * 3 if n % 2 else None, n / 3, f"n{n}"),
        )
        cur.execute(
            "INSERT INTO times VALUES (%s, %s, %s, %s, %s, %s)",
            (
                n,
                f"2024-02-29 10:11:{n % 60:02d}",
                f"1969-12-31 23:59:59.{n % 1000:03d}",
                f"12:34:56.{n % 1000:03d}",
                f"20{n % 100:02d}-01-02",
                f"2038-01-19 03:14:07.{n % 1000:03d}+00",
            ),
        )


def test_real_debezium_postgres_every_converter_and_setting(
    tmp_path: Path,
    warehouse: Path,
    spark: SparkSession,
    postgres: PostgresServer,
    kafka: KafkaServer,
    connect: ConnectWorker,
) -> None:
    from tests.integration.capture.test_postgres_capture import (
        ALL_TYPES_DDL as PG_ALL_TYPES_DDL,
    )
    from tests.integration.capture.test_postgres_capture import FULL_ROW as PG_FULL_ROW
    from tests.integration.capture.test_postgres_capture import _insert as pg_insert

    run = next(_runs)
    db = f"pgdbz{run}"
    feeds = [
        Feed(f"p{run}js", ("all_types", "paths", "nums", "times")),  # schemas on, defaults
        Feed(f"p{run}jp", ("all_types", "paths", "nums", "times"), SCHEMALESS),  # precise
        Feed(
            f"p{run}jt",
            ("nums", "times"),
            {
                **SCHEMALESS,
                "decimal.handling.mode": "string",
                "time.precision.mode": "adaptive_time_microseconds",
            },
            {
                "decimal_handling_mode": "string",
                "time_precision_mode": "adaptive_time_microseconds",
            },
        ),
        Feed(
            f"p{run}jc",
            ("times",),
            {**SCHEMALESS, "time.precision.mode": "connect"},
            {"time_precision_mode": "connect"},
        ),
    ]
    postgres.create_database(db)
    conn = postgres.connect(db)
    try:
        with conn.cursor() as cur:
            cur.execute(PG_ALL_TYPES_DDL)
            cur.execute(PG_NUMS_DDL)
            cur.execute(PG_TIMES_DDL)
            # Debezium's arrays are one-dimensional: it sends {{1,2},{3,4}} as [null, null],
            # which no consumer can mirror (docs/debezium.md), so the int[][] column (a
            # list of lists) stays NULL here; icetide's capture keeps it.
            cur.execute(*pg_insert("all_types", {**PG_FULL_ROW, "c_int_2d": None}))
            cur.execute(*pg_insert("all_types", {"id": 2, "c_notnull": "", "c_numx": None}))
            _pg_rows(cur, 1, 30)
            _pg_both_paths_table(cur)
            for table in ("all_types", "nums", "times", "paths"):  # old images of updates
                cur.execute(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
    finally:
        conn.close()
    base = {
        **example("postgres-connector.json"),
        "database.port": str(postgres.port),
        "database.user": postgres.user,
        "database.password": "",
        "database.dbname": db,
        "heartbeat.interval.ms": "500",
    }
    assert base["connector.class"] == POSTGRES_CONNECTOR
    for feed in feeds:
        feed.settings.update(
            {
                "slot.name": f"dbz_{feed.server}",
                "publication.name": f"dbz_{feed.server}",
                "table.include.list": ",".join(f"public.{t}" for t in feed.tables),
            }
        )
    sources = [
        {
            "name": f.server,
            "type": "postgres",
            "port": postgres.port,
            "user": postgres.user,
            "database": db,
            "tables": [f"{f.server}_{t}" for t in f.tables],
            "debezium": f.declared,
        }
        for f in feeds
    ]
    try:
        _run_feeds(connect, kafka, feeds, base)
        conn = postgres.connect(db)
        try:
            with conn.cursor() as cur:  # the live workload
                _pg_rows(cur, 31, 20)
                cur.execute("UPDATE nums SET d2 = -d2, note = 'flipped' WHERE id % 3 = 0")
                cur.execute("DELETE FROM nums WHERE id % 7 = 0")
                cur.execute("UPDATE times SET id = id + 1000 WHERE id < 5")  # key updates
                cur.execute("UPDATE all_types SET c_float8 = 1e-300, c_num = 0 WHERE id = 2")
                cur.execute(f"INSERT INTO nums (id, d2) VALUES ({SENTINEL}, 1.5)")
                cur.execute(f"INSERT INTO times (id) VALUES ({SENTINEL})")
                # The TOASTed values stay unchanged: Debezium sends its placeholder.
                cur.execute("UPDATE paths SET c_int2 = 5 WHERE id IN (1, 4)")
                cur.execute(f"INSERT INTO paths (id) VALUES ({SENTINEL})")
                cur.execute(f"INSERT INTO all_types (id, c_notnull) VALUES ({SENTINEL}, 'e')")
        finally:
            conn.close()
        topics = [f"{f.server}.public.{t}" for f in feeds for t in f.tables]
        _consume_until_sentinels(kafka, topics, timeout=180)
        pipe = _pipeline(tmp_path, warehouse, spark, kafka, db, sources, feeds, "public")
        ledger_stage(spark, pipe.pipeline).start(once=True).awaitTermination()
        pipe.merge()
    finally:
        for feed in feeds:
            connect.remove(feed.server)
        for feed in feeds:  # slots are server-wide: leave none behind
            _drop_slot_once_idle(postgres, f"dbz_{feed.server}", db)
    conn = postgres.connect(db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, d2, d6, dbl FROM nums ORDER BY id")
            nums = [{"id": r[0], "d2": r[1], "d6": r[2], "dbl": r[3]} for r in cur.fetchall()]
    finally:
        conn.close()
    for table in pipe.config.tables:
        assert pipe.dead_letters(pipe.refs(table.name).dead_letters) == [], table.name
    _assert_equal_to_source(pipe, {f"{f.server}_nums": nums for f in feeds if "nums" in f.tables})
