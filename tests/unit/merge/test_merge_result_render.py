"""A merge's progress line names the ledger range it read in words, never ``None``."""

from __future__ import annotations

from icetide.merge.compact import Compaction
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


def test_a_small_file_rewrite_is_named_after_the_strategy() -> None:
    result = MergeResult(
        "customers", 3, 41, 42, 0.25, "bucket_join", "configured", 2, 16, Compaction(9, 2)
    )
    assert result.render().endswith(
        "by bucket_join (configured, 2/16 buckets touched); 9 small files bin-packed into 2"
    )
    nothing = MergeResult("customers", 3, 41, 42, 0.25, "shuffle", "configured", None, None)
    assert "bin-packed" not in nothing.render()


def test_a_packing_says_what_it_removed_and_a_deferred_one_says_when_it_packs() -> None:
    def line(compaction: Compaction) -> str:
        return MergeResult(
            "customers", 3, 41, 42, 0.25, "shuffle", "configured", None, None, compaction
        ).render()

    assert line(Compaction(9, 2, dangling_removed=5)).endswith(
        "; 9 small files bin-packed into 2, 5 dangling delete files removed"
    )
    assert "dangling" not in line(Compaction(9, 2))
    assert line(Compaction(0, 0, deferred=True)).endswith(
        "; small files packed at its next merge (another table packs this round)"
    )
