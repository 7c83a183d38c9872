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
