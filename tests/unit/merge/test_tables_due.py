"""Which tables a merge round visits when the ledger runs in the same process
(merge/round.py, TablesDue; marked by cli/run.py's marks_due_tables)."""

from __future__ import annotations

from icetide.cli.run import marks_due_tables
from icetide.merge.round import TablesDue
from icetide.progress import Reporter

NAMES = ["a", "b", "c", "d"]


def test_the_first_round_and_one_a_minute_visit_every_table_the_others_the_marked() -> None:
    now = [0.0]
    due = TablesDue(NAMES, full_every=60, clock=lambda: now[0])
    assert due.take() == NAMES
    now[0] = 10
    assert due.take() == []
    due.mark(["d", "b", "b"])
    assert due.take() == ["b", "d"]  # config order, once each
    assert due.take() == []  # the marks went with the round that took them
    due.mark(["a"])
    now[0] = 59.9
    assert due.take() == ["a"]
    now[0] = 60
    assert due.take() == NAMES  # a minute after the last full round
    now[0] = 61
    assert due.take() == []


def test_a_failed_rounds_tables_are_due_again() -> None:
    due = TablesDue(NAMES, full_every=60, clock=lambda: 1.0)
    due.take()
    due.mark(["c"])
    taken = due.take()
    due.give_back(taken)
    assert due.take() == ["c"]


def test_ledger_batches_mark_the_tables_they_stored_rows_for_and_table_records_mark_theirs() -> (
    None
):
    due = TablesDue(NAMES, full_every=60, clock=lambda: 1.0)
    due.take()
    report = Reporter(marks_due_tables(due)).report
    report("ledger", "ledger batch 3: 5 events", batch=3, events={"a": 5, "b": 0})
    report("evolution", "schema c: held", table="c")
    report("merge", "merge d: 4 events", table="d", events=4)  # its own records mark nothing
    report("observe", "d fresh", table="d")
    assert due.take() == ["a", "c"]
