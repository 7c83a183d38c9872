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
from icetide.errors import IcetideError, StageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.config import Config
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
    """Run the whole spine on embedded defaults and check the result."""
    from icetide.demo.run import run_demo

    ok = run_demo(Path(args.workdir), events=args.events, seed=args.seed, log=_log)
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

    p = with_config(sub.add_parser("status", help="per-table events, watermark, lag, dead letters"))
    p.add_argument("--output", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("config", help="inspect the pipeline config")
    config_sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = with_config(
        config_sub.add_parser("show", help="print the effective config, secrets hidden")
    )
    p.set_defaults(func=cmd_config_show)

    p = sub.add_parser("demo", help="run the whole pipeline on generated data and verify it")
    p.add_argument("--workdir", default="icetide-demo", help="folder for the demo's files")
    p.add_argument("--events", type=int, default=3000, help="change events to generate")
    p.add_argument("--seed", type=int, default=7, help="random seed of the workload")
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
