"""A merge tells another merge's commits on the base from its own and from maintenance."""

from __future__ import annotations

from icetide.lake.tables import Snapshot
from icetide.merge.race import ATTEMPT_PROPERTY, ConcurrentMergeError, concurrent_merges
from icetide.schema.contract.base import WATERMARK_PROPERTY


def merge(snapshot: int, parent: int | None, watermark: int, attempt: str | None) -> Snapshot:
    summary = {WATERMARK_PROPERTY: str(watermark)}
    if attempt is not None:
        summary[ATTEMPT_PROPERTY] = attempt
    return Snapshot(snapshot, parent, summary)


def rewrite(snapshot: int, parent: int) -> Snapshot:
    return Snapshot(snapshot, parent, {"operation": "replace"})


def test_another_merge_between_the_plan_and_the_commit_is_found() -> None:
    lineage = [
        merge(5, 4, 30, "mine"),
        rewrite(4, 3),
        merge(3, 2, 40, "theirs"),
        merge(2, 1, 20, None),
    ]
    assert concurrent_merges(lineage, 2, "mine") == [3]


def test_a_merge_after_only_maintenance_or_its_own_commits_found_none() -> None:
    # delete_insert commits twice (DELETE and append), both tagged with its attempt.
    lineage = [
        merge(6, 5, 30, "mine"),
        merge(5, 4, 30, "mine"),
        rewrite(4, 2),
        merge(2, 1, 20, "old"),
    ]
    assert concurrent_merges(lineage, 2, "mine") == []


def test_commits_before_the_planned_snapshot_do_not_count() -> None:
    lineage = [merge(3, 2, 30, "mine"), merge(2, 1, 20, "earlier"), merge(1, None, 10, None)]
    assert concurrent_merges(lineage, 2, "mine") == []


def test_on_a_base_without_snapshot_any_other_merge_counts() -> None:
    lineage = [merge(2, 1, 30, "mine"), merge(1, None, 10, "theirs")]
    assert concurrent_merges(lineage, None, "mine") == [1]


def test_the_error_names_the_table_and_the_snapshots_and_is_retried() -> None:
    err = ConcurrentMergeError("orders", [7, 3])
    assert "merge of orders" in err.message and "snapshot 7, 3" in err.message
    assert err.hint is not None and "one `icetide merge`" in err.hint
    from icetide.spark.retry import classify

    assert classify(err) == "conflict"
