"""Which tables a merge round visits when the ledger runs in the same process
(merge/round.py, TablesDue; marked by cli/run.py's marks_due_tables)."""

from __future__ import annotations

from icetide.cli.run import marks_due_tables
from icetide.merge.round import TablesDue
from icetide.progress import Reporter

NAMES = ["a", "b", "c", "d"]


def test_the_first_round_visits_every_table_the_others_the_marked_ones() -> None:
    due = TablesDue(NAMES, sweep_after=60, clock=lambda: 1.0)
    assert due.take() == NAMES
    assert due.take() == []
    due.mark(["d", "b", "b"])
    assert due.take() == ["b", "d"]  # config order, once each
    assert due.take() == []  # the marks went with the round that took them


def test_tables_nothing_marked_are_swept_a_share_a_round_longest_unvisited_first() -> None:
    now = [0.0]
    names = [f"t{i:02d}" for i in range(25)]
    due = TablesDue(names, sweep_after=60, share=12, clock=lambda: now[0])
    due.take()
    now[0] = 30
    due.mark(["t00"])
    assert due.take() == ["t00"]
    now[0] = 59
    assert due.take() == []  # nothing unvisited for a minute yet
    rounds = []
    for second in range(95, 135):
        now[0] = second
        due.mark(["t05"])
        rounds.append(due.take())
    # Three a round besides the marked one (25 tables / 12), oldest first: t00 last.
    assert rounds[0] == ["t01", "t02", "t03", "t05"]
    assert rounds[1] == ["t04", "t05", "t06", "t07"]
    swept = [t for r in rounds for t in r if t != "t05"]
    assert len(swept) == len(set(swept))  # none twice before every other one
    assert set(swept) == set(names) - {"t05"}  # every table within a few rounds
    round_of = {t: i for i, r in enumerate(rounds) for t in r if t != "t05"}
    assert round_of["t00"] == max(round_of.values())  # visited at 30 s, the others at 0 s


def test_a_failed_rounds_tables_are_due_again() -> None:
    due = TablesDue(NAMES, sweep_after=60, clock=lambda: 1.0)
    due.take()
    due.mark(["c"])
    taken = due.take()
    due.give_back(taken)
    assert due.take() == ["c"]


def test_ledger_batches_mark_the_tables_they_stored_rows_for_and_table_records_mark_theirs() -> (
    None
):
    due = TablesDue(NAMES, sweep_after=60, clock=lambda: 1.0)
    due.take()
    report = Reporter(marks_due_tables(due)).report
    report("ledger", "ledger batch 3: 5 events", batch=3, events={"a": 5, "b": 0})
    report("evolution", "schema c: held", table="c")
    report("merge", "merge d: 4 events", table="d", events=4)  # its own records mark nothing
    report("observe", "d fresh", table="d")
    assert due.take() == ["a", "c"]
    # A long batch's progress marks the tables it stored so far, before the batch ends.
    report("ledger", "ledger batch 4: 2 of 3 tables stored", storing=4, stored={"d": 7})
    assert due.take() == ["d"]
