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
import sys
import traceback
from collections.abc import Sequence

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
        return _run(args)
    finally:
        state.stop.restore()
        sys.stdout, sys.stderr = streams


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
