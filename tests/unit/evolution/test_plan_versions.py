"""Only what a plan applies moves the schema version: a held change (its hint included)
or a reorder nobody listed writes none, and a precision change that alters how values
arrive (milliseconds → microseconds) is applied with its new hint."""

from __future__ import annotations

from typing import Any

from icetide.evolution.evidence import collect
from icetide.evolution.plan import build_plan
from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema

MILLIS, MICROS = "io.debezium.time.Timestamp", "io.debezium.time.MicroTimestamp"


def schema(columns: list[dict[str, Any]], logical: dict[str, str], version: int = 1) -> TableSchema:
    return schema_from_dict(
        {
            "table": "t",
            "version": version,
            "primary_key": ["id"],
            "columns": [{"id": 1, "name": "id", "type": "long", "nullable": False}, *columns],
            "sink": {"logical": logical},
        }
    )


NOTE = {"id": 2, "name": "note", "type": "string"}
TS = {"id": 3, "name": "ts", "type": "timestamp"}


def test_a_held_change_writes_no_version_and_keeps_the_old_hint() -> None:
    old = schema([NOTE, {"id": 3, "name": "d", "type": "date"}], {"d": "io.debezium.time.Date"})
    new = schema(
        [NOTE, {"id": 3, "name": "d", "type": "timestamptz"}],
        {"d": "io.debezium.time.ZonedTimestamp"},
    )
    plan = build_plan(old, new)
    assert [c.kind for c in plan.held] == ["type_change"]
    assert not plan.changed and plan.target == old
    assert plan.target.sink.logical[3] == "io.debezium.time.Date"


def test_a_reorder_nobody_listed_writes_no_version() -> None:
    old = schema([NOTE, TS], {"ts": MILLIS})
    new = schema([TS, NOTE], {"ts": MILLIS})
    assert not build_plan(old, new).changed


def test_a_precision_change_with_ddl_applies_the_new_hint() -> None:
    old = schema([NOTE, TS], {"ts": MILLIS})
    new = schema([NOTE, TS], {"ts": MICROS})
    evidence = collect(["ALTER TABLE t MODIFY ts DATETIME(6)"], "mysql")
    plan = build_plan(old, new, evidence)
    assert [c.id for c in plan.applied] == ["source_only:ts"]
    assert plan.changed and plan.target.version == 2
    assert plan.target.sink.logical[3] == MICROS


def test_a_precision_change_without_ddl_is_seen_by_its_hint() -> None:
    # PostgreSQL timestamp(3) → timestamp(6): a Relation message, no DDL text.
    old = schema([NOTE, TS], {"ts": MILLIS})
    new = schema([NOTE, TS], {"ts": MICROS})
    plan = build_plan(old, new)
    [change] = plan.applied
    assert change.kind == "source_only" and change.detail["hint"] == {"from": MILLIS, "to": MICROS}
    assert plan.target.sink.logical[3] == MICROS


def test_a_source_type_change_that_reads_the_same_writes_no_version() -> None:
    old = schema([NOTE], {})
    new = schema([NOTE], {})
    plan = build_plan(old, new, collect(["ALTER TABLE t MODIFY note VARCHAR(64)"], "mysql"))
    assert [c.kind for c in plan.changes] == ["source_only"]
    assert plan.applied == () and not plan.changed
