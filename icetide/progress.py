"""Progress reporting: every stage reports structured records through one Reporter.

Stages say what they did as a :class:`Progress` record (a line for people, figures for
machines); the CLI renders them on stderr as text or JSON lines, tests and the demo
collect them. It sits at the top of the package (no icetide imports) so capture, which
runs without Spark or the rest, reports the same way.

>>> lines: list[str] = []
>>> reporter = Reporter(Reporter.lines(lines))
>>> reporter.report("merge", "merge t: up to date", table="t", events=0)
>>> lines
['merge t: up to date']
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

ERROR_STAGE = "error"
"""The stage of the record a command writes, with ``--progress json``, when it fails:
``message``, ``hint`` and ``terminal`` (whether running it again without a change can
help), so a supervising process can tell a failure to retry from one to give up on."""


@dataclass(frozen=True)
class Progress:
    """One progress record: which stage, a line for people, and figures for machines."""

    stage: str
    message: str
    table: str | None = None
    figures: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def to_json(self) -> str:
        """One JSON line (``--output json`` progress)."""
        data: dict[str, Any] = {"stage": self.stage, "message": self.message}
        if self.table is not None:
            data["table"] = self.table
        data.update(self.figures)
        return json.dumps(data, default=str, sort_keys=False)


Sink = Callable[[Progress], None]


class Reporter:
    """The one structured progress reporter every stage reports through."""

    def __init__(self, *sinks: Sink) -> None:
        self.sinks: tuple[Sink, ...] = sinks or (Reporter.stderr,)

    def report(self, stage: str, message: str, *, table: str | None = None, **figures: Any) -> None:
        """Hand one record to every sink."""
        record = Progress(stage, message, table, MappingProxyType(figures))
        for sink in self.sinks:
            sink(record)

    @staticmethod
    def stderr(record: Progress) -> None:
        """Text on stderr, so stdout carries only results (``status --output json``)."""
        print(record.message, file=sys.stderr, flush=True)

    @staticmethod
    def json_stderr(record: Progress) -> None:
        """JSON lines on stderr, for a machine following the progress."""
        print(record.to_json(), file=sys.stderr, flush=True)

    @staticmethod
    def lines(into: list[str]) -> Sink:
        """A sink collecting the message lines (tests and the demo's summary)."""
        return lambda record: into.append(record.message)

    @staticmethod
    def text(write: Callable[[str], None]) -> Sink:
        """A sink handing each message line to ``write``."""
        return lambda record: write(record.message)
