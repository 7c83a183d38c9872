"""The ledger's decode steps read registry-tagged messages like their JSON twins."""

from __future__ import annotations

import base64
import json

from icetide.events.raw import Wire
from icetide.events.wire import AVRO, WriterSchema, frame
from icetide.ledger.decode import DEAD, ROW, Routes, classify_one, project_one
from icetide.schema.contract import ledger as c
from icetide.schema.file import schema_from_dict
from tests.unit.events.test_events_wire import ENVELOPE_JSON, ROW_V1, avro_bytes, envelope

ROUTES = Routes({"inv.items": [(None, "items")]})
ITEMS = schema_from_dict(
    {
        "table": "items",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "int", "nullable": False},
            {"id": 2, "name": "name", "type": "string"},
            {"id": 3, "name": "qty", "type": "long"},
        ],
    }
)
WIRE = Wire({7: WriterSchema(AVRO, json.dumps(envelope(ROW_V1)))})
AVRO_MESSAGE = frame(7, avro_bytes(envelope(ROW_V1), ENVELOPE_JSON))
JSON_MESSAGE = json.dumps(ENVELOPE_JSON).encode()


def test_avro_message_routes_and_projects_to_the_json_messages_row() -> None:
    assert classify_one(AVRO_MESSAGE, ROUTES, WIRE) == ("items", ROW, "", "")
    assert classify_one(JSON_MESSAGE, ROUTES, WIRE) == ("items", ROW, "", "")
    assert project_one(AVRO_MESSAGE, ITEMS, WIRE) == project_one(JSON_MESSAGE, ITEMS)
    assert project_one(AVRO_MESSAGE, ITEMS, WIRE)[c.AFTER] == {"id": 1, "name": "pen", "qty": 3}


def test_unknown_schema_and_garbage_payload_are_dead_letters_with_reasons() -> None:
    unknown = frame(8, b"\x02")
    assert classify_one(unknown, ROUTES, WIRE)[1:3] == (DEAD, "unknown_schema_id")
    garbage = frame(7, b"\xff\xff\xff")
    assert classify_one(garbage, ROUTES, WIRE)[1:3] == (DEAD, "deserialization")


def test_landing_lines_hold_frames_in_base64() -> None:
    files = Wire(WIRE.schemas, base64_lines=True)
    line = base64.b64encode(AVRO_MESSAGE)
    assert classify_one(line, ROUTES, files) == ("items", ROW, "", "")
    assert project_one(line, ITEMS, files) == project_one(JSON_MESSAGE, ITEMS)
    assert classify_one(JSON_MESSAGE, ROUTES, files) == ("items", ROW, "", "")
