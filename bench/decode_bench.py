"""Decode benchmark: Debezium envelopes per second per core, registry formats vs JSON.

Runs the ledger's own decode functions (``classify_batches`` then ``project_batches``,
what the ``mapInArrow`` workers run, on Arrow batches of 4,096 messages, the size the
landing-file reader makes) in one process, so the figure is per core, for the same
``--events`` Debezium envelopes (an 8-column row) serialised four ways:

* plain JSON (the baseline),
* Avro with a registry frame (fastavro, writer schema),
* JSON Schema with a registry frame (payload validated by ``jsonschema``),
* Protobuf with a registry frame and message indexes,
* Avro again with the ``price`` column a ``decimal(12,2)`` (Avro's ``decimal`` logical
  type, as Confluent's AvroConverter writes a Connect Decimal): ``avro_decimal``;
* JSON with the inline Connect schema block JsonConverter writes by default
  (``schemas.enable=true``; ~2 kB of schema beside each row, compact as it writes it):
  ``json_inline``;
* plain JSON again with the ``price`` column a ``decimal(12,2)``, each value a JSON
  number with two decimals (as a connector with ``decimal.handling.mode=double`` writes
  it): ``json_decimal``;
* plain JSON again with three nested columns more (a ``list<string>``, a
  ``map<string, long>`` and a ``struct<city: string, zip: int>``, as a PostgreSQL
  array, an hstore or a composite arrive): ``json_nested``.

Rates are per CPU-second of this process (``time.process_time``), not per wall second:
on a shared machine a process waits for a core for as long as it runs, and the figure
is what one core does. Each format runs ``--repeat`` times; medians are printed with
the ratio to JSON, and
beside them the parse alone of the JSON lines by ``json.loads``, ``orjson.loads`` and
``pyarrow.json`` (the floor a Python decode can approach). Machines here are small and
shared: read medians, not single runs. No Spark, no broker.

    python bench/decode_bench.py --events 20000 --repeat 5
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import fastavro
import orjson
import pyarrow as pa
import pyarrow.json as pa_json
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from icetide.capture.envelope import envelope_schema
from icetide.capture.mysql.reader import SOURCE as MYSQL
from icetide.events.wire import AVRO, JSON_SCHEMA, PROTOBUF, WriterSchema, frame
from icetide.ledger.decode import ROW, Routes, classify_batches, project_batches
from icetide.ledger.registry_decode import Wire
from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema

COLUMNS = [
    ("id", "long"),
    ("name", "string"),
    ("email", "string"),
    ("qty", "long"),
    ("price", "double"),
    ("active", "boolean"),
    ("city", "string"),
    ("note", "string"),
]
SCHEMA = schema_from_dict(
    {
        "table": "items",
        "primary_key": ["id"],
        "columns": [
            {"id": i, "name": n, "type": t, "nullable": n != "id"}
            for i, (n, t) in enumerate(COLUMNS, 1)
        ],
    }
)
ROUTES = Routes({"inv.items": [(None, "items")]})
DECIMAL_SCHEMA = schema_from_dict(
    {
        "table": "items",
        "primary_key": ["id"],
        "columns": [
            {"id": i, "name": n, "type": "decimal(12,2)" if n == "price" else t,
             "nullable": n != "id"}
            for i, (n, t) in enumerate(COLUMNS, 1)
        ],
    }
)  # fmt: skip
NESTED_SCHEMA = schema_from_dict(
    {
        "table": "items",
        "primary_key": ["id"],
        "columns": [
            *({"id": i, "name": n, "type": t, "nullable": n != "id"}
              for i, (n, t) in enumerate(COLUMNS, 1)),
            {"id": 20, "name": "tags", "type": {"list": {"element_id": 21, "element": "string"}}},
            {"id": 22, "name": "attrs",
             "type": {"map": {"key_id": 23, "key": "string", "value_id": 24, "value": "long"}}},
            {"id": 25, "name": "addr", "type": {"struct": [
                {"id": 26, "name": "city", "type": "string"},
                {"id": 27, "name": "zip", "type": "int"},
            ]}},
        ],
    }
)  # fmt: skip


def nested(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with values for :data:`NESTED_SCHEMA`'s nested columns."""
    i = doc["after"]["id"]
    extra = {
        "tags": [f"t{i % 7}", "sale"],
        "attrs": {"views": i % 1000, "likes": i % 13},
        "addr": {"city": "Lisbon", "zip": 1000 + i % 900},
    }
    return doc | {"after": doc["after"] | extra}


SOURCE_FIELDS = [
    ("name", "string"),
    ("db", "string"),
    ("table", "string"),
    ("file", "string"),
    ("pos", "long"),
    ("ts_ms", "long"),
]


def event(i: int) -> dict[str, Any]:
    row = {
        "id": i,
        "name": f"item {i}",
        "email": f"u{i}@example.com",
        "qty": i % 97,
        "price": i / 7,
        "active": i % 2 == 0,
        "city": "Lisbon",
        "note": "x" * 20,
    }
    source = {
        "name": "shop",
        "db": "inv",
        "table": "items",
        "file": "b.1",
        "pos": i,
        "ts_ms": 1_700_000_000_000 + i,
    }
    return {"before": None, "after": row, "source": source, "op": "c", "ts_ms": i}


CONNECT_TYPES = {"long": "int64", "string": "string", "double": "float64", "boolean": "boolean"}


INLINE_SCHEMA = envelope_schema(
    "shop.inv.items",
    [{"field": n, "type": CONNECT_TYPES[t], "optional": n != "id"} for n, t in COLUMNS],
    MYSQL,
)
"""The envelope's Connect schema, as icetide's capture writes it."""


def inline(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` as JsonConverter writes it with ``schemas.enable=true``: the envelope's
    Connect schema beside the payload."""
    return {"schema": INLINE_SCHEMA, "payload": doc}


def compact(doc: dict[str, Any]) -> bytes:
    """``doc`` as Kafka Connect's JsonConverter writes it: compact JSON."""
    return json.dumps(doc, separators=(",", ":")).encode()


def avro_schema() -> dict[str, Any]:
    avro = {"long": "long", "string": "string", "double": "double", "boolean": "boolean"}
    fields = [
        {"name": n, "type": avro[t] if n == "id" else ["null", avro[t]], "default": None}
        for n, t in COLUMNS
    ]
    fields[0].pop("default")
    row = {"type": "record", "name": "Value", "fields": fields}
    source = {
        "type": "record",
        "name": "Source",
        "fields": [{"name": n, "type": t} for n, t in SOURCE_FIELDS],
    }
    return {
        "type": "record",
        "name": "Envelope",
        "namespace": "inv.items",
        "fields": [
            {"name": "before", "type": ["null", row], "default": None},
            {"name": "after", "type": ["null", "Value"], "default": None},
            {"name": "source", "type": source},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
        ],
    }


def avro_decimal_schema() -> dict[str, Any]:
    """:func:`avro_schema` with ``price`` an Avro ``decimal(12,2)``."""
    schema = avro_schema()
    for field in schema["fields"][0]["type"][1]["fields"]:
        if field["name"] == "price":
            field["type"] = [
                "null",
                {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
            ]
    return schema


def json_schema() -> dict[str, Any]:
    kinds = {"long": "integer", "string": "string", "double": "number", "boolean": "boolean"}
    value = {"type": "object", "properties": {n: {"type": [kinds[t], "null"]} for n, t in COLUMNS}}
    return {
        "type": "object",
        "properties": {
            "before": {"oneOf": [{"type": "null"}, value]},
            "after": {"oneOf": [{"type": "null"}, value]},
            "source": {"type": "object"},
            "op": {"type": "string"},
            "ts_ms": {"type": ["integer", "null"]},
        },
        "required": ["op", "source"],
    }


def proto_file() -> descriptor_pb2.FileDescriptorProto:
    t = descriptor_pb2.FieldDescriptorProto
    kinds = {
        "long": t.TYPE_INT64,
        "string": t.TYPE_STRING,
        "double": t.TYPE_DOUBLE,
        "boolean": t.TYPE_BOOL,
    }
    f = descriptor_pb2.FileDescriptorProto(name="items.proto", package="inv", syntax="proto3")
    env = f.message_type.add(name="Envelope")
    value = env.nested_type.add(name="Value")
    for number, (n, k) in enumerate(COLUMNS, 1):
        value.field.add(name=n, number=number, type=kinds[k], label=t.LABEL_OPTIONAL)
    source = env.nested_type.add(name="Source")
    for number, (n, k) in enumerate(SOURCE_FIELDS, 1):
        source.field.add(name=n, number=number, type=kinds[k], label=t.LABEL_OPTIONAL)
    for number, (n, kind, ref) in enumerate(
        [
            ("before", t.TYPE_MESSAGE, ".inv.Envelope.Value"),
            ("after", t.TYPE_MESSAGE, ".inv.Envelope.Value"),
            ("source", t.TYPE_MESSAGE, ".inv.Envelope.Source"),
            ("op", t.TYPE_STRING, ""),
            ("ts_ms", t.TYPE_INT64, ""),
        ],
        1,
    ):
        field = env.field.add(name=n, number=number, type=kind, label=t.LABEL_OPTIONAL)
        if ref:
            field.type_name = ref
    return f


Case = tuple[list[bytes], Wire | None, TableSchema]


def messages(events: int) -> dict[str, Case]:
    docs = [event(i) for i in range(events)]
    parsed = fastavro.parse_schema(avro_schema())
    avro = []
    for doc in docs:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, doc)
        avro.append(frame(1, out.getvalue()))
    proto = proto_file()
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("inv.Envelope"))
    pb = [
        frame(
            3,
            cls(
                after=cls.Value(**d["after"]),
                source=cls.Source(**d["source"]),
                op=d["op"],
                ts_ms=d["ts_ms"],
            ).SerializeToString(),
            (0,),
        )
        for d in docs
    ]
    decimal = fastavro.parse_schema(avro_decimal_schema())
    avro_decimal = []
    for doc in docs:
        out = io.BytesIO()
        cents = Decimal(round(doc["after"]["price"] * 100)) / 100
        fastavro.schemaless_writer(out, decimal, doc | {"after": doc["after"] | {"price": cents}})
        avro_decimal.append(frame(4, out.getvalue()))
    wire = Wire(
        {
            1: WriterSchema(AVRO, json.dumps(avro_schema())),
            2: WriterSchema(JSON_SCHEMA, json.dumps(json_schema())),
            3: WriterSchema(PROTOBUF, base64.b64encode(proto.SerializeToString()).decode()),
            4: WriterSchema(AVRO, json.dumps(avro_decimal_schema())),
        }
    )
    return {
        "json": ([json.dumps(d).encode() for d in docs], None, SCHEMA),
        "avro": (avro, wire, SCHEMA),
        "json_schema": ([frame(2, json.dumps(d).encode()) for d in docs], wire, SCHEMA),
        "protobuf": (pb, wire, SCHEMA),
        "avro_decimal": (avro_decimal, wire, DECIMAL_SCHEMA),
        "json_inline": ([compact(inline(d)) for d in docs], None, SCHEMA),
        "json_nested": ([json.dumps(nested(d)).encode() for d in docs], None, NESTED_SCHEMA),
        "json_decimal": ([json.dumps(in_cents(d)).encode() for d in docs], None, DECIMAL_SCHEMA),
    }


def in_cents(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with its price rounded to cents: the double a decimal(12,2) column's value
    is written as by ``decimal.handling.mode=double``."""
    return doc | {"after": doc["after"] | {"price": round(doc["after"]["price"], 2)}}


BATCH = 4096


def batches(raws: list[bytes]) -> list[pa.RecordBatch]:
    return [
        pa.RecordBatch.from_arrays(
            [
                pa.array([f"f.json:{n}" for n in range(i, i + len(chunk))], pa.string()),
                pa.array(chunk, pa.binary()),
            ],
            names=["message_id", "raw"],
        )
        for i in range(0, len(raws), BATCH)
        for chunk in [raws[i : i + BATCH]]
    ]


def run(raws: list[bytes], wire: Wire | None, schema: TableSchema = SCHEMA) -> float:
    """Events per second through classify then project, on one core."""
    arrow = batches(raws)
    start = time.process_time()
    classified = list(classify_batches(ROUTES, wire)(arrow))
    projected = list(project_batches(schema, datetime.now(UTC), wire)(arrow))
    seconds = time.process_time() - start
    for out in classified:
        assert set(out.column("status").to_pylist()) == {ROW}, out.column("error")
    for out in projected:
        assert set(out.column("_status").to_pylist()) == {ROW}, out.column("_error")
    return len(raws) / seconds


def parsers(raws: list[bytes]) -> dict[str, Callable[[], object]]:
    """The JSON parse alone, three ways (what one pass cannot go below)."""
    text = b"\n".join(raws) + b"\n"
    return {
        "json.loads": lambda: [json.loads(r) for r in raws],
        "orjson.loads": lambda: [orjson.loads(r) for r in raws],
        "pyarrow.json": lambda: pa_json.read_json(io.BytesIO(text)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cases = messages(args.events)
    medians = {}
    for name, (raws, wire, schema) in cases.items():
        run(raws[:200], wire, schema)  # warm the caches (schema parsing, classes)
        medians[name] = statistics.median(run(raws, wire, schema) for _ in range(args.repeat))
    base = medians["json"]
    print(
        f"decode, {args.events:,} Debezium envelopes, median of {args.repeat}, "
        "per CPU-second of one core"
    )
    for name, rate in medians.items():
        print(f"  {name:<12} {rate:>10,.0f} events/s   {rate / base:5.2f}x json")
    raws = cases["json"][0]
    for name, parse in parsers(raws).items():
        rate = statistics.median(
            len(raws) / (lambda t: (parse(), time.process_time() - t)[1])(time.process_time())
            for _ in range(args.repeat)
        )
        share = base / rate
        print(f"  parse only, {name:<13} {rate:>10,.0f} lines/s   (json decode: {share:.2f}x this)")


if __name__ == "__main__":
    main()
