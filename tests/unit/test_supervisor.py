"""The supervisor: rounds on a schedule, a failed task restarted with backoff and reported,
every task stopped and closed on a stop request."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from icetide.stopping import Stop, Stopped
from icetide.supervisor import Supervisor, Task


def test_a_failing_task_is_restarted_and_reported_and_stop_closes_everything() -> None:
    stop = Stop()
    reports: list[dict[str, Any]] = []
    events: list[str] = []
    lock = threading.Lock()

    def report(stage: str, message: str, **figures: Any) -> None:
        with lock:
            reports.append({"stage": stage, "message": message, **figures})

    rounds = {"flaky": 0, "steady": 0}

    def flaky() -> None:
        rounds["flaky"] += 1
        if rounds["flaky"] <= 2:
            raise RuntimeError(f"boom {rounds['flaky']}")
        if rounds["flaky"] >= 4 and rounds["steady"] >= 3:
            stop.request("test")

    def steady() -> None:
        rounds["steady"] += 1

    sup = Supervisor(stop, report, first_backoff=0.01, max_backoff=0.02)
    sup.add(
        Task(
            "flaky",
            flaky,
            0.0,
            start=lambda: events.append("start flaky"),
            close=lambda: events.append("close flaky"),
        )
    )
    sup.add(Task("steady", steady, 0.0, close=lambda: events.append("close steady")))
    with pytest.raises(Stopped):
        sup.run()
    restarts = [r for r in reports if r.get("restarted") == "flaky"]
    assert [r["error"] for r in restarts] == ["RuntimeError: boom 1", "RuntimeError: boom 2"]
    assert [r["backoff_seconds"] for r in restarts] == [0.01, 0.02]
    # Started three times (first, and after each failure), closed after each failure and
    # once at the stop; the steady task closed once at the stop.
    assert events.count("start flaky") == 3
    assert events.count("close flaky") == 3
    assert events.count("close steady") == 1
    assert sup.tasks[0].restarts == 2 and sup.tasks[1].restarts == 0


def test_busy_rounds_start_at_a_fixed_rate_and_an_idle_round_waits_a_whole_interval() -> None:
    """A ``catch_up`` task: after a busy round longer than its interval the next starts at
    once, after a short busy one the rest of the interval; after an idle round (the step
    returned False) a whole interval, however long the round took."""
    import time

    stop = Stop()
    starts: list[float] = []
    ends: list[float] = []
    long_round = threading.Event()  # never set: rounds 1 and 3 simply last 0.6 s

    def step() -> bool:
        starts.append(time.monotonic())
        if len(starts) in (1, 3):
            long_round.wait(0.6)
        if len(starts) == 4:
            stop.request("test")
        ends.append(time.monotonic())
        return len(starts) != 3  # the third round found nothing to do

    sup = Supervisor(stop, lambda *_, **__: None)
    sup.add(Task("merge", step, 0.5, catch_up=True))
    with pytest.raises(Stopped):
        sup.run()
    after_long, after_short = starts[1] - starts[0], starts[2] - starts[1]
    after_idle = starts[3] - ends[2]
    assert after_long < 0.9, f"a 0.6 s round was followed {after_long:.2f} s after it began"
    assert after_short >= 0.45, f"a short round was followed after only {after_short:.2f} s"
    assert after_idle >= 0.45, f"an idle round was followed {after_idle:.2f} s after it ended"
