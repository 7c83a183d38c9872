"""What every command shares: the process's stop request, secret scrubber and Spark.

One command runs per process. ``state`` holds its stop request, the secrets to keep out
of its output and the SparkSessions it started (to stop, with their JVMs, before
exiting). Command modules reach it as ``context.state`` (never ``from … import``), since
``main()`` replaces its parts for each run.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from icetide.stopping import Stop

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from icetide.config import Config
    from icetide.config.secrets import Scrubber
    from icetide.observe.metrics import MetricsServer
    from icetide.pipeline import Pipeline

DEFAULT_CONFIG = "icetide.yaml"


@dataclass
class CommandState:
    """The running command: its name, stop request, scrubber and started sessions."""

    command: str | None = None
    stop: Stop = field(default_factory=Stop)
    scrub: Scrubber | None = None
    started: list[SparkSession] = field(default_factory=list)


state = CommandState()


def log(message: str) -> None:
    """Progress goes to stderr, so stdout carries only results (``status --output json``)."""
    print(message, file=sys.stderr, flush=True)


def load_pipeline(args: argparse.Namespace) -> Pipeline:
    """The command's pipeline: config, schema files, and progress on stderr."""
    from icetide.config import load_config
    from icetide.config.secrets import secret_values
    from icetide.pipeline import Pipeline
    from icetide.progress import Reporter

    config = load_config(args.config)
    if state.scrub is not None:
        state.scrub.add(secret_values(config))
    json_lines = getattr(args, "progress", "text") == "json"
    # The pipeline reads the schema history on an s3:// state location: a store that
    # does not answer is the preflight's one clear error naming `state`, said first.
    from icetide.lake.preflight import check_state_location
    from icetide.state.s3 import split_s3_uri

    if config.state is not None and split_s3_uri(config.state) is not None:
        check_state_location(config.state, config.catalog.properties_plain())
    return Pipeline(
        config, reporter=Reporter(Reporter.json_stderr if json_lines else Reporter.stderr)
    )


def spark_session(
    config: Config, *, abandon_at_once: bool = False, writes_class_archive: bool = False
) -> SparkSession:
    """Start Spark; from here on a signal asks the command to stop between steps.

    A second signal during start-up exits at once (the JVM dies with us); after it, it
    cancels the running Spark jobs, abandoning the current step. ``abandon_at_once`` does
    that on the first signal, for commands that write nothing (verify).
    """
    from pyspark import SparkContext

    from icetide.lake.preflight import check_lake
    from icetide.spark.session import build_session

    # An unreachable catalog or store is one clear error now, not a JVM trace later.
    check_lake(config)
    log(f"starting Spark ({config.spark.master}) …")
    state.stop.defer(on_repeat=_abandon_start_up)
    # In-process callers (tests) may own a running session: never stop theirs.
    reused = SparkContext._active_spark_context is not None
    spark = build_session(config, writes_class_archive=writes_class_archive)
    if not reused:
        state.started.append(spark)
    cancel = lambda: _cancel_jobs(spark)  # noqa: E731
    state.stop.defer(on_repeat=cancel, on_first=cancel if abandon_at_once else None)
    state.stop.check()
    return spark


def _abandon_start_up() -> None:
    """Second signal while Spark starts: leave now; the JVM gets SIGTERM when we exit."""
    log(stopped_line(abandoned=True))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _cancel_jobs(spark: SparkSession) -> None:
    """Cancel every running Spark job from another thread: the main thread is inside a
    py4j call, and a second call on its connection would corrupt both."""
    import threading

    threading.Thread(target=spark.sparkContext.cancelAllJobs, daemon=True).start()


def stopped_line(*, abandoned: bool = False) -> str:
    """The one line a stopped command prints."""
    command = state.command or "icetide"
    how = f" by {state.stop.signal_name}" if state.stop.signal_name else ""
    step = "; the step in progress was abandoned" if abandoned else ""
    return f"{command} stopped{how}{step}: nothing lost, a rerun resumes where it left off"


def await_query(query: StreamingQuery, action: str) -> None:
    """Wait for the query to end; on a stop request stop it between micro-batches."""
    from icetide.spark.errors import jvm_boundary

    with jvm_boundary(action):
        while not query.awaitTermination(1):
            if state.stop.requested:
                stop_query(query)
                state.stop.check()


STOP_GRACE = 10.0
"""How long a stop waits for the micro-batch in flight before it stops that one too."""


def stop_query(query: StreamingQuery, grace: float = STOP_GRACE) -> None:
    """Stop the stream between micro-batches: let the one in flight commit first, since
    interrupting it makes Spark log errors (a second signal stops it at once).

    A batch still running after ``grace`` seconds is stopped as well: one waiting on a
    transport that stopped answering (a Kafka broker gone) would otherwise hold the stop
    for as long as its client retries. That batch committed nothing, so the next start
    replays it from the checkpoint; nothing is lost or doubled."""
    deadline = time.monotonic() + grace
    while query.isActive and query.status["isTriggerActive"] and state.stop.signals < 2:
        if time.monotonic() >= deadline:
            log(
                f"icetide: the micro-batch under way did not end within {grace:.0f}s (is the "
                "transport reachable?): stopping it; the next start replays it"
            )
            break
        time.sleep(0.2)
    try:
        query.stop()  # bounded by spark.sql.streaming.stopTimeout
    except Exception as exc:  # noqa: BLE001 - stopping anyway: the JVM ends with us
        log(f"icetide: the stream did not stop in time ({type(exc).__name__}); leaving it")


def stop_sessions() -> None:
    """Stop the SparkSessions this command started and wait for their JVMs to exit."""
    from icetide.spark.session import stop_session

    while state.started:
        session = state.started.pop()
        try:
            saved = stop_session(session)
        except Exception as exc:  # noqa: BLE001 - exiting anyway; say why the JVM may linger
            log(f"icetide: warning: could not stop Spark cleanly: {exc}")
            continue
        if saved is not None:
            log(f"icetide: saved the JVM's classes to {saved}: the next start is faster")


# Argument helpers shared by the command modules.


def with_config(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``-c/--config`` and ``--progress`` to a command that reads the pipeline."""
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


def with_output(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--output text|json`` to a command that reports."""
    p.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="text for people (default) or JSON on stdout for machines",
    )
    return p


def with_metrics(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--metrics-port`` to a long-running command."""
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics on http://127.0.0.1:PORT/metrics (default: off; "
        "0 picks a free port and logs it)",
    )
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address the metrics server binds (default 127.0.0.1; 0.0.0.0 for all)",
    )
    return p


def serve_metrics(args: argparse.Namespace, pipeline: Pipeline) -> MetricsServer | None:
    """Start the metrics server when ``--metrics-port`` was given, fed by the pipeline's
    reporter; it stops with the process (a daemon thread)."""
    from icetide.observe.metrics import Metrics, MetricsServer

    if getattr(args, "metrics_port", None) is None:
        return None
    metrics = Metrics()
    pipeline.reporter.sinks = (*pipeline.reporter.sinks, metrics.sink)
    server = MetricsServer(metrics, args.metrics_port, args.metrics_host).start()
    log(f"metrics: http://{args.metrics_host}:{server.port}/metrics")
    return server


def examples(*lines: str) -> str:
    """An epilog listing example invocations (shown by ``--help``)."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def command_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    *,
    help: str,
    description: str | None = None,
    example: tuple[str, ...] = (),
) -> argparse.ArgumentParser:
    """A subcommand whose ``--help`` keeps the examples' line breaks."""
    return sub.add_parser(
        name,
        help=help,
        description=description or help[:1].upper() + help[1:] + ".",
        epilog=examples(*example) if example else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


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
