"""Protobuf ``.proto`` text ↔ descriptor: what capture registers prints from its own
descriptor and compiles back (protoc) to the same descriptor, for every golden Avro
conversion that has a Protobuf form and for a Debezium envelope with Connect names."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import descriptor_pb2, json_format

from icetide.errors import SchemaError
from icetide.schema.convert.proto_text import descriptor_to_proto, proto_to_descriptor
from icetide.schema.convert.protobuf import _field_meta, avro_to_protobuf, protobuf_to_avro
from tests.unit.schema.test_schema_convert_registry import CASES, to_avro


def _descriptors() -> list[tuple[str, Any]]:
    """The golden Protobuf conversions' descriptors, and what capture builds from the
    golden Avro / JSON Schema cases with enums as strings, fixed as bytes, no null elements (as
    Connect-shaped Avro is)
    and from a Debezium envelope with Connect names (``field_meta`` options)."""
    from icetide.schema.convert.connect import connect_to_avro
    from tests.unit.capture.test_capture_transport_encode import _record

    out = [("debezium-envelope", avro_to_protobuf(connect_to_avro(_record().value["schema"])))]
    for number, case in enumerate(CASES):
        name = f"{case['format']}-{number}"
        if case["format"] == "protobuf":
            file = json_format.ParseDict(case["schema"], descriptor_pb2.FileDescriptorProto())
            out.append((name, file))
            continue
        out.append((name, avro_to_protobuf(_without_enums(to_avro(case)))))
    return out


def _without_enums(avro: Any) -> Any:
    if isinstance(avro, list):
        return [_without_enums(a) for a in avro]
    if isinstance(avro, dict):
        if avro.get("type") in ("enum", "fixed"):  # Connect has neither
            return "string" if avro["type"] == "enum" else "bytes"
        out = {k: _without_enums(v) for k, v in avro.items()}
        for key in ("items", "values"):  # Protobuf elements are never null
            if isinstance(out.get(key), list):
                out[key] = next(a for a in out[key] if a != "null")
        return out
    return avro


FORMS = _descriptors()


def _comparable(file: Any) -> tuple[Any, list[dict[str, str]]]:
    """The descriptor without what protoc adds (json_name) and with field options read as
    their ``field_meta`` params (protoc may order map entries differently)."""
    copy = descriptor_pb2.FileDescriptorProto()
    copy.CopyFrom(file)
    metas: list[dict[str, str]] = []

    def walk(messages: Any) -> None:
        for message in messages:
            for field in message.field:
                field.ClearField("json_name")
                metas.append(_field_meta(field))
                field.ClearField("options")
            walk(message.nested_type)

    walk(copy.message_type)
    copy.ClearField("dependency")  # confluent/meta.proto, imported for the options
    if not copy.package:
        copy.ClearField("package")  # set to "" or unset: the same file
    return copy, metas


@pytest.mark.parametrize("name,file", FORMS, ids=[n for n, _ in FORMS])
def test_printed_proto_compiles_back_to_the_same_descriptor(name: str, file: Any) -> None:
    compiled = proto_to_descriptor(descriptor_to_proto(file), file.name or "schema.proto")
    assert protobuf_to_avro(compiled) == protobuf_to_avro(file)
    if not name.startswith("protobuf"):
        # What capture builds compiles back field for field. The golden Protobuf case is
        # written by hand (no synthetic oneof for its proto3 optional, nested messages
        # before map entries), so it is held to the same Avro only.
        assert _comparable(compiled) == _comparable(file)


def test_map_entries_take_protocs_names() -> None:
    avro = {
        "type": "record",
        "name": "V",
        "fields": [{"name": "byCity", "type": {"type": "map", "values": "long"}}],
    }
    file = avro_to_protobuf(avro)
    text = descriptor_to_proto(file)
    assert "map<string, int64> byCity = 1;" in text
    compiled = proto_to_descriptor(text, file.name)
    assert compiled.message_type[0].nested_type[0].name == "ByCityEntry"
    assert _comparable(compiled) == _comparable(file)


def test_text_that_does_not_compile_names_the_problem() -> None:
    with pytest.raises(SchemaError, match='"Money" is not defined') as caught:
        proto_to_descriptor('syntax = "proto3";\nmessage V { Money price = 1; }\n')
    assert "icetide-proto-" not in str(caught.value)  # no temporary paths


def test_a_well_known_import_resolves_from_grpc_tools() -> None:
    text = (
        'syntax = "proto3";\nimport "google/protobuf/timestamp.proto";\n'
        "message V { google.protobuf.Timestamp at = 1; }\n"
    )
    avro = protobuf_to_avro(proto_to_descriptor(text))
    assert avro["fields"][0]["type"][1] == {"type": "long", "logicalType": "timestamp-micros"}


def test_registry_text_is_compiled_base64_kept_and_bad_text_left_to_dead_letters() -> None:
    import base64

    from icetide.errors import DecodeError
    from icetide.events.registry import descriptor_text
    from icetide.events.wire import DESERIALIZATION, PROTOBUF, WriterSchema, decode_framed, frame

    file = FORMS[0][1]
    serialized = base64.b64encode(file.SerializeToString()).decode("ascii")
    assert descriptor_text(serialized) == serialized  # a format=serialized answer
    compiled = descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(descriptor_text(descriptor_to_proto(file)))
    )
    assert protobuf_to_avro(compiled) == protobuf_to_avro(file)
    broken = 'syntax = "proto3";\nmessage V { Money price = 1; }\n'
    assert descriptor_text(broken) == broken
    with pytest.raises(DecodeError) as caught:
        decode_framed(frame(9, b"", (0,)), {9: WriterSchema(PROTOBUF, broken)})
    assert caught.value.reason == DESERIALIZATION
