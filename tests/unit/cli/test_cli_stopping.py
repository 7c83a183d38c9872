"""Signals ask a command to stop; once Spark runs they must never raise inside a JVM call."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from icetide.stopping import Stop, Stopped


@pytest.fixture
def stop() -> Iterator[Stop]:
    installed = Stop()
    installed.install()
    yield installed
    installed.restore()


def test_before_spark_a_sigterm_interrupts_like_ctrl_c(stop: Stop) -> None:
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGTERM)
    assert stop.signal_name == "SIGTERM"


def test_once_deferred_a_signal_only_requests_the_stop(stop: Stop) -> None:
    first: list[str] = []
    repeats: list[str] = []
    stop.defer(on_repeat=lambda: repeats.append("abandon"), on_first=lambda: first.append("x"))
    os.kill(os.getpid(), signal.SIGINT)  # no exception: the step in progress carries on
    assert stop.requested and stop.signal_name == "SIGINT"
    assert first == ["x"] and repeats == []
    with pytest.raises(Stopped):
        stop.check()
    os.kill(os.getpid(), signal.SIGTERM)
    assert repeats == ["abandon"] and stop.signal_name == "SIGINT" and stop.signals == 2


def test_waiting_between_steps_ends_on_a_signal(stop: Stop) -> None:
    stop.defer()
    os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(Stopped):
        stop.wait(3600)


def test_restore_puts_the_previous_handlers_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    stop = Stop()
    stop.install()
    assert signal.getsignal(signal.SIGTERM) != before
    stop.restore()
    assert signal.getsignal(signal.SIGTERM) == before


class _StuckQuery:
    """A streaming query whose micro-batch never ends (its transport stopped answering)."""

    def __init__(self) -> None:
        self.stopped = False

    @property
    def isActive(self) -> bool:  # noqa: N802 - PySpark's name
        return not self.stopped

    @property
    def status(self) -> dict[str, bool]:
        return {"isTriggerActive": not self.stopped}

    def stop(self) -> None:
        self.stopped = True


def test_a_stop_does_not_wait_for_a_batch_that_never_ends(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import time

    from icetide.cli import context

    query = _StuckQuery()
    started = time.monotonic()
    context.stop_query(query, grace=0.5)  # type: ignore[arg-type]
    assert query.stopped and time.monotonic() - started < 2
    assert "did not end within" in capsys.readouterr().err


def test_a_run_whose_task_gave_up_exits_non_zero_with_the_reason(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor requests the stop when a task gives up, then raises its GaveUp: a
    failure, not a step abandoned by that stop, so `icetide run` exits 2 with the reason
    (an exit 0 reads as a clean stop to whatever started it)."""
    import argparse

    from icetide.cli import context
    from icetide.cli.main import _run
    from icetide.errors import GaveUp

    stop = Stop()
    monkeypatch.setattr(context.state, "stop", stop)

    def run(args: argparse.Namespace) -> int:
        stop.request("capture shop gave up")
        raise GaveUp("capture of shop: another capture is writing", hint="stop the other one")

    assert _run(argparse.Namespace(func=run)) == 2
    err = capsys.readouterr().err
    assert "icetide: error: capture of shop: another capture is writing" in err, err
    assert "stopped" not in err, err
