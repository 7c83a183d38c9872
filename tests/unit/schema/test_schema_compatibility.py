"""Compatibility modes against golden version pairs (tests/unit/schema/golden/registry)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from icetide.errors import ConfigError
from icetide.schema.compatibility import MODES, check

GOLDEN = Path(__file__).parent / "golden" / "registry" / "compatibility.json"
CASES: list[dict[str, Any]] = json.loads(GOLDEN.read_text())["cases"]


def test_the_golden_file_covers_every_mode_with_passing_and_failing_pairs() -> None:
    assert len(CASES) >= 30
    for mode in MODES:
        verdicts = {c["compatible"] for c in CASES if c["mode"] == mode}
        assert verdicts == ({True} if mode == "NONE" else {True, False}), mode


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_golden_pair(case: dict[str, Any]) -> None:
    verdict = check(case["new"], case["history"], case["mode"])
    assert verdict.compatible is case["compatible"], verdict.reason
    if not verdict.compatible:
        assert verdict.problems and "version" in verdict.reason


def test_an_unknown_mode_names_the_choices() -> None:
    with pytest.raises(ConfigError) as caught:
        check({"type": "record", "name": "r", "fields": []}, [], "SIDEWAYS")
    assert "BACKWARD_TRANSITIVE" in (caught.value.hint or "")


def _envelope(*fields: dict[str, Any]) -> dict[str, Any]:
    row = {"type": "record", "name": "V", "fields": [{"name": "id", "type": "int"}, *fields]}
    return {
        "type": "record",
        "name": "E",
        "fields": [
            {"name": "before", "type": ["null", row], "default": None},
            {"name": "after", "type": ["null", "V"], "default": None},
            {"name": "op", "type": "string"},
        ],
    }


def test_a_refusal_inside_the_envelope_names_the_column_the_rule_and_the_mode() -> None:
    v1 = _envelope()
    v2 = _envelope({"name": "note", "type": ["null", "string"], "default": None})
    v3 = _envelope({"name": "note", "type": ["null", "string"]})  # its default removed
    verdict = check(v3, [v1, v2])
    assert not verdict.compatible
    assert verdict.problems == (
        "under BACKWARD_TRANSITIVE it must read version 1's data: column note has no "
        "default, and that data has no value for it (a column added without one, or its "
        "default removed)",
    )
    assert check(_envelope(), [_envelope()]).compatible
    retyped = check(_envelope({"name": "note", "type": "int"}), [v2], "BACKWARD")
    assert "column note" in retyped.reason and "lacking" not in retyped.reason
