"""``icetide capture`` and ``icetide bootstrap``: the commands that read source databases."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from icetide.cli import context
from icetide.cli.bars import progress_bars
from icetide.cli.context import command_parser, log, positive_int, with_config, with_metrics
from icetide.errors import ConfigError
from icetide.stopping import SUPERVISOR_ENV, stop_when_orphaned

if TYPE_CHECKING:
    from icetide.config import Config, SourceConfig


def chosen_sources(config: Config, name: str | None) -> list[SourceConfig]:
    """The source named by ``--source``, or every source when there is no choice to make."""
    if name:
        chosen = [config.source(name)]
    elif not config.sources:
        raise ConfigError(
            f"pipeline {config.pipeline!r} has no sources",
            path="sources",
            hint="add a sources: entry (type mysql or postgres, host, port, user, password)",
        )
    else:
        chosen = [s for s in config.sources if s.captured_by_icetide]
        if not chosen:
            raise ConfigError(
                f"every source of pipeline {config.pipeline!r} is captured by Debezium "
                "(debezium: on each), so icetide has none to capture",
                path="sources",
                hint="run `icetide run` to read what Debezium writes",
            )
    for source in chosen:
        if not source.captured_by_icetide:
            raise ConfigError(
                f"source {source.name!r} is captured by an external Debezium connector "
                "(it has debezium:), not by icetide",
                path="sources",
                hint="remove debezium: from the source to capture it with icetide",
            )
    return chosen


def cmd_capture(args: argparse.Namespace) -> int:
    """Read each source's change log into the transport, from its saved offset."""
    from icetide.capture.runner import run_capture

    pipeline = context.load_pipeline(args)
    config = pipeline.config
    sources = chosen_sources(config, args.source)
    context.serve_metrics(args, pipeline)
    if len(sources) > 1 and not args.once:
        raise ConfigError(
            "several sources: capture follows one per process",
            hint="run `icetide capture --source NAME` once per source "
            f"({', '.join(s.name for s in sources)})",
        )
    supervisor = os.environ.get(SUPERVISOR_ENV)
    if supervisor and supervisor.isdigit():
        stop_when_orphaned(int(supervisor))  # started by `icetide run`: stop with it
    # No Spark here: a signal raises KeyboardInterrupt, and main() reports the stop.
    for source in sources:
        log(f"capture {source.name}: reading the {source.type} log …")
        progress = run_capture(
            config,
            source,
            follow=not args.once,
            from_now=args.from_now,
            reporter=pipeline.reporter,
        )
        offset = progress.offset or "unchanged"
        log(f"capture {source.name}: {progress.records:,} events, offset {offset}")
    return 0


def cmd_bootstrap(args: argparse.Namespace) -> int:
    """Copy the source tables into empty base tables and set capture's start offset."""
    from icetide.bootstrap.run import Bootstrap
    from icetide.spark.errors import jvm_boundary

    pipeline = context.load_pipeline(args)
    sources = chosen_sources(pipeline.config, args.source)
    spark = context.spark_session(pipeline.config)
    with progress_bars(args, pipeline):  # a bar per table, moved by its chunk records
        for source in sources:
            context.state.stop.check()
            with jvm_boundary(f"bootstrap of {source.name}"):
                Bootstrap(
                    spark,
                    pipeline,
                    source,
                    chunk_rows=args.chunk_rows,
                    between_chunks=context.state.stop.check,
                ).run(args.table or None, replace=args.replace)
    log("bootstrap done: start `icetide capture` (it resumes from the recorded position)")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``capture`` and ``bootstrap``."""
    p = with_metrics(
        with_config(
            command_parser(
                sub,
                "capture",
                help="read the source databases' change logs into the transport",
                example=(
                    "icetide capture",
                    "icetide capture --source shop --from-now",
                    "icetide capture --once   # read to the log's end, then stop",
                ),
            )
        )
    )
    p.add_argument("--source", help="the source to capture (default: the only one)")
    p.add_argument("--once", action="store_true", help="read to the end of the log, then stop")
    p.add_argument(
        "--from-now",
        action="store_true",
        help="without a saved offset, start at the log's end (rows already there are skipped)",
    )
    p.set_defaults(func=cmd_capture)

    p = with_config(
        command_parser(
            sub,
            "bootstrap",
            help="copy source tables into empty base tables, then hand off",
            example=(
                "icetide bootstrap",
                "icetide bootstrap --source shop --table orders --chunk-rows 50000",
            ),
        )
    )
    p.add_argument("--source", help="the source to bootstrap (default: every source)")
    p.add_argument("--table", action="append", help="only this table (repeatable)")
    p.add_argument("--replace", action="store_true", help="drop and reload base tables with rows")
    p.add_argument(
        "--chunk-rows",
        type=positive_int,
        default=200_000,
        help="rows per resumable chunk (default 200000)",
    )
    p.set_defaults(func=cmd_bootstrap)
