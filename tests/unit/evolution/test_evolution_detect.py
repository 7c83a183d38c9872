"""DDL detection honours ``evolution.enabled: false`` as the message-schema walk does: the
change read from the source is refused with ``schema_evolution_disabled`` and not applied.
A declared type the source type still fits (the demo's ``TINYINT(1)`` declared
``boolean``) is no change; a source type it no longer fits is."""

from __future__ import annotations

from pathlib import Path

import pytest

from icetide.config import Config
from icetide.demo.shop import shop_schemas
from icetide.evolution.detect import Detector
from icetide.evolution.policy import EVOLUTION_DISABLED
from icetide.evolution.source_schema import Catalog, CatalogColumn
from icetide.ledger.signals import ChangeSignal
from icetide.pipeline import Pipeline
from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema

ITEMS = {
    "table": "items",
    "primary_key": ["id"],
    "columns": [
        {"id": 1, "name": "id", "type": "long", "nullable": False},
        {"id": 2, "name": "name", "type": "string"},
    ],
}
SOURCE_NOW = Catalog(
    (
        CatalogColumn("id", "bigint(20)", False, True, None, "mysql"),
        CatalogColumn("name", "longtext", True, False, None, "mysql"),
        CatalogColumn("note", "varchar(20)", True, False, None, "mysql"),
    ),
    ("id",),
)
DDL = ChangeSignal("items", "ddl", ddl="ALTER TABLE items ADD COLUMN note varchar(20)")


class Reports:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, object]]] = []

    def report(self, stage: str, message: str, *, table: str | None = None, **kw: object) -> None:
        self.lines.append((message, kw))


def detector(
    tmp_path: Path,
    enabled: bool = True,
    schema: TableSchema | None = None,
    catalog: Catalog = SOURCE_NOW,
    source: str = "mysql",
) -> tuple[Detector, Pipeline, Reports]:
    schema = schema or schema_from_dict(ITEMS)
    name = schema.table
    doc = {
        "pipeline": "p",
        "sources": [{"name": "shopdb", "type": source, "database": "shop"}],
        "tables": [{"name": name, "source": f"shop.{name}", "evolution": {"enabled": enabled}}],
    }
    config = Config.model_validate(doc, context={"config_dir": tmp_path})
    reports = Reports()
    pipeline = Pipeline(config, {name: schema}, reports)  # type: ignore[arg-type]
    found = Detector(None, pipeline, catalog=lambda table: catalog)  # type: ignore[arg-type]
    return found, pipeline, reports


@pytest.mark.parametrize("enabled", [True, False])
def test_a_ddl_change_is_refused_with_the_carried_paths_reason_when_evolution_is_off(
    tmp_path: Path, enabled: bool
) -> None:
    found, pipeline, reports = detector(tmp_path, enabled)
    plan = found.plan("items", [DDL])
    assert plan is not None
    if enabled:  # the same change applies when the switch is on
        assert [c.id for c in plan.applied] == ["add_column:note"] and not plan.refused
        return
    assert plan.applied == () and [c.id for c in plan.refused] == ["add_column:note"]
    assert plan.decision("add_column:note").reason.startswith(EVOLUTION_DISABLED)
    assert found.detect("items", [DDL]) is None
    assert pipeline.schema("items").version == 1  # nothing applied
    reason, text = found.refused["items"]
    assert reason == EVOLUTION_DISABLED
    assert "table items" in text and "evolution.enabled is false" in text and "note" in text
    [(message, figures)] = reports.lines
    assert figures["refused"] == EVOLUTION_DISABLED and EVOLUTION_DISABLED in message


def shop_customers(vip: str) -> Catalog:
    """The demo's ``customers`` as MariaDB's ``information_schema`` shows it, after
    ``ADD COLUMN note`` and with ``vip`` of the given column type."""
    return Catalog(
        (
            CatalogColumn("id", "int(11)", False, True, None, "mysql"),
            CatalogColumn("name", "varchar(100)", False, False, None, "mysql"),
            CatalogColumn("email", "varchar(200)", True, False, None, "mysql"),
            CatalogColumn("balance", "decimal(12,2)", True, False, None, "mysql"),
            CatalogColumn("vip", vip, True, False, None, "mysql"),
            CatalogColumn("updated_at", "datetime(6)", True, False, None, "mysql"),
            CatalogColumn("note", "varchar(16)", True, False, None, "mysql"),
        ),
        ("id",),
    )


NOTE = ChangeSignal("customers", "ddl", ddl="ALTER TABLE customers ADD COLUMN note VARCHAR(16)")


@pytest.mark.parametrize(
    ("vip", "held"),
    [
        ("tinyint(1)", []),  # untouched: the declared boolean still fits
        ("int(11)", ["type_change:vip"]),  # MODIFY vip INT
        ("varchar(5)", ["type_change:vip"]),  # MODIFY vip VARCHAR(5)
    ],
)
def test_a_declared_boolean_tinyint_is_no_change_but_a_new_vip_type_is(
    tmp_path: Path, vip: str, held: list[str]
) -> None:
    customers = shop_schemas()[0]
    assert str(customers.by_name["vip"].type) == "boolean"
    found, _, _ = detector(tmp_path, schema=customers, catalog=shop_customers(vip))
    plan = found.plan("customers", [NOTE])
    assert plan is not None
    assert [c.id for c in plan.applied] == ["add_column:note"]
    assert [c.id for c in plan.held] == held
    now = plan.new.by_name["vip"]
    assert now.id == 5 and plan.new.by_name["note"].id == 7
    if held:
        assert plan.held[0].detail == {"from": "boolean", "to": str(now.type)}
    else:  # the candidate keeps the declaration: nothing to alter, nothing to approve
        assert str(now.type) == "boolean" and plan.target.by_name["vip"] == now


MOODS = {
    "table": "people",
    "primary_key": ["id"],
    "columns": [
        {"id": 1, "name": "id", "type": "long", "nullable": False},
        {"id": 2, "name": "mood", "type": {"enum": ["sad", "ok", "happy"]}},
    ],
}


@pytest.mark.parametrize(
    ("labels", "changes"),
    [
        (("sad", "ok", "happy"), []),  # the declared enum holds every label
        (("sad", "ok", "happy", "meh"), ["widen:mood"]),  # ADD VALUE 'meh': a change
    ],
)
def test_a_declared_postgres_enum_is_no_change_until_a_label_is_added(
    tmp_path: Path, labels: tuple[str, ...], changes: list[str]
) -> None:
    catalog = Catalog(
        (
            CatalogColumn("id", "bigint", False, True, None, "postgres"),
            CatalogColumn("mood", '"mood"', True, False, None, "postgres", True, labels),
        ),
        ("id",),
    )
    found, _, _ = detector(
        tmp_path, schema=schema_from_dict(MOODS), catalog=catalog, source="postgres"
    )
    relation = ChangeSignal("people", "relation", columns=("id", "mood"))
    plan = found.plan("people", [relation])
    assert plan is not None
    assert [c.id for c in plan.changes] == changes


def test_a_source_table_that_lost_its_primary_key_holds_that_table_not_the_stage(
    tmp_path: Path,
) -> None:
    no_key = Catalog(
        (
            CatalogColumn("id", "bigint(20)", False, False, None, "mysql"),
            CatalogColumn("name", "longtext", True, False, None, "mysql"),
        ),
        (),
    )
    found, pipeline, reports = detector(tmp_path, catalog=no_key)
    drop = ChangeSignal("items", "ddl", ddl="ALTER TABLE items DROP PRIMARY KEY")
    assert found.detect("items", [drop]) is None  # no exception reaches the ledger
    [reason] = found.held["items"]
    assert reason == "key_change: the source table shop.items has no primary key", reason
    said = [m for m, kw in reports.lines if kw.get("held") == ["key_change"]]
    assert len(said) == 1 and "tables[].primary_key" in said[0]
    assert "has no primary key" in said[0] and "needs at least one column" not in said[0]
    assert pipeline.schema("items").version == 1


def test_a_key_change_behind_a_pinned_primary_key_is_held(tmp_path: Path) -> None:
    # The config pins primary_key, so the inferred schema keeps [id]; the DDL still says
    # the source's key moved to name, and that is held, not passed over.
    moved = Catalog(
        (
            CatalogColumn("id", "bigint(20)", False, False, None, "mysql"),
            CatalogColumn("name", "varchar(20)", False, True, None, "mysql"),
        ),
        ("name",),
    )
    doc = {
        "pipeline": "p",
        "sources": [{"name": "shopdb", "type": "mysql"}],
        "tables": [{"name": "items", "source": "shop.items", "primary_key": ["id"]}],
    }
    config = Config.model_validate(doc, context={"config_dir": tmp_path})
    pipeline = Pipeline(config, {"items": schema_from_dict(ITEMS)}, Reports())  # type: ignore[arg-type]
    found = Detector(None, pipeline, catalog=lambda table: moved)  # type: ignore[arg-type]
    ddl = "ALTER TABLE items DROP PRIMARY KEY, ADD PRIMARY KEY (name)"
    plan = found.plan("items", [ChangeSignal("items", "ddl", ddl=ddl)])
    assert plan is not None and plan.target.primary_key == ("id",)
    [held] = [c for c in plan.held if c.kind == "key_change"]
    assert held.detail == {"from": ["id"], "to": ["name"]} and "pinned" in held.reason
