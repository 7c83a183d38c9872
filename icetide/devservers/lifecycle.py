"""What every private server (MariaDB, PostgreSQL, Kafka) does the same way: a folder it
may own, ``with`` support, a start that survives losing its free port, and a stop that
asks first and kills second.

A free port is only free when we look: between :func:`~icetide.devservers.ports.free_port`
and the server binding it, another process (another test's server) may take it. So a
start that failed because the port was taken picks another port and tries again, up to
three times; any other failure stops the server and is raised as it is.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from icetide.devservers.errors import LocalServerError
from icetide.devservers.ports import free_port

START_ATTEMPTS = 3
V = TypeVar("V")


def overridden(defaults: dict[str, V], overrides: Mapping[str, V | None]) -> dict[str, V]:
    """``defaults`` with ``overrides`` applied; an override of ``None`` removes the key.

    >>> overridden({"a": "1", "b": "2"}, {"a": None, "c": "3"})
    {'b': '2', 'c': '3'}
    """
    merged = dict(defaults)
    for name, value in overrides.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return merged


def terminate(process: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """SIGTERM ``process`` and wait up to ``timeout``; then SIGKILL it and wait again."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout)


class LocalServer:
    """The shared part of the private servers (see module doc); a subclass gives
    :meth:`start`, which sets ``_process``, and overrides :meth:`_terminate` (end the
    process, keep the folder) or :attr:`running` only when its server is not that one
    process."""

    STOP_TIMEOUT = 30.0
    _startup_timeout: float

    def __init__(self, base: Path | None, prefix: str, keep: bool) -> None:
        self._owns_base = base is None
        self.base = Path(tempfile.mkdtemp(prefix=prefix)) if base is None else base
        self._keep = keep
        self._scratch: Path | None = None
        """A short folder of our own for a unix socket whose path under ``base`` would
        be too long; removed on stop."""
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    def _spawn(self, command: list[str], env: dict[str, str], log: str) -> None:
        """Start the server process in its folder, its output appended to ``log`` there."""
        with (self.base / log).open("ab") as out:
            self._process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.base,
            )

    def start(self) -> Self:
        raise NotImplementedError

    def _terminate(self, timeout: float = STOP_TIMEOUT) -> None:
        """End the server process: asked first, killed after ``timeout`` seconds."""
        process, self._process = self._process, None
        terminate(process, timeout)

    def halt(self, timeout: float | None = None) -> None:
        """End the server process and keep its folder and port: :meth:`start` brings the
        same server back on the same port with what it stored (an outage in a test)."""
        self._terminate(self.STOP_TIMEOUT if timeout is None else timeout)

    def stop(self, timeout: float | None = None) -> None:
        """End the server (asked first, killed after ``timeout`` seconds) and remove the
        folders it made, unless asked to keep them."""
        self._terminate(self.STOP_TIMEOUT if timeout is None else timeout)
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
        if self._owns_base and not self._keep:
            shutil.rmtree(self.base, ignore_errors=True)

    def _wait_until_it_connects(
        self,
        program: str,
        connect: Callable[[], Any],
        refused: type[Exception],
        log: Callable[[], str],
        alive: Callable[[], None] = lambda: None,
    ) -> None:
        """Try ``connect()`` every 0.2 s (``alive()`` first: it raises when the process
        died) until it works (the connection is closed again) or ``_startup_timeout``
        passes; ``refused`` is the driver's error for "not yet"."""
        deadline = time.monotonic() + self._startup_timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            alive()
            try:
                conn = connect()
            except refused as exc:
                last_error = exc
                time.sleep(0.2)
                continue
            conn.close()
            return
        raise LocalServerError(
            f"{program} did not accept connections on port {self.port} within "
            f"{self._startup_timeout:.0f}s (last error: {last_error}):\n" + log(),
            hint="the machine may be overloaded; try again or raise startup_timeout",
        )

    def _scratch_folder(self, prefix: str) -> Path:
        """A new short folder (see ``_scratch``)."""
        self._scratch = Path(tempfile.mkdtemp(prefix=prefix))
        return self._scratch

    def _start_on_a_free_port(
        self, attempt: Callable[[], None], port_taken: Callable[[], bool]
    ) -> None:
        """Run ``attempt`` (launch and wait until ready); when it fails with a
        :class:`LocalServerError` and ``port_taken()`` says why, end the process, take
        another port and try again. Otherwise, or on the last attempt, stop and raise."""
        for number in range(START_ATTEMPTS):
            try:
                attempt()
                return
            except BaseException as exc:
                taken = isinstance(exc, LocalServerError) and port_taken()
                self._terminate()
                if not taken or number == START_ATTEMPTS - 1:
                    self.stop()
                    raise
                self.port = free_port()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
