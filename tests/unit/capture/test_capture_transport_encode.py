"""Capture's registry forms (``transport.format: avro | json_schema | protobuf``): a change
record registered and framed the way Debezium's converters write it decodes to the same
ledger row as its JSON form, and the registered version reads back as the table's own
schema (no change to walk)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from icetide.capture.errors import CaptureError
from icetide.capture.record import CaptureRecord
from icetide.capture.transport.encode import ValueEncoder
from icetide.events.position import binlog_position
from icetide.events.registry import AvroVersions, registry_for
from icetide.events.wire import decode_framed, is_framed
from icetide.evolution.plan import build_plan
from icetide.evolution.registry_walk import model_of
from icetide.ledger.decode import ROW, STATUS, project_one
from icetide.ledger.registry_decode import Wire
from icetide.schema.contract import ledger as c
from icetide.schema.convert.connect import connect_schema
from icetide.schema.file import schema_from_dict

TABLE = schema_from_dict(
    {
        "table": "people",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "int", "nullable": False},
            {"id": 2, "name": "born", "type": "date"},
            {"id": 3, "name": "photo", "type": "binary"},
            {"id": 4, "name": "price", "type": "decimal(10,2)"},
            {"id": 5, "name": "seen", "type": "timestamp"},
        ],
    }
)


def _row_schema() -> dict[str, Any]:
    fields = []
    for column in TABLE.columns:
        logical = "io.debezium.time.Timestamp" if column.name == "seen" else None
        fields.append(
            {**connect_schema(column.type, logical, optional=column.nullable), "field": column.name}
        )
    return {"type": "struct", "name": "srv.shop.people.Value", "optional": True, "fields": fields}


def _record() -> CaptureRecord:
    row = _row_schema()
    source = {"type": "struct", "field": "source", "fields": [
        {"type": "string", "field": "name"}, {"type": "string", "field": "db"},
        {"type": "string", "field": "table"}, {"type": "string", "field": "file"},
        {"type": "int64", "field": "pos"}]}  # fmt: skip
    schema = {
        "type": "struct",
        "name": "srv.shop.people.Envelope",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            source,
            {"type": "string", "field": "op"},
            {"type": "int64", "field": "ts_ms", "optional": True},
        ],
    }
    unscaled = (12345).to_bytes(2, "big")  # 123.45 at scale 2, as the JSON converter writes
    payload = {
        "before": None,
        "after": {
            "id": 7,
            "born": 19_000,
            "photo": base64.b64encode(b"\x01\x02").decode(),
            "price": base64.b64encode(unscaled).decode(),
            "seen": 1_700_000_000_123,
        },
        "source": {"name": "srv", "db": "shop", "table": "people", "file": "b.1", "pos": 4},
        "op": "c",
        "ts_ms": 5,
    }
    value = {"schema": schema, "payload": payload}
    position = binlog_position("b.000001", 4)
    return CaptureRecord("change", "shop", "people", {"id": 7}, value, position, None)  # type: ignore[arg-type]


@pytest.mark.parametrize("form", ["avro", "json_schema", "protobuf"])
def test_registry_form_gives_the_json_forms_ledger_row_and_reads_back_as_the_table(
    form: str,
) -> None:
    record = _record()
    url = f"mock://capture-encode-{form}"
    encoder = ValueEncoder(form, url)
    raw = encoder.encode(record, "srv.shop.people")
    assert is_framed(raw) and encoder.encode(record, "srv.shop.people") == raw  # once
    registry = registry_for(url)
    schema_id = int.from_bytes(raw[1:5], "big")
    wire = Wire(registry.writer_schemas({schema_id}))
    decoded = decode_framed(raw, wire.schemas)
    # The JSON form, with the Connect Decimal as its digits (its schema says the scale).
    expected = json.loads(json.dumps(record.value["payload"]))
    expected["after"]["price"] = "123.45"
    assert decoded == expected
    as_json = ValueEncoder("json").encode(record, "srv.shop.people")
    row, twin = project_one(raw, TABLE, wire), project_one(as_json, TABLE)
    assert row == twin and row[STATUS] == ROW, row
    assert row[c.AFTER]["born"] is not None and row[c.AFTER]["photo"] == b"\x01\x02"

    [version] = AvroVersions(registry).versions("srv.shop.people-value")
    plan = build_plan(TABLE, model_of(version, TABLE))
    assert plan.changes == ()  # dates, decimals, timestamps keep their types (connect.name)


def test_schema_changes_stay_json_and_avro_without_a_schema_is_refused() -> None:
    encoder = ValueEncoder("avro", "mock://capture-encode")
    record = _record()
    ddl = CaptureRecord(
        "schema_change", "shop", "people", None, {"ddl": "x"}, record.position, None
    )  # type: ignore[arg-type]
    assert encoder.encode(ddl, "srv") == b'{"ddl":"x"}'
    bare = CaptureRecord(
        "change",
        "shop",
        "people",
        None,
        record.value["payload"],
        record.position,
        None,  # type: ignore[arg-type]
    )
    with pytest.raises(CaptureError, match="no Connect schema"):
        encoder.encode(bare, "srv.shop.people")
    with pytest.raises(CaptureError, match="needs a schema registry"):
        ValueEncoder("avro")
    with pytest.raises(CaptureError, match="thrift.* is not one capture writes"):
        ValueEncoder("thrift", "mock://capture-encode")
