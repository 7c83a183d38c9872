"""``icetide run``: capture, stream, merge, maintenance and the observer, supervised.

Capture needs no Spark, and follows one source per process: each configured source is
captured by a child ``icetide capture`` whose JSON progress lines are read back into
this process's reporter (so its figures reach the metrics and the page). The stream,
merge, maintenance and observer run as threads sharing one SparkSession. Each is a
:class:`~icetide.supervisor.Task`: restarted with backoff when it fails, stopped cleanly
on Ctrl-C or SIGTERM (the child capture gets SIGTERM in turn).

With ``--metrics-port`` the same server serves ``/metrics``, the status page at ``/``
and its data at ``/status.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

from icetide.cli import context
from icetide.cli.context import command_parser, log, positive_seconds, with_config, with_metrics
from icetide.errors import GaveUp, StageError, failure_line
from icetide.ledger.summary import STORED_ROWS
from icetide.progress import ERROR_STAGE
from icetide.stopping import SUPERVISOR_ENV
from icetide.supervisor import BEHIND, Supervisor, Task

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from icetide.config import SourceConfig
    from icetide.ledger.stage import LedgerStage
    from icetide.merge.round import TablesDue
    from icetide.observe.board import StatusBoard
    from icetide.pipeline import Pipeline
    from icetide.progress import Progress, Reporter, Sink


CAPTURE_HEALTHY_AFTER = 30.0
"""A capture child that fails within this many seconds of its start never got going."""
LOOK_REST = 3.0
"""How many times as long as its look the observer (and the artifacts watch) rests, at
least (:attr:`~icetide.supervisor.Task.rest_ratio`): a quarter of the time at most."""


class CaptureChild:
    """``icetide capture --source NAME`` as a child process, its progress relayed."""

    def __init__(self, args: argparse.Namespace, pipeline: Pipeline, source: SourceConfig):
        self.config_path = str(args.config)
        self.pipeline = pipeline
        self.source = str(source.name)
        self.process: subprocess.Popen[str] | None = None
        self.relay: threading.Thread | None = None
        self.error: dict[str, Any] | None = None
        """The child's last error record (``--progress json``): message, hint, terminal."""

    def start(self) -> None:
        """Start the child in its own session: a terminal's Ctrl-C reaches only us, and
        we stop it in turn."""
        command = [sys.executable, "-m", "icetide.cli", "capture", "--source", self.source]
        command += ["--progress", "json", "-c", self.config_path]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", SUPERVISOR_ENV: str(os.getpid())},
        )
        self.relay = threading.Thread(target=self._relay, args=(self.process,), daemon=True)
        self.relay.start()

    def _relay(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            line = line.rstrip("\n")
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if isinstance(record, dict) and record.get("stage") == ERROR_STAGE:
                self.error = record  # its text was relayed as a plain line already
            elif isinstance(record, dict) and "stage" in record and "message" in record:
                stage, message = str(record.pop("stage")), str(record.pop("message"))
                table = record.pop("table", None)
                self.pipeline.report(stage, message, table=table, **record)
            elif line:
                log(line)  # its plain lines (start-up, stop) already name the source

    def step(self) -> None:
        """Fail (to be restarted) when the child has ended."""
        assert self.process is not None
        code = self.process.poll()
        if code is None:
            return
        error, self.error = self.error, None
        if error is not None and error.get("terminal"):
            raise GaveUp(
                f"capture of {self.source}: {error.get('message')}", hint=error.get("hint")
            )
        why = f": {error.get('message')}" if error is not None else ""
        raise StageError(f"capture of {self.source} exited with code {code}{why}")

    def close(self) -> None:
        """SIGTERM, wait for it to make its records durable and save its offset."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.relay is not None:
            self.relay.join(timeout=5)


class Stream:
    """The ledger stage's streaming query, started again after a failure."""

    def __init__(self, spark: SparkSession, pipeline: Pipeline) -> None:
        self.spark = spark
        self.pipeline = pipeline
        self.query: StreamingQuery | None = None
        self.ledger: LedgerStage | None = None
        self._started = False

    def started(self) -> bool:
        """Whether the stream's first trigger has ended, with a micro-batch or finding
        nothing new (Spark reports the first trigger's progress either way), or the
        stream failed. Until then the merge leaves the tables with no events waiting
        (:class:`~icetide.merge.round.TablesDue`): the ledger's start creates every
        ledger table and its first batch holds every event landed meanwhile, while the
        merge's first visits would create every base."""
        if not self._started and self.query is not None:
            try:
                self._started = self.query.lastProgress is not None
            except Exception:  # a JVM gone: the stream's own step says so
                self._started = True
        return self._started

    def start(self) -> None:
        from icetide.cli.stages import ledger_stage
        from icetide.spark.errors import jvm_boundary

        try:
            with jvm_boundary("ledger stream"):
                ledger = ledger_stage(self.spark, self.pipeline)
                self.query = ledger.start(once=False)
        except BaseException:
            self._started = True  # a stream that cannot start holds the merge back no more
            raise
        # Only now: the merge's tick moves schema phases on the ledger tables, which
        # start() creates on a first run (a tick before that failed the merge round).
        self.ledger = ledger

    def tick(self) -> None:
        """Move a schema change's phases on even when no event arrives (after merges);
        nothing while a micro-batch is under way, which takes the same steps
        (:meth:`~icetide.ledger.stage.LedgerStage.tick`)."""
        from icetide.spark.errors import jvm_boundary

        if self.ledger is not None:
            with jvm_boundary("ledger schema phases"):
                self.ledger.tick()

    def step(self) -> None:
        from icetide.spark.errors import jvm_boundary, root_cause

        assert self.query is not None
        with jvm_boundary("ledger stream"):
            if self.query.isActive:
                return
            error = self.query.exception()
        self._started = True
        # The root cause first: a batch's own error, not py4j's wrapper of it.
        failure = self.ledger.failure if self.ledger is not None else None
        if failure is not None:
            why = failure_line(failure)
        else:
            why = root_cause(error) if error is not None else "no reason given"
        raise StageError(f"the ledger stream stopped: {why}")

    def close(self) -> None:
        query, self.query = self.query, None
        if query is not None and query.isActive:
            context.stop_query(query)


class Observer:
    """Measures every table (freshness, SLA, lag, files, dead letters) for the metrics
    and the page, and logs an SLA breach when it begins and when it ends."""

    def __init__(self, spark: SparkSession, pipeline: Pipeline, sinks: Reporter) -> None:
        from icetide.lake.tables import HeldTables

        self.spark = spark
        self.pipeline = pipeline
        self.sinks = sinks
        self.breached: set[str] = set()
        self.held = HeldTables(spark)
        """The tables looked at, held from look to look and refreshed."""

    def step(self) -> None:
        from dataclasses import replace

        from icetide.observe.freshness import observe_all
        from icetide.spark.errors import jvm_boundary

        with jvm_boundary("observe"):
            healths = observe_all(self.spark, self.pipeline.config, self.held)
        for health in healths:
            health = replace(health, schema_version=self.pipeline.schema(health.table).version)
            figures = health.to_dict()
            del figures["table"]
            self.sinks.report("observe", health.render(), table=health.table, **figures)
            if health.breached and health.table not in self.breached:
                self.breached.add(health.table)
                log(f"WARNING {health.render()}")
            elif not health.breached and health.table in self.breached:
                self.breached.discard(health.table)
                log(f"{health.render()} (recovered)")


def stored_rows(record: Progress) -> dict[str, int]:
    """The tables a ledger record says rows were stored for, each with its row events
    (none for another stage), from its :data:`~icetide.ledger.summary.STORED_ROWS`
    figures.

    >>> from icetide.progress import Progress
    >>> stored_rows(Progress("ledger", "l", figures={"events": {"a": 2, "b": 0}}))
    {'a': 2}
    >>> stored_rows(Progress("ledger", "l", figures={"storing": 3, "stored": {"c": 9}}))
    {'c': 9}
    """
    if record.stage != "ledger":
        return {}
    tables: dict[str, int] = {}
    for key in STORED_ROWS:
        counts = record.figures.get(key)
        if isinstance(counts, dict):
            for table, n in counts.items():
                if n:
                    tables[str(table)] = tables.get(str(table), 0) + int(n)
    return tables


def wakes_on_stored_rows(wake: threading.Event) -> Sink:
    """A progress sink that sets ``wake`` when the ledger reports rows stored (by a
    micro-batch, or so far by a long one): the merge then starts its next round at once
    if it was resting after an idle one (:attr:`~icetide.supervisor.Task.wake`). A batch
    of dead letters only leaves nothing to merge."""

    def sink(record: Progress) -> None:
        if stored_rows(record):
            wake.set()

    return sink


MARKING_STAGES = frozenset({"ledger", "evolution", "bootstrap", "dlt"})
"""The stages whose records about a table make the next merge round visit it."""


def marks_due_tables(due: TablesDue) -> Sink:
    """A progress sink that marks for a coming merge round (:class:`TablesDue`) each
    table a ledger micro-batch stored rows for, with their row events (at its end, or in
    a long one's progress lines as it goes), and each table a record of the ledger,
    the schema evolution, a bootstrap or a dead-letter replay names."""

    def sink(record: Progress) -> None:
        if record.stage not in MARKING_STAGES:
            return
        due.mark(stored_rows(record))
        if record.table is not None:
            due.mark([record.table])

    return sink


def serve(args: argparse.Namespace, pipeline: Pipeline, board: StatusBoard) -> None:
    """Metrics, page and page data on ``--metrics-port``, when given."""
    from icetide.observe.metrics import Metrics, MetricsServer
    from icetide.observe.page import add_routes

    metrics = Metrics()
    pipeline.reporter.sinks = (*pipeline.reporter.sinks, metrics.sink)
    if args.metrics_port is None:
        return
    server = MetricsServer(metrics, args.metrics_port, args.metrics_host)
    add_routes(server, board)
    server.start()
    log(f"status page: http://{args.metrics_host}:{server.port}/ (metrics at /metrics)")


def cmd_run(args: argparse.Namespace) -> int:
    """Supervise every stage on this machine until Ctrl-C or SIGTERM."""
    from icetide.cli.stages import merge_all
    from icetide.config.types import format_duration
    from icetide.maintenance.run import maintain_table
    from icetide.merge.round import TablesDue
    from icetide.merge.stage import MergeStage
    from icetide.observe.board import StatusBoard
    from icetide.progress import Reporter
    from icetide.spark.errors import jvm_behind

    pipeline = context.load_pipeline(args)
    config = pipeline.config
    board = StatusBoard(config.pipeline, [t.name for t in config.tables])
    pipeline.reporter.sinks = (*pipeline.reporter.sinks, board.sink)
    captured = [s for s in config.sources if s.captured_by_icetide] if not args.no_capture else []
    if captured:
        from icetide.capture.transport import check_capture_free

        # Before Spark starts: a capture another process runs is a mistake to say at once,
        # not after a JVM's start-up and a child that fails the same way.
        for source in captured:
            check_capture_free(config, source)
    serve(args, pipeline, board)
    # Observations go to the metrics and the page only (they come every few seconds).
    quiet = Reporter(*[s for s in pipeline.reporter.sinks if s is not pipeline.reporter.sinks[0]])
    spark = context.spark_session(config, writes_class_archive=True)
    supervisor = Supervisor(
        context.state.stop,
        pipeline.report,
        max_backoff=args.max_backoff,
        # A JVM gone (out of memory, killed) fails every stage alike, restart or not.
        diagnose=lambda failure: jvm_behind(failure, "icetide run"),
    )
    board.stage_states = supervisor.states  # every task listed, reported or not
    names: list[str] = []
    if captured:
        for source in captured:
            child = CaptureChild(args, pipeline, source)
            names.append(f"capture {source.name}")
            supervisor.add(
                Task(
                    f"capture {source.name}",
                    child.step,
                    1.0,
                    child.start,
                    child.close,
                    healthy_after=CAPTURE_HEALTHY_AFTER,
                )
            )
    stream = Stream(spark, pipeline)
    supervisor.add(Task("stream", stream.step, 1.0, stream.start, stream.close))
    merge = MergeStage(spark, pipeline)
    # The ledger runs here: a round visits the tables it stored events for (merge/round.py),
    # and the others' first visits wait for the ledger's start.
    due = TablesDue(
        [t.name for t in config.tables], limit=config.merge.round_tables, ready=stream.started
    )
    merge.rounds.due = due
    pipeline.reporter.sinks = (*pipeline.reporter.sinks, marks_due_tables(due))
    merge_every = config.schedule.merge_interval.total_seconds()

    def merge_round() -> object:
        merged = any(result.events for result in merge_all(merge))
        stream.tick()
        # Tables left for a later round (merge.round_tables): the next round at once.
        return BEHIND if due.waiting else merged

    merge_wake = threading.Event()
    supervisor.add(Task("merge", merge_round, merge_every, catch_up=True, wake=merge_wake))
    pipeline.reporter.sinks = (*pipeline.reporter.sinks, wakes_on_stored_rows(merge_wake))
    every = config.maintenance.interval.total_seconds()

    def maintain() -> None:
        for table in config.tables:
            context.state.stop.check()
            maintain_table(spark, pipeline, table.name)

    supervisor.add(Task("maintenance", maintain, every, initial_delay=every))
    observer = Observer(spark, pipeline, quiet)
    supervisor.add(Task("observe", observer.step, args.observe_interval, rest_ratio=LOOK_REST))
    names += ["stream", "merge", "maintenance", "observe"]
    if config.artifacts.refresh == "auto":
        from icetide.artifacts.watch import VersionWatch

        watch = VersionWatch(spark, pipeline, pipeline.report)
        supervisor.add(Task("artifacts", watch.step, args.observe_interval, rest_ratio=LOOK_REST))
        names.append("artifacts")
    log(
        f"running: {', '.join(names)}; ledger every "
        f"{format_duration(config.schedule.stream_interval)}, merge every "
        f"{format_duration(config.schedule.merge_interval)}, maintenance every "
        f"{format_duration(config.maintenance.interval)}; Ctrl-C stops"
    )
    supervisor.run()
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``run``."""
    p = with_metrics(
        with_config(
            command_parser(
                sub,
                "run",
                help="capture, stream, merge and maintain on this machine until Ctrl-C",
                description="Supervises every stage: capture of each configured source "
                "(a child process), the ledger stream, the merge every "
                "schedule.merge_interval, maintenance every maintenance.interval and the "
                "freshness observer; a failed stage is restarted with backoff. Ctrl-C or "
                "SIGTERM stops them all between steps, nothing lost. --metrics-port also "
                "serves the status page at / .",
                example=(
                    "icetide run",
                    "icetide run -c shop.yaml --metrics-port 9464   # page on :9464/",
                    "icetide run --no-capture --progress json",
                ),
            )
        )
    )
    p.add_argument(
        "--no-capture",
        action="store_true",
        help="do not capture here (capture runs elsewhere or events arrive from Debezium)",
    )
    p.add_argument(
        "--observe-interval",
        type=positive_seconds,
        default=15.0,
        metavar="SECONDS",
        help="how often freshness, lag and files are measured (default 15; a look that "
        "takes longer, over many tables, is followed by a rest three times its length)",
    )
    p.add_argument(
        "--max-backoff",
        type=positive_seconds,
        default=60.0,
        metavar="SECONDS",
        help="longest wait before restarting a failed stage (default 60)",
    )
    p.set_defaults(func=cmd_run)
