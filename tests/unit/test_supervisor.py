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


def test_a_wake_ends_the_rest_after_an_idle_round_but_not_the_cadence_after_a_busy_one() -> None:
    """``Task.wake`` (the ledger waking the merge): round 1 is idle and sets the wake
    itself, as a micro-batch stored while a round looked at an older ledger; round 2
    follows at once instead of the task's 60 s. Round 2 is busy and the wake is set
    again at once: round 3 still waits for round 2's interval."""
    import time

    stop = Stop()
    wake = threading.Event()
    starts: list[float] = []
    ends: list[float] = []

    def step() -> bool:
        starts.append(time.monotonic())
        if len(starts) == 1:
            wake.set()  # during an idle round: still counts
            ends.append(time.monotonic())
            return False
        if len(starts) == 2:
            task.interval = 0.5  # round 3 is due 0.5 s after round 2 began
            wake.set()
            ends.append(time.monotonic())
            return True
        stop.request("test")
        ends.append(time.monotonic())
        return True

    sup = Supervisor(stop, lambda *_, **__: None)
    task = sup.add(Task("merge", step, 60.0, catch_up=True, wake=wake))
    with pytest.raises(Stopped):
        sup.run()
    assert len(starts) == 3
    after_idle = starts[1] - ends[0]
    assert after_idle < 5, f"a woken rest after an idle round lasted {after_idle:.2f} s"
    after_busy = starts[2] - starts[1]
    assert after_busy >= 0.45, f"a wake cut a busy round's cadence to {after_busy:.2f} s"


def test_a_round_that_left_known_work_behind_is_followed_at_once() -> None:
    """A ``catch_up`` task whose short round returns BEHIND (a merge round that took
    fewer tables than were due) starts the next at once, not at the interval."""
    import time

    from icetide.supervisor import BEHIND

    stop = Stop()
    starts: list[float] = []

    def step() -> object:
        starts.append(time.monotonic())
        if len(starts) == 3:
            stop.request("test")
        return BEHIND

    sup = Supervisor(stop, lambda *_, **__: None)
    sup.add(Task("merge", step, 60.0, catch_up=True))
    with pytest.raises(Stopped):
        sup.run()
    assert len(starts) == 3
    assert starts[2] - starts[0] < 5, "a round left behind waited out the 60-s interval"


def test_the_merge_is_woken_by_a_ledger_batch_that_stored_rows_only() -> None:
    """``icetide run``'s sink: a ledger report with stored rows wakes the merge; one of
    dead letters only, an empty batch or another stage's report does not."""
    from icetide.cli.run import wakes_on_stored_rows
    from icetide.progress import Reporter

    wake = threading.Event()
    reporter = Reporter(wakes_on_stored_rows(wake))
    reporter.report("ledger", "batch 3: 0 events", batch=3, events={}, dead_letters={"x": 2})
    reporter.report("ledger", "batch 4: 0 events", batch=4, events={"customers": 0})
    reporter.report("merge", "merge customers: 5 events", table="customers", events=5)
    assert not wake.is_set()
    reporter.report("ledger", "batch 5: 2 events", batch=5, events={"a": 0, "customers": 2})
    assert wake.is_set()
    wake.clear()  # a long batch's progress line, with rows stored so far, wakes it too
    reporter.report("ledger", "batch 6: 8 of 20 tables stored", storing=6, stored={"a": 4})
    assert wake.is_set()


def test_a_child_that_dies_before_getting_going_backs_off_more_each_time() -> None:
    # A capture child that exits a moment after every start: one good round after its
    # start, then a failure. Without healthy_after each failure was "1 in a row" (a
    # fixed 1-s loop for ever); with it the failures add up and the backoff doubles.
    stop = Stop()
    reports: list[dict[str, Any]] = []
    rounds = {"n": 0}

    def child_died_again() -> None:
        rounds["n"] += 1
        if rounds["n"] % 2 == 0:
            raise RuntimeError("capture exited with code 2")
        if rounds["n"] >= 9:
            stop.request("test")

    sup = Supervisor(stop, lambda *a, **f: reports.append(f), first_backoff=0.001, max_backoff=1)
    sup.add(Task("capture", child_died_again, 0.0, healthy_after=60.0))
    with pytest.raises(Stopped):
        sup.run()
    backoffs = [r["backoff_seconds"] for r in reports if r.get("restarted") == "capture"]
    assert backoffs == [0.001, 0.002, 0.004, 0.008]


def test_a_failure_that_cannot_go_away_stops_the_run_once_with_what_to_do() -> None:
    from icetide.errors import GaveUp

    stop = Stop()
    reports: list[tuple[str, dict[str, Any]]] = []
    calls = {"capture": 0, "stream": 0}

    def capture() -> None:
        calls["capture"] += 1
        raise GaveUp("another capture of source 'shop' is writing", hint="stop the other one")

    def stream() -> None:
        calls["stream"] += 1

    sup = Supervisor(stop, lambda s, m, **f: reports.append((m, f)), first_backoff=0.001)
    sup.add(Task("capture shop", capture, 0.0))
    sup.add(Task("stream", stream, 0.0))
    with pytest.raises(GaveUp, match="another capture"):
        sup.run()
    assert calls["capture"] == 1  # never restarted
    assert [t.state for t in sup.tasks] == ["failed", "stopped"]
    assert sup.tasks[0].last_error == "another capture of source 'shop' is writing"
    said = [m for m, f in reports if f.get("gave_up") == "capture shop"]
    assert len(said) == 1 and "stop the other one" in said[0] and "start it again" in said[0]


def test_a_failure_diagnosed_as_permanent_ends_the_run_once_for_every_task() -> None:
    """A cause behind every task's failure (the process's Spark JVM gone): what
    ``diagnose`` makes of a failure ends the run, said once, instead of each task
    restarting with backoff for ever; a failure it does not recognise is restarted."""
    from icetide.errors import GaveUp

    stop = Stop()
    reports: list[tuple[str, dict[str, Any]]] = []
    gone = threading.Event()
    calls = {"stream": 0, "merge": 0}

    def stream() -> None:
        calls["stream"] += 1
        if calls["stream"] > 10:  # restarted for ever: end the test, which then fails
            stop.request("test")
        if calls["stream"] < 3:
            raise OSError("a hiccup")  # not diagnosed: restarted
        gone.set()
        raise ConnectionRefusedError("[Errno 111] Connection refused")

    def merge() -> None:
        calls["merge"] += 1
        if gone.is_set():
            raise ConnectionRefusedError("[Errno 111] Connection refused")

    def diagnose(failure: BaseException) -> GaveUp | None:
        return (
            GaveUp("the Spark JVM has exited (code 52)", hint="more memory")
            if gone.is_set()
            else None
        )

    sup = Supervisor(
        stop, lambda s, m, **f: reports.append((m, f)), first_backoff=0.001, diagnose=diagnose
    )
    sup.add(Task("stream", stream, 0.0))
    sup.add(Task("merge", merge, 0.0))
    with pytest.raises(GaveUp, match="JVM has exited"):
        sup.run()
    assert calls["stream"] == 3  # two restarts, then the diagnosed failure: no more
    restarts = [f["restarted"] for m, f in reports if "restarted" in f]
    assert restarts == ["stream", "stream"], reports
    said = [m for m, f in reports if "gave_up" in f]
    assert len(said) == 1 and "more memory" in said[0], reports
    assert "failed" in [t.state for t in sup.tasks]
    assert all(t.state in ("failed", "stopped") for t in sup.tasks)


def test_each_task_says_its_state_running_idle_backing_off_then_stopped() -> None:
    """The status page lists every task by :meth:`Supervisor.states`, including one
    that never reported: running a round, idle between rounds (or before its first),
    backing off after a failure until its restart, stopped at the end."""
    stop = Stop()
    inside, release, failed = threading.Event(), threading.Event(), threading.Event()
    changed = threading.Event()

    def long_round() -> None:
        inside.set()
        release.wait(timeout=60)

    def broken() -> None:
        failed.set()
        raise RuntimeError("catalog down")

    def report(stage: str, message: str, **figures: Any) -> None:
        changed.set()

    sup = Supervisor(stop, report, first_backoff=600.0, max_backoff=600.0)
    sup.add(Task("stream", long_round, 3600.0))
    sup.add(Task("maintenance", lambda: None, 3600.0, initial_delay=3600.0))
    sup.add(Task("capture shop", broken, 3600.0))
    runner = threading.Thread(target=lambda: pytest.raises(Stopped, sup.run), daemon=True)
    assert [s["state"] for s in sup.states()] == ["idle", "idle", "idle"]
    runner.start()
    assert inside.wait(timeout=30) and failed.wait(timeout=30)

    def states() -> dict[str, dict[str, Any]]:
        return {s["name"]: s for s in sup.states()}

    assert changed.wait(timeout=30)  # the failure's report: its state is set before it
    now = states()
    assert now["capture shop"]["state"] == "backing off"
    assert now["stream"]["state"] == "running"
    assert now["maintenance"]["state"] == "idle" and now["maintenance"]["restarts"] == 0
    capture = now["capture shop"]
    assert capture["last_error"] == "RuntimeError: catalog down"
    assert capture["retry_at"] == pytest.approx(capture["since"] + 600.0)
    assert capture["restarts"] == 1 and capture["failures"] == 1
    stop.request("test")
    release.set()
    runner.join(timeout=60)
    assert not runner.is_alive()
    assert [s["state"] for s in sup.states()] == ["stopped", "stopped", "stopped"]
    assert sup.states()[2]["retry_at"] is None
