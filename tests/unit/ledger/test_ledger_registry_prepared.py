"""Registry frames read by their prepared readers (icetide.events.wire_prepared) and the
one-pass row path give exactly what the general decoder gives, for every message they
take; every other message, and its dead-letter reason and text, is the general
decoder's. Checked on a seeded corpus of Avro, JSON Schema and Protobuf frames written
as capture writes them (every column type: decimals, timestamps, dates, times, JSON,
UUID, nulls; MySQL and PostgreSQL source blocks), mixed with hostile frames (unknown
schema ids, truncated frames, a wrong magic byte, trailing bytes, schema-invalid JSON,
bad message indexes, landing lines in base64), both paths run on each message."""

from __future__ import annotations

import base64
import json
import random
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from icetide.capture.envelope import envelope_schema
from icetide.capture.mysql.reader import SOURCE as MYSQL
from icetide.capture.postgres.reader import SOURCE as POSTGRES
from icetide.capture.transport.encode import _avro_form, _json_schema_form, _protobuf_form
from icetide.errors import DecodeError
from icetide.events.raw import Wire
from icetide.events.wire import (
    AVRO,
    JSON_SCHEMA,
    PROTOBUF,
    WriterSchema,
    decode_framed,
    frame,
)
from icetide.events.wire_prepared import read_framed
from icetide.ledger.decode import (
    DEAD,
    DECODE_FAILED,
    ERROR,
    RAW,
    REASON,
    ROW,
    STATUS,
    Projection,
    _classify,
    _classify_read,
    _error_text,
    _framed_rows,
    _project,
    row_projector,
)
from icetide.schema.convert.connect import connect_to_avro
from icetide.schema.convert.protobuf import avro_to_protobuf
from tests.unit.events.test_events_wire import ENVELOPE_JSON_SCHEMA
from tests.unit.ledger.test_ledger_plain import PROJECTIONS, ROUTES

DECIMAL = "org.apache.kafka.connect.data.Decimal"
ROW_FIELDS = [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "n", "type": "int32", "optional": True},
    {"field": "name", "type": "string", "optional": False},
    {"field": "price", "type": "float64", "optional": True},
    {"field": "ratio", "type": "float32", "optional": True},
    {"field": "amount", "type": "bytes", "optional": True, "name": DECIMAL,
     "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
    {"field": "ok", "type": "boolean", "optional": True},
    {"field": "at", "type": "int64", "optional": True, "name": "io.debezium.time.Timestamp"},
    {"field": "atz", "type": "string", "optional": True,
     "name": "io.debezium.time.ZonedTimestamp"},
    {"field": "day", "type": "int32", "optional": True, "name": "io.debezium.time.Date"},
    {"field": "tod", "type": "int64", "optional": True, "name": "io.debezium.time.MicroTime"},
    {"field": "doc", "type": "string", "optional": True, "name": "io.debezium.data.Json"},
    {"field": "u", "type": "string", "optional": True, "name": "io.debezium.data.Uuid"},
]  # fmt: skip
PLAIN_FIELDS = [f for f in ROW_FIELDS if f["field"] != "amount"]
"""No bytes: the Avro reader skips the json_form walk for this schema."""


def connect(fields: list[dict[str, Any]], source: Any) -> dict[str, Any]:
    return envelope_schema("srv.shop.things", fields, source)


Writer = Callable[[dict[str, Any], dict[str, Any]], tuple[bytes, tuple[int, ...] | None]]


def writers() -> dict[int, tuple[WriterSchema, Writer | None, dict[str, Any], Any]]:
    """Schema id → (registered schema, payload writer, Connect schema, source block)."""
    out: dict[int, tuple[WriterSchema, Writer | None, dict[str, Any], Any]] = {}
    number = 0
    for source in (MYSQL, POSTGRES):
        for fields in (ROW_FIELDS, PLAIN_FIELDS):
            schema = connect(fields, source)
            avro = connect_to_avro(schema)
            for form in (_avro_form, _json_schema_form, _protobuf_form):
                kind, text, write = form(avro)
                if kind == PROTOBUF:  # the registry's descriptor form, as readers fetch it
                    text = base64.b64encode(avro_to_protobuf(avro).SerializeToString()).decode()
                number += 1
                out[number] = (WriterSchema(kind, text), write, schema, source)
    # Avro with logical types, as Confluent's AvroConverter writes a Connect Decimal
    # (and as other producers write times, dates and UUIDs): read, then put in the JSON
    # converter's form field by field.
    logical = connect_to_avro(connect(ROW_FIELDS, MYSQL))
    kinds = {
        "amount": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        "at": {"type": "long", "logicalType": "timestamp-millis"},
        "day": {"type": "int", "logicalType": "date"},
        "tod": {"type": "long", "logicalType": "time-micros"},
        "u": {"type": "string", "logicalType": "uuid"},
    }
    for field in logical["fields"][0]["type"][1]["fields"]:
        if field["name"] in kinds:
            field["type"] = ["null", kinds[field["name"]]]
    kind, text, write = _avro_form(logical)
    number += 1
    out[number] = (WriterSchema(kind, text), write, connect(ROW_FIELDS, MYSQL), MYSQL)
    # JSON Schemas of the MySQL envelope that Debezium's converter would not write but
    # a registry may hold: combinators that overlap (an int is both an ``integer`` and a
    # ``number``: ``oneOf`` fails), ``format`` (an annotation here), no additional
    # properties; and, from draft 2019-09 on, a ``$ref``'s siblings apply (drafts 4-7
    # ignore them: this one's would refuse every message there). Both go the general
    # way: a $ref with a sibling that acts gets no compiled check.
    full = out[1][2]
    drafts = ("http://json-schema.org/draft-07/schema#", "zzz"), (
        "https://json-schema.org/draft/2020-12/schema", "pos")  # fmt: skip
    for draft, needed in drafts:
        tuned = json.loads(out[2][0].text)
        tuned["$schema"] = draft
        value = tuned["definitions"]["srv_shop_things_Value"]
        value["properties"]["n"] = {"oneOf": [{"type": "null"}, {"type": "integer"},
                                              {"type": "number"}]}  # fmt: skip
        value["properties"]["price"] = {"anyOf": [{"type": "number"}, {"type": "null"}]}
        value["properties"]["ok"] = {"allOf": [{"type": ["boolean", "null"]}]}
        value["properties"]["doc"] = {"type": ["string", "null"], "format": "uri"}
        value["additionalProperties"] = False
        tuned["properties"]["source"]["required"] = [needed]
        number += 1
        out[number] = (WriterSchema(JSON_SCHEMA, json.dumps(tuned)), out[2][1], full, MYSQL)
    # A JSON Schema with a keyword the checker does not compile (enum): general path only.
    number += 1
    out[number] = (WriterSchema(JSON_SCHEMA, json.dumps(ENVELOPE_JSON_SCHEMA)), None, {}, None)
    return out


DECLINED = set(sorted(writers())[-3:])
"""The schema ids the prepared readers leave to the general decoder: the two tuned JSON
Schemas (a ``$ref`` beside ``required``, whose meaning changed in draft 2019-09) and the
one with ``enum``."""
WRITERS = writers()
WIRE = Wire({k: v[0] for k, v in WRITERS.items()})
SERVER = {"mysql": "srv", "postgresql": "srv"}


def column_value(name: str, rnd: random.Random) -> Any:
    """A value of ``name``'s Connect type in the JSON converter's form: mostly a usual
    one, now and then one at or beyond an edge (NaN, a year-0 date, text that is no
    timestamp, the unavailable-value placeholder)."""
    nan, inf = float("nan"), float("inf")
    amount = rnd.randint(-(2**31), 2**31).to_bytes(5, "big", signed=True)
    usual = {
        "id": rnd.randint(-(2**63), 2**63 - 1),
        "n": rnd.randint(-(2**31), 2**31 - 1),
        "name": rnd.choice(["a", "é", "\u2603", "x" * 50]),
        "price": rnd.random() * 10 ** rnd.randint(-5, 20),
        "ratio": rnd.random(),
        "amount": base64.b64encode(amount).decode(),
        "ok": rnd.random() < 0.5,
        "at": rnd.randint(-(10**12), 10**13),
        "atz": "2024-02-29T10:00:00+01:00",
        "day": rnd.randint(-1000, 30_000),
        "tod": rnd.randint(0, 86_399_999_999),
        "doc": rnd.choice(['{"a":1}', "[1,2.50]"]),
        "u": str(uuid.UUID(int=rnd.getrandbits(128))),
    }
    if rnd.random() < 0.97:
        return usual[name]
    edges = {
        "id": [0, 2**63 - 1],
        "n": [0, -1],
        "name": ["", "__debezium_unavailable_value"],
        "price": [0.0, -0.0, 1e300, nan],
        "ratio": [0.1, 1.5, 3.0e38, inf, -inf],
        "amount": ["", "AA==", "/4U="],
        "ok": [False],
        "at": [0, -1, 2**62],
        "atz": ["2024-01-01T00:00:00Z", "junk", ""],
        "day": [0, -719_162, 10**7],
        "tod": [0, 86_400_000_000, -1],
        "doc": ["not json", ""],
        "u": ["junk"],
    }
    return rnd.choice(edges[name])


def image(fields: list[dict[str, Any]], rnd: random.Random) -> dict[str, Any]:
    out = {}
    for f in fields:
        name = f["field"]
        out[name] = None if f["optional"] and rnd.random() < 0.1 else column_value(name, rnd)
    return out


def rare(rnd: random.Random, usual: Any, *edges: Any) -> Any:
    """``usual`` mostly, one of ``edges`` now and then."""
    return rnd.choice(edges) if rnd.random() < 0.04 else usual


def payload(fields: list[dict[str, Any]], source: Any, rnd: random.Random) -> dict[str, Any]:
    """One envelope for ``fields`` and ``source``; now and then an unusual one."""
    op = rare(rnd, rnd.choice(["c", "u", "d", "r"]), "t", "x", "")
    table = rare(rnd, "things", "x", "", "THINGS")
    name = rare(rnd, "srv", "srv2", "")
    if source.connector == "mysql":
        block = source.values(
            name=name, ts_ms=rare(rnd, 1_700_000_000_000, 0), db="shop", table=table,
            server_id=1, gtid=rnd.choice([None, "0-1-42", rare(rnd, "0-1-43", "")]),
            file=rare(rnd, f"mysql-bin.00000{rnd.randint(1, 4)}", ""),
            pos=rare(rnd, rnd.randint(4, 10**9), 0, -1), row=rare(rnd, 0, 1),
        )  # fmt: skip
    else:
        block = source.values(
            name=name, ts_ms=1_700_000_000_000, db="shopdb", schema="shop", table=table,
            txId=rnd.choice([None, rnd.randint(1, 99)]),
            lsn=rare(rnd, rnd.randint(1, 2**40), None, 0),
        )  # fmt: skip
    before = image(fields, rnd) if op in ("u", "d") or rnd.random() < 0.02 else None
    after = image(fields, rnd) if op != "d" and rnd.random() > 0.02 else None
    return {
        "before": before,
        "after": after,
        "source": block,
        "op": op,
        "ts_ms": rare(rnd, 1_700_000_000_005, None),
        "transaction": rnd.choice([None, {"id": "tx1", "total_order": 1,
                                          "data_collection_order": 1}]),
    }  # fmt: skip


def hostile(raw: bytes, kind: str, rnd: random.Random) -> bytes:
    """A frame broken one way, or a message that is no frame of a known schema."""
    choice = rnd.randrange(9)
    if choice == 0:
        return raw[: rnd.randint(0, len(raw) - 1)]  # truncated, maybe inside the header
    if choice == 1:
        return raw + b"\x00\x02"  # trailing bytes
    if choice == 2:
        return b"\x01" + raw[1:]  # another serializer's magic byte
    if choice == 3:
        return frame(999, raw[5:])  # a schema id the registry does not have
    if choice == 4:
        return raw[:5] + bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 40)))
    if choice == 5 and kind == PROTOBUF:
        return raw[:5] + rnd.choice([b"\x7f", b"\x02\x02", b"\x02\x00", b"\x04\x00\x00"]) + raw[6:]
    if choice == 6 and kind == JSON_SCHEMA:
        doc = json.loads(raw[5:])
        doc[rnd.choice(["op", "source", "ts_ms"])] = rnd.choice([5, "s", None, [1], 1.5])
        return raw[:5] + json.dumps(doc).encode()
    if choice == 7 and kind == JSON_SCHEMA:
        return raw[:5] + rnd.choice([b"not json", "\ufeff{}".encode(), b"\xff\xfe", b"{}"])
    return raw[: max(5, len(raw) // 2)]


def corpus(count: int, seed: int = 20261202) -> list[bytes]:
    """``count`` registry messages of every writer schema, ~12% of them hostile."""
    rnd = random.Random(seed)
    out: list[bytes] = []
    ids = sorted(WRITERS)
    while len(out) < count:
        schema_id = rnd.choice(ids)
        writer, write, schema, source = WRITERS[schema_id]
        if write is None:  # the $ref schema: JSON of the PLAIN fields' envelope
            doc = payload(PLAIN_FIELDS, MYSQL, rnd)
            raw = frame(schema_id, json.dumps(doc).encode())
        else:
            fields = schema["fields"][0]["fields"]
            doc = payload(fields, source, rnd)
            if writer.format == PROTOBUF:  # ParseDict takes NaN and infinities as text
                doc = json.loads(json.dumps(doc).replace("NaN", '"NaN"')
                                 .replace("-Infinity", '"-Infinity"')
                                 .replace(" Infinity", ' "Infinity"'))  # fmt: skip
            try:
                body, indexes = write(doc, schema)
            except Exception:  # a value the writer refuses: not a message a producer sends
                continue
            raw = frame(schema_id, body, indexes)
        if rnd.random() < 0.12:
            raw = hostile(raw, writer.format, rnd)
        out.append(raw)
    return out


RAWS = corpus(1500)
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def same(value: Any) -> str:
    """``repr`` (True is not 1, 1.0 is not 1, nan is its text), without the object
    addresses a reader's error text may hold (``<_io.BytesIO object at 0x…>``)."""
    return _ADDRESS.sub(" at 0x…", repr(value))


def general_row(raw: bytes, projection: Projection, wire: Wire) -> dict[str, Any]:
    """What :func:`row_projector` gives with the general decoder alone."""
    try:
        return _project(raw, projection, wire)
    except DecodeError as exc:
        return {STATUS: DEAD, REASON: exc.reason, ERROR: exc.message, RAW: raw}
    except Exception as exc:
        return {STATUS: DEAD, REASON: DECODE_FAILED, ERROR: _error_text(exc), RAW: raw}


def general_value(raw: bytes) -> Any:
    try:
        return decode_framed(raw, WIRE.schemas)
    except DecodeError as exc:
        return ("dead", exc.reason, exc.message)


def test_prepared_readers_give_the_general_decoders_value_or_none() -> None:
    taken = dict.fromkeys(WIRE.schemas, 0)
    for raw in RAWS:
        fast = read_framed(raw, WIRE.schemas)
        if fast is None:
            continue
        taken[int.from_bytes(raw[1:5], "big")] += 1
        assert same(fast) == same(general_value(raw)), raw
    # Every schema's reader takes messages (the declined one none): a reader declining
    # what it could read would pass the comparison above, and lose the speed.
    assert all(n > 3 for i, n in taken.items() if i not in DECLINED), sorted(taken.items())
    assert all(taken[i] == 0 for i in DECLINED), taken


@pytest.mark.parametrize("base64_lines", [False, True])
def test_classify_gives_what_the_general_decoder_gives(base64_lines: bool) -> None:
    wire = Wire(WIRE.schemas, base64_lines)
    reasons: set[str] = set()
    for raw in RAWS[::3] if base64_lines else RAWS:
        line = base64.b64encode(raw) if base64_lines else raw
        expected = _classify_read(line, ROUTES, wire)
        assert same(_classify(line, ROUTES, wire)) == same(expected), raw
        reasons.add(expected[0][2] or expected[0][1])
    # The corpus reaches the dead-letter reasons a registry frame can have here.
    assert base64_lines or {
        ROW, "deserialization", "unknown_schema_id", "unknown_magic_byte", "unknown_table",
        "missing_source", "unknown_op",
    } <= reasons, reasons  # fmt: skip


def test_ledger_rows_and_dead_letters_are_the_general_decoders() -> None:
    reasons: set[str] = set()
    for projection in PROJECTIONS:
        fast = _framed_rows(projection, WIRE, None)
        assert fast is not None
        project = row_projector(projection, WIRE)
        taken = 0
        for raw in RAWS:
            expected = general_row(raw, projection, WIRE)
            taken += fast(raw) is not None
            assert same(project(raw)) == same(expected), raw
            reasons.add(expected.get(REASON) or "row")
        # Both paths are exercised: many messages taken, many left to the general one.
        assert len(RAWS) * 0.15 < taken < len(RAWS) * 0.85, taken
    assert {
        "row", "deserialization", "unknown_schema_id", "type_mismatch", "missing_position",
        "bad_logical_value",
    } <= reasons, reasons  # fmt: skip


def test_a_refused_schema_version_is_the_general_decoders_dead_letter() -> None:
    raw = next(r for r in RAWS if read_framed(r, WIRE.schemas) is not None)
    key = f"registry:{int.from_bytes(raw[1:5], 'big')}"
    for refused in ({key: ("schema_incompatible", "held")}, {"*": ("schema_change_failed", "x")}):
        row = row_projector(PROJECTIONS[0], WIRE, refused)(raw)
        assert row[STATUS] == DEAD and row[REASON] == next(iter(refused.values()))[0]
        assert repr(row) == repr(general_row_refused(raw, PROJECTIONS[0], refused))


def general_row_refused(raw: bytes, projection: Projection, refused: Any) -> dict[str, Any]:
    try:
        return _project(raw, projection, WIRE, refused)
    except DecodeError as exc:
        return {STATUS: DEAD, REASON: exc.reason, ERROR: exc.message, RAW: raw}


CHECKED_SCHEMAS: list[dict[str, Any]] = [
    {"type": "integer"},
    {"type": "number"},
    {"type": ["string", "null"]},
    {"type": "boolean"},
    {"type": ["object", "array"]},
    {"oneOf": [{"type": "integer"}, {"type": "number"}]},
    {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    {"allOf": [{"type": "number"}, {"type": "integer"}]},
    {"oneOf": []},
    {"oneOf": [{"type": "integer"}, {"type": "null"}]},
    {"oneOf": [{"type": "null"}, {"type": ["integer", "null"]}]},
    {"oneOf": [{"type": "null"}, {"type": "null"}]},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
     "additionalProperties": False},
    {"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
    {"items": {"type": "integer"}},
    {"properties": {"a": {"$ref": "#"}}, "type": "object"},
    {"type": "string", "format": "email"},
]  # fmt: skip
INSTANCES: list[Any] = [
    None, True, False, 0, 1, -5, 2**70, 1.0, 1.5, -0.0, float("nan"), float("inf"), "", "a",
    "not an email", [], [1], [1, "a"], [True], {}, {"a": 1}, {"a": "s"}, {"a": 1, "b": 2},
    {"b": 2}, {"a": True}, {"a": {"a": {}}}, {"a": 1.0},
]  # fmt: skip


@pytest.mark.parametrize("draft", ["Draft4Validator", "Draft7Validator", "Draft202012Validator"])
def test_the_json_schema_checker_answers_as_the_validator(draft: str) -> None:
    from jsonschema import validators

    from icetide.events.wire_prepared import _json_checker

    cls = getattr(validators, draft)
    for schema in CHECKED_SCHEMAS:
        validator = cls(schema)
        check = _json_checker(schema, validator)
        assert check is not None, schema
        for instance in INSTANCES:
            assert check(instance) == validator.is_valid(instance), (schema, instance)
    # Keywords whose meaning differs between the libraries or the drafts, a remote
    # reference, a $ref with an acting sibling: left to jsonschema.
    for schema in (
        {"enum": [1]},
        {"const": 1},
        {"pattern": "a"},
        {"$ref": "other.json"},
        {"items": [{}]},
        {"$ref": "#/definitions/a", "type": "string", "definitions": {"a": {}}},
        {"properties": {"a": {"$id": "x", "type": "string"}}},
    ):
        if "const" in schema and "const" not in cls.VALIDATORS:
            continue  # draft 4 has no const: an unknown word, ignored by both
        assert _json_checker(schema, cls(schema)) is None, schema
    # A default is an annotation: the checked document is left as it came.
    schema = {"properties": {"a": {"type": "integer", "default": 5}}}
    check = _json_checker(schema, cls(schema))
    assert check is not None
    document: dict[str, int] = {}
    assert check(document) and document == {}


def test_the_avro_reader_puts_every_kind_of_value_in_the_json_form() -> None:
    import io
    from datetime import date

    import fastavro

    record = {"type": "record", "name": "S", "fields": [{"name": "b", "type": ["null", "bytes"]}]}
    schema = {
        "type": "record", "name": "R", "namespace": "n",
        "fields": [
            {"name": "a", "type": {"type": "array", "items": "bytes"}},
            {"name": "m", "type": {"type": "map", "values": {"type": "int",
                                                              "logicalType": "date"}}},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
            {"name": "s", "type": record},
            {"name": "again", "type": ["null", "n.S"]},
            {"name": "u", "type": ["null", "long", "bytes"]},
            {"name": "p", "type": "long"},
        ],
    }  # fmt: skip
    value = {
        "a": [b"\x01"], "m": {"k": date(2020, 1, 1)}, "e": "Y", "f": b"ab", "s": {"b": b"\x02"},
        "again": {"b": b"\x03"}, "u": b"\x04", "p": 5,
    }  # fmt: skip
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    schemas = {1: WriterSchema(AVRO, json.dumps(schema))}
    raw = frame(1, out.getvalue())
    assert read_framed(raw, schemas) == decode_framed(raw, schemas)
    assert read_framed(raw, schemas)["again"] == {"b": "Aw=="}
