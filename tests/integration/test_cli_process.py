"""The ``icetide`` command as people run it: a real child process, real signals, real output.

Each child starts its own Spark, so these tests are few and each stop as early as it can.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.demo.workload import deliver, generate
from tests.integration.harness import REPO, Pipeline, assert_matches

START_TIMEOUT = 300
RECVFROM = {"x86_64": 45, "aarch64": 207}
"""The recvfrom system call's number, where a py4j call waits for the JVM."""


class Child:
    """A running ``icetide`` process in its own process group, its output read line by line."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path = REPO) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "icetide.cli", *args],
            cwd=cwd,
            env={**os.environ, **env, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its group id is its pid: the JVM is found by group
        )
        self.lines: list[str] = []
        self._new: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._new.put(line)
        self._new.put(None)

    def wait_for_line(self, pattern: str, timeout: float = START_TIMEOUT) -> None:
        """Block until a line matching ``pattern`` has been printed; after ``timeout``
        seconds without one, fail with the child's last lines (what it was doing)."""
        if any(re.search(pattern, line) for line in self.lines):
            return
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._new.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(
                    f"no line matching {pattern!r} within {timeout:g} s; the last lines:\n"
                    + "\n".join(self.lines[-80:])
                ) from None
            assert line is not None, f"exited before {pattern!r}:\n{self.output}"
            if re.search(pattern, line):
                return

    def group(self) -> list[str]:
        """Command lines of every live process in the child's process group."""
        return [cmdline for _, cmdline in self.members()]

    def members(self) -> list[tuple[int, str]]:
        """(pid, command line) of every live process in the child's process group."""
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
            except (OSError, IndexError):
                continue
            if int(fields[2]) == self.proc.pid and fields[0] != "Z":
                found.append((int(stat.parent.name), cmdline.decode(errors="replace")))
        return found

    def in_jvm_call(self) -> bool:
        """True while the child's main thread waits for the JVM's answer on py4j's socket."""
        try:
            call = Path(f"/proc/{self.proc.pid}/syscall").read_text().split()
            if not call or call[0] != str(RECVFROM[os.uname().machine]):
                return False
            target = os.readlink(f"/proc/{self.proc.pid}/fd/{int(call[1], 16)}")
        except (OSError, IndexError, ValueError):
            return False
        return target.startswith("socket:")

    def jvm_started(self) -> bool:
        return any("java" in cmd and "SparkSubmit" in cmd for cmd in self.group())

    def finish(self, timeout: float = START_TIMEOUT) -> int:
        """Wait for the child's exit (not for the end of its output: an orphan holds that)."""
        return self.proc.wait(timeout)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def kill_group(self) -> None:
        """Clean up after a failed test: end whatever the child left in its group."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@contextmanager
def child(args: list[str], env: dict[str, str] | None = None, cwd: Path = REPO) -> Iterator[Child]:
    started = Child(args, env or {}, cwd)
    try:
        yield started
    finally:
        started.kill_group()
        started.proc.wait()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = START_TIMEOUT) -> None:
    """Until ``condition()``; between two checks a pause as long as the last check took
    (at least 0.05 s): a costly check (a metrics scrape the run must answer, a table read
    whole) then takes at most half the time waited, not the cores the run needs."""
    deadline = time.monotonic() + timeout
    while True:
        started = time.monotonic()
        if condition():
            return
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(max(0.05, time.monotonic() - started))


def assert_stopped_cleanly(run: Child, signame: str) -> None:
    """Exit 0, no traceback, one line saying it stopped, and nothing left running."""
    returncode = run.finish()
    output = run.output
    assert returncode == 0, output
    assert "Traceback" not in output and "py4j" not in output.lower(), output
    stops = [line for line in run.lines if "stopped" in line]
    assert stops == [
        f"icetide run stopped by {signame}: nothing lost, a rerun resumes where it left off"
    ], output
    # A run that went on long enough saves its JVM's classes as the JVM stops, after the
    # stop line (icetide/spark/class_archive.py, MIN_TRAINING_SECONDS): on a loaded
    # machine a short run does. Nothing else may follow the stop line.
    said = [line for line in run.lines if not line.startswith("icetide: saved the JVM's classes")]
    assert said[-1] == stops[0], output
    assert run.group() == [], "processes outlived icetide run:\n" + "\n".join(run.group())


# SIGINT only: it is the signal with a start-up path of its own (PySpark's SparkContext
# installs a SIGINT handler as it starts, which icetide/spark/session.py keeps out);
# SIGTERM takes the same handler as SIGINT (icetide/stopping.py, SIGNALS; checked in
# tests/unit/cli/test_cli_stopping.py), and test_run_supervised.py stops a run by it.
@pytest.mark.parametrize("sig", [signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_during_start_up_stops_run_and_its_jvm(pipeline: Pipeline, sig: int) -> None:
    with child(["run", "-c", str(pipeline.config_path)]) as run:
        run.wait_for_line(r"^starting Spark")
        wait_until(run.jvm_started, "the Spark JVM")
        os.kill(run.proc.pid, sig)
        assert_stopped_cleanly(run, signal.Signals(sig).name)


def test_a_spark_jvm_that_dies_ends_run_at_once_saying_why(pipeline: Pipeline) -> None:
    """The Spark JVM killed under a running ``icetide run`` (as the kernel's out-of-memory
    killer would): every stage's next call into it fails, and no restart brings it back.
    The run ends at once, exit 2, with one error naming the JVM's end and what to do; no
    stage is restarted against the dead JVM, no traceback, nothing left running."""
    with child(["run", "-c", str(pipeline.config_path)]) as run:
        run.wait_for_line(r"^running: ")
        [jvm] = [pid for pid, cmd in run.members() if "java" in cmd and "SparkSubmit" in cmd]
        os.kill(jvm, signal.SIGKILL)
        returncode = run.finish(timeout=60)
    output = run.output
    assert returncode == 2, output
    errors = [line for line in run.lines if line.startswith("icetide: error: ")]
    assert len(errors) == 1 and "the Spark JVM has exited (killed by SIGKILL)" in errors[0], output
    assert "out-of-memory killer" in output, output  # the hint
    assert "restarting in" not in output and "Traceback" not in output, output
    assert run.group() == [], "processes outlived icetide run:\n" + "\n".join(run.group())


# SIGINT only: SIGTERM takes the same handler (icetide/stopping.py, SIGNALS), and
# test_run_supervised.py stops a run by SIGTERM during a merge (held there, so the signal
# cannot miss it) with the same checks: exit 0, the merge under way finishes and none
# starts after it, nothing outlives the run, and the restarted run loses nothing.
@pytest.mark.parametrize("sig", [signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_during_a_merge_stops_run_and_a_rerun_loses_nothing(
    tmp_path: Path, warehouse: Path, spark: SparkSession, sig: int
) -> None:
    shop = Pipeline.create(
        tmp_path,
        warehouse,
        f"cli_signal_merge_{signal.Signals(sig).name.lower()}",
        spark=spark,
        # One table at a time: with ``merge.parallel_tables`` of 2 the third table starts
        # the moment the first finishes, so no table would be left to start after the signal.
        extra={
            "schedule": {"stream_interval": "1s", "merge_interval": "1s"},
            "merge": {"parallel_tables": 1},
        },
    )
    workload = generate(23, 120)
    deliver(workload, shop.landing, seed=4, files=2, duplicate_rate=0.0)
    shop.stream()  # the ledger is ready: the child merges as soon as it runs
    with child(["run", "-c", str(shop.config_path)]) as run:
        # The merge thread merges the tables in config order: once the first is reported
        # the second is under way (seconds of Spark work) when the signal arrives.
        run.wait_for_line(r"^running: ")
        run.wait_for_line(r"^merge customers: ")
        merged_before = _merge_lines(run.lines)
        os.kill(run.proc.pid, sig)
        assert_stopped_cleanly(run, signal.Signals(sig).name)
    # The merge under way may finish; none starts after the signal. (Which table is under
    # way when the signal lands depends on the machine's speed, so count, not name.)
    assert len(_merge_lines(run.lines)) - len(merged_before) <= 1, run.output
    assert "0:00:01" not in run.output and "every 1s" in run.output
    shop.stream()
    shop.merge()
    assert_matches(shop.compare(workload))


def _merge_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("merge ")]


SECRETS = {
    "ICETIDE_TEST_MASTER": "local[1]",
    "ICETIDE_TEST_DB_HOST": "127.0.0.213",
    "ICETIDE_TEST_DB_USER": "u_7f3q_secret",
    "ICETIDE_TEST_DB_PASSWORD": "pw_7f3q_secret",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_secrets_from_the_environment_never_reach_the_output(
    tmp_path: Path, warehouse: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)  # the children inherit them
    source = {
        "name": "shop",
        "type": "mysql",
        "host": "${ICETIDE_TEST_DB_HOST}",
        "port": free_port(),  # nothing listens: capture's connection is refused
        "user": "${ICETIDE_TEST_DB_USER}",
        "password": "${ICETIDE_TEST_DB_PASSWORD}",
        "server_id": 4242,
    }
    shop = Pipeline.create(
        tmp_path,
        warehouse,
        "cli_secrets",
        spark=spark,
        master="${ICETIDE_TEST_MASTER}",
        extra={"sources": [source]},
    )
    config = ["-c", str(shop.config_path)]
    with child(["merge", "--once", *config]) as merge:
        assert merge.finish() == 0, merge.output
    with child(["capture", "--once", "--from-now", *config]) as capture:
        assert capture.finish() == 2, capture.output
    for name, value in SECRETS.items():
        for run in (merge, capture):
            assert value not in run.output, f"{name} printed:\n{run.output}"
    assert "starting Spark (***) …" in merge.lines, merge.output
    assert "icetide: error: cannot connect to the MySQL/MariaDB server at ***:" in capture.output
    assert "Traceback" not in capture.output
    # Nothing in the ledger yet: --once says so instead of printing nothing.
    assert "merge: nothing new to merge in 3 table(s)" in merge.lines, merge.output
