"""Ctrl-C and SIGTERM ask a long-running command to stop; they never break a JVM call.

Python runs a signal handler in the main thread between two bytecodes, which may be in
the middle of a py4j call to the JVM. Raising ``KeyboardInterrupt`` there (Python's
default, and what PySpark's own handler does) leaves that call's connection half read,
and the command ends in py4j tracebacks. So once Spark is starting, a signal only
*requests* a stop: the command finishes its current step (a start-up, one table's
merge, one micro-batch) and stops between steps; everything it committed is kept and a
rerun resumes from there. A second signal abandons the current step (its ``on_repeat``
action, e.g. cancelling the running Spark jobs), which is safe because every step
commits its progress atomically with its data.

Before Spark starts, and in commands without Spark (``capture``), a signal raises
``KeyboardInterrupt`` as usual, SIGTERM included.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(Exception):
    """Raised by a command that stopped between steps because a stop was requested."""


class Stop:
    """The stop request of one command run; install() routes SIGINT and SIGTERM here."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self.signals = 0
        """How many signals arrived: a second one means "now, not after this step"."""
        self.deferring = False
        self.on_repeat: Callable[[], None] | None = None
        self.on_first: Callable[[], None] | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """True once a signal (or :meth:`request`) asked the command to stop."""
        return self.signal_name is not None

    def request(self, reason: str) -> None:
        """Ask for a stop without a signal (tests, other threads)."""
        self.signal_name = self.signal_name or reason

    def install(self) -> None:
        """Handle SIGINT and SIGTERM (main thread only; elsewhere signals stay as they are)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)

    def restore(self) -> None:
        """Put back the handlers :meth:`install` replaced."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def defer(
        self,
        on_repeat: Callable[[], None] | None = None,
        on_first: Callable[[], None] | None = None,
    ) -> None:
        """From now on a signal requests a stop instead of raising. The first signal calls
        ``on_first``, a repeated one ``on_repeat`` (say, abandon the current step)."""
        self.deferring = True
        self.on_repeat = on_repeat
        self.on_first = on_first

    def check(self) -> None:
        """Raise :class:`Stopped` when a stop was requested: call it between steps."""
        if self.requested:
            raise Stopped(self.signal_name)

    def wait(self, seconds: float) -> None:
        """Wait up to ``seconds`` between steps; raise :class:`Stopped` when asked to stop.

        Polls a flag instead of waiting on an Event: a handler that set an Event could
        deadlock on the lock the interrupted wait holds.
        """
        deadline = time.monotonic() + seconds
        while True:
            self.check()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.1))

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        repeated = self.requested
        self.signals += 1
        self.signal_name = self.signal_name or signal.Signals(signum).name
        if not self.deferring:
            raise KeyboardInterrupt
        action = self.on_repeat if repeated else self.on_first
        if action is not None:
            action()


SUPERVISOR_ENV = "ICETIDE_SUPERVISOR_PID"
"""Set by ``icetide run`` for the capture children it starts: the pid they belong to."""


def stop_when_orphaned(parent: int, every: float = 0.5) -> threading.Thread:
    """Send ourselves SIGTERM once ``parent`` is no longer our parent process.

    ``icetide run`` starts each capture child in a session of its own (a terminal's
    Ctrl-C reaches only the supervisor, which stops its children in turn). A supervisor
    killed with SIGKILL cannot do that, and its children would go on capturing unseen,
    holding the landing lock and a PostgreSQL slot. Here the child notices it was
    re-parented and stops exactly as on SIGTERM: records made durable, offset saved.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="orphan-watch", daemon=True)
    thread.start()
    return thread
