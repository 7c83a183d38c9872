"""Golden cases for the table-contract builder: schema in, exact SQL or Arrow shape out.

Inputs are data files (``golden/build.yaml``, ``golden/alter.yaml``, schemas in
``golden/schemas.yaml``); each case's expected output is ``golden/expected/<case>.txt``.
``ICETIDE_GOLDEN_UPDATE=1`` rewrites the expected files from the code: review the diff
before committing it, it is the change in what the tables look like.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

from icetide.errors import SchemaError
from icetide.schema.contract.alter import alter_plan
from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.contract.names import TableName
from icetide.schema.file import schema_from_dict

GOLDEN = Path(__file__).parent / "golden"
SCHEMAS = yaml.safe_load((GOLDEN / "schemas.yaml").read_text())
BUILD = yaml.safe_load((GOLDEN / "build.yaml").read_text())
ALTER = yaml.safe_load((GOLDEN / "alter.yaml").read_text())
UPDATE = os.environ.get("ICETIDE_GOLDEN_UPDATE") == "1"
BASE = TableName("lake", "ns", "t")
LEDGER = BASE.suffixed("_cdc")


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def check(kind: str, case: dict[str, Any], got: str) -> None:
    path = GOLDEN / "expected" / kind / f"{slug(case['name'])}.txt"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got + "\n")
    assert path.exists(), (
        f"no expected output for {case['name']!r}: run with ICETIDE_GOLDEN_UPDATE=1"
    )
    assert got + "\n" == path.read_text(), case["name"]


def contract(case: dict[str, Any]) -> TableContract:
    schema = schema_from_dict(SCHEMAS[case["schema"]], case["schema"])
    return TableContract(schema, TableSettings(**case.get("settings", {})))


def build(case: dict[str, Any]) -> str:
    c = contract(case)
    what = case["build"]
    if what == "ledger_ddl":
        return c.ledger_ddl(LEDGER)
    if what == "base_ddl":
        return c.base_ddl(BASE)
    if what == "dlt_ddl":
        return TableContract.dead_letter_ddl(BASE.suffixed("_dlt"))
    if what == "identifier_fields":
        return c.identifier_fields_sql(BASE)
    if what == "merge":
        return c.merge_sql(BASE, "batch")
    if what == "naive_merge":
        return c.naive_merge_sql(BASE, LEDGER)
    if what == "arrow":
        return str(pa.schema(c.ledger_arrow()))
    if what == "projection":
        return c.projection_text()
    raise AssertionError(f"unknown build {what!r}")


@pytest.mark.parametrize("case", BUILD, ids=[slug(c["name"]) for c in BUILD])
def test_build(case: dict[str, Any]) -> None:
    check("tables", case, build(case))


@pytest.mark.parametrize("case", ALTER, ids=[slug(c["name"]) for c in ALTER])
def test_alter(case: dict[str, Any]) -> None:
    old = TableContract(schema_from_dict(SCHEMAS[case["from"]], case["from"]))
    new = TableContract(schema_from_dict(case["to"], case["name"]))
    if "error" in case:
        with pytest.raises(SchemaError) as raised:
            alter_plan(old, new, BASE, LEDGER, case.get("drop", "soft"))
        assert case["error"] in str(raised.value), str(raised.value)
        return
    plan = alter_plan(old, new, BASE, LEDGER, case.get("drop", "soft"))
    text = "\n".join(["-- base", *plan.base, "-- ledger", *plan.ledger])
    check("alter", case, text)


def test_there_are_at_least_thirty_golden_cases() -> None:
    assert len(BUILD) + len(ALTER) >= 30
