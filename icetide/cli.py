"""The ``icetide`` command: one entry point, a subcommand per job."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from icetide import __version__
from icetide.errors import ConfigError, IcetideError, StageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.config import Config, SourceConfig
    from icetide.schema.model import TableSchema

DEFAULT_CONFIG = "icetide.yaml"


def _log(message: str) -> None:
    """Progress goes to stderr, so stdout carries only results (``status --output json``)."""
    print(message, file=sys.stderr, flush=True)


def _load(args: argparse.Namespace) -> tuple[Config, dict[str, TableSchema]]:
    from icetide.config import load_config, load_table_schemas

    config = load_config(args.config)
    return config, load_table_schemas(config)


def _session(config: Config) -> SparkSession:
    from icetide.spark.session import build_session

    _log(f"starting Spark ({config.spark.master}) …")
    return build_session(config)


def cmd_init(args: argparse.Namespace) -> int:
    """Write a commented example config and schema file."""
    from icetide.config import write_example

    for path in write_example(Path(args.directory), force=args.force):
        _log(f"wrote {path}")
    _log("next: edit icetide.yaml and schemas/, then `icetide run`")
    return 0


def _await(query: object, action: str) -> None:
    from icetide.spark.errors import jvm_boundary

    with jvm_boundary(action):
        query.awaitTermination()  # type: ignore[attr-defined]


def cmd_stream(args: argparse.Namespace) -> int:
    """Run the ledger stage (events → CDC tables)."""
    from icetide.ledger.stage import LedgerStage
    from icetide.spark.errors import jvm_boundary

    config, schemas = _load(args)
    spark = _session(config)
    with jvm_boundary("ledger stream"):
        query = LedgerStage(spark, config, schemas, _log).start(once=args.once)
    try:
        _await(query, "ledger stream")
    except KeyboardInterrupt:
        query.stop()
        _log("ledger stream stopped")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    """Run the merge stage once, or every ``schedule.merge_interval``."""
    from icetide.merge.stage import MergeStage
    from icetide.spark.errors import jvm_boundary

    config, schemas = _load(args)
    spark = _session(config)
    stage = MergeStage(spark, config, schemas, _log)
    interval = config.schedule.merge_interval.total_seconds()
    try:
        while True:
            with jvm_boundary("merge"):
                stage.run_once()
            if args.once:
                return 0
            time.sleep(interval)
    except KeyboardInterrupt:
        _log("merge stopped")
        return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Stream and merge on one machine until Ctrl-C."""
    from icetide.ledger.stage import LedgerStage
    from icetide.merge.stage import MergeStage
    from icetide.spark.errors import jvm_boundary

    config, schemas = _load(args)
    spark = _session(config)
    with jvm_boundary("ledger stream"):
        query = LedgerStage(spark, config, schemas, _log).start(once=False)
    merge = MergeStage(spark, config, schemas, _log)
    interval = config.schedule.merge_interval.total_seconds()
    _log(
        f"running: ledger every {config.schedule.stream_interval}, merge every "
        f"{config.schedule.merge_interval}; Ctrl-C stops"
    )
    try:
        while True:
            deadline = time.monotonic() + interval
            while time.monotonic() < deadline:
                if not query.isActive:
                    _await(query, "ledger stream")
                    raise StageError("the ledger stream stopped", hint="rerun `icetide run`")
                time.sleep(0.5)
            with jvm_boundary("merge"):
                merge.run_once()
    except KeyboardInterrupt:
        _log("stopping …")
        query.stop()
        _log("stopped cleanly; rerun resumes where it left off")
        return 0


def _sources(config: Config, name: str | None) -> list[SourceConfig]:
    """The source named by ``--source``, or every source when there is no choice to make."""
    if name:
        return [config.source(name)]
    if not config.sources:
        raise ConfigError(
            f"pipeline {config.pipeline!r} has no sources",
            path="sources",
            hint="add a sources: entry (type mysql or postgres, host, port, user, password)",
        )
    return list(config.sources)


def cmd_capture(args: argparse.Namespace) -> int:
    """Read each source's change log into the transport, from its saved offset."""
    from icetide.capture.runner import run_capture

    config, _ = _load(args)
    sources = _sources(config, args.source)
    if len(sources) > 1 and not args.once:
        raise ConfigError(
            "several sources: capture follows one per process",
            hint="run `icetide capture --source NAME` once per source "
            f"({', '.join(s.name for s in sources)})",
        )
    try:
        for source in sources:
            _log(f"capture {source.name}: reading the {source.type} log …")
            progress = run_capture(
                config, source, follow=not args.once, from_now=args.from_now, log=_log
            )
            offset = progress.offset or "unchanged"
            _log(f"capture {source.name}: {progress.records:,} events, offset {offset}")
    except KeyboardInterrupt:
        _log("capture stopped; rerun resumes from the last saved offset")
    return 0


def cmd_bootstrap(args: argparse.Namespace) -> int:
    """Copy the source tables into empty base tables and set capture's start offset."""
    from icetide.capture.bootstrap import Bootstrap
    from icetide.spark.errors import jvm_boundary

    config, schemas = _load(args)
    sources = _sources(config, args.source)
    spark = _session(config)
    for source in sources:
        with jvm_boundary(f"bootstrap of {source.name}"):
            Bootstrap(spark, config, schemas, source, chunk_rows=args.chunk_rows, log=_log).run(
                args.table or None, replace=args.replace
            )
    _log("bootstrap done: start `icetide capture` (it resumes from the recorded position)")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Compare every base table with its source table: count, checksum, differing keys."""
    from icetide.observe.verify import exit_code, render_verdicts, run_verify, verdict_dicts
    from icetide.spark.errors import jvm_boundary

    config, _ = _load(args)
    spark = _session(config)
    with jvm_boundary("verify"):
        verdicts = run_verify(config, spark, args.table or None, log=_log)
    if args.output == "json":
        print(json.dumps(verdict_dicts(verdicts), indent=2))
    else:
        print(render_verdicts(verdicts))
    return exit_code(verdicts)


def cmd_status(args: argparse.Namespace) -> int:
    """Print per-table ledger, base, lag and dead-letter figures."""
    from icetide.observe.status import pipeline_status, render_status, status_dicts
    from icetide.spark.errors import jvm_boundary

    config, _ = _load(args)
    spark = _session(config)
    with jvm_boundary("status"):
        rows = pipeline_status(spark, config)
    if args.output == "json":
        print(json.dumps(status_dicts(rows), indent=2))
    else:
        print(render_status(rows))
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    """Print the effective config (defaults filled in, secrets as ***)."""
    import yaml

    config, _ = _load(args)
    print(yaml.safe_dump(config.redacted(), sort_keys=False), end="")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the whole pipeline on a private MariaDB (or generated events) and verify it."""
    if args.synthetic:
        from icetide.demo.run import run_demo

        ok = run_demo(Path(args.workdir), events=args.events, seed=args.seed, log=_log)
    else:
        from icetide.demo.live import run_live_demo

        ok = run_live_demo(Path(args.workdir), seconds=args.seconds, seed=args.seed, log=_log)
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (kept separate so tests and docs can read it)."""
    parser = argparse.ArgumentParser(
        prog="icetide",
        description="Change data capture from databases into Apache Iceberg tables on Spark.",
    )
    parser.add_argument("--version", action="version", version=f"icetide {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_config(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "-c",
            "--config",
            default=os.environ.get("ICETIDE_CONFIG", DEFAULT_CONFIG),
            help="pipeline YAML (default: $ICETIDE_CONFIG or ./icetide.yaml)",
        )
        return p

    p = sub.add_parser("init", help="write a commented example icetide.yaml and schema file")
    p.add_argument("directory", nargs="?", default=".", help="where to write (default: .)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.set_defaults(func=cmd_init)

    p = with_config(sub.add_parser("stream", help="ledger stage: change events → CDC tables"))
    p.add_argument("--once", action="store_true", help="process what has arrived, then stop")
    p.set_defaults(func=cmd_stream)

    p = with_config(sub.add_parser("merge", help="merge stage: CDC tables → base tables"))
    p.add_argument("--once", action="store_true", help="merge once, then stop")
    p.set_defaults(func=cmd_merge)

    p = with_config(sub.add_parser("run", help="stream and merge on this machine until Ctrl-C"))
    p.set_defaults(func=cmd_run)

    p = with_config(
        sub.add_parser("capture", help="read the source databases' change logs into the transport")
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
        sub.add_parser("bootstrap", help="copy source tables into empty base tables, then hand off")
    )
    p.add_argument("--source", help="the source to bootstrap (default: every source)")
    p.add_argument("--table", action="append", help="only this table (repeatable)")
    p.add_argument("--replace", action="store_true", help="drop and reload base tables with rows")
    p.add_argument(
        "--chunk-rows", type=int, default=200_000, help="rows per resumable chunk (default 200000)"
    )
    p.set_defaults(func=cmd_bootstrap)

    p = with_config(
        sub.add_parser(
            "verify",
            help="compare base tables with their source tables (exit 0 only when all match)",
            description="Per table: row count and an order-independent checksum of every "
            "column, on the source (SQL) and on the base table (Spark); on a mismatch, the "
            "first differing keys. Stop writes and let capture and merge catch up first.",
        )
    )
    p.add_argument("--table", action="append", help="only this table (repeatable)")
    p.add_argument("--output", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_verify)

    p = with_config(sub.add_parser("status", help="per-table events, watermark, lag, dead letters"))
    p.add_argument("--output", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("config", help="inspect the pipeline config")
    config_sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = with_config(
        config_sub.add_parser("show", help="print the effective config, secrets hidden")
    )
    p.set_defaults(func=cmd_config_show)

    p = sub.add_parser(
        "demo",
        help="capture a live private MariaDB into Iceberg and verify the mirror",
        description="Start a private MariaDB, write to it while icetide bootstraps, captures, "
        "streams and merges, then verify every base table against the source. "
        "--synthetic runs the generated-event demo instead (no database).",
    )
    p.add_argument("--workdir", default="icetide-demo", help="folder for the demo's files")
    p.add_argument(
        "--seconds", type=float, default=45, help="how long the live workload writes (default 45)"
    )
    p.add_argument("--seed", type=int, default=7, help="random seed of the workload")
    p.add_argument(
        "--synthetic", action="store_true", help="generated Debezium events, no database"
    )
    p.add_argument("--events", type=int, default=3000, help="--synthetic: events to generate")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: render icetide errors for people and exit non-zero."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except IcetideError as exc:
        print(f"icetide: error: {exc.render()}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
