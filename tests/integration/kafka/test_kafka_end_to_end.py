"""MariaDB → capture → a real Kafka broker (JSON, then Avro with a registry) → ledger via
Spark's Kafka source → base.

One broker per run (the ``kafka`` session fixture, KRaft on loopback). The ledger reads
it with Spark's own ``spark-sql-kafka-0-10`` source, so message ids are
``topic/partition/offset``; a second run of the ledger over the same topic adds nothing
(exactly-once by the checkpoint and batch id), and a broker killed with ``kill -9`` and
restarted mid-stream loses no acknowledged message; a ledger process killed (exit 137)
right after its append, rerun, writes every event once.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from icetide.capture.runner import run_capture
from icetide.capture.transport.kafka import topic_name
from icetide.cli.stages import ledger_stage
from icetide.config import load_config, load_table_schemas
from icetide.devservers.mariadb import MariaDBServer
from icetide.events.registry import registry_for
from icetide.evolution.registry_walk import MAPPING_PROPERTY
from icetide.faults import KILLED_EXIT_CODE
from icetide.lake.alter import table_properties
from icetide.schema.contract import ledger as c
from icetide.schema.file import dump_schema_file, schema_from_dict
from tests.devservers.kafka import KafkaServer
from tests.devservers.registry import RegistryServer
from tests.integration.harness import Pipeline

_runs = itertools.count(1)

ITEMS = {
    "table": "items",
    "primary_key": ["id"],
    "columns": [
        {"id": 1, "name": "id", "type": "int", "nullable": False},
        {"id": 2, "name": "name", "type": "string"},
        {"id": 3, "name": "qty", "type": "long"},
    ],
}


def _kafka_pipeline(
    root: Path,
    warehouse: Path,
    namespace: str,
    db: str,
    server: MariaDBServer,
    kafka: KafkaServer,
    spark: SparkSession,
    avro_registry: str | None = None,
) -> Pipeline:
    dump_schema_file(schema_from_dict(ITEMS), root / "schemas" / "items.yaml")
    source = f"k{namespace}"
    doc: dict[str, Any] = {
        "pipeline": namespace,
        "state_dir": "./state",
        "catalog": {"name": "lake", "warehouse": str(warehouse), "namespace": namespace},
        "spark": {"master": "local[2]", "shuffle_partitions": 4},
        "sources": [server.source_entry(source, server_id=5000 + next(_runs), heartbeat="1s")],
        "transport": {
            "type": "kafka",
            "bootstrap_servers": kafka.bootstrap_servers,
            "topics": [topic_name(source, db, "items")],
            "roll_interval": "1s",
        },
        "tables": [
            {
                "name": "items",
                "source": f"{source}.{db}.items",
                "schema": "schemas/items.yaml",
                "buckets": 2,
            }
        ],
    }
    if avro_registry is not None:  # capture writes Avro, registered (AvroConverter's form)
        doc["transport"] |= {"format": "avro", "registry": {"url": avro_registry}}
    path = root / "icetide.yaml"
    path.write_text(json.dumps(doc))
    config = load_config(path)
    return Pipeline(root, path, config, load_table_schemas(config), spark)


def test_capture_through_a_real_broker_reaches_the_base_table_exactly_once(
    tmp_path: Path,
    warehouse: Path,
    mariadb: MariaDBServer,
    kafka: KafkaServer,
    registry: RegistryServer,
    spark: SparkSession,
) -> None:
    namespace = f"kafka{next(_runs)}"
    db = f"{namespace}_db"
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"CREATE TABLE `{db}`.items (id INT PRIMARY KEY, name VARCHAR(20), qty BIGINT)")
    pipe = _kafka_pipeline(tmp_path, warehouse, namespace, db, mariadb, kafka, spark)
    source = pipe.config.sources[0]
    topic = pipe.config.transport.topics[0]

    run_capture(pipe.config, source, follow=False, from_now=True)  # records the log's end
    with mariadb.connect(db) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO items VALUES (%s, %s, %s)", [(i, f"item {i}", i * 10) for i in range(1, 6)]
        )
        cur.execute("UPDATE items SET qty = 999 WHERE id = 2")
        cur.execute("DELETE FROM items WHERE id = 5")
    run_capture(pipe.config, source, follow=False)
    # The ledger process is killed (exit 137, as kill -9) right after its ledger append,
    # before Spark commits the batch: the rerun replays the batch and appends nothing twice.
    killed = pipe.cli("stream", "--once", fault="ledger.after_first_append")
    assert killed.returncode == KILLED_EXIT_CODE, killed.stderr[-2000:]
    pipe.stream()

    # A crash of the broker after the first batch: every acknowledged message is kept.
    kafka.restart()
    with mariadb.connect(db) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO items VALUES (6, 'after restart', 60)")
    run_capture(pipe.config, source, follow=False)
    pipe.stream()
    pipe.stream()  # nothing new: adds nothing
    pipe.merge()

    ledger = pipe.rows(pipe.refs("items").cdc.sql, order=c.MESSAGE_ID)
    ids = [row[c.MESSAGE_ID] for row in ledger]
    assert len(ids) == len(set(ids)) == 8  # 5 inserts, 1 update, 1 delete, 1 insert; once each
    assert sorted(int(i.rsplit("/", 1)[1]) for i in ids) == list(range(8))
    assert all(i.startswith(f"{topic}/0/") for i in ids)
    assert [(r["id"], r["name"], r["qty"]) for r in pipe.base("items")] == [
        (1, "item 1", 10),
        (2, "item 2", 999),
        (3, "item 3", 30),
        (4, "item 4", 40),
        (6, "after restart", 60),
    ]

    # The same pipeline switched to transport.format: avro: capture registers the
    # envelope's schema under <topic>-value and frames each value; the running ledger
    # reads Avro and JSON side by side, walks the subject's version 1 (the table's own
    # schema: nothing to change) and lands the rows.
    url = registry.url  # the run's registry, over HTTP
    pipe = _kafka_pipeline(tmp_path, warehouse, namespace, db, mariadb, kafka, spark, url)
    with mariadb.connect(db) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO items VALUES (7, 'avro', 70)")
        cur.execute("UPDATE items SET name = 'avro too' WHERE id = 3")
    run_capture(pipe.config, source, follow=False)
    ledger_stage(spark, pipe.pipeline).start(once=True).awaitTermination()
    pipe.merge()
    cdc = pipe.refs("items").cdc
    assert table_properties(spark, cdc)[MAPPING_PROPERTY] == '{"1": 1}'
    assert [v.version for v in registry_for(url).versions(f"{topic}-value")] == [1]
    assert len(pipe.rows(cdc.sql)) == 10 and pipe.rows(pipe.refs("items").dead_letters.sql) == []
    assert [(r["id"], r["name"], r["qty"]) for r in pipe.base("items")][2:] == [
        (3, "avro too", 30),
        (4, "item 4", 40),
        (6, "after restart", 60),
        (7, "avro", 70),
    ]


def test_a_backlog_is_taken_in_micro_batches_no_larger_than_the_bound(
    tmp_path: Path, warehouse: Path, kafka: KafkaServer, spark: SparkSession
) -> None:
    """``transport.max_messages_per_trigger`` bounds every micro-batch of the Kafka
    source, ``--once`` included: a backlog of 7 messages with a bound of 3 is stored by
    three appends of 3, 3 and 1 (unbounded, one batch holds the whole backlog)."""
    from confluent_kafka import Producer

    from tests.integration.events import ITEMS as ROWS
    from tests.integration.events import mysql

    namespace = f"kafka{next(_runs)}"
    topic = f"{namespace}.items"
    transport = {
        "type": "kafka",
        "bootstrap_servers": kafka.bootstrap_servers,
        "topics": [topic],
        "max_messages_per_trigger": 3,
    }
    pipe = Pipeline.custom(
        tmp_path,
        warehouse,
        namespace,
        {"items": ROWS},
        {"items": "shop.items"},
        spark,
        transport=transport,
    )
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "log_level": "3"})
    for i in range(7):
        producer.produce(topic, mysql("c", 100 + i, after={"id": i, "name": f"n{i}", "qty": i}))
    assert producer.flush(30) == 0

    ledger_stage(spark, pipe.pipeline).start(once=True).awaitTermination()
    cdc = pipe.refs("items").cdc
    added = [
        int(row.summary["added-records"])
        for row in spark.sql(
            f"SELECT operation, summary FROM {cdc.sql}.snapshots ORDER BY committed_at"
        ).collect()
        if row.operation == "append"
    ]
    assert added == [3, 3, 1], added
    assert sorted(r["id"] for r in pipe.rows(cdc.sql)) == list(range(7))
