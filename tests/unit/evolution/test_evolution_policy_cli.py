"""The evolution: config block, decide(), and the `icetide schema plan|apply` commands
(offline: the new schema from a file, the ALTERs not run)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from icetide.cli import main
from icetide.cli.schema_plan import register_schema_group
from icetide.config import load_config
from icetide.errors import ConfigError
from icetide.evolution.classify import SchemaChange
from icetide.evolution.policy import Policy, decide


def test_the_evolution_block_rejects_unknown_keys_and_kinds_naming_the_path(folder: Path) -> None:
    config = folder / "icetide.yaml"
    config.write_text(
        "pipeline: evo\ntables:\n  - name: customers\n"
        "    evolution: {mode: evolve, modes: {add_colum: freeze}, drp: hard}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(config)
    text = str(err.value)
    assert (
        "tables[0].evolution.modes: unknown change kind 'add_colum'; did you mean 'add_column'?"
        in text
    )
    assert "tables[0].evolution.drp: unknown key; did you mean 'drop'?" in text
    config.write_text("pipeline: evo\ntables:\n  - name: customers\n    evolution: {mode: melt}\n")
    with pytest.raises(ConfigError, match=r"tables\[0\].evolution.mode"):
        load_config(config)


def test_a_table_without_evolution_gets_the_defaults(folder: Path) -> None:
    config = folder / "icetide.yaml"
    config.write_text("pipeline: evo\ntables:\n  - name: customers\n")
    policy = Policy.from_config(load_config(config).table("customers").evolution)
    assert (policy.mode, policy.drop, policy.auto_apply, dict(policy.modes)) == (
        "evolve",
        "soft",
        True,
        {},
    )


@pytest.mark.parametrize(
    "classification,policy,action",
    [
        ("automatic", Policy(), "apply"),
        ("held", Policy(), "hold"),
        ("held", Policy(approved=frozenset({"x:c"})), "apply"),
        ("automatic", Policy(mode="freeze"), "reject"),
        ("held", Policy(modes={"add_column": "discard_row"}), "discard_row"),
        ("automatic", Policy(modes={"add_column": "discard_value"}), "discard_value"),
        ("automatic", Policy(mode="freeze", modes={"add_column": "evolve"}), "apply"),
    ],
)
def test_decide_one_table(classification: str, policy: Policy, action: str) -> None:
    change = SchemaChange("x:c", "add_column", classification, ("c",), 2, "why")  # type: ignore[arg-type]
    assert decide(change, policy).action == action


def test_an_ambiguous_change_needs_a_resolution() -> None:
    change = SchemaChange("ambiguous:a>b", "ambiguous", "ambiguous", ("b",), 3, "why")
    assert decide(change, Policy()).action == "hold"
    assert (
        decide(change, Policy(approved=frozenset({"ambiguous:a>b=rename"}))).resolution == "rename"
    )
    with pytest.raises(Exception, match="ambiguous:a>b=rename or ambiguous:a>b=drop_add"):
        decide(change, Policy(approved=frozenset({"ambiguous:a>b"})))


def test_schema_plan_then_apply_from_the_command_line(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    common = ["--table", "customers", "--from", "new.yaml", "--ddl", "m.sql"]
    assert main(["schema", "plan", *common, "--output", "json"]) == 0
    plans = json.loads(capsys.readouterr().out)
    assert plans[0]["held"] == ["sensitive:ssn"]
    assert {c["id"]: c["decision"]["action"] for c in plans[0]["changes"]} == {
        "rename:mail": "apply",
        "widen:amount": "apply",
        "add_with_default:note": "apply",
        "sensitive:ssn": "hold",
    }
    assert any("RENAME COLUMN `email` TO `mail`" in s for s in plans[0]["ddl"]["base"])
    # held changes stay held: exit 3, the rest is applied
    assert main(["schema", "apply", *common, "--no-ddl", "--by", "ana", "--reason", "r"]) == 3
    out = capsys.readouterr().out
    assert "schema version 1 → 2" in out and "still held: sensitive:ssn" in out
    assert main(["schema", "apply", *common, "--no-ddl", "--approve", "sensitive:nope"]) == 2
    assert "no planned change has this id" in capsys.readouterr().err
    assert main(["schema", "apply", *common, "--no-ddl", "--approve", "sensitive:ssn"]) == 0
    assert "schema version 2 → 3" in capsys.readouterr().out
    # approved again (a rerun, or a second process that lost the race): nothing to do
    assert main(["schema", "apply", *common, "--no-ddl", "--approve", "sensitive:ssn"]) == 0
    assert "already applied; nothing to do" in capsys.readouterr().out
    assert main(["schema", "plan", *common]) == 0
    assert "nothing to apply" in capsys.readouterr().out
    lines = (folder / "schemas" / "customers.audit.jsonl").read_text().splitlines()
    assert [json.loads(x)["version"] for x in lines] == [2, 3]


def test_the_schema_group_is_made_once_for_every_module() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    group = register_schema_group(sub)
    assert register_schema_group(sub) is group
    group.add_parser("show")
    assert parser.parse_args(["schema", "show"]).action == "show"


def test_a_schema_group_made_by_another_module_is_extended() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    other = sub.add_parser("schema").add_subparsers(dest="schema_command")
    other.add_parser("show")
    assert register_schema_group(sub) is other
