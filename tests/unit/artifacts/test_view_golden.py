"""Golden cases for view schemas derived from SQL: data files in, columns out.

Inputs: ``golden/views/tables.yaml`` (base tables) and ``golden/views/cases.yaml`` (the
SQL, and views defined before it); each case's expected columns are
``golden/views/expected/<case>.txt``. ``ICETIDE_GOLDEN_UPDATE=1`` rewrites them from the
code: review the diff, it is the change in what views look like.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from icetide.artifacts.errors import ViewError
from icetide.artifacts.views.derive import dependencies, derive
from icetide.artifacts.views.ids import assign_ids
from icetide.schema.file import schema_from_dict
from icetide.schema.types import Column

GOLDEN = Path(__file__).parent / "golden" / "views"
TABLES = {
    name: schema_from_dict(data, name).columns
    for name, data in yaml.safe_load((GOLDEN / "tables.yaml").read_text()).items()
}
CASES = yaml.safe_load((GOLDEN / "cases.yaml").read_text())
UPDATE = os.environ.get("ICETIDE_GOLDEN_UPDATE") == "1"


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def render(columns: tuple[Column, ...], deps: tuple[str, ...]) -> str:
    lines = [f"reads: {', '.join(deps)}"]
    for c in columns:
        null = "null" if c.nullable else "not null"
        doc = f"  -- {c.doc}" if c.doc else ""
        lines.append(f"{c.id:>3} {c.name}: {c.type} {null}{doc}")
    return "\n".join(lines)


def run(case: dict[str, Any]) -> str:
    inputs = dict(TABLES)
    for view, sql in (case.get("views") or {}).items():
        inputs[view], _ = assign_ids(derive(view, sql, inputs))
    try:
        columns, _ = assign_ids(derive("v", case["sql"], inputs))
        return render(columns, dependencies("v", case["sql"]))
    except ViewError as exc:
        return f"error: {exc.render()}"


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 25
    assert len({slug(c["name"]) for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[slug(c["name"]) for c in CASES])
def test_view_schema(case: dict[str, Any]) -> None:
    got = run(case)
    path = GOLDEN / "expected" / f"{slug(case['name'])}.txt"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got + "\n")
    assert path.exists(), f"no expected output for {case['name']!r}: ICETIDE_GOLDEN_UPDATE=1"
    assert got + "\n" == path.read_text(), case["name"]
