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
