"""Avro-serialised Debezium envelopes over the real broker, schema ids from a registry.

The registry is the run's real one (``rivven-schema`` over HTTP on loopback, the
``registry`` fixture; Apicurio Registry could not be built from Maven Central here: see
docs/registry.md). The ledger reads the topic
with Spark's Kafka source and walks the schema versions the messages name by itself:
one schema version each, in order, recorded in ``icetide.schema.mapping``; messages still
in flight with the old version apply after the table moved on; a version the
compatibility mode refuses and bad frames are dead letters. A process walking a batch's
six new versions is killed (exit 137, as ``kill -9``) between the first two (it asks the
same registry); the running ledger then applies each version exactly once.
"""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import Any

import fastavro
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema
from pyspark.sql import SparkSession

from icetide.cli.stages import ledger_stage
from icetide.config import load_config, load_table_schemas
from icetide.events.registry import registry_for
from icetide.events.wire import frame
from icetide.evolution.audit import audit_path, read_audit
from icetide.evolution.registry_walk import MAPPING_PROPERTY, read_mapping
from icetide.faults import KILLED_EXIT_CODE
from icetide.lake.alter import int_property, table_properties
from icetide.pipeline import SchemaStore
from icetide.schema.contract.names import TableName
from icetide.schema.contract.phases import DATA_VERSION
from icetide.schema.file import dump_schema_file, schema_from_dict
from tests.devservers.kafka import KafkaServer
from tests.devservers.registry import RegistryServer
from tests.integration.harness import Pipeline, run_script

_runs = itertools.count(1)
SUBJECT_SUFFIX = "-value"
ITEMS = {
    "table": "items",
    "primary_key": ["id"],
    "columns": [
        {"id": 1, "name": "id", "type": "int", "nullable": False},
        {"id": 2, "name": "name", "type": "string"},
        {"id": 3, "name": "qty", "type": "int"},
        {"id": 4, "name": "price", "type": "float"},
        {"id": 5, "name": "legacy", "type": "string"},
        {"id": 6, "name": "note", "type": "string", "nullable": False},
    ],
}
SOURCE_AVRO = {
    "type": "record",
    "name": "Source",
    "namespace": "io.debezium.connector.mysql",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "db", "type": "string"},
        {"name": "table", "type": "string"},
        {"name": "file", "type": "string"},
        {"name": "pos", "type": "long"},
        {"name": "ts_ms", "type": "long"},
    ],
}


def opt(name: str, kind: Any = "string") -> dict[str, Any]:
    return {"name": name, "type": ["null", kind], "default": None}


def row(
    qty: str = "int",
    price: str = "float",
    legacy: bool = True,
    note_optional: bool = False,
    email: bool = False,
    address: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    fields = [{"name": "id", "type": "int"}, opt("name"), opt("qty", qty), opt("price", price)]
    if legacy:
        fields.append(opt("legacy"))
    fields.append(opt("note") if note_optional else {"name": "note", "type": "string"})
    if email:
        fields.append(opt("email"))
    if address is not None:
        fields.append(opt("address", address))
    return fields


CITY = {"type": "record", "name": "address", "fields": [{"name": "city", "type": "string"}]}
CITY_ZIP = {
    "type": "record",
    "name": "address",
    "fields": [{"name": "city", "type": "string"}, opt("zip")],
}
ROWS = [
    row(),  # v1
    row(email=True),  # v2: add an optional column
    row(email=True, address=CITY),  # v3: add a struct
    row(email=True, address=CITY_ZIP),  # v4: add a nested field
    row(qty="long", email=True, address=CITY_ZIP),  # v5: int → long
    row(qty="long", price="double", email=True, address=CITY_ZIP),  # v6: float → double
    # v7: legacy deleted (soft: kept in Iceberg, optional), note required → optional
    row(qty="long", price="double", legacy=False, note_optional=True, email=True, address=CITY_ZIP),
    # v8: a required field with no default: old records cannot be read (not BACKWARD)
    [
        *row(
            qty="long",
            price="double",
            legacy=False,
            note_optional=True,
            email=True,
            address=CITY_ZIP,
        ),
        {"name": "sku", "type": "string"},
    ],
]


def envelope(fields: list[dict[str, Any]]) -> dict[str, Any]:
    row = {"type": "record", "name": "Value", "namespace": "shop.inv.items", "fields": fields}
    return {
        "type": "record",
        "name": "Envelope",
        "namespace": "shop.inv.items",
        "fields": [
            {"name": "before", "type": ["null", row], "default": None},
            {"name": "after", "type": ["null", "Value"], "default": None},
            {"name": "source", "type": SOURCE_AVRO},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
        ],
    }


def message(schema_id: int, version: int, after: dict[str, Any], pos: int) -> bytes:
    value = {
        "before": None,
        "after": after,
        "source": {
            "name": "shop",
            "db": "inv",
            "table": "items",
            "file": "b.1",
            "pos": pos,
            "ts_ms": 1000 + pos,
        },
        "op": "c",
        "ts_ms": 2000 + pos,
    }
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(envelope(ROWS[version - 1])), value)
    return frame(schema_id, out.getvalue())


def stream(pipe: Pipeline) -> None:
    """One run of the ledger stage as `icetide stream` wires it (version walk included)."""
    ledger_stage(pipe.session, pipe.pipeline).start(once=True).awaitTermination()


def mapping(spark: SparkSession, table: TableName) -> dict[int, int]:
    return read_mapping(table_properties(spark, table).get(MAPPING_PROPERTY))


def _pipeline(
    root: Path, warehouse: Path, namespace: str, kafka: KafkaServer, url: str, spark: SparkSession
) -> Pipeline:
    dump_schema_file(schema_from_dict(ITEMS), root / "schemas" / "items.yaml")
    doc = {
        "pipeline": namespace,
        "state_dir": "./state",
        "catalog": {"name": "lake", "warehouse": str(warehouse), "namespace": namespace},
        "spark": {"master": "local[2]", "shuffle_partitions": 4},
        "transport": {
            "type": "kafka",
            "bootstrap_servers": kafka.bootstrap_servers,
            "topics": [f"{namespace}.inv.items"],
            "registry": {"url": url},
        },
        "tables": [
            {
                "name": "items",
                "source": "shop.inv.items",
                "schema": "schemas/items.yaml",
                "buckets": 2,
            }
        ],
    }
    path = root / "icetide.yaml"
    path.write_text(json.dumps(doc))
    config = load_config(path)
    return Pipeline(root, path, config, load_table_schemas(config), spark)


def test_seven_registry_versions_apply_in_order_and_old_messages_still_land(
    tmp_path: Path,
    warehouse: Path,
    kafka: KafkaServer,
    registry: RegistryServer,
    spark: SparkSession,
) -> None:
    namespace = f"reg{next(_runs)}"
    pipe = _pipeline(tmp_path, warehouse, namespace, kafka, registry.url, spark)
    topic = pipe.config.transport.topics[0]
    subject = topic + SUBJECT_SUFFIX
    client = registry_for(registry.url).client
    ids: dict[int, int] = {}

    def register(version: int) -> None:
        schema = Schema(json.dumps(envelope(ROWS[version - 1])), "AVRO")
        ids[version] = client.register_schema(subject, schema)

    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "log_level": "3"})

    def send(*values: bytes) -> None:
        for value in values:
            producer.produce(topic, value)
        assert producer.flush(30) == 0

    def v1_row(key: int, name: str, qty: int | None, price: float | None) -> dict[str, Any]:
        return {
            "id": key,
            "name": name,
            "qty": qty,
            "price": price,
            "legacy": "L",
            "note": f"n{key}",
        }

    register(1)
    send(
        message(ids[1], 1, v1_row(1, "pen", 3, 1.5), 10),
        frame(ids[1], b"\xff\xff\xff\xff"),  # not Avro of that schema
        frame(9999, b"\x00"),  # an id the registry does not have
        message(ids[1], 1, v1_row(2, "ink", None, None), 11),
    )
    refs = pipe.refs("items")
    stream(pipe)
    assert mapping(spark, refs.cdc) == {1: 1}  # version 1 is the schema file: nothing to do
    pipe.merge()

    for version in range(2, 9):
        register(version)
    address = {"city": "Oslo", "zip": "0150"}
    send(
        message(
            ids[7],
            7,
            {
                "id": 3,
                "name": "cap",
                "qty": 5_000_000_000,
                "price": 0.1,
                "note": None,
                "email": "a@x",
                "address": address,
            },
            12,
        ),
        message(
            ids[4],
            4,
            {**v1_row(4, "hat", 4, None), "email": None, "address": {"city": "Rome", "zip": None}},
            13,
        ),
        message(ids[1], 1, v1_row(5, "old", 7, 2.5), 14),  # still in flight
        message(ids[8], 8, {**v1_row(6, "bad", 1, 1.0), "sku": "S6"}, 15),  # incompatible
    )

    # A process walking this batch's versions is killed (exit 137, as kill -9) right
    # after applying version 2, before version 3 and before recording 2 in the mapping.
    batch = [ids[7], ids[4], ids[1], ids[8]]  # the schema ids in the order messages came
    killed = run_script(
        WALK_IN_A_CHILD,
        str(pipe.config_path),
        subject,
        json.dumps(batch),
        fault="evolution.between_versions",
    )
    assert killed.returncode == KILLED_EXIT_CODE, killed.stderr[-2000:]
    assert [s.version for s in SchemaStore(pipe.config).history("items").versions] == [1, 2]
    assert mapping(spark, refs.cdc) == {1: 1}  # died before recording version 2
    pipe.schemas = load_table_schemas(pipe.config)  # what a restarted process reads

    # The running ledger walks every version up to the newest it sees, one version each,
    # before projecting the batch; version 8 breaks BACKWARD_TRANSITIVE and is refused.
    stream(pipe)
    store = SchemaStore(pipe.config)
    assert mapping(spark, refs.cdc) == {v: v for v in range(1, 8)}
    audit = audit_path(pipe.config.resolved_path(pipe.config.table("items").schema_file))
    assert [r.version for r in read_audit(audit)] == list(range(2, 8))  # each once, in order
    history = store.history("items")
    assert [s.version for s in history.versions] == list(range(1, 8))
    assert "email" in history.versions[1].by_name and "email" not in history.versions[0].by_name
    assert str(history.versions[4].by_name["qty"].type) == "long"
    assert str(history.versions[3].by_name["qty"].type) == "int"
    assert str(history.versions[5].by_name["price"].type) == "double"
    assert "legacy" not in history.versions[6].by_name
    assert history.versions[6].by_name["note"].nullable
    assert not history.versions[5].by_name["note"].nullable

    pipe.schemas = load_table_schemas(pipe.config)
    # The stages converge on version 7 in turns, as `icetide run` takes them
    # (docs/convergence.md): the merge acknowledges it, the ledger switches its
    # projection, the merge fills the values kept meanwhile in _rescued.
    ledger = ledger_stage(pipe.session, pipe.pipeline)
    for _ in range(5):
        pipe.merge()
        ledger.tick()
        if int_property(table_properties(spark, refs.base), DATA_VERSION) == 7:
            break
    assert int_property(table_properties(spark, refs.base), DATA_VERSION) == 7
    stream(pipe)  # a restart walks again: nothing is applied twice
    assert [s.version for s in SchemaStore(pipe.config).history("items").versions] == list(
        range(1, 8)
    )
    base = [
        (r["id"], r["name"], r["qty"], r["price"], r["note"], r["email"], r["address"])
        for r in pipe.base("items")
    ]
    assert base == [
        (1, "pen", 3, 1.5, "n1", None, None),
        (2, "ink", None, None, "n2", None, None),
        (3, "cap", 5_000_000_000, 0.1, None, "a@x", {"city": "Oslo", "zip": "0150"}),
        (4, "hat", 4, None, "n4", None, {"city": "Rome", "zip": None}),
        (5, "old", 7, 2.5, "n5", None, None),
    ]
    [refused] = pipe.dead_letters_raw(refs.dead_letters.sql)
    assert refused["message_id"] == f"{topic}/0/7" and refused["reason"] == "schema_incompatible"
    assert "version 8" in refused["error"] and "must read version 1's data" in refused["error"]
    # The column and the rule, not the union the checker stopped at.
    assert "column sku has no default" in refused["error"], refused["error"]
    assert "BACKWARD_TRANSITIVE" in refused["error"] and "lacking" not in refused["error"]
    # Undecodable frames name no table: they go to the unrouted dead-letter table.
    unrouted = pipe.refs(pipe.config.dead_letter.unrouted_table).dead_letters
    dead = {
        r["message_id"]: (r["reason"], r["payload"]) for r in pipe.dead_letters_raw(unrouted.sql)
    }
    assert dead == {
        f"{topic}/0/1": ("deserialization", frame(ids[1], b"\xff\xff\xff\xff")),
        f"{topic}/0/2": ("unknown_schema_id", frame(9999, b"\x00")),
    }
    columns = {f.name: f for f in spark.table(refs.base.sql).schema.fields}
    assert {"email", "address"} <= set(columns)
    assert "legacy" in columns and columns["legacy"].nullable  # soft-deleted: kept, optional


WALK_IN_A_CHILD = """
import json, sys
from pathlib import Path
import icetide.evolution.carried as carried
from icetide.artifacts.runtime import table_metadata
from icetide.config import load_config
from icetide.ledger.signals import CarriedSchema
from icetide.pipeline import Pipeline
config = load_config(sys.argv[1])
subject, batch = sys.argv[2], json.loads(sys.argv[3])
def properties(spark, table):  # the ledger table's real properties, from its metadata file
    folder = Path(config.catalog.warehouse) / table.namespace / table.name
    return json.loads(Path(table_metadata(str(folder))).read_text())["properties"]
carried.table_properties = properties  # no Spark here: it dies before writing any
carried.VersionWalker(None, Pipeline(config))([
    CarriedSchema("items", f"registry:{i}", subject=subject, schema_id=i, first=n)
    for n, i in enumerate(batch)
])
"""
"""The registry version walk alone, in a child process that asks the same registry over
HTTP (no Spark: see the comments)."""
