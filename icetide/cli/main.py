"""The ``icetide`` entry point: build the parser from the command modules, run one command.

Each command group lives in its own module with a ``register(sub)`` function; to add a
group, write the module and name it in ``GROUPS`` (the order is the order in ``--help``).
Errors are rendered here, once: an ``IcetideError`` prints what happened and what to do
and exits 2, a signal stops the command cleanly (exit 0), a bug prints its traceback and
exits 1.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import icetide.cli.context as context
from icetide import __version__
from icetide.cli.context import log, stopped_line
from icetide.errors import GaveUp, IcetideError, Terminal
from icetide.progress import ERROR_STAGE
from icetide.stopping import Stop, Stopped

GROUPS = (
    "icetide.cli.setup",
    "icetide.cli.onboard",
    "icetide.cli.capture",
    "icetide.cli.stages",
    "icetide.cli.run",
    "icetide.cli.observe",
    "icetide.cli.maintain",
    "icetide.cli.dlt",
    "icetide.cli.asof",
    "icetide.cli.schema_plan",
    "icetide.cli.schema_show",
    "icetide.cli.jars",
    "icetide.cli.artifacts",
    "icetide.cli.views",
    "icetide.cli.demo",
)
"""The command modules, in the order ``icetide --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (kept separate so tests and docs can read it)."""
    parser = argparse.ArgumentParser(
        prog="icetide",
        description="Change data capture from databases into Apache Iceberg tables on Spark.",
        epilog=context.examples(
            "icetide init                # an example icetide.yaml and schema file",
            "icetide capture             # one terminal: source log → transport",
            "icetide run                 # another: ledger and merge stages",
            "icetide status --output json",
            "icetide COMMAND --help   # each command's options and examples",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"icetide {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in GROUPS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run one command; render icetide errors for people and exit non-zero.

    Everything printed meanwhile passes through the scrubber, so no secret of the config
    reaches the terminal; SIGINT and SIGTERM stop the command cleanly (exit 0).
    """
    args = build_parser().parse_args(argv)
    from icetide.config.secrets import ScrubbedStream, Scrubber

    state = context.state
    state.command, state.stop, state.scrub = f"icetide {args.command}", Stop(), Scrubber()
    streams = sys.stdout, sys.stderr
    sys.stdout = ScrubbedStream(sys.stdout, state.scrub)
    sys.stderr = ScrubbedStream(sys.stderr, state.scrub)
    state.stop.install()
    try:
        with console_logging():
            return _run(args)
    finally:
        state.stop.restore()
        sys.stdout, sys.stderr = streams


class ConsoleWarnings(logging.Handler):
    """The command's handler on the root logger: a warning or error logged by icetide or
    a library prints as its bare message (and traceback, if any) on the command's
    stderr, as Python prints it with no logging set up; py4j's records never do.

    Why a handler: py4j logs a failed call into the JVM with ``logging.exception`` on
    the root logger, which sets logging up (``basicConfig``) when the root has none;
    from then on every record printed as ``ERROR:root:…`` with its traceback, and a
    JVM killed under ``icetide run`` printed one per stage in flight. Each such call
    also fails to its caller, which says what the failure means once, so py4j's own
    records are left out.
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter())

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("py4j") or _from_py4j(record):
            return
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging's own rule: never raise from a handler
            self.handleError(record)


def _from_py4j(record: logging.LogRecord) -> bool:
    """True for a record py4j logged on the root logger (its name is then ``root``)."""
    return "py4j" in record.pathname.replace("\\", "/").split("/")


@contextmanager
def console_logging() -> Iterator[ConsoleWarnings]:
    """:class:`ConsoleWarnings` on the root logger while a command runs."""
    root = logging.getLogger()
    handler = ConsoleWarnings()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args))
    except (KeyboardInterrupt, Stopped):
        log(stopped_line())
        return 0
    except IcetideError as exc:
        # A task that gave up requested the stop itself: its failure is the outcome.
        if context.state.stop.requested and not isinstance(exc, GaveUp):
            # The step failed because we abandoned it (cancelled jobs, stopped query).
            log(stopped_line(abandoned=True))
            return 0
        print(f"icetide: error: {exc.render()}", file=sys.stderr)
        if getattr(args, "progress", None) == "json":
            # For a supervisor reading this process (icetide run's capture children):
            # whether running it again can help.
            record = {
                "stage": ERROR_STAGE,
                "message": exc.message,
                "hint": exc.hint,
                "terminal": isinstance(exc, Terminal),
            }
            print(json.dumps(record), file=sys.stderr)
        return 2
    except Exception:
        # A bug: show it (scrubbed) like Python would, exit 1.
        traceback.print_exc()
        return 1
    finally:
        context.stop_sessions()
