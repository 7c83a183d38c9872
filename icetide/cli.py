"""The ``icetide`` command: one entry point, a subcommand per job."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from icetide import __version__
from icetide.errors import ConfigError, IcetideError, StageError
from icetide.stopping import Stop, Stopped

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from icetide.config import Config, SourceConfig
    from icetide.config.secrets import Scrubber
    from icetide.merge.stage import MergeResult, MergeStage
    from icetide.pipeline import Pipeline

DEFAULT_CONFIG = "icetide.yaml"

# One command runs per process; these hold its stop request, the secrets to keep out of
# its output, and the SparkSession it started (to stop, with its JVM, before exiting).
_stop = Stop()
_scrub: Scrubber | None = None
_started: list[SparkSession] = []
_command: str | None = None


def _log(message: str) -> None:
    """Progress goes to stderr, so stdout carries only results (``status --output json``)."""
    print(message, file=sys.stderr, flush=True)


def _load(args: argparse.Namespace) -> Pipeline:
    """The command's pipeline: config, schema files, and progress on stderr."""
    from icetide.config import load_config
    from icetide.config.secrets import secret_values
    from icetide.pipeline import Pipeline
    from icetide.progress import Reporter

    config = load_config(args.config)
    if _scrub is not None:
        _scrub.add(secret_values(config))
    json_lines = getattr(args, "progress", "text") == "json"
    return Pipeline(
        config, reporter=Reporter(Reporter.json_stderr if json_lines else Reporter.stderr)
    )


def _session(config: Config, *, abandon_at_once: bool = False) -> SparkSession:
    """Start Spark; from here on a signal asks the command to stop between steps.

    A second signal during start-up exits at once (the JVM dies with us); after it, it
    cancels the running Spark jobs, abandoning the current step. ``abandon_at_once`` does
    that on the first signal, for commands that write nothing (verify).
    """
    from pyspark import SparkContext

    from icetide.spark.session import build_session

    _log(f"starting Spark ({config.spark.master}) …")
    _stop.defer(on_repeat=_abandon_start_up)
    # In-process callers (tests) may own a running session: never stop theirs.
    reused = SparkContext._active_spark_context is not None
    spark = build_session(config)
    if not reused:
        _started.append(spark)
    cancel = lambda: _cancel_jobs(spark)  # noqa: E731
    _stop.defer(on_repeat=cancel, on_first=cancel if abandon_at_once else None)
    _stop.check()
    return spark


def _abandon_start_up() -> None:
    """Second signal while Spark starts: leave now; the JVM gets SIGTERM when we exit."""
    _log(_stopped_line(abandoned=True))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _cancel_jobs(spark: SparkSession) -> None:
    """Cancel every running Spark job from another thread: the main thread is inside a
    py4j call, and a second call on its connection would corrupt both."""
    import threading

    threading.Thread(target=spark.sparkContext.cancelAllJobs, daemon=True).start()


def _stopped_line(*, abandoned: bool = False) -> str:
    command = _command or "icetide"
    how = f" by {_stop.signal_name}" if _stop.signal_name else ""
    step = "; the step in progress was abandoned" if abandoned else ""
    return f"{command} stopped{how}{step}: nothing lost, a rerun resumes where it left off"


def cmd_init(args: argparse.Namespace) -> int:
    """Write a commented example config and schema file."""
    from icetide.config import write_example

    for path in write_example(Path(args.directory), force=args.force):
        _log(f"wrote {path}")
    _log("next: edit icetide.yaml and schemas/, then `icetide run`")
    return 0


def _await(query: StreamingQuery, action: str) -> None:
    """Wait for the query to end; on a stop request stop it between micro-batches."""
    from icetide.spark.errors import jvm_boundary

    with jvm_boundary(action):
        while not query.awaitTermination(1):
            if _stop.requested:
                _stop_query(query)
                _stop.check()


def _stop_query(query: StreamingQuery) -> None:
    """Stop the stream between micro-batches: let the one in flight commit first, since
    interrupting it makes Spark log errors (a second signal stops it at once)."""
    while query.isActive and query.status["isTriggerActive"] and _stop.signals < 2:
        time.sleep(0.2)
    query.stop()


def cmd_stream(args: argparse.Namespace) -> int:
    """Run the ledger stage (events → CDC tables)."""
    from icetide.ledger.stage import LedgerStage
    from icetide.spark.errors import jvm_boundary

    pipeline = _load(args)
    spark = _session(pipeline.config)
    with jvm_boundary("ledger stream"):
        query = LedgerStage(spark, pipeline).start(once=args.once)
    _await(query, "ledger stream")
    return 0


def _merge_all(stage: MergeStage, config: Config) -> list[MergeResult]:
    """Merge each table in turn, stopping between tables when asked to."""
    from icetide.spark.errors import jvm_boundary

    results = []
    for table in config.tables:
        _stop.check()
        with jvm_boundary(f"merge of {table.name}"):
            results.append(stage.merge_table(table.name))
    return results


def cmd_merge(args: argparse.Namespace) -> int:
    """Run the merge stage once, or every ``schedule.merge_interval``."""
    from icetide.merge.stage import MergeStage

    pipeline = _load(args)
    config = pipeline.config
    spark = _session(config)
    stage = MergeStage(spark, pipeline)
    interval = config.schedule.merge_interval.total_seconds()
    while True:
        results = _merge_all(stage, config)
        if args.once:
            if not any(r.events for r in results):
                _log(f"merge: nothing new to merge in {len(results)} table(s)")
            return 0
        _stop.wait(interval)


def cmd_run(args: argparse.Namespace) -> int:
    """Stream and merge on one machine until Ctrl-C."""
    from icetide.config.model import format_duration
    from icetide.ledger.stage import LedgerStage
    from icetide.merge.stage import MergeStage
    from icetide.spark.errors import jvm_boundary

    pipeline = _load(args)
    config = pipeline.config
    spark = _session(config)
    with jvm_boundary("ledger stream"):
        query = LedgerStage(spark, pipeline).start(once=False)
    merge = MergeStage(spark, pipeline)
    interval = config.schedule.merge_interval.total_seconds()
    _log(
        f"running: ledger every {format_duration(config.schedule.stream_interval)}, merge "
        f"every {format_duration(config.schedule.merge_interval)}; Ctrl-C stops"
    )
    try:
        while True:
            # Merge first: what the ledger holds already need not wait for the interval.
            _merge_all(merge, config)
            deadline = time.monotonic() + interval
            while (left := deadline - time.monotonic()) > 0:
                with jvm_boundary("ledger stream"):
                    active = query.isActive
                if not active:
                    _await(query, "ledger stream")
                    raise StageError("the ledger stream stopped", hint="rerun `icetide run`")
                _stop.wait(min(left, 0.5))
    except Stopped:
        with jvm_boundary("ledger stream"):
            _stop_query(query)
        raise


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

    pipeline = _load(args)
    config = pipeline.config
    sources = _sources(config, args.source)
    if len(sources) > 1 and not args.once:
        raise ConfigError(
            "several sources: capture follows one per process",
            hint="run `icetide capture --source NAME` once per source "
            f"({', '.join(s.name for s in sources)})",
        )
    # No Spark here: a signal raises KeyboardInterrupt, and main() reports the stop.
    for source in sources:
        _log(f"capture {source.name}: reading the {source.type} log …")
        progress = run_capture(
            config,
            source,
            follow=not args.once,
            from_now=args.from_now,
            reporter=pipeline.reporter,
        )
        offset = progress.offset or "unchanged"
        _log(f"capture {source.name}: {progress.records:,} events, offset {offset}")
    return 0


def cmd_bootstrap(args: argparse.Namespace) -> int:
    """Copy the source tables into empty base tables and set capture's start offset."""
    from icetide.bootstrap.run import Bootstrap
    from icetide.spark.errors import jvm_boundary

    pipeline = _load(args)
    sources = _sources(pipeline.config, args.source)
    spark = _session(pipeline.config)
    for source in sources:
        _stop.check()
        with jvm_boundary(f"bootstrap of {source.name}"):
            Bootstrap(
                spark,
                pipeline,
                source,
                chunk_rows=args.chunk_rows,
                between_chunks=_stop.check,
            ).run(args.table or None, replace=args.replace)
    _log("bootstrap done: start `icetide capture` (it resumes from the recorded position)")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Compare every base table with its source table: count, checksum, differing keys."""
    from icetide.observe.verify import exit_code, render_verdicts, run_verify, verdict_dicts
    from icetide.spark.errors import jvm_boundary

    pipeline = _load(args)
    config = pipeline.config
    if not config.sources:
        raise ConfigError(
            f"pipeline {config.pipeline!r} has no sources to verify against",
            hint="add a sources: section with the source database's connection",
        )
    spark = _session(config, abandon_at_once=True)
    with jvm_boundary("verify"):
        verdicts = run_verify(pipeline, spark, args.table or None)
    _stop.check()
    if args.output == "json":
        print(json.dumps(verdict_dicts(verdicts), indent=2))
    else:
        print(render_verdicts(verdicts))
    return exit_code(verdicts)


def cmd_status(args: argparse.Namespace) -> int:
    """Print per-table ledger, base, lag and dead-letter figures."""
    from icetide.observe.status import pipeline_status, render_status, status_dicts
    from icetide.spark.errors import jvm_boundary

    config = _load(args).config
    spark = _session(config)
    with jvm_boundary("status"):
        status = pipeline_status(spark, config)
    if args.output == "json":
        print(json.dumps(status_dicts(status), indent=2))
    else:
        print(render_status(status))
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    """Print the effective config (defaults filled in, secrets as ***)."""
    import yaml

    config = _load(args).config
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


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1.

    >>> positive_int("200")
    200
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0.

    >>> positive_seconds("2.5")
    2.5
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text}")
    return value


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
        p.add_argument(
            "--progress",
            choices=("text", "json"),
            default="text",
            help="progress on stderr as text lines (default) or JSON lines, one per "
            'record: {"stage": "merge", "message": ..., "table": ..., figures}',
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
        "--chunk-rows",
        type=positive_int,
        default=200_000,
        help="rows per resumable chunk (default 200000)",
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
        "--seconds",
        type=positive_seconds,
        default=45,
        help="how long the live workload writes (default 45)",
    )
    p.add_argument("--seed", type=int, default=7, help="random seed of the workload")
    p.add_argument(
        "--synthetic", action="store_true", help="generated Debezium events, no database"
    )
    p.add_argument(
        "--events", type=positive_int, default=3000, help="--synthetic: events to generate"
    )
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run one command; render icetide errors for people and exit non-zero.

    Everything printed meanwhile passes through the scrubber, so no secret of the config
    reaches the terminal; SIGINT and SIGTERM stop the command cleanly (exit 0).
    """
    global _command, _stop, _scrub
    args = build_parser().parse_args(argv)
    from icetide.config.secrets import ScrubbedStream, Scrubber

    _command, _stop, _scrub = f"icetide {args.command}", Stop(), Scrubber()
    streams = sys.stdout, sys.stderr
    sys.stdout = ScrubbedStream(sys.stdout, _scrub)
    sys.stderr = ScrubbedStream(sys.stderr, _scrub)
    _stop.install()
    try:
        return _run(args)
    finally:
        _stop.restore()
        sys.stdout, sys.stderr = streams


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args))
    except (KeyboardInterrupt, Stopped):
        _log(_stopped_line())
        return 0
    except IcetideError as exc:
        if _stop.requested:
            # The step failed because we abandoned it (cancelled jobs, stopped query).
            _log(_stopped_line(abandoned=True))
            return 0
        print(f"icetide: error: {exc.render()}", file=sys.stderr)
        return 2
    except Exception:
        # A bug: show it (scrubbed) like Python would, exit 1.
        traceback.print_exc()
        return 1
    finally:
        _stop_sessions()


def _stop_sessions() -> None:
    """Stop the SparkSession this command started and wait for its JVM to exit."""
    from icetide.spark.session import stop_session

    while _started:
        session = _started.pop()
        try:
            stop_session(session)
        except Exception as exc:  # noqa: BLE001 - exiting anyway; say why the JVM may linger
            _log(f"icetide: warning: could not stop Spark cleanly: {exc}")


if __name__ == "__main__":
    sys.exit(main())
