"""Run several stages side by side, each on its schedule, restarting the ones that fail.

``icetide run`` hands the :class:`Supervisor` one :class:`Task` per stage (capture,
stream, merge, maintenance, the observer). Each runs in a thread of its own: a round
(``step``), then a wait of ``interval`` (less after a busy round of a ``catch_up``
task, see :func:`pause_after`; cut short after an idle round when the task is woken,
see :attr:`Task.wake`), until a stop is requested. A failed round is
reported, and the task is started again after a backoff that doubles up to a ceiling
(reset by the next good round), so a catalog that is down for a minute costs a few
retries, not the process. A stop request (Ctrl-C, SIGTERM: :mod:`icetide.stopping`)
lets every task finish its round, then each is closed, in reverse order of starting.

No stage is imported here: the tasks are plain callables.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from icetide.errors import GaveUp, failure_line
from icetide.stopping import Stop, Stopped

Report = Callable[..., None]

TaskState = Literal["idle", "running", "backing off", "failed", "stopped"]
"""Where a supervised task is: ``idle`` between rounds (and before its first),
``running`` a round (or its start-up), ``backing off`` after a failure until its
restart, ``failed`` when it gave up (:class:`GaveUp`), ``stopped`` once closed."""


@dataclass
class Task:
    """One supervised stage."""

    name: str
    step: Callable[[], object]
    """One round of work; raising means the task failed and is restarted. What it
    returns matters only with ``catch_up``: true when the round found work to do,
    :data:`BEHIND` when it also left work it knows of for the next round."""
    interval: float
    """Seconds to wait after a round before the next (but see ``catch_up``)."""
    start: Callable[[], None] | None = None
    """Set-up, run first and again after every failure (start a query, a process)."""
    close: Callable[[], None] | None = None
    """Tear-down on stop or failure (stop the query, end the process)."""
    initial_delay: float = 0.0
    catch_up: bool = False
    """After a round that found work (``step`` returned true), start the next one
    ``interval`` after this one *started* (:func:`pause_after`): a stage falling behind
    its schedule runs its rounds back to back. After an idle round, still a whole
    interval: a pipeline with nothing to do rests."""
    wake: threading.Event | None = None
    """Set by another stage when it has made work for this one (the ledger, after a
    micro-batch stored rows, wakes the merge). It ends the rest after an *idle* round at
    once, so the first change after a quiet spell does not wait out the interval for an
    idle round to notice it; after a busy round the cadence stays (at most one round per
    interval under load). Cleared as each round starts: a wake during a round that
    found nothing still counts, since that round may have looked before the work
    arrived."""
    rest_ratio: float = 0.0
    """After a round, rest at least this many times as long as the round took (and never
    less than ``interval``): a look at every table (the observer's, the artifacts
    watch's) grows with the table count, and at 1,000 tables one took longer than its
    15-s interval, so it ran back to back and held a third of the cores' time in the
    JVM, loading tables for figures no stage needs (bench/results/tables.md). With a
    ratio of 3 a look keeps at most a quarter of its thread's time, and of the JVM's
    answers to it."""
    healthy_after: float = 0.0
    """Seconds a task must have run since its (re)start before a good round counts as
    recovery: a child process that fails again within them never got going, so its
    failures keep adding up (the backoff grows) instead of starting over at one."""
    failures: int = field(default=0, init=False)
    restarts: int = field(default=0, init=False)
    state: TaskState = field(default="idle", init=False)
    state_since: float = field(default_factory=time.time, init=False)
    """When the task entered ``state`` (Unix time)."""
    last_error: str | None = field(default=None, init=False)
    retry_at: float | None = field(default=None, init=False)
    """While ``backing off``: when it starts again (Unix time)."""

    def enter(self, state: TaskState, error: str | None = None, retry_in: float = 0.0) -> None:
        """Record that the task is now in ``state`` (its thread only)."""
        now = time.time()
        self.state, self.state_since = state, now
        if error is not None:
            self.last_error = error
        self.retry_at = now + retry_in if state == "backing off" else None

    def describe(self) -> dict[str, Any]:
        """The task's state as JSON-ready figures (the status page lists every task by
        this, whether or not it has reported anything yet)."""
        return {
            "name": self.name,
            "state": self.state,
            "since": self.state_since,
            "restarts": self.restarts,
            "failures": self.failures,
            "last_error": self.last_error,
            "retry_at": self.retry_at,
        }


def backoff(failures: int, first: float = 1.0, ceiling: float = 60.0) -> float:
    """Seconds to wait after ``failures`` failures in a row.

    >>> [backoff(n) for n in (1, 2, 3, 8)]
    [1.0, 2.0, 4.0, 60.0]
    """
    return min(ceiling, first * 2 ** (failures - 1))


class Behind:
    """The type of :data:`BEHIND`."""

    def __repr__(self) -> str:
        return "BEHIND"


BEHIND = Behind()
"""What a ``catch_up`` task's ``step`` returns when its round found work and left some
it already knows of for the next (a merge round that took fewer tables than were due):
the next round starts at once, whatever the interval."""


def pause_after(
    round_seconds: float,
    interval: float,
    busy: bool = True,
    behind: bool = False,
    rest_ratio: float = 0.0,
) -> float:
    """Seconds to wait after a round of ``round_seconds`` of a ``catch_up`` task (and of
    ``icetide merge``'s loop), ``busy`` when it found work, ``behind`` when it left work
    it knows of (:data:`BEHIND`): none.

    Busy rounds start every ``interval`` (a fixed rate, like the stream's processing-time
    trigger), and one longer than that is followed at once: with "merge every 5s" a
    change waits at most one round for a merge to start, not a round plus 5 s (which
    had made the freshness benchmark's merge cycle 17 s for 10 s of merging). After an
    idle round, the whole interval: a pipeline with nothing to do rests. A task with a
    ``rest_ratio`` (not a ``catch_up`` one) rests that many times its round, when that
    is longer than the interval (:attr:`Task.rest_ratio`).

    >>> pause_after(2.0, 5.0), pause_after(7.5, 5.0), pause_after(0.0, 0.0)
    (3.0, 0.0, 0.0)
    >>> pause_after(2.0, 5.0, busy=False), pause_after(2.0, 5.0, behind=True)
    (5.0, 0.0)
    >>> pause_after(2.0, 15.0, busy=False, rest_ratio=3), pause_after(
    ...     60.0, 15.0, busy=False, rest_ratio=3)
    (15.0, 180.0)
    """
    if behind:
        return 0.0
    if busy:
        return max(0.0, interval - round_seconds)
    return max(interval, round_seconds * rest_ratio)


def describe(exc: BaseException) -> str:
    """A one-line reason for a failure (:func:`icetide.errors.failure_line`)."""
    return failure_line(exc)


class Supervisor:
    """Runs tasks in threads until a stop is requested."""

    def __init__(
        self,
        stop: Stop,
        report: Report,
        *,
        first_backoff: float = 1.0,
        max_backoff: float = 60.0,
        diagnose: Callable[[BaseException], GaveUp | None] | None = None,
    ) -> None:
        self.stop = stop
        self.report = report
        self.first_backoff = first_backoff
        self.max_backoff = max_backoff
        self.diagnose = diagnose
        """Looks at a task's failure for a cause no restart can mend (the process's Spark
        JVM has exited: every task fails alike from then on) and returns it as the
        :class:`GaveUp` that ends the run; None: restart the task as usual."""
        self.tasks: list[Task] = []
        self._threads: list[threading.Thread] = []
        self._giving_up = threading.Lock()
        self.gave_up: GaveUp | None = None
        """The failure that stopped the run, if one did (:class:`GaveUp`)."""

    def add(self, task: Task) -> Task:
        """Supervise ``task`` (before :meth:`run`)."""
        self.tasks.append(task)
        return task

    def states(self) -> list[dict[str, Any]]:
        """Every task's :meth:`Task.describe`, in the order they were added."""
        return [task.describe() for task in self.tasks]

    def run(self) -> None:
        """Start every task and wait for a stop request; then stop them all.

        Raises :class:`~icetide.stopping.Stopped` once everything is stopped, or the
        :class:`GaveUp` of a task whose failure cannot go away by itself.
        """
        for task in self.tasks:
            thread = threading.Thread(target=self._loop, args=(task,), name=f"icetide-{task.name}")
            thread.daemon = True
            thread.start()
            self._threads.append(thread)
        try:
            while True:
                self.stop.wait(0.25)
        finally:
            self.stop.request("stop")
            self.report(
                "run",
                f"run: stopping on {self.stop.signal_name}: the steps under way finish first",
                stopping=self.stop.signal_name,
            )
            for thread in self._threads:
                thread.join()
            if self.gave_up is not None:
                raise self.gave_up

    def _wait(self, seconds: float, wake: threading.Event | None = None) -> None:
        deadline = time.monotonic() + seconds
        while not self.stop.requested and (left := deadline - time.monotonic()) > 0:
            if wake is None:
                time.sleep(min(left, 0.1))
            elif wake.wait(min(left, 0.1)):
                break
        self.stop.check()

    def _close(self, task: Task) -> None:
        if task.close is None:
            return
        try:
            task.close()
        except Exception as exc:  # noqa: BLE001 - reported; the task is restarted anyway
            self.report("run", f"run: closing {task.name} failed: {describe(exc)}", stage=task.name)

    def _gave_up(self, failure: Exception) -> Exception:
        """``failure`` itself, or the :class:`GaveUp` :attr:`diagnose` finds behind it."""
        if isinstance(failure, GaveUp) or self.diagnose is None:
            return failure
        return self.diagnose(failure) or failure

    def _failed(self, task: Task, exc: Exception) -> float:
        """Report a failed round and close the task; the seconds to wait before its
        restart (the backoff)."""
        task.failures += 1
        task.restarts += 1
        pause = backoff(task.failures, self.first_backoff, self.max_backoff)
        task.enter("backing off", describe(exc), pause)
        self.report(
            "run",
            f"run: {task.name} failed ({describe(exc)}); restarting in "
            f"{pause:.0f}s (failure {task.failures} in a row)",
            restarted=task.name,
            error=describe(exc),
            backoff_seconds=pause,
        )
        self._close(task)
        return pause

    def _loop(self, task: Task) -> None:
        started = False
        started_at = time.monotonic()
        try:
            self._wait(task.initial_delay)
            while not self.stop.requested:
                try:
                    task.enter("running")
                    if not started:
                        if task.start is not None:
                            task.start()
                        started, started_at = True, time.monotonic()
                    began = time.monotonic()
                    if task.wake is not None:
                        task.wake.clear()
                    found = task.step()
                    if time.monotonic() - started_at >= task.healthy_after:
                        task.failures = 0
                    busy = task.catch_up and bool(found)
                    behind = task.catch_up and found is BEHIND
                    task.enter("idle")
                    self._wait(
                        pause_after(
                            time.monotonic() - began, task.interval, busy, behind, task.rest_ratio
                        ),
                        None if busy else task.wake,
                    )
                except Stopped:
                    break
                except Exception as failure:  # noqa: BLE001 - every failure restarts the task
                    exc = self._gave_up(failure)
                    if not isinstance(exc, GaveUp):
                        # The stop is requested from a signal handler or another task's
                        # thread, which mypy's narrowing by the loop condition cannot see.
                        if self.stop.requested:
                            break  # type: ignore[unreachable]  # abandoned by a second signal
                        pause = self._failed(task, exc)
                        started = False
                        self._wait(pause)
                        continue
                    with self._giving_up:
                        # Said once: a cause like a JVM gone fails every task alike.
                        first, self.gave_up = self.gave_up is None, self.gave_up or exc
                    if first:
                        self.report(
                            "run",
                            f"run: {task.name} cannot go on: {exc.render()}; stopping icetide "
                            "run (fix the cause, then start it again)",
                            gave_up=task.name,
                            error=describe(exc),
                        )
                        self.stop.request(f"{task.name} gave up")
                    task.enter("failed", describe(exc))
                    break
        except Stopped:
            pass
        finally:
            if started:
                self._close(task)
            if task.state != "failed":
                task.enter("stopped")
