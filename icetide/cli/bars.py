"""Rich progress bars for long work (bootstrap, verify, maintain, dead-letter replay), on a
terminal only.

The stages already report what they do as progress records; a record that carries the
figures ``done`` and ``total`` (and optionally ``bar``, the bar's name, by default its
stage) also moves a bar. :func:`progress_bars` adds that sink for the length of a
command when stderr is a terminal and neither ``--output json`` nor ``--progress json``
was asked for; elsewhere (a pipe, a log file, a machine reading JSON) nothing changes and
the plain lines are all there is. On a terminal the plain lines still print, above the
bars (Rich redirects stderr while the bars are live), and the bars vanish at the end.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from icetide.progress import Progress as Record

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from icetide.pipeline import Pipeline


def wanted(args: argparse.Namespace, stream: Any = None) -> bool:
    """Bars only on a terminal, and not when the output or the progress is JSON."""
    if getattr(args, "output", "text") == "json" or getattr(args, "progress", "text") == "json":
        return False
    stream = sys.stderr if stream is None else stream
    return bool(getattr(stream, "isatty", lambda: False)())


class Bars:
    """One Rich bar per name, moved by :meth:`update` or by progress records (:meth:`sink`)."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.tasks: dict[str, TaskID] = {}

    def update(self, name: str, done: int, total: int, detail: str = "") -> None:
        """Show ``done`` of ``total`` on the bar called ``name`` (made on first use)."""
        if self.progress is None:
            return
        description = f"{name}: {detail}" if detail and detail not in name else name
        task = self.tasks.get(name)
        if task is None:
            self.tasks[name] = self.progress.add_task(description, total=total, completed=done)
        else:
            self.progress.update(task, completed=done, total=total, description=description)

    def sink(self, record: Record) -> None:
        """A Reporter sink: records with ``done`` and ``total`` figures move their bar."""
        done, total = record.figures.get("done"), record.figures.get("total")
        if isinstance(done, int) and isinstance(total, int) and total > 0:
            name = str(record.figures.get("bar") or record.stage)
            self.update(name, done, total, record.table or "")


@contextmanager
def progress_bars(
    args: argparse.Namespace, pipeline: Pipeline | None = None, console: Console | None = None
) -> Iterator[Bars]:
    """Bars for the length of a command (see module doc); with ``pipeline``, its progress
    records move them. Off a terminal the :class:`Bars` do nothing."""
    if console is None and not wanted(args):
        yield Bars(None)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console or Console(stderr=True), transient=True) as live:
        bars = Bars(live)
        if pipeline is None:
            yield bars
            return
        before = pipeline.reporter.sinks
        pipeline.reporter.sinks = (*before, bars.sink)
        try:
            yield bars
        finally:
            pipeline.reporter.sinks = before
