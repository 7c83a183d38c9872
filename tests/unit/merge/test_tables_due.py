"""Which tables a merge round visits when the ledger runs in the same process
(merge/round.py, TablesDue; marked by cli/run.py's marks_due_tables)."""

from __future__ import annotations

from icetide.cli.run import marks_due_tables
from icetide.merge.round import BUSIEST_SHARE, TablesDue
from icetide.progress import Reporter

NAMES = ["a", "b", "c", "d"]


def first_visits(due: TablesDue) -> list[list[str]]:
    """The rounds from the start until every table has had its first visit."""
    rounds = []
    while due.waiting:
        rounds.append(due.take())
    return rounds


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


def test_a_capped_round_takes_the_busiest_and_the_longest_waiting_and_starves_none() -> None:
    """1,000 tables, a round of at most 32: every round merges the five busy tables
    (a stored batch marks all of them, most with few events), busiest first; the rest
    of the round goes to those waiting longest, so every marked table is taken within
    a bounded number of rounds, each once, and the others stay marked meanwhile."""
    now = [0.0]
    names = [f"t{i:04d}" for i in range(1000)]
    hot = {"t0500": 9000, "t0007": 4000, "t0999": 3000, "t0123": 2000, "t0042": 1000}
    due = TablesDue(names, sweep_after=3600, limit=32, clock=lambda: now[0])
    first_visits(due)
    now[0] = 1.0
    due.mark(dict.fromkeys(names, 1) | hot)
    rounds = []
    for second in range(2, 200):
        now[0] = second
        due.mark(dict(hot))  # the busy tables get events in every batch
        rounds.append(due.take())
        if not due.waiting:
            break
    assert all(len(r) == 32 for r in rounds[:-1])
    assert all(r[:5] == list(hot) for r in rounds)  # the busiest first, every round
    assert len(hot) <= 32 // BUSIEST_SHARE  # they fit in the busiest quarter
    cold = [t for r in rounds for t in r if t not in hot]
    assert len(cold) == len(set(cold)) == 995  # each once, every one within the rounds
    assert len(rounds) == -(-995 // (32 - len(hot)))  # 27 a round: no visit wasted
    assert cold[:3] == ["t0000", "t0001", "t0002"]  # ties: waiting longest, then name


def test_a_table_marked_again_keeps_its_place_and_adds_its_events() -> None:
    now = [0.0]
    due = TablesDue(NAMES, sweep_after=3600, limit=2, clock=lambda: now[0])
    first_visits(due)
    now[0] = 1.0
    due.mark({"a": 1})
    now[0] = 2.0
    due.mark({"b": 3, "c": 2, "d": 1})
    now[0] = 3.0
    due.mark({"c": 5, "a": 1})  # c: 7 events in all, a: waiting since 1 s
    assert due.take() == ["c", "a"]  # the busiest, then the one waiting longest
    assert due.waiting == 2
    assert due.take() == ["b", "d"]


def test_a_failed_capped_rounds_tables_are_due_again_with_their_events() -> None:
    now = [0.0]
    due = TablesDue(NAMES, sweep_after=3600, limit=1, clock=lambda: now[0])
    first_visits(due)
    due.mark({"a": 2, "b": 50})
    taken = due.take()
    assert taken == ["b"]
    now[0] = 5.0
    due.mark({"c": 10})
    due.give_back(taken)
    assert due.take() == ["b"]  # still the busiest: its 50 events were given back


def test_the_sweep_fills_a_capped_round_only_as_far_as_it_has_room_but_never_none() -> None:
    """A swept table the ledger stored events for meanwhile is merged at its visit, so the
    sweep counts within ``limit``: one table at least, so nothing goes unswept under a
    backlog."""
    now = [0.0]
    names = [f"t{i:03d}" for i in range(100)]
    due = TablesDue(names, sweep_after=60, share=12, limit=8, clock=lambda: now[0])
    first_visits(due)
    now[0] = 61.0
    assert len(due.take()) == 8  # idle: nine a round by share, eight by the cap
    now[0] = 130.0
    due.mark(dict.fromkeys(names[90:96], 5))
    assert due.take() == names[90:96] + names[8:10]  # six marked, two swept
    now[0] = 200.0
    due.mark(dict.fromkeys(names[80:90], 5))
    taken = due.take()
    assert taken[:8] == names[80:88] and len(taken) == 9  # full: one swept all the same


def test_first_visits_are_capped_too_and_a_busy_table_waits_for_none_of_them() -> None:
    """At the start every table is due once (its first visit creates its base): 100
    tables, a round of 8, config order; a table the ledger stores events for meanwhile
    comes first in the next round, so it never waits behind the others' first visits."""
    names = [f"t{i:03d}" for i in range(100)]
    due = TablesDue(names, sweep_after=3600, limit=8, clock=lambda: 0.0)
    assert due.waiting == 100
    assert due.take() == names[:8]
    due.mark({"t090": 500})
    second = due.take()
    assert second[0] == "t090" and second[1:] == names[8:15], second
    rounds = [names[:8], second, *first_visits(due)]
    visited = [t for r in rounds for t in r]
    assert sorted(visited) == names  # each once
    assert all(len(r) == 8 for r in rounds[:-1]) and len(rounds) == 13


def test_until_ready_a_round_takes_only_tables_given_events_and_sweeps_none() -> None:
    """``icetide run`` holds the first visits and the sweep until the ledger's first
    trigger has ended; the tables its first batch stores as it goes are merged
    meanwhile, and nothing else is counted as waiting (the merge then rests instead of
    starting round after empty round)."""
    now, started = [0.0], [False]
    due = TablesDue(NAMES, sweep_after=60, limit=2, clock=lambda: now[0], ready=lambda: started[0])
    assert due.take() == [] and due.waiting == 0
    now[0] = 500.0  # long past the sweep's minute
    due.mark({"c": 3, "a": 1})
    assert due.waiting == 2
    assert due.take() == ["c", "a"]
    assert due.take() == [] and due.waiting == 0
    started[0] = True
    assert due.waiting == 2  # a and c had their first visit: their merge
    assert first_visits(due) == [["b", "d"]]
    now[0] = 600.0
    assert due.take() == ["a"]  # swept (one a round of four tables), now that it may
