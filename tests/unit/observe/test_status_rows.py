"""``icetide status``'s rows: worst first as on the status page, the freshness
humanized in the text, and every JSON field documented."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from icetide.observe import display
from icetide.observe.capture_lag import CaptureLag
from icetide.observe.convergence import Convergence
from icetide.observe.status import (
    PipelineNotes,
    PipelineStatus,
    TableStatus,
    render_status,
    status_dicts,
)

DOCS = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


def row(table: str, freshness: float | None, **fields: object) -> TableStatus:
    base = TableStatus(table, 10, 5, 8, 2, None, 0, freshness_seconds=freshness)
    return replace(base, **fields)  # type: ignore[arg-type]


def late_change(table: str) -> Convergence:
    return Convergence(table, 2, "code", None, 1.0, 2.0, None, None, 60.0, breached=True)


def test_status_lists_the_worst_table_first_with_its_freshness_for_people() -> None:
    rows = [
        row("fresh", 2.0),
        row("stale", 7200.0, sla_seconds=600.0, breached=True),
        row("late_change", 1.0, convergence=late_change("late_change")),
        row("never_merged", None),
        row("old", 32_167.0),
    ]
    shown, _ = display.select(rows, lambda r: r.table, TableStatus.rank)
    assert [(r.table, r.verdict) for r in shown] == [
        ("late_change", "held"),
        ("stale", "stale"),
        ("never_merged", "ok"),
        ("old", "ok"),
        ("fresh", "ok"),
    ]
    status = PipelineStatus(shown, PipelineNotes("icetide_unrouted_dlt", 0, []))
    lines = render_status(status).splitlines()
    assert [line.split()[0] for line in lines[1:6]] == [r.table for r in shown]
    assert "8 h 56 min" in lines[4] and "never merged" in lines[3]
    assert [d["verdict"] for d in status_dicts(status)][:2] == ["held", "stale"]


def test_every_json_field_of_status_is_documented() -> None:
    capture = CaptureLag("shop", "mysql", "bin.000001:4", None, "bin.000001:9", 5)
    status = PipelineStatus(
        [row("t", 1.0, convergence=late_change("t"), capture=capture)],
        PipelineNotes("icetide_unrouted_dlt", 0, []),
    )
    [fields] = status_dicts(status)
    documented = set(re.findall(r"^\| `(\w+)` \|", DOCS.read_text(), re.MULTILINE))
    assert set(fields) <= documented, sorted(set(fields) - documented)
