"""The tests' schema registry server: starts on a free loopback port, speaks the Confluent
REST API to confluent-kafka's client, leaves compatibility to icetide, and stops."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.devservers.registry import RegistryServer


def test_registry_serves_versions_accepts_an_incompatible_one_and_stops() -> None:
    def record(kind: str) -> Schema:
        fields = [{"name": "id", "type": kind}]
        return Schema(json.dumps({"type": "record", "name": "V", "fields": fields}), "AVRO")

    with RegistryServer() as registry:
        assert registry.url.startswith("http://127.0.0.1:")
        client = SchemaRegistryClient({"url": registry.url})
        first = client.register_schema("t-value", record("long"))
        second = client.register_schema("t-value", record("string"))  # NONE: icetide decides
        assert client.get_versions("t-value") == [1, 2] and first != second
        assert json.loads(client.get_schema(second).schema_str)["fields"][0]["type"] == "string"
        with pytest.raises(SchemaRegistryError) as caught:
            client.get_schema(second + 100)
        assert caught.value.http_status_code == 404
        url = registry.url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/subjects", timeout=2)


def test_capture_forms_round_trip_through_the_live_registry() -> None:
    # What capture registers reads back over HTTP to the JSON form's ledger row. Protobuf
    # goes as .proto text (the server refuses a descriptor and has no format=serialized),
    # compiled back to a descriptor by protoc when read.
    from icetide.capture.transport.encode import ValueEncoder
    from icetide.events.registry import registry_for
    from icetide.ledger.decode import ROW, STATUS, project_one
    from icetide.ledger.registry_decode import Wire
    from tests.unit.capture.test_capture_transport_encode import TABLE, _record

    twin = project_one(ValueEncoder("json").encode(_record(), "t"), TABLE)
    with RegistryServer() as registry:
        for form in ("avro", "json_schema", "protobuf"):
            raw = ValueEncoder(form, registry.url).encode(_record(), f"srv.{form}")
            schema_id = int.from_bytes(raw[1:5], "big")
            wire = Wire(registry_for(registry.url).writer_schemas({schema_id}))
            row = project_one(raw, TABLE, wire)
            assert row == twin and row[STATUS] == ROW, (form, row)
