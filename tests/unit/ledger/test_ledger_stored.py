"""A ledger append redone (a replayed micro-batch, a retry after a catalog outage) finds
its batch in the table's snapshot summary and is not written twice."""

from __future__ import annotations

from icetide.ledger.stored import NONE, after_failure, stored_batch
from icetide.schema.contract import ledger as c

QUERY = "0b9c6f0e-query"


def summary(batch: int, query: str = QUERY) -> dict[str, str]:
    return {c.BATCH_PROPERTY: str(batch), c.QUERY_PROPERTY: query, "added-records": "4"}


def test_a_table_holds_the_last_batch_its_query_appended() -> None:
    assert stored_batch(summary(3), QUERY) == 3
    assert stored_batch(None, QUERY) == NONE  # nothing appended yet


def test_another_querys_batch_numbers_say_nothing_about_this_one() -> None:
    # A new checkpoint (a new query) numbers its batches from 0 again.
    assert stored_batch(summary(9, "an-older-query"), QUERY) == NONE


def test_a_commit_that_landed_before_its_failure_is_found_on_the_retry() -> None:
    """The stage remembered batch 4 in the ledger and appended batch 5; the commit
    landed, its answer was lost. The retry may not trust the memory (batch 4: append
    again, every row twice): it reads the summary again and finds batch 5."""
    remembered = {"items_cdc": 4, "orders_cdc": 5}
    kept = after_failure(remembered, "items_cdc")
    assert "items_cdc" not in kept and kept["orders_cdc"] == 5
    landed = summary(5)
    stored = kept.get("items_cdc", stored_batch(landed, QUERY))
    assert stored >= 5  # skipped, not appended twice


def test_a_commit_that_did_not_land_is_appended_on_the_retry() -> None:
    kept = after_failure({"items_cdc": 4}, "items_cdc")
    stored = kept.get("items_cdc", stored_batch(summary(4), QUERY))
    assert stored < 5
