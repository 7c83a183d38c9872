"""One table packs its small files per merge round, the longest waiting first."""

from __future__ import annotations

import threading

from icetide.merge.compact import PackingTurn, PackingTurns


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


def test_a_table_that_lost_its_turn_packs_next_round_before_a_newly_due_one() -> None:
    turns = PackingTurns()
    first = turns.open_round()
    assert turns.take(first, "orders")
    assert not turns.take(first, "customers")  # waits
    turns.close_round(first)
    # Next round: orders is due again at once (compact_every 1), customers' turn it is.
    second = turns.open_round()
    assert second.reserved == "customers"
    assert not turns.take(second, "orders")
    assert turns.take(second, "customers")
    turns.close_round(second)
    assert turns.open_round().reserved == "orders"


def test_a_waiting_table_is_due_off_its_schedule_and_others_are_not() -> None:
    turns = PackingTurns()
    assert not turns.due("orders", 3, 4)
    assert turns.due("orders", 4, 4) and turns.due("orders", 8, 4)
    assert not turns.due("orders", 5, 4)
    turns.take(_taken(), "orders")  # lost the turn of its round
    assert turns.due("orders", 5, 4)
    assert not turns.due("orders", 3, 4)  # rewritten meanwhile: waits no more
    assert turns.open_round().reserved is None
    assert not turns.due("orders", 5, 4)


def test_an_idle_waiting_table_passes_its_turn_on() -> None:
    turns = PackingTurns()
    round_one = _taken()
    turns.take(round_one, "orders")
    turns.take(round_one, "customers")
    turns.close_round(round_one)
    idle = turns.open_round()
    assert idle.reserved == "orders"
    turns.close_round(idle)  # orders had no events: nobody packed
    assert turns.open_round().reserved == "customers"


def test_outside_a_round_a_due_table_always_packs() -> None:
    turns = PackingTurns()
    turns.take(_taken(), "orders")
    assert turns.take(None, "orders")
    assert turns.open_round().reserved is None


def _taken() -> PackingTurn:
    turn = PackingTurn()
    turn.take("someone else")
    return turn
