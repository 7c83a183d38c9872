"""A merge's progress line names the ledger range it read in words, never ``None``."""

from __future__ import annotations

from icetide.merge.stage import MergeResult


def test_first_merge_line_has_no_none() -> None:
    line = MergeResult("customers", 1200, None, 42, 2.345).render()
    assert line == (
        "merge customers: 1,200 events from the ledger up to snapshot 42 (first merge) in 2.3s"
    )


def test_later_merge_line_names_both_snapshots() -> None:
    line = MergeResult("customers", 3, 41, 42, 0.25).render()
    assert line == "merge customers: 3 events from ledger snapshots after 41 up to 42 in 0.2s"


def test_nothing_to_merge_says_up_to_date() -> None:
    assert MergeResult("customers", 0, None, None, 0.0).render() == "merge customers: up to date"
