"""Nested types end to end: schemaless events with a struct, a list, a map and an enum go
through the ledger (typed by the schema's Arrow shape) and the merge into the mirror.

Then the same table changes through Debezium-schema events on the files transport (issue
9's nested acceptance): the inline schema adds a field inside the struct and widens
another, then a top-level column: a process walking those two versions is killed
(exit 137, as ``kill -9``) between them, the running ledger resumes the walk with nothing
applied twice, the stages converge and the values land; an inline schema changing a
column's category is held and its events dead-lettered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from icetide.cli.stages import ledger_stage
from icetide.config import load_table_schemas
from icetide.evolution.audit import audit_path, read_audit
from icetide.faults import KILLED_EXIT_CODE
from icetide.lake.alter import int_property, table_properties
from icetide.ledger.decode import inline_row_schema, schema_key
from icetide.schema.contract.phases import DATA_VERSION
from icetide.schema.file import schema_from_dict
from tests.integration.events import mysql
from tests.integration.harness import Pipeline, run_script

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


def test_nested_values_land_a_bad_symbol_is_dead_and_an_inline_struct_change_converges(
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
    [dead] = pipe.dead_letters(pipe.refs("items").dead_letters)
    assert dead["reason"] == "type_mismatch" and "status" in dead["error"]

    # Debezium-schema events (files transport) change the struct; see the module doc.
    status = _opt(
        "status", "string", name="io.debezium.data.Enum", parameters={"allowed": "new,active"}
    )
    v2_address = _opt(
        "address",
        "struct",
        fields=[_opt("city", "string"), _opt("zip", "int64"), _opt("country", "string")],
    )
    now = {**first, "tags": [], "status": "active"}
    wide = {"id": 4, "address": {"city": "Rome", "zip": 5_000_000_000, "country": "IT"}}
    noted = {"id": 6, "address": {"city": "Oslo", "zip": 1, "country": "NO"}, "note": "hi"}
    lines = [
        _with_schema(mysql("c", 200, after={**wide, "status": "active"}), v2_address, status),
        # Still in flight with the old struct: applies after the table moved on.
        mysql("u", 210, before=now, after={**now, "address": {"city": "Bergen", "zip": 5}}),
        # Version 3: a top-level column too.
        _with_schema(
            mysql("c", 215, after={**noted, "status": "new"}),
            v2_address,
            status,
            _opt("note", "string"),
        ),
        # The struct becomes text: a type-category change, held.
        _with_schema(
            mysql("c", 220, after={"id": 5, "address": "Paris"}), _opt("address", "string"), status
        ),
    ]
    pipe.land(lines)
    # A process walking versions 2 and 3 is killed (exit 137, as kill -9) between them...
    carried = [(schema_key(b"", d), json.dumps(inline_row_schema(d), sort_keys=True)) for d in (
        json.loads(lines[0]), json.loads(lines[2]))]  # fmt: skip
    killed = run_script(
        WALK_IN_A_CHILD,
        str(pipe.config_path),
        json.dumps(carried),
        fault="evolution.between_versions",
    )
    assert killed.returncode == KILLED_EXIT_CODE, killed.stderr[-2000:]
    pipe.schemas = load_table_schemas(pipe.config)  # what a restarted process reads
    assert pipe.schemas["items"].version == 2
    # ...and the running ledger resumes the walk: version 2 is not applied again.
    ledger_stage(spark, pipe.pipeline).start(once=True).awaitTermination()
    pipe.schemas = load_table_schemas(pipe.config)
    schema = pipe.schemas["items"]
    assert schema.version == 3
    assert str(schema.by_name["address"].type) == "struct<city: string, zip: long, country: string>"
    assert "note" in schema.by_name
    audit = audit_path(pipe.config.resolved_path(pipe.config.table("items").schema_file))
    assert [r.version for r in read_audit(audit)] == [2, 3]  # once each
    refs = pipe.refs("items")
    for _ in range(4):  # the stages converge in turns, as `icetide run` takes them
        pipe.merge()
        ledger_stage(spark, pipe.pipeline).tick()
        if int_property(table_properties(spark, refs.base), DATA_VERSION) == 3:
            break
    rows = {r["id"]: (r["address"], r["note"]) for r in pipe.base("items")}
    assert rows == {
        1: ({"city": "Bergen", "zip": 5, "country": None}, None),
        4: ({"city": "Rome", "zip": 5_000_000_000, "country": "IT"}, None),
        6: ({"city": "Oslo", "zip": 1, "country": "NO"}, "hi"),
    }
    dead_letters = pipe.dead_letters(refs.dead_letters)
    assert sorted(d["reason"] for d in dead_letters) == [
        "type_mismatch",
        "unsupported_schema_change",
    ]
    [held] = [d for d in dead_letters if d["reason"] == "unsupported_schema_change"]
    assert "inline schema inline:" in held["error"] and "address" in held["error"]


WALK_IN_A_CHILD = """
import json, sys
from icetide.config import load_config
from icetide.evolution.carried import VersionWalker
from icetide.ledger.signals import CarriedSchema
from icetide.pipeline import Pipeline
pipeline = Pipeline(load_config(sys.argv[1]))
seen = json.loads(sys.argv[2])
carried = [CarriedSchema("items", k, text=t, first=i) for i, (k, t) in enumerate(seen)]
VersionWalker(None, pipeline)(carried)
"""
"""The version walk alone (no Spark needed until its properties), in a child process."""


def _opt(field: str, kind: str, **more: Any) -> dict[str, Any]:
    return {"field": field, "type": kind, "optional": True, **more}


def _with_schema(
    line: str, address: dict[str, Any], status: dict[str, Any], *more: dict[str, Any]
) -> str:
    """A schemaless event wrapped as JsonConverter writes it with ``schemas.enable``."""
    row = {
        "type": "struct",
        "name": "srv.shop.items.Value",
        "optional": True,
        "fields": [
            {"field": "id", "type": "int64"},
            address,
            _opt("tags", "array", items={"type": "string"}),
            _opt("scores", "map", keys={"type": "string"}, values={"type": "int64"}),
            status,
            *more,
        ],
    }
    envelope = {
        "type": "struct",
        "name": "srv.shop.items.Envelope",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {"field": "op", "type": "string"},
        ],
    }
    return json.dumps({"schema": envelope, "payload": json.loads(line)})
