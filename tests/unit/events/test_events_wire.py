"""Registry-framed Debezium envelopes (Avro, JSON Schema, Protobuf) decode to the same
change events as the JSON form; bad frames and payloads are dead letters with a reason."""

from __future__ import annotations

import base64
import io
import json
from decimal import Decimal
from typing import Any

import fastavro
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from icetide.errors import DecodeError
from icetide.events.envelope import decode_document
from icetide.events.wire import (
    AVRO,
    DESERIALIZATION,
    JSON_SCHEMA,
    PROTOBUF,
    UNKNOWN_SCHEMA,
    WriterSchema,
    decode_framed,
    frame,
    split_frame,
    unbase64_line,
)

SOURCE = {"name": "shop", "db": "inv", "table": "items", "file": "b.1", "pos": 4, "ts_ms": 7}
ENVELOPE_JSON = {
    "before": None,
    "after": {"id": 1, "name": "pen", "qty": 3},
    "source": SOURCE,
    "op": "c",
    "ts_ms": 9,
}

ROW_V1 = {
    "type": "record",
    "name": "Value",
    "namespace": "shop.inv.items",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "qty", "type": ["null", "int"], "default": None},
    ],
}
SOURCE_AVRO = {
    "type": "record",
    "name": "Source",
    "namespace": "io.debezium.connector.mysql",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "db", "type": "string"},
        {"name": "table", "type": ["null", "string"], "default": None},
        {"name": "file", "type": "string"},
        {"name": "pos", "type": "long"},
        {"name": "ts_ms", "type": "long"},
    ],
}


def envelope(row: dict[str, Any]) -> dict[str, Any]:
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


def avro_bytes(schema: dict[str, Any], value: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def test_avro_envelope_decodes_to_the_same_event_as_json() -> None:
    schemas = {7: WriterSchema(AVRO, json.dumps(envelope(ROW_V1)))}
    raw = frame(7, avro_bytes(envelope(ROW_V1), ENVELOPE_JSON))
    decoded = decode_framed(raw, schemas)
    assert decoded == ENVELOPE_JSON
    assert decode_document(decoded) == decode_document(json.loads(json.dumps(ENVELOPE_JSON)))


def test_old_avro_version_is_read_with_its_writer_schema_and_projected() -> None:
    """A v1 message read after the table moved to v2 (qty long, new column 'color')."""
    row_v2 = json.loads(json.dumps(ROW_V1))
    row_v2["fields"][2]["type"] = ["null", "long"]
    row_v2["fields"].append({"name": "color", "type": ["null", "string"], "default": None})
    v1 = envelope(ROW_V1)
    raw = frame(1, avro_bytes(v1, ENVELOPE_JSON))
    decoded = decode_framed(raw, {1: WriterSchema(AVRO, json.dumps(v1))}, reader=envelope(row_v2))
    assert decoded["after"] == {"id": 1, "name": "pen", "qty": 3, "color": None}
    # Read with the v2 schema as if it were the writer's, the bytes are garbage or fail.
    with pytest.raises(DecodeError) as caught:
        decode_framed(raw, {1: WriterSchema(AVRO, json.dumps(envelope(row_v2)))})
    assert caught.value.reason == DESERIALIZATION


def test_avro_logical_types_take_the_json_converter_form() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "d", "type": {"type": "int", "logicalType": "date"}},
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "m", "type": {"type": "long", "logicalType": "time-micros"}},
            {
                "name": "n",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2},
            },
            {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "b", "type": "bytes"},
        ],
    }
    value = {
        "d": 19_000,
        "t": 1_600_000_000_123_456,
        "m": 45_296_000_001,
        "n": b"\x04\xd2",
        "u": "0b5e8d8a-54a8-4a8e-9b0c-0b5e8d8a54a8",
        "b": b"\x00\xff",
    }
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value | {"n": Decimal("12.34")})
    decoded = decode_framed(frame(3, out.getvalue()), {3: WriterSchema(AVRO, json.dumps(schema))})
    assert decoded == {
        "d": 19_000,
        "t": 1_600_000_000_123_456,
        "m": 45_296_000_001,
        "n": "12.34",
        "u": "0b5e8d8a-54a8-4a8e-9b0c-0b5e8d8a54a8",
        "b": base64.b64encode(b"\x00\xff").decode(),
    }


ENVELOPE_JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "before": {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/Value"}]},
        "after": {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/Value"}]},
        "source": {"type": "object"},
        "op": {"type": "string", "enum": ["c", "u", "d", "r", "t"]},
        "ts_ms": {"type": ["integer", "null"]},
    },
    "required": ["op", "source"],
    "definitions": {
        "Value": {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "name": {"type": ["string", "null"]},
                "qty": {"type": ["integer", "null"]},
            },
            "required": ["id"],
        }
    },
}


def test_json_schema_envelope_decodes_to_the_same_event_and_is_validated() -> None:
    schemas = {4: WriterSchema(JSON_SCHEMA, json.dumps(ENVELOPE_JSON_SCHEMA))}
    raw = frame(4, json.dumps(ENVELOPE_JSON).encode())
    assert decode_document(decode_framed(raw, schemas)) == decode_document(ENVELOPE_JSON)
    bad = dict(ENVELOPE_JSON, after={"id": "one"})
    with pytest.raises(DecodeError) as caught:
        decode_framed(frame(4, json.dumps(bad).encode()), schemas)
    assert caught.value.reason == DESERIALIZATION
    assert "after" in caught.value.message


def proto_envelope() -> str:
    """A serialized FileDescriptorProto: Envelope {Value before, after; Source source; ...}."""
    f = descriptor_pb2.FileDescriptorProto(name="items.proto", package="shop", syntax="proto3")
    t = descriptor_pb2.FieldDescriptorProto
    unused = f.message_type.add(name="Unused")
    unused.field.add(name="x", number=1, type=t.TYPE_INT32, label=t.LABEL_OPTIONAL)
    env = f.message_type.add(name="Envelope")
    value = env.nested_type.add(name="Value")
    value.field.add(name="id", number=1, type=t.TYPE_INT32, label=t.LABEL_OPTIONAL)
    value.field.add(name="name", number=2, type=t.TYPE_STRING, label=t.LABEL_OPTIONAL)
    value.field.add(name="qty", number=3, type=t.TYPE_INT64, label=t.LABEL_OPTIONAL)
    source = env.nested_type.add(name="Source")
    for number, (name, kind) in enumerate(
        [
            ("name", t.TYPE_STRING),
            ("db", t.TYPE_STRING),
            ("table", t.TYPE_STRING),
            ("file", t.TYPE_STRING),
            ("pos", t.TYPE_INT64),
            ("ts_ms", t.TYPE_INT64),
        ],
        1,
    ):
        source.field.add(name=name, number=number, type=kind, label=t.LABEL_OPTIONAL)
    for number, (name, kind, type_name) in enumerate(
        [
            ("before", t.TYPE_MESSAGE, ".shop.Envelope.Value"),
            ("after", t.TYPE_MESSAGE, ".shop.Envelope.Value"),
            ("source", t.TYPE_MESSAGE, ".shop.Envelope.Source"),
            ("op", t.TYPE_STRING, ""),
            ("ts_ms", t.TYPE_INT64, ""),
        ],
        1,
    ):
        field = env.field.add(name=name, number=number, type=kind, label=t.LABEL_OPTIONAL)
        if type_name:
            field.type_name = type_name
    return base64.b64encode(f.SerializeToString()).decode()


def test_protobuf_envelope_with_message_indexes_decodes_to_the_same_event() -> None:
    text = proto_envelope()
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text)))
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Envelope"))
    message = cls(
        after=cls.Value(id=1, name="pen", qty=3), source=cls.Source(**SOURCE), op="c", ts_ms=9
    )
    raw = frame(5, message.SerializeToString(), (1,))  # the second message of the file
    assert split_frame(raw, protobuf=True).indexes == (1,)
    decoded = decode_framed(raw, {5: WriterSchema(PROTOBUF, text)})
    assert decoded["after"] == {"id": 1, "name": "pen", "qty": 3}
    assert decode_document(decoded) == decode_document(ENVELOPE_JSON)
    # proto3 leaves zero scalars off the wire: they must come back as 0, not missing.
    zero = cls(
        after=cls.Value(id=0, name="", qty=0),
        source=cls.Source(
            **SOURCE,
        ),
        op="c",
    )
    decoded = decode_framed(
        frame(5, zero.SerializeToString(), (1,)), {5: WriterSchema(PROTOBUF, text)}
    )
    assert decoded["after"] == {"id": 0, "name": "", "qty": 0}


def test_unknown_schema_id_and_unframed_bytes_are_dead_letters_with_reasons() -> None:
    with pytest.raises(DecodeError) as caught:
        decode_framed(frame(99, b"x"), {})
    assert caught.value.reason == UNKNOWN_SCHEMA and "99" in caught.value.message
    with pytest.raises(DecodeError) as caught:
        decode_framed(b'{"op":"c"}', {})
    assert caught.value.reason == DESERIALIZATION


def test_landing_lines_carry_frames_in_base64() -> None:
    raw = frame(7, b"payload")
    assert unbase64_line(base64.b64encode(raw) + b"\r") == raw
    with pytest.raises(DecodeError):
        unbase64_line(b"not base64!")
