"""Avro / JSON Schema / Protobuf → schema model, golden cases as a data file
(tests/unit/schema/golden/registry/conversions.json: input schema, expected columns)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, json_format

from icetide.errors import SchemaError
from icetide.schema.convert import ids_from
from icetide.schema.convert.avro import from_avro_schema, known_ids, to_avro_schema
from icetide.schema.convert.json_schema import json_schema_to_avro
from icetide.schema.convert.protobuf import protobuf_to_avro
from icetide.schema.model import all_fields
from icetide.schema.types import ListType

GOLDEN = Path(__file__).parent / "golden" / "registry" / "conversions.json"
CASES: list[dict[str, Any]] = json.loads(GOLDEN.read_text())["cases"]


def to_avro(case: dict[str, Any]) -> dict[str, Any]:
    schema = case["schema"]
    if case["format"] == "json_schema":
        return json_schema_to_avro(schema)
    if case["format"] == "protobuf":
        proto = json_format.ParseDict(schema, descriptor_pb2.FileDescriptorProto())
        return protobuf_to_avro(proto)
    return dict(schema)


@pytest.mark.parametrize("case", CASES, ids=[c["format"] for c in CASES])
def test_golden_conversion(case: dict[str, Any]) -> None:
    columns = from_avro_schema(to_avro(case), ids_from(1))
    got = [f"{c.name}: {c.type}" + ("" if c.nullable else " not null") for c in columns]
    assert got == case["expected"]
    ids = [f.id for f in all_fields(columns)]
    assert len(ids) == len(set(ids))  # every field, nested ones too, has its own id


def test_avro_round_trip_keeps_types_nullability_and_ids() -> None:
    columns = from_avro_schema(to_avro(CASES[0]), ids_from(1))
    tags = next(c for c in columns if c.name == "tags")
    assert isinstance(tags.type, ListType) and tags.type.element_nullable
    avro = to_avro_schema("Value", "shop", columns)
    back = from_avro_schema(avro, ids_from(1000), known_ids(columns))
    assert back == columns


def test_a_later_version_keeps_ids_by_path_and_numbers_new_fields_above() -> None:
    v1 = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "id", "type": "long"},
            {
                "name": "a",
                "type": {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]},
            },
        ],
    }
    v2 = json.loads(json.dumps(v1))
    v2["fields"].insert(1, {"name": "new", "type": ["null", "string"], "default": None})
    v2["fields"][2]["type"]["fields"].append(
        {"name": "y", "type": ["null", "int"], "default": None}
    )
    first = from_avro_schema(v1, ids_from(1))
    second = from_avro_schema(v2, ids_from(10), known_ids(first))
    ids = {f.name: f.id for f in all_fields(second)}
    assert ids == {"id": 1, "new": 10, "a": 2, "x": 3, "y": 11}


def test_unions_of_two_types_are_refused_with_the_field_named() -> None:
    with pytest.raises(SchemaError) as caught:
        from_avro_schema(
            {"type": "record", "name": "r", "fields": [{"name": "v", "type": ["int", "string"]}]},
            ids_from(1),
        )
    assert "field v" in str(caught.value)
