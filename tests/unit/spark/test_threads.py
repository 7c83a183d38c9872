"""``run_all``: every item ends before the call returns, results in the items' order,
and the first item's failure (in that order) raised once all have ended."""

from __future__ import annotations

import threading

import pytest

from icetide.spark.threads import run_all


def test_results_come_back_in_the_items_order_from_several_threads() -> None:
    seen: set[str] = set()
    ready = threading.Barrier(3)

    def step(item: int) -> int:
        ready.wait(timeout=10)  # three items under way at once, or this times out
        seen.add(threading.current_thread().name)
        return item * 10

    assert run_all(step, [3, 1, 2], 3, "test-run") == [30, 10, 20]
    assert len(seen) == 3 and all(name.startswith("test-run") for name in seen)


def test_one_thread_runs_the_items_in_the_callers_thread_one_after_another() -> None:
    threads: list[threading.Thread] = []
    order: list[int] = []

    def step(item: int) -> int:
        threads.append(threading.current_thread())
        order.append(item)
        return item

    assert run_all(step, [2, 1], 1, "test-run") == [2, 1]
    assert order == [2, 1] and set(threads) == {threading.current_thread()}


def test_the_first_failure_is_raised_after_every_item_has_ended() -> None:
    ended: list[int] = []
    second_failed = threading.Event()

    def step(item: int) -> int:
        if item == 1:
            second_failed.wait(timeout=10)  # fails after the later item failed
            ended.append(item)
            raise ValueError("first")
        if item == 2:
            ended.append(item)
            second_failed.set()
            raise KeyError("second")
        second_failed.wait(timeout=10)
        ended.append(item)
        return item

    with pytest.raises(ValueError, match="first"):
        run_all(step, [1, 2, 3], 3, "test-run")
    assert sorted(ended) == [1, 2, 3]
