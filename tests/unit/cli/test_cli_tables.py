"""status and verify on a terminal: one aligned Rich table, numbers right-aligned."""

from __future__ import annotations

import re

import pytest

from icetide.cli import tables


def test_status_rows_render_as_an_aligned_table(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {
            "table": "customers",
            "freshness": "8 h 56 min STALE",
            "ledger_events": 1234,
            "base_rows": 7,
            "lag_events": 0,
            "dead_letters": 2,
            "watermark": None,
        },
        {
            "table": "orders",
            "freshness": "12 s",
            "ledger_events": 5,
            "base_rows": 123456,
            "lag_events": 10,
            "dead_letters": 0,
            "watermark": 99,
        },
    ]
    tables.print_table("status", tables.STATUS_COLUMNS, rows)
    out = capsys.readouterr().out
    cells = [re.split("[│┃]", line)[1:-1] for line in out.splitlines() if re.search("[│┃]", line)]
    header, first, second = cells
    assert [h.strip() for h in header] == [h for _, h in tables.STATUS_COLUMNS]
    # One width per column in every row.
    assert [len(c) for c in first] == [len(c) for c in header] == [len(c) for c in second]
    assert first[2].strip() == "1,234" and second[3].strip() == "123,456"
    assert first[1].strip() == "8 h 56 min STALE"
    # Numbers end at the column's right edge, names start at its left edge.
    assert first[3].endswith("7 ") and second[2].endswith("5 ")
    assert first[0].startswith(" customers") and second[0].startswith(" orders")
    assert first[6].strip() == "-"
