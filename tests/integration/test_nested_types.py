"""Nested types end to end: schemaless events with a struct, a list, a map and an enum go
through the ledger (typed by the schema's Arrow shape) and the merge into the mirror."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from icetide.schema.file import schema_from_dict
from tests.integration.events import mysql
from tests.integration.harness import Pipeline

PROFILES = schema_from_dict(
    {
        "table": "items",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long"},
            {
                "id": 2,
                "name": "address",
                "type": {
                    "struct": [
                        {"id": 3, "name": "city", "type": "string"},
                        {"id": 4, "name": "zip", "type": "int"},
                    ]
                },
            },
            {"id": 5, "name": "tags", "type": {"list": {"element_id": 6, "element": "string"}}},
            {
                "id": 7,
                "name": "scores",
                "type": {"map": {"key_id": 8, "key": "string", "value_id": 9, "value": "long"}},
            },
            {"id": 10, "name": "status", "type": {"enum": ["new", "active"]}},
        ],
    }
)


def test_nested_values_reach_the_mirror_and_a_bad_symbol_is_a_dead_letter(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    pipe = Pipeline.custom(
        tmp_path, warehouse, "nested_types", {"items": PROFILES}, {"items": "shop.items"}, spark
    )
    first = {
        "id": 1,
        "address": {"city": "Oslo", "zip": 150},
        "tags": ["a", "b"],
        "scores": {"x": 1, "y": 2},
        "status": "new",
    }
    pipe.land(
        [
            mysql("c", 100, after=first),
            mysql("u", 110, before=first, after={**first, "tags": [], "status": "active"}),
            mysql("c", 120, after={**first, "id": 2, "status": "closed"}),  # not a symbol
        ]
    )
    pipe.stream()
    pipe.merge()

    [row] = pipe.base("items")
    assert row["address"] == {"city": "Oslo", "zip": 150}
    assert row["tags"] == [] and row["status"] == "active"
    assert row["scores"] == {"x": 1, "y": 2}
    [dead] = pipe.dead_letters(pipe.refs("items").dlt)
    assert dead["reason"] == "type_mismatch" and "status" in dead["error"]
