"""What an inline Debezium schema adds to a table (``inline_candidate``) and how the one
evolution plan classifies it: adds and widenings apply, a category change is held, an old
narrower or shorter schema changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from icetide.config import Config
from icetide.evolution.carried import VersionWalker, inline_candidate
from icetide.evolution.plan import build_plan
from icetide.pipeline import Pipeline
from icetide.schema.file import schema_from_dict

TABLE = schema_from_dict(
    {
        "table": "items",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {
                "id": 2,
                "name": "address",
                "type": {"struct": [{"id": 3, "name": "city", "type": "string"}]},
            },
            {"id": 4, "name": "qty", "type": "int"},
            {"id": 5, "name": "price", "type": "decimal(10,2)"},
        ],
    }
)


def row(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": [{"field": "id", "type": "int64"}, *fields]}


def opt(field: str, kind: str, **more: Any) -> dict[str, Any]:
    return {"field": field, "type": kind, "optional": True, **more}


ADDRESS_ZIP = opt("address", "struct", fields=[opt("city", "string"), opt("zip", "string")])


def test_nested_add_and_widening_apply_as_one_new_version() -> None:
    inline = row(ADDRESS_ZIP, opt("qty", "int64"), opt("note", "string"))
    new = inline_candidate(TABLE, inline)
    assert new is not None and new.version == 2
    assert str(new.by_name["address"].type) == "struct<city: string, zip: string>"
    assert str(new.by_name["qty"].type) == "long"
    assert new.by_name["note"].nullable and new.by_name["note"].id == 7  # after zip (6)
    plan = build_plan(TABLE, new)
    assert not plan.held
    assert sorted(c.kind for c in plan.applied) == ["add_column", "add_nested", "widen"]


def test_old_narrower_or_shorter_schemas_change_nothing() -> None:
    assert inline_candidate(TABLE, row()) is None  # fields missing: old message, not a drop
    assert inline_candidate(TABLE, row(opt("qty", "int16"))) is None  # narrower: kept
    decimal = {"name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}
    assert inline_candidate(TABLE, row(opt("price", "bytes", **decimal))) is None
    wider = {**decimal, "parameters": {"scale": "2", "connect.decimal.precision": "12"}}
    new = inline_candidate(TABLE, row(opt("price", "bytes", **wider)))
    assert new is not None and str(new.by_name["price"].type) == "decimal(12,2)"


def test_a_category_change_is_held() -> None:
    new = inline_candidate(TABLE, row(opt("address", "string")))
    assert new is not None
    plan = build_plan(TABLE, new)
    assert [c.kind for c in plan.held] == ["type_change"]


def test_evolution_disabled_refuses_a_differing_inline_schema_and_names_the_switch(
    tmp_path: Path,
) -> None:
    doc = {
        "pipeline": "p",
        "tables": [{"name": "items", "source": "shop.items", "evolution": {"enabled": False}}],
    }
    config = Config.model_validate(doc, context={"config_dir": tmp_path})
    walker = VersionWalker(None, Pipeline(config, {"items": TABLE}))  # type: ignore[arg-type]
    refused = walker.take_inline("items", "inline:k", row(opt("note", "string")))
    assert refused["inline:k"][0] == "schema_evolution_disabled"
    assert "evolution.enabled is false" in refused["inline:k"][1]
    assert "table items" in refused["inline:k"][1]
    assert walker.take_inline("items", "inline:same", row()) == {}  # nothing new: flows
