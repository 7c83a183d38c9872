"""Schema versions and evolution's progress on the state location, seen from a new machine.

Two folders stand for two machines: each has the config and the schema files as they
were committed (version 1); they share only the state location (``state:``). The same
scenarios run against an ``s3://`` location in
tests/integration/lakehouse/test_shared_state.py (:func:`machines_share_schema_versions`
and :func:`an_apply_cut_short_is_finished_elsewhere` take the location and the config's
other sections).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from icetide.config import load_config
from icetide.config.loader import load_schema_file
from icetide.evolution.apply import apply_plan
from icetide.evolution.audit import audit_path, read_audit
from icetide.evolution.classify import candidate_schema
from icetide.evolution.plan import EvolutionPlan, build_plan
from icetide.pipeline import Pipeline
from icetide.progress import Reporter
from icetide.schema.file import schema_from_dict
from icetide.state.store import state_store

SCHEMA = """\
table: customers
version: 1
primary_key: [id]
columns:
  - {id: 1, name: id, type: long}
  - {id: 2, name: email, type: string}
"""


def machine(folder: Path, state: str, extra: dict[str, Any] | None = None) -> Path:
    """A machine's folder: the config (sharing ``state``) and version 1 of the schema."""
    (folder / "schemas").mkdir(parents=True)
    doc = {
        "pipeline": "evo",
        "state": state,
        **(extra or {}),
        "tables": [{"name": "customers"}],
    }
    (folder / "icetide.yaml").write_text(yaml.safe_dump(doc))
    (folder / "schemas" / "customers.yaml").write_text(SCHEMA)
    return folder / "icetide.yaml"


def start(config_file: Path, lines: list[str]) -> Pipeline:
    return Pipeline(load_config(config_file), reporter=Reporter(Reporter.lines(lines)))


def add_note(pipeline: Pipeline) -> EvolutionPlan:
    """The plan ``icetide run`` makes for ``ADD COLUMN note`` at the source."""
    old = pipeline.schema("customers")
    fresh = schema_from_dict(
        {
            "table": "customers",
            "primary_key": ["id"],
            "columns": [
                {"id": 1, "name": "id", "type": "long"},
                {"id": 2, "name": "email", "type": "string"},
                {"id": 3, "name": "note", "type": "string"},
            ],
        }
    )
    return build_plan(old, candidate_schema(old, fresh))


def machines_share_schema_versions(tmp_path: Path, state: str, extra: dict[str, Any]) -> None:
    first = start(machine(tmp_path / "first", state, extra), [])
    applied = apply_plan(add_note(first), first.schemas, by="icetide ledger (automatic)")
    assert applied.version == 2

    # A new machine given the committed files (version 1) runs with version 2 and says so.
    lines: list[str] = []
    second_config = machine(tmp_path / "second", state, extra)
    second = start(second_config, lines)
    assert second.schema("customers").version == 2
    assert "note" in second.schema("customers").by_name
    file = tmp_path / "second" / "schemas" / "customers.yaml"
    assert load_schema_file(file).version == 2
    history = state_store(second.config).file("schemas/customers.history.yaml")
    assert lines == [
        f"schema customers: {file} written from the state location's history "
        f"({history.where}): its version 1 is older than version 2 there; commit the file to "
        "keep it"
    ]
    assert [s.version for s in second.schemas.history("customers").versions] == [1, 2]
    # The audit log beside the file is written again too: the record of version 2.
    copy = audit_path(file)
    assert [(r.version, r.by) for r in read_audit(copy)] == [(2, "icetide ledger (automatic)")]

    # Started again with the file as it is now: nothing to say.
    lines.clear()
    assert start(second_config, lines).schema("customers").version == 2
    assert lines == []

    # A machine with no schema file at all gets it from the state location.
    file.unlink()
    assert start(second_config, lines).schema("customers").version == 2
    assert "it was missing; version 2 is the newest there;" in lines[0]

    # A file ahead of the state location is a person's edit: the next version.
    edited = yaml.safe_load(file.read_text())
    edited["version"] = 3
    edited["columns"].append({"id": 4, "name": "phone", "type": "string"})
    file.write_text(yaml.safe_dump(edited))
    ahead = start(second_config, lines)
    assert ahead.schema("customers").version == 3
    assert [s.version for s in ahead.schemas.history("customers").versions] == [1, 2, 3]


def an_apply_cut_short_is_finished_elsewhere(
    tmp_path: Path, state: str, extra: dict[str, Any]
) -> None:
    first = start(machine(tmp_path / "first", state, extra), [])
    plan = add_note(first)
    ran: list[str] = []

    def dies_after_one(statement: str) -> None:
        if ran:
            raise RuntimeError("injected: the machine is gone")
        ran.append(statement)

    with pytest.raises(RuntimeError, match="injected"):
        apply_plan(plan, first.schemas, run_ddl=dies_after_one)
    second = start(machine(tmp_path / "second", state, extra), [])
    rest: list[str] = []
    result = apply_plan(add_note(second), second.schemas, run_ddl=rest.append)
    statements = [*plan.ddl, "base properties", "ledger properties"]
    assert len(ran) + len(rest) == len(statements)  # the first statement is not run again
    assert rest[0] not in ran and result.version == 2
    progress = state_store(second.config).file("evolution/customers.applying.json")
    assert progress.read() is None


def test_a_new_machine_runs_with_the_schema_version_the_state_location_holds(
    tmp_path: Path,
) -> None:
    machines_share_schema_versions(tmp_path, str(tmp_path / "shared"), {})


def test_an_apply_cut_short_is_finished_on_another_machine(tmp_path: Path) -> None:
    an_apply_cut_short_is_finished_elsewhere(tmp_path, str(tmp_path / "shared"), {})


def test_a_history_kept_in_state_dir_moves_to_a_newly_set_state_location(tmp_path: Path) -> None:
    """Versions recorded before ``state:`` was set are copied to it, not lost."""
    config_file = machine(tmp_path / "here", str(tmp_path / "shared"), {})
    config = load_config(config_file)
    before = Pipeline(config.model_copy(update={"state": None}), reporter=Reporter(lambda r: None))
    apply_plan(add_note(before), before.schemas)
    assert state_store(config).file("schemas/customers.history.yaml").read() is None

    moved = start(config_file, [])
    assert [s.version for s in moved.schemas.history("customers").versions] == [1, 2]
    assert state_store(config).file("schemas/customers.history.yaml").read() is not None
