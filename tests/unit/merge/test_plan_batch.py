"""The plan of one merge batch (``plan_batch``): every strategy choice, every reason
``delete_insert`` is blocked, and the rest of what the merge decides before Spark runs,
from figures and base states written out by hand (no JVM, no tables)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from icetide.lake.ledger_figures import BatchFigures
from icetide.merge.strategy import (
    BROADCAST_EVENTS,
    IN_ORDER,
    SMALL_BASE_ROWS,
    BaseState,
    plan_batch,
)
from icetide.schema.contract.base import (
    EVENTS_PROPERTY,
    STRATEGY_PROPERTY,
    WATERMARK_PROPERTY,
    StrategySetting,
)

LARGE = BaseState(rows=5_000_000, snapshot_id=11)
SMALL = BaseState(rows=1_000, snapshot_id=11)
EMPTY = BaseState(rows=0, snapshot_id=None)
"""A base nothing has been written to: no snapshot."""

WHOLE_ROWS = BatchFigures(
    count=10_000,
    truncate=None,
    earlier=None,
    unavailable=frozenset(),
    moves=False,
    touched=(1, 4, 6),
    history_tombstones=0,
    first=Decimal(500),
    last_tombstone=None,
    positions_recorded=True,
    key_changes=False,
)
"""A batch of whole row images, as the ledger records them (no truncate, no TOAST)."""
TOAST = replace(WHOLE_ROWS, unavailable=frozenset({"body", "attachment"}))
MOVES = replace(WHOLE_ROWS, unavailable=frozenset({"body"}), moves=True, key_changes=True)
"""Key changes with placeholders: a key move always has some (``key_move``)."""
TRUNCATED = replace(WHOLE_ROWS, truncate=Decimal(400))

NOT_IN_ORDER = "the batch is not known to be newer than the base (in order)"
LEFT_OUT = "events leave attachment, body unchanged (TOAST): the stored values are read"
BODY_LEFT_OUT = "events leave body unchanged (TOAST): the stored values are read"
FROM_OLD_ROWS = "key changes take values from the old rows"
NO_SNAPSHOT = "the base has no snapshot yet"


@pytest.mark.parametrize(
    ("configured", "figures", "base", "in_order", "strategy", "blocker", "reason"),
    [
        # auto
        pytest.param(
            "auto", WHOLE_ROWS, SMALL, True, "shuffle", None,
            "auto: base of 1,000 rows is below 200,000", id="auto-small-base",
        ),
        pytest.param(
            "auto", replace(WHOLE_ROWS, count=3_000_000), LARGE, True, "shuffle", None,
            "auto: batch of 3,000,000 events is at least 50% of the 5,000,000-row base",
            id="auto-batch-half-the-base",
        ),
        pytest.param(
            "auto", WHOLE_ROWS, LARGE, True, "delete_insert", None,
            "auto: base of 5,000,000 rows, batch of 10,000 events in order",
            id="auto-in-order",
        ),
        pytest.param(
            "auto", WHOLE_ROWS, LARGE, False, "bucket_join_pruned", NOT_IN_ORDER,
            "auto: base of 5,000,000 rows, batch of 10,000 events: bucket join",
            id="auto-not-in-order",
        ),
        pytest.param(
            "auto", TOAST, LARGE, True, "bucket_join_pruned", LEFT_OUT,
            "auto: base of 5,000,000 rows, batch of 10,000 events: bucket join",
            id="auto-toast",
        ),
        pytest.param(
            "auto", MOVES, LARGE, True, "bucket_join_pruned", BODY_LEFT_OUT,
            "auto: base of 5,000,000 rows, batch of 10,000 events: bucket join",
            id="auto-key-moves",
        ),
        pytest.param(
            "auto", replace(WHOLE_ROWS, count=BROADCAST_EVENTS),
            replace(LARGE, rows=10 * BROADCAST_EVENTS), True, "delete_insert", None,
            "auto: base of 20,000,000 rows, batch of 2,000,000 events in order",
            id="auto-in-order-as-many-keys-as-broadcast",
        ),
        pytest.param(
            "auto", replace(WHOLE_ROWS, count=BROADCAST_EVENTS + 1),
            replace(LARGE, rows=10 * BROADCAST_EVENTS), True, "bucket_join_pruned", None,
            "auto: base of 20,000,000 rows, batch of 2,000,001 events: bucket join",
            id="auto-too-many-keys-to-broadcast",
        ),
        pytest.param(
            "auto", WHOLE_ROWS, EMPTY, True, "shuffle", NO_SNAPSHOT,
            "auto: base of 0 rows", id="auto-empty-base",
        ),
        # configured
        pytest.param(
            "shuffle", WHOLE_ROWS, LARGE, True, "shuffle", None, "configured",
            id="shuffle",
        ),
        pytest.param(
            "bucket_join", WHOLE_ROWS, SMALL, False, "bucket_join", NOT_IN_ORDER, "configured",
            id="bucket-join",
        ),
        pytest.param(
            "bucket_join_pruned", TOAST, SMALL, True, "bucket_join_pruned", LEFT_OUT,
            "configured", id="bucket-join-pruned",
        ),
        pytest.param(
            "delete_insert", WHOLE_ROWS, SMALL, True, "delete_insert", None, "configured",
            id="delete-insert",
        ),
        # delete_insert configured and blocked: auto's choice, with the reason
        pytest.param(
            "delete_insert", WHOLE_ROWS, LARGE, False, "bucket_join_pruned", NOT_IN_ORDER,
            f"delete_insert configured, but {NOT_IN_ORDER}; auto: base of 5,000,000 rows",
            id="delete-insert-not-in-order",
        ),
        pytest.param(
            "delete_insert", TOAST, SMALL, True, "shuffle", LEFT_OUT,
            f"delete_insert configured, but {LEFT_OUT}; auto: base of 1,000 rows",
            id="delete-insert-toast",
        ),
        # Figures no ledger writes (a key move without placeholders): the rule alone.
        pytest.param(
            "delete_insert", replace(MOVES, unavailable=frozenset()), LARGE, True,
            "bucket_join_pruned", FROM_OLD_ROWS,
            f"delete_insert configured, but {FROM_OLD_ROWS}; auto",
            id="delete-insert-key-moves",
        ),
        pytest.param(
            "delete_insert", WHOLE_ROWS, EMPTY, True, "shuffle", NO_SNAPSHOT,
            f"delete_insert configured, but {NO_SNAPSHOT}; auto: base of 0 rows",
            id="delete-insert-no-snapshot",
        ),
        # The truncate's DELETE gives the empty base its first snapshot before the batch.
        pytest.param(
            "delete_insert", TRUNCATED, EMPTY, True, "delete_insert", None, "configured",
            id="delete-insert-no-snapshot-until-the-truncate",
        ),
        # The first blocker found is the one given: order, then TOAST, then key moves.
        pytest.param(
            "delete_insert", MOVES, LARGE, False, "bucket_join_pruned", NOT_IN_ORDER,
            f"delete_insert configured, but {NOT_IN_ORDER}", id="not-in-order-first",
        ),
        pytest.param(
            "delete_insert", replace(MOVES, unavailable=TOAST.unavailable), EMPTY, True,
            "shuffle", LEFT_OUT, f"delete_insert configured, but {LEFT_OUT}",
            id="toast-before-moves-and-snapshot",
        ),
    ],
)  # fmt: skip
def test_the_strategy_and_its_blocker(
    configured: StrategySetting,
    figures: BatchFigures,
    base: BaseState,
    in_order: bool,
    strategy: str,
    blocker: str | None,
    reason: str,
) -> None:
    plan = plan_batch(figures, base, configured, in_order, watermark=42)
    assert (plan.strategy, plan.blocker) == (strategy, blocker)
    assert plan.choice.reason.startswith(reason), plan.choice.reason
    assert plan.properties[STRATEGY_PROPERTY].startswith(f"{strategy}: {plan.choice.reason}")


@pytest.mark.parametrize(
    ("tombstones", "moves", "in_order", "history"),
    [
        pytest.param(0, False, False, False, id="nothing-to-remember"),
        pytest.param(3, False, False, True, id="tombstones-may-win"),
        pytest.param(3, False, True, False, id="in-order-nothing-can-win"),
        pytest.param(0, True, True, True, id="key-moves-look-up-lost-values"),
        pytest.param(None, False, False, True, id="tombstones-not-counted"),
    ],
)
def test_the_tombstone_history_is_read_only_when_it_can_matter(
    tombstones: int | None, moves: bool, in_order: bool, history: bool
) -> None:
    figures = replace(WHOLE_ROWS, history_tombstones=tombstones, moves=moves)
    assert plan_batch(figures, LARGE, "auto", in_order, watermark=42).history is history


@pytest.mark.parametrize(
    ("truncate", "earlier", "truncated_before"),
    [
        (None, None, None),
        (Decimal(5), None, Decimal(5)),
        (None, Decimal(7), Decimal(7)),
        (Decimal(5), Decimal(7), Decimal(7)),
        (Decimal(9), Decimal(7), Decimal(9)),
    ],
)
def test_events_up_to_the_newest_truncate_are_dropped(
    truncate: Decimal | None, earlier: Decimal | None, truncated_before: Decimal | None
) -> None:
    figures = replace(WHOLE_ROWS, truncate=truncate, earlier=earlier)
    plan = plan_batch(figures, LARGE, "auto", False, watermark=42)
    # Only the batch's own truncate deletes base rows; the history's did already.
    assert (plan.truncate, plan.truncated_before) == (truncate, truncated_before)


@pytest.mark.parametrize(
    ("configured", "base", "touched"),
    [
        pytest.param("auto", LARGE, (1, 4, 6), id="auto-large-base"),
        pytest.param("auto", replace(LARGE, rows=SMALL_BASE_ROWS - 1), None, id="auto-small"),
        pytest.param("bucket_join_pruned", SMALL, (1, 4, 6), id="pruned"),
        pytest.param("delete_insert", SMALL, (1, 4, 6), id="delete-insert"),
        pytest.param("bucket_join", LARGE, None, id="bucket-join-reads-every-bucket"),
        pytest.param("shuffle", LARGE, None, id="shuffle"),
    ],
)
def test_the_touched_buckets_go_to_strategies_that_prune_by_them(
    configured: StrategySetting, base: BaseState, touched: tuple[int, ...] | None
) -> None:
    assert plan_batch(WHOLE_ROWS, base, configured, True, watermark=42).touched == touched


@pytest.mark.parametrize("in_order", [True, False])
def test_the_commit_records_the_watermark_the_events_and_the_strategy(in_order: bool) -> None:
    plan = plan_batch(WHOLE_ROWS, LARGE, "auto", in_order, watermark=42)
    strategy = f"{plan.strategy}: {plan.choice.reason}"
    assert plan.properties == {
        WATERMARK_PROPERTY: "42",
        EVENTS_PROPERTY: "10000",
        STRATEGY_PROPERTY: f"{strategy}; {IN_ORDER}" if in_order else strategy,
    }
    assert (plan.in_order, plan.guarded, plan.events) == (in_order, not in_order, 10_000)


def test_the_batch_is_read_as_its_figures_describe_it() -> None:
    plan = plan_batch(MOVES, LARGE, "auto", False, watermark=42)
    assert (plan.keep, plan.moves, plan.key_changes) == (frozenset({"body"}), True, True)
    plan = plan_batch(WHOLE_ROWS, LARGE, "auto", True, watermark=42)
    assert (plan.keep, plan.moves, plan.key_changes) == (frozenset(), False, False)
