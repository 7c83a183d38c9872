"""One table packs its small files per merge round, the longest waiting first."""

from __future__ import annotations

import threading

from icetide.merge.compact import PackingTurn


def test_the_first_due_table_takes_an_open_turn_and_no_other() -> None:
    turn = PackingTurn()
    assert not turn.taken
    assert turn.take("orders")
    assert not turn.take("customers") and not turn.take("orders")
    assert turn.taken


def test_a_reserved_turn_is_only_the_waiting_tables() -> None:
    turn = PackingTurn("customers")
    assert not turn.take("orders")
    assert not turn.taken
    assert turn.take("customers")


def test_threads_racing_for_the_turn_get_it_once() -> None:
    turn = PackingTurn()
    won: list[str] = []
    barrier = threading.Barrier(8)

    def race(name: str) -> None:
        barrier.wait()
        if turn.take(name):
            won.append(name)

    threads = [threading.Thread(target=race, args=(f"t{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
