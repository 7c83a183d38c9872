"""The merge figures read back from the ledger's lineage: when they may be trusted,
and when the merge must compute them from the rows (icetide/lake/ledger_figures.py)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from icetide.lake.ledger_figures import FIGURES_PROPERTY, batch_figures
from icetide.lake.tables import Snapshot

HOUR_US = 3_600_000_000


def snap(
    i: int, parent: int | None, op: str = "append", n: int = 1, figures: bool = True, **fig: Any
) -> Snapshot:
    """Snapshot ``i`` committed at hour ``i``, its rows ingested at the same time."""
    summary = {"operation": op, "added-records": str(n)}
    if figures:
        base = {
            "format": 1,
            "version": 3,
            "ingested_at_us": i * HOUR_US,
            "truncate": None,
            "unavailable": [],
            "moves": 0,
            "tombstones": 0,
            "buckets": 8,
            "touched": [],
        }
        summary[FIGURES_PROPERTY] = json.dumps({**base, **fig})
    return Snapshot(i, parent, summary, i * HOUR_US // 1000)


def test_a_batch_sums_its_appends_and_the_history_keeps_what_is_within_retention() -> None:
    lineage = [
        snap(1, None, n=5, tombstones=4, truncate="90"),  # before the cutoff
        snap(2, 1, n=5, tombstones=1, truncate="100"),
        snap(3, 2, op="replace", n=10),  # a rewrite: no new rows
        snap(4, 3, n=2, touched=[1, 3], unavailable=["note"]),
        snap(5, 4, n=3, touched=[3, 5], truncate="400", moves=1),
    ]
    f = batch_figures(lineage, 3, 5, 2 * HOUR_US, 3, 8)
    assert f is not None
    assert (f.count, f.truncate, f.earlier, f.moves) == (5, Decimal(400), Decimal(100), True)
    assert (f.touched, f.unavailable, f.history_tombstones) == ((1, 3, 5), {"note"}, 1)


def test_the_first_merge_reads_the_whole_lineage_without_history() -> None:
    lineage = [snap(1, None, n=5), snap(2, 1, n=0, figures=False), snap(3, 2, n=2)]
    f = batch_figures(lineage, None, 3, 0, 3, 8)
    assert f is not None and (f.count, f.history_tombstones) == (7, 0)


def test_anything_the_figures_cannot_vouch_for_falls_back_to_the_rows() -> None:
    whole = [snap(1, None), snap(2, 1), snap(3, 2)]
    assert batch_figures(whole, 1, 3, 0, 3, 8) is not None
    cases = {
        "an append without figures in the batch": [
            snap(1, None),
            snap(2, 1),
            snap(3, 2, figures=False),
        ],
        "an append without figures in the history": [snap(1, None, figures=False), *whole[1:]],
        "rows deleted from the ledger": [snap(1, None), snap(2, 1, op="delete", n=0), snap(3, 2)],
        "rows overwritten": [snap(1, None), snap(2, 1, op="overwrite"), snap(3, 2)],
        "an expired ancestor": whole[1:],
        "another layout version": [snap(1, None), snap(2, 1), snap(3, 2, version=4)],
        "another bucket count": [snap(1, None), snap(2, 1), snap(3, 2, buckets=16)],
        "a malformed property": [
            snap(1, None),
            snap(2, 1),
            Snapshot(3, 2, {"operation": "append", "added-records": "1", FIGURES_PROPERTY: "{"}, 3),
        ],
    }
    for case, lineage in cases.items():
        assert batch_figures(lineage, 1, 3, 0, 3, 8) is None, case
    # ``start`` not an ancestor of ``end`` (the ledger rolled back past it)
    assert batch_figures(whole, 7, 3, 0, 3, 8) is None
    # history without figures is fine once it is older than the cutoff
    old = [snap(1, None, figures=False), *whole[1:]]
    assert batch_figures(old, 2, 3, 2 * HOUR_US, 3, 8) is not None
