"""Golden cases for schema evolution: schema before, the change (source DDL in MySQL or
PostgreSQL form and/or the source's new schema), a policy → the classification, the
decisions, the plan with its DDL and phases, and the new schema version.

Inputs are data files (``golden/*.yaml``; base schemas in ``golden/schemas.yaml``); each
case also states what it expects in words a reviewer checks (``expect:``: change id →
the decision's action, ``held:``, ``version:``) and its full output is kept in
``golden/expected/<file>/<case>.txt``. ``ICETIDE_GOLDEN_UPDATE=1`` rewrites the expected
files from the code: review the diff before committing it.

A case:

``before``: a schema name in ``schemas.yaml``; ``after``: the source's new columns (a
schema file's ``columns:`` entries, or ``name:type`` shorthand, ``!`` for NOT NULL; ids
are matched by name and evidence, never trusted); without ``after``, the columns of
``before``. ``primary_key``: the source's key when it changed. ``ddl``: ``{mysql: [...]}``
or ``{postgres: [...]}``. ``policy``: an ``evolution:`` block. ``approve``: change ids.
``has_rows``: false for an empty table.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from icetide.config.tables import EvolutionConfig
from icetide.evolution.classify import candidate_schema
from icetide.evolution.evidence import NO_EVIDENCE, collect
from icetide.evolution.plan import EvolutionPlan, build_plan
from icetide.evolution.policy import Policy
from icetide.schema.contract.names import TableName
from icetide.schema.file import schema_from_dict, schema_to_dict

GOLDEN = Path(__file__).parent / "golden"
SCHEMAS = yaml.safe_load((GOLDEN / "schemas.yaml").read_text())
UPDATE = os.environ.get("ICETIDE_GOLDEN_UPDATE") == "1"
BASE = TableName("lake", "ns", "t")
FILES = sorted(p for p in GOLDEN.glob("*.yaml") if p.name != "schemas.yaml")
CASES = [(path.stem, case) for path in FILES for case in yaml.safe_load(path.read_text()) or []]


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _column(entry: Any, number: int) -> dict[str, Any]:
    if isinstance(entry, dict):
        return {"id": number, **entry} if "id" not in entry else entry
    name, _, type_text = str(entry).partition(":")
    required = type_text.endswith("!")
    column: dict[str, Any] = {"id": number, "name": name, "type": type_text.rstrip("!")}
    if required:
        column["nullable"] = False
    return column


def plan_of(case: dict[str, Any]) -> EvolutionPlan:
    before = schema_from_dict(SCHEMAS[case["before"]], case["before"])
    data = schema_to_dict(before)
    if "after" in case:
        # Ids in a fresh read mean nothing: number them far away from the old ones.
        data["columns"] = [_column(c, 1000 + i) for i, c in enumerate(case["after"])]
        data.pop("last_column_id", None)
    if "primary_key" in case:
        data["primary_key"] = case["primary_key"]
    data["version"] = 1
    fresh = schema_from_dict(data, f"case {case['name']!r}: after")
    ddl = case.get("ddl") or {}
    evidence = NO_EVIDENCE
    for dialect, statements in ddl.items():
        evidence = collect(statements, dialect, before.table)
    policy = Policy.from_config(EvolutionConfig.model_validate(case.get("policy") or {}))
    new = candidate_schema(before, fresh, evidence, sensitive=policy.sensitive)
    plan = build_plan(
        before,
        new,
        evidence,
        policy,
        has_rows=case.get("has_rows", True),
        base=BASE,
        ledger=BASE.suffixed("_cdc"),
    )
    return plan.with_approvals(case["approve"]) if case.get("approve") else plan


def output(plan: EvolutionPlan) -> str:
    data = plan.to_json()
    summary = {
        "changes": {
            c["id"]: [c["classification"], c["decision"]["action"]] for c in data["changes"]
        },
        "automatic": data["automatic"],
        "fills": {f["change"]: f["method"] for f in data["fills"]},
    }
    schema = yaml.safe_dump(schema_to_dict(plan.apply()), sort_keys=False, default_flow_style=None)
    return "\n".join(
        [
            plan.render(),
            "--- summary",
            json.dumps(summary, indent=1, sort_keys=True),
            "--- schema",
            schema.rstrip(),
        ]
    )


@pytest.mark.parametrize("file,case", CASES, ids=[f"{f}-{slug(c['name'])}" for f, c in CASES])
def test_golden(file: str, case: dict[str, Any]) -> None:
    plan = plan_of(case)
    expect = case.get("expect") or {}
    actions = {d.change: d.action for d in plan.decisions}
    assert actions == expect, f"{case['name']}: decisions {actions}"
    assert [c.id for c in plan.held] == case.get("held", []), case["name"]
    assert plan.target.version == case.get("version", 2 if plan.applied else 1), case["name"]
    got = output(plan)
    path = GOLDEN / "expected" / file / f"{slug(case['name'])}.txt"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got + "\n")
    assert path.exists(), (
        f"no expected output for {case['name']!r}: run with ICETIDE_GOLDEN_UPDATE=1"
    )
    assert got + "\n" == path.read_text(), case["name"]


def test_enough_cases() -> None:
    """The issue asks for at least 40; every name is unique within its file."""
    assert len(CASES) >= 40
    for path in FILES:
        names = [slug(c["name"]) for c in yaml.safe_load(path.read_text())]
        assert len(names) == len(set(names)), path.name
