"""Every registry version in order, once: a subject of seven versions walked through
confluent-kafka's in-process registry (``mock://``), with a crash in the middle."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema

from icetide.events.registry import HistoryVersions, InlineVersions, RegistryVersions
from icetide.evolution.plan import EvolutionPlan
from icetide.evolution.policy import EVOLUTION_DISABLED, Policy
from icetide.evolution.registry_walk import (
    SCHEMA_INCOMPATIBLE,
    UNSUPPORTED_SCHEMA_CHANGE,
    apply_versions,
    read_mapping,
    render_mapping,
)
from icetide.schema.convert import ids_from
from icetide.schema.convert.avro import from_avro_schema
from icetide.schema.history import SchemaHistory
from icetide.schema.model import TableSchema

_registries = itertools.count()


def record(*fields: Any) -> dict[str, Any]:
    return {"type": "record", "name": "Value", "namespace": "shop.items", "fields": list(fields)}


def opt(name: str, kind: Any = "string") -> dict[str, Any]:
    return {"name": name, "type": ["null", kind], "default": None}


ADDRESS_1 = {"type": "record", "name": "address", "fields": [{"name": "city", "type": "string"}]}
ADDRESS_2 = {
    "type": "record",
    "name": "address",
    "fields": [{"name": "city", "type": "string"}, opt("zip")],
}
V1 = [
    {"name": "id", "type": "long"},
    opt("name"),
    opt("qty", "int"),
    opt("price", "float"),
    opt("legacy"),
    {"name": "note", "type": "string"},
]
VERSIONS = [
    record(*V1),
    record(*V1, opt("email")),  # 2: add an optional column
    record(*V1, opt("email"), opt("address", ADDRESS_1)),  # 3: add a struct
    record(*V1, opt("email"), opt("address", ADDRESS_2)),  # 4: add a nested field
    record(*V1[:2], opt("qty", "long"), *V1[3:], opt("email"), opt("address", ADDRESS_2)),  # 5
    record(
        *V1[:2],
        opt("qty", "long"),
        opt("price", "double"),
        *V1[4:],
        opt("email"),
        opt("address", ADDRESS_2),
    ),  # 6: float → double
    record(
        *V1[:2],
        opt("qty", "long"),
        opt("price", "double"),
        opt("note"),
        opt("email"),
        opt("address", ADDRESS_2),
    ),  # 7: legacy dropped (soft), note required → optional
]


def registry(versions: list[dict[str, Any]]) -> RegistryVersions:
    source = RegistryVersions(f"mock://icetide-{next(_registries)}")
    for schema in versions:
        source.client.register_schema("shop.items-value", Schema(json.dumps(schema), "AVRO"))
    return source


class Table:
    """The table side: its schema, its mapping property, and every commit made."""

    def __init__(self, first: TableSchema) -> None:
        self.schema = first
        self.mapping: dict[int, int] = {1: 1}
        self.commits: list[int] = []
        self.plans: list[EvolutionPlan] = []
        self.fail_at: int | None = None

    def apply(self, plan: EvolutionPlan) -> int:
        if self.fail_at == plan.target.version:
            self.fail_at = None
            raise KeyboardInterrupt("killed")  # a kill -9 between two versions
        self.schema = plan.target
        self.plans.append(plan)
        self.commits.append(plan.target.version)
        return plan.target.version

    def record(self, mapping: dict[int, int]) -> None:
        self.mapping = read_mapping(render_mapping(mapping))

    def walk(self, source: RegistryVersions, up_to: int, **kw: Any) -> Any:
        return apply_versions(
            "shop.items-value",
            up_to,
            source,
            lambda: self.schema,
            lambda: dict(self.mapping),
            self.apply,
            self.record,
            **kw,
        )


def first_table(source: RegistryVersions) -> Table:
    v1 = source.versions("shop.items-value", 1)[0]
    columns = from_avro_schema(v1.schema.text, ids_from(1))
    return Table(TableSchema("items", columns, key_ids=(1,), version=1))


def test_seven_versions_apply_in_order_once_each_across_a_crash() -> None:
    source = registry(VERSIONS)
    table = first_table(source)
    table.fail_at = 4  # the process dies applying source version 4
    with pytest.raises(KeyboardInterrupt):
        table.walk(source, 7)
    assert table.commits == [2, 3] and table.mapping == {1: 1, 2: 2, 3: 3}
    walk = table.walk(source, 7)  # the restart
    assert walk.skipped == [1, 2, 3]
    assert walk.applied == [(4, 4), (5, 5), (6, 6), (7, 7)]
    assert table.commits == [2, 3, 4, 5, 6, 7]  # one commit per version, none twice
    assert table.mapping == {v: v for v in range(1, 8)}
    assert table.walk(source, 7).applied == []  # a replay applies nothing

    columns = table.schema.by_name
    assert str(columns["qty"].type) == "long" and str(columns["price"].type) == "double"
    assert columns["note"].nullable
    # Soft delete: gone from the model, kept (optional, commented) in the Iceberg tables.
    assert "legacy" not in columns
    last = table.plans[-1]
    assert last.alter is not None
    statements = " ".join(last.alter.base + last.alter.ledger)
    assert "legacy" in statements and "DROP COLUMN" not in statements.upper()
    address = columns["address"].type
    assert [f.name for f in address.fields] == ["city", "zip"]  # type: ignore[attr-defined]
    ids = {c.name: c.id for c in table.schema.columns}
    assert ids["id"] == 1 and len(set(ids.values())) == len(ids)


def test_an_incompatible_version_stops_the_walk_with_its_reason() -> None:
    bad = record({"name": "id", "type": "long"}, opt("name", "int"), *V1[2:])
    source = registry([VERSIONS[0], VERSIONS[1], bad])
    table = first_table(source)
    walk = table.walk(source, 3)
    assert walk.applied == [(2, 2)]
    assert walk.rejected is not None and walk.rejected.version == 3
    assert walk.rejected.reason == SCHEMA_INCOMPATIBLE and "name" in walk.rejected.detail
    assert 3 not in table.mapping


def test_a_category_change_under_mode_none_is_held_as_unsupported() -> None:
    changed = record(
        *V1[:4],
        {"name": "legacy", "type": ["null", {"type": "array", "items": "string"}], "default": None},
        V1[5],
    )
    source = registry([VERSIONS[0], changed])
    table = first_table(source)
    walk = table.walk(source, 2, mode="NONE")
    assert walk.rejected is not None and walk.rejected.reason == UNSUPPORTED_SCHEMA_CHANGE
    assert table.commits == []


def test_history_and_inline_sources_answer_the_same_question() -> None:
    source = registry(VERSIONS[:3])
    table = first_table(source)
    table.walk(source, 3)
    history = SchemaHistory("items", (table.schema.with_columns(table.schema.columns, version=1),))
    answered = HistoryVersions({"items": history}).versions("items", 5)
    assert [v.version for v in answered] == [1]
    inline = InlineVersions()
    assert inline.observe("s", {"type": "struct", "fields": []}) == 1
    assert inline.observe("s", {"type": "struct", "fields": [{"field": "a"}]}) == 2
    assert inline.observe("s", {"type": "struct", "fields": []}) == 1
    assert [v.version for v in inline.versions("s", 1)] == [1]
    assert [v.version for v in source.versions("shop.items-value", 2)] == [1, 2]


def test_writer_schemas_of_a_batch_leave_unknown_ids_out() -> None:
    source = registry(VERSIONS[:2])
    proto = source.client.register_schema("other-value", Schema("Cg5pdGVtcy5wcm90bw==", "PROTOBUF"))
    got = source.writer_schemas({1, 2, proto, 424242})
    assert sorted(got) == sorted({1, 2, proto})
    assert got[1].format == "AVRO" and json.loads(got[2].text)["fields"][-1]["name"] == "email"
    assert got[proto].format == "PROTOBUF" and got[proto].text == "Cg5pdGVtcy5wcm90bw=="


def test_evolution_disabled_or_frozen_refuses_a_version_and_records_nothing() -> None:
    source = registry(VERSIONS[:2])  # version 2 adds a column
    table = first_table(source)
    walk = table.walk(source, 2, policy=Policy(enabled=False))
    assert walk.rejected is not None and walk.rejected.version == 2
    assert walk.rejected.reason == EVOLUTION_DISABLED
    assert "evolution.enabled is false" in walk.rejected.detail
    assert table.commits == [] and table.mapping == {1: 1}
    frozen = table.walk(source, 2, policy=Policy(modes={"add_column": "freeze"}))
    assert frozen.rejected is not None and frozen.rejected.reason == UNSUPPORTED_SCHEMA_CHANGE
    assert table.commits == [] and table.mapping == {1: 1}
    assert table.walk(source, 2).applied == [(2, 2)]  # switched on: it applies
