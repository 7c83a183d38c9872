"""DDL detection honours ``evolution.enabled: false`` as the message-schema walk does: the
change read from the source is refused with ``schema_evolution_disabled`` and not applied."""

from __future__ import annotations

from pathlib import Path

import pytest

from icetide.config import Config
from icetide.evolution.detect import Detector
from icetide.evolution.policy import EVOLUTION_DISABLED
from icetide.ledger.signals import ChangeSignal
from icetide.pipeline import Pipeline
from icetide.schema.file import schema_from_dict

ITEMS = {
    "table": "items",
    "primary_key": ["id"],
    "columns": [
        {"id": 1, "name": "id", "type": "long", "nullable": False},
        {"id": 2, "name": "name", "type": "string"},
    ],
}
SOURCE_NOW = {**ITEMS, "columns": [*ITEMS["columns"], {"id": 3, "name": "note", "type": "string"}]}
DDL = ChangeSignal("items", "ddl", ddl="ALTER TABLE items ADD COLUMN note varchar(20)")


class Reports:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, object]]] = []

    def report(self, stage: str, message: str, *, table: str | None = None, **kw: object) -> None:
        self.lines.append((message, kw))


def detector(tmp_path: Path, enabled: bool) -> tuple[Detector, Pipeline, Reports]:
    doc = {
        "pipeline": "p",
        "sources": [{"name": "shopdb", "type": "mysql"}],
        "tables": [{"name": "items", "source": "shop.items", "evolution": {"enabled": enabled}}],
    }
    config = Config.model_validate(doc, context={"config_dir": tmp_path})
    reports = Reports()
    pipeline = Pipeline(config, {"items": schema_from_dict(ITEMS)}, reports)  # type: ignore[arg-type]
    fresh = schema_from_dict(SOURCE_NOW)
    found = Detector(None, pipeline, catalog=lambda table: fresh)  # type: ignore[arg-type]
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
