"""Progress bars: on a terminal only (not in a pipe, not with JSON output), moved by the
progress records that carry ``done`` and ``total``."""

from __future__ import annotations

import argparse
import io
from types import SimpleNamespace

from rich.console import Console

from icetide.cli.bars import progress_bars, wanted
from icetide.progress import Reporter


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bars_only_on_a_terminal_and_never_with_json() -> None:
    text = argparse.Namespace(output="text", progress="text")
    assert wanted(text, Terminal())
    assert not wanted(text, io.StringIO())  # a pipe or a file: plain lines only
    assert not wanted(argparse.Namespace(output="json", progress="text"), Terminal())
    assert not wanted(argparse.Namespace(progress="json"), Terminal())
    with progress_bars(argparse.Namespace(output="json")) as bars:  # nothing drawn
        bars.update("verify", 1, 2)
        assert bars.progress is None and bars.tasks == {}


def test_records_with_done_and_total_move_their_bar() -> None:
    lines: list[str] = []
    pipeline = SimpleNamespace(reporter=Reporter(Reporter.lines(lines)))
    console = Console(file=Terminal(), force_terminal=True, width=100)
    with progress_bars(argparse.Namespace(), pipeline, console) as bars:  # type: ignore[arg-type]
        report = pipeline.reporter.report
        report("bootstrap", "bootstrap t: chunk 1/4", table="t", done=1, total=4, bar="bootstrap t")
        report("bootstrap", "bootstrap u: chunk 1/2", table="u", done=1, total=2, bar="bootstrap u")
        report("bootstrap", "bootstrap t: chunk 3/4", table="t", done=3, total=4, bar="bootstrap t")
        report("merge", "merge t: 5 events", table="t", events=5)  # no bar
        report("verify", "verify t", table="t", done=0, total=2)  # the stage names the bar
        assert bars.progress is not None
        shown = {name: bars.progress.tasks[task] for name, task in bars.tasks.items()}
        assert {n: (t.completed, t.total) for n, t in shown.items()} == {
            "bootstrap t": (3, 4),
            "bootstrap u": (1, 2),
            "verify": (0, 2),
        }
        assert shown["bootstrap t"].description == "bootstrap t"
        assert shown["verify"].description == "verify: t"
    assert len(lines) == 5  # the plain lines go on as before
    assert len(pipeline.reporter.sinks) == 1  # the bar sink is gone with the command
