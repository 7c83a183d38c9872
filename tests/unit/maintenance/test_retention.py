"""Expiry's cut-offs decided from the tables' lineages (:func:`plan_keeps`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from icetide.lake.tables import Snapshot
from icetide.maintenance.retention import Keep, Lineages, plan_keeps
from icetide.schema.contract import history as h
from icetide.schema.contract.base import BOOTSTRAP_STATE, WATERMARK_PROPERTY
from icetide.schema.contract.names import TableName

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
DAY = timedelta(days=1)
BASE = TableName("lake", "s", "t")
LEDGER = TableName("lake", "s", "t_cdc")
HISTORY = TableName("lake", "s", "t_history")


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def lineage(*snapshots: tuple[dict[str, str], datetime]) -> list[Snapshot]:
    """Newest first, as the lineage is read."""
    count = len(snapshots)
    return [
        Snapshot(count - i, count - i - 1 or None, summary, ms(at))
        for i, (summary, at) in enumerate(snapshots)
    ]


# The ledger's snapshots 101..110, a day apart, the newest a day old.
LEDGER_TIMES = {100 + i: ms(NOW - (11 - i) * DAY) for i in range(1, 11)}


def plan(lineages: Lineages, history: bool = True) -> tuple[Keep, Keep, Keep | None]:
    return plan_keeps(
        lineages,
        (BASE, LEDGER, HISTORY if history else None),
        max_age=5 * DAY,
        tombstone_window=3 * DAY,
        now=NOW,
    )


def test_a_table_never_merged_keeps_its_whole_ledger() -> None:
    base, ledger, history = plan(Lineages(base=[], ledger_times=LEDGER_TIMES))
    assert ledger.older_than is None
    assert base.older_than == NOW - 5 * DAY
    assert history is None


def test_the_ledger_keeps_from_the_base_watermark_the_base_its_watermark_snapshot() -> None:
    base_lineage = lineage(
        ({}, NOW - 9 * DAY),  # a compaction after the merge: carries no watermark
        ({WATERMARK_PROPERTY: "103"}, NOW - 10 * DAY),
        ({WATERMARK_PROPERTY: "102"}, NOW - 11 * DAY),
    )
    base, ledger, _ = plan(Lineages(base=base_lineage, ledger_times=LEDGER_TIMES))
    assert base.older_than == NOW - 10 * DAY
    assert ledger.older_than == datetime.fromtimestamp(LEDGER_TIMES[103] / 1000, UTC)
    assert "watermark snapshot 103" in ledger.reasons


def test_the_bootstrap_snapshot_is_kept_when_older_than_the_watermark() -> None:
    base_lineage = lineage(
        ({WATERMARK_PROPERTY: "109"}, NOW - DAY),
        ({BOOTSTRAP_STATE: "{}"}, NOW - 20 * DAY),
    )
    base, _, _ = plan(Lineages(base=base_lineage, ledger_times=LEDGER_TIMES))
    assert base.older_than == NOW - 20 * DAY


def test_a_gone_watermark_snapshot_keeps_the_whole_ledger() -> None:
    base_lineage = lineage(({WATERMARK_PROPERTY: "42"}, NOW - DAY))
    _, ledger, _ = plan(Lineages(base=base_lineage, ledger_times=LEDGER_TIMES))
    assert ledger.older_than is None


def test_a_history_behind_the_base_keeps_the_ledger_from_its_own_watermark() -> None:
    base_lineage = lineage(({WATERMARK_PROPERTY: "109"}, NOW - DAY))
    history_lineage = lineage(
        ({}, NOW - 2 * DAY),
        ({h.WATERMARK_PROPERTY: "104"}, NOW - 8 * DAY),
    )
    lineages = Lineages(base=base_lineage, ledger_times=LEDGER_TIMES, history=history_lineage)
    _, ledger, history = plan(lineages)
    assert ledger.older_than == datetime.fromtimestamp(LEDGER_TIMES[104] / 1000, UTC)
    assert "watermark snapshot 104" in ledger.reasons
    assert history is not None and history.older_than == NOW - 8 * DAY


def test_a_history_ahead_is_kept_by_max_age_and_the_ledger_by_the_base() -> None:
    base_lineage = lineage(({WATERMARK_PROPERTY: "103"}, NOW - 8 * DAY))
    history_lineage = lineage(({h.WATERMARK_PROPERTY: "103"}, NOW - 2 * DAY))
    lineages = Lineages(base=base_lineage, ledger_times=LEDGER_TIMES, history=history_lineage)
    _, ledger, history = plan(lineages)
    assert ledger.older_than == datetime.fromtimestamp(LEDGER_TIMES[103] / 1000, UTC)
    assert history is not None and history.older_than == NOW - 5 * DAY


def test_a_history_holding_no_ledger_snapshot_keeps_the_whole_ledger() -> None:
    base_lineage = lineage(({WATERMARK_PROPERTY: "109"}, NOW - DAY))
    history_lineage = lineage(({h.WATERMARK_PROPERTY: h.NO_WATERMARK}, NOW - 7 * DAY))
    lineages = Lineages(base=base_lineage, ledger_times=LEDGER_TIMES, history=history_lineage)
    _, ledger, history = plan(lineages)
    assert ledger.older_than is None
    assert ledger.reasons == ("the history holds no ledger snapshot yet",)
    assert history is not None and history.older_than == NOW - 7 * DAY


def test_a_history_never_seeded_changes_nothing_for_the_ledger() -> None:
    base_lineage = lineage(({WATERMARK_PROPERTY: "105"}, NOW - DAY))
    lineages = Lineages(base=base_lineage, ledger_times=LEDGER_TIMES, history=lineage(({}, NOW)))
    _, ledger, history = plan(lineages)
    assert ledger.older_than == datetime.fromtimestamp(LEDGER_TIMES[105] / 1000, UTC)
    assert history is not None and history.older_than == NOW - 5 * DAY


def test_a_history_not_asked_for_is_not_planned() -> None:
    history_lineage = lineage(({h.WATERMARK_PROPERTY: h.NO_WATERMARK}, NOW))
    lineages = Lineages(base=[], ledger_times=LEDGER_TIMES, history=history_lineage)
    assert plan(lineages, history=False)[2] is None
