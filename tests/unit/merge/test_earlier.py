"""Which earlier base snapshot still holds a row whose delete a later merge applied."""

from __future__ import annotations

from datetime import datetime

from icetide.merge.earlier import BaseSnapshot, snapshot_before

LEDGER = {7: datetime(2026, 1, 1, 0, 0, 1), 8: datetime(2026, 1, 1, 0, 0, 3)}
SNAPSHOTS = [BaseSnapshot(100, 7), BaseSnapshot(101, 8)]


def test_the_newest_merge_whose_watermark_predates_the_delete_is_chosen() -> None:
    removed = datetime(2026, 1, 1, 0, 0, 2)
    assert snapshot_before(removed, SNAPSHOTS, LEDGER) == BaseSnapshot(100, 7)
    assert snapshot_before(datetime(2026, 1, 1, 0, 0, 4), SNAPSHOTS, LEDGER) == SNAPSHOTS[1]


def test_nothing_when_every_merge_already_saw_the_delete() -> None:
    assert snapshot_before(datetime(2026, 1, 1), SNAPSHOTS, LEDGER) is None


def test_nothing_when_the_watermarks_ledger_snapshot_expired() -> None:
    # The events merged after the chosen snapshot could not be read back.
    assert snapshot_before(datetime(2026, 1, 1, 0, 0, 2), SNAPSHOTS, {8: LEDGER[8]}) is None


def test_an_expired_base_snapshot_falls_back_to_an_older_one() -> None:
    removed = datetime(2026, 1, 1, 0, 0, 4)
    assert snapshot_before(removed, SNAPSHOTS[:1], LEDGER) == BaseSnapshot(100, 7)
