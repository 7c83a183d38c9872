"""The ledger stage: a Structured Streaming query appending every event to ``<t>_cdc``.

Exactly once across restarts: Spark's checkpoint replays an unfinished micro-batch with
the same id and the same input, and every append carries the query id and batch id as
snapshot properties, so a batch that already reached a table is not written twice
(:mod:`icetide.ledger.stored`). A catalog outage during a batch is ridden out in the
batch: each of its catalog steps (the schema phases, each append) is redone with the
merge's backoff (:func:`~icetide.spark.retry.retry_step`), and an append redone after a
commit that landed unconfirmed finds the batch there. Bad events go to the dead-letter
tables; they never stop the stream.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial, reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from icetide.config import Config
from icetide.errors import IcetideError, SchemaError, failure_line
from icetide.events.raw import Wire, message_text
from icetide.faults import crash_point
from icetide.lake.align import align_to
from icetide.lake.data_files import FileTarget, WrittenFile, append_files, file_target
from icetide.lake.ledger_figures import FIGURES_PROPERTY, figure_aggregates, figures_json, micros
from icetide.lake.payload import payload_b64
from icetide.lake.tables import (
    HeldTables,
    TableRefs,
    columns_present,
    ensure_namespace,
    latest_snapshot_property,
    spark_schema,
)
from icetide.ledger.decode import (
    ALL_MESSAGES,
    CLASSIFIED_SCHEMA,
    DEAD,
    ERROR,
    EXTRA,
    FILE,
    INLINE_KEY,
    RAW,
    REASON,
    ROW,
    SCHEMA_CHANGE,
    SCHEMA_CHANGE_FAILED,
    SKIP,
    STATUS,
    Projection,
    Refused,
    Routes,
    classify_batches,
    inline_row_schema,
    project_batches,
    projected_spark_schema,
)
from icetide.ledger.landing import LandingWatch, Receipt, parse_receipt
from icetide.ledger.one_pass import SAMPLES, classify_and_write, tables_to_prepare, task_answer
from icetide.ledger.phases import alter_ledger, projection, record_projection
from icetide.ledger.registry_decode import wire_for
from icetide.ledger.resume import (
    FILE as POSITION_FILE,
)
from icetide.ledger.resume import (
    batch_end_offsets,
    load_position,
    save_position,
    starting_offsets,
)
from icetide.ledger.signals import (
    CarriedSchema,
    ChangeSignal,
    OnSignals,
    OnVersions,
    schema_change_signal,
    seen_line,
)
from icetide.ledger.source import ArrowMap, as_messages, source_rows, subscribed_partitions
from icetide.ledger.stored import after_failure, stored_batch
from icetide.ledger.summary import PROGRESS_SECONDS, BatchProgress, BatchSummary
from icetide.ledger.table_files import (
    FILES_DDL,
    INPUT_COLUMNS,
    TableFiles,
    TableJob,
    UnroutedJob,
    collected,
    write_table_files,
)
from icetide.ledger.tally import First
from icetide.schema.contract import ledger as c
from icetide.schema.contract.builder import TableContract
from icetide.schema.contract.names import TableName
from icetide.schema.model import TableSchema
from icetide.spark.retry import DEFAULT_POLICY, RetryPolicy, classify, retry_step
from icetide.spark.session import LEDGER_POOL
from icetide.spark.threads import run_all
from icetide.state.store import state_store

if TYPE_CHECKING:
    from icetide.pipeline import Pipeline


T = TypeVar("T")

CREATE_THREADS = 2
"""Tables whose ledger and dead-letter tables :meth:`LedgerStage.ensure_tables` creates at
once. ``bench/create_bench.py`` (150 generated tables, Hadoop catalog, 2026-12-03, shared
2-core machine): 54 ms a table one after another, 21 ms with two threads and 18 with
four; 35, 17 and 16 ms a table when they all exist (a restart). Two, as the merge
commits two tables at once by default (``merge.parallel_tables``): every catalog
already takes that many commits at a time."""

ONE_PASS_TABLES = 16
"""Tables at most in a pipeline whose one-pass batches (:mod:`icetide.ledger.one_pass`)
prepare every table: that pass needs a table's projection and files' target before it
reads a message, catalog reads for each table prepared in every batch. A pipeline of
more tables prepares those its earlier batches held messages for
(:func:`~icetide.ledger.one_pass.tables_to_prepare`), and stores its first batch, and
any batch with messages of a table new to it, in two passes."""

CHUNK_TABLES = 8
"""Tables of a micro-batch whose projections and figures are one Spark job (a union of
one branch per table), before their appends (fewer once a chunk's row events reach
:data:`SMALL_SHARE`: :func:`chunks_of`). One job for a few tables saves each its
job's fixed cost; but every task of that job deserializes the whole union's plan, a
cost that grows with the square of the tables in it (a 100-table union: 85–100 ms a
task, 400 tasks), so a batch of more tables is stored in chunks of this many."""

STORE_THREADS = 4
"""Chunks of a micro-batch (:data:`CHUNK_TABLES`) stored at once, in threads of the one
SparkSession, with the batch's jobs in the ledger's own scheduler pool so that the
merge's are not queued behind them (icetide/spark/scheduler_pools.xml). A chunk is a few
small Spark jobs and catalog commits whose fixed costs (planning, task set-up, metadata
files) are most of its time when its tables have few events. A batch of one chunk is
stored in the batch's own thread and pool, as one job after another."""


SPLITS_A_TASK = 4
"""Spark's input splits (128 MB of landing files each, by default) a task of the
ledger's write job takes at most: see :func:`in_core_tasks`."""


def in_core_tasks(frame: DataFrame) -> DataFrame:
    """``frame`` read in one task per core of the application (Spark's default
    parallelism), for the jobs that write every table's files of a batch
    (:mod:`icetide.ledger.table_files`); more when that would give a task over
    :data:`SPLITS_A_TASK` of the input's splits.

    Each task of those jobs writes a file for each table it meets and pays that table's
    fixed cost (its projection set up, its file opened, its footer's metrics, the
    tally): in a pipeline of many tables, nearly every table in every task. Spark cuts a
    large batch of landing files into 128-MB splits (seven tasks for 500 MB, on two
    cores), which paid those costs seven times where two tasks, one per core, use the
    same cores (bench/results/tables.md); each table also got a file per task. A task's
    landing files reach its Python worker whole, in Arrow batches that span its splits,
    so a task takes at most a few of them: a batch of large files is not one worker's
    gigabytes. A batch already in fewer partitions keeps them (``coalesce`` never adds
    any)."""
    cores = frame.sparkSession.sparkContext.defaultParallelism
    splits = frame.rdd.getNumPartitions()
    return frame.coalesce(max(cores, -(-splits // SPLITS_A_TASK)))


SHARE = "_share"
"""The column naming the table in a chunk's combined projection counts."""

SMALL_SHARE = 30_000
"""In a micro-batch of several chunks, a table with at most this many row events is
projected in one task: its figures then need no shuffle, and each of its jobs is one
task, not one per input partition (a partition holding none of its events still cost a
task). A batch of one chunk keeps its input's partitions: its few tables' projections
are most of its work, on every core."""


@dataclass(frozen=True)
class _Share:
    """One table's part of a micro-batch: the projection of its rows (persisted while
    the batch is stored) and the ledger layout they are written in."""

    name: str
    plan: Projection
    projected: DataFrame
    stored: TableSchema


def _inline_text(raw: bytes) -> str | None:
    """The inline row struct (Connect JSON text) of one message, or None."""
    try:
        row = inline_row_schema(json.loads(message_text(raw)))
    except Exception:  # the message was classified a row: unreadable now means no schema
        return None
    return json.dumps(row, sort_keys=True) if row is not None else None


def subject_of(config: Config, table: str, message_id: str) -> str:
    """The registry subject of ``table``'s messages (TopicNameStrategy): the Kafka
    topic's (from the ``topic/partition/offset`` id), or in landing files the Debezium
    topic ``<server>.<db>.<table>``'s."""
    if config.transport.type == "kafka":
        return message_id.rsplit("/", 2)[0] + "-value"
    settings = config.table(table)
    server = config.table_server(settings)
    topic = f"{server}.{settings.source}" if server else str(settings.source)
    return topic + "-value"


def carried_schema(
    config: Config, table: str, key: str, message_id: str, raw: bytes, first: int
) -> CarriedSchema:
    """The :class:`CarriedSchema` of schema ``key`` seen first in message ``raw``."""
    if key.startswith(INLINE_KEY):
        return CarriedSchema(table, key, text=_inline_text(raw), first=first)
    subject = subject_of(config, table, message_id)
    return CarriedSchema(table, key, subject, int(key.rsplit(":", 1)[1]), first=first)


def storing_order(names: Iterable[str], row_events: Mapping[str, int]) -> list[str]:
    """The order a micro-batch stores its tables in: most row events first (then by
    name), so that in a batch of many chunks the busiest tables are stored, and merged,
    first.

    >>> storing_order({"a", "b", "c", "d"}, {"b": 5, "c": 900, "d": 5})
    ['c', 'b', 'd', 'a']
    """
    return sorted(names, key=lambda name: (-row_events.get(name, 0), name))


def chunks_of(names: Iterable[str], row_events: Mapping[str, int]) -> list[list[str]]:
    """``names`` in :func:`storing_order`, in chunks of :data:`CHUNK_TABLES` tables. A
    batch of more tables than one chunk also ends a chunk once its row events reach
    :data:`SMALL_SHARE`: a busy table is stored in a chunk of its own, in the first
    chunks under way, and is merged sooner, where in a chunk of the eight busiest it was
    stored with the slowest chunk. A batch of one chunk stays one.

    >>> events = {"a": 70_000, "b": 31_000, "c": 20_000, "d": 9_000, "e": 5, "f": 5}
    >>> chunks_of(["a", "b", "c", "d", "e", "f"], events)  # one chunk: kept whole
    [['a', 'b', 'c', 'd', 'e', 'f']]
    >>> events |= {f"t{i}": 1 for i in range(9)}
    >>> chunks_of(events, events)[:4]
    [['a'], ['b'], ['c', 'd', 'e', 'f', 't0', 't1', 't2', 't3'], ['t4', 't5', 't6', 't7', 't8']]
    """
    ordered = storing_order(names, row_events)
    if len(ordered) <= CHUNK_TABLES:
        return [ordered] if ordered else []
    chunks: list[list[str]] = []
    chunk: list[str] = []
    load = 0
    for name in ordered:
        chunk.append(name)
        load += row_events.get(name, 0)
        if len(chunk) == CHUNK_TABLES or load >= SMALL_SHARE:
            chunks.append(chunk)
            chunk, load = [], 0
    return chunks + ([chunk] if chunk else [])


def ledger_rows(projected: DataFrame, plan: Projection) -> DataFrame:
    """What a ledger append writes of a table's projected messages
    (:func:`~icetide.ledger.decode.project_batches`): the rows, in the ledger's projected
    columns, stamped with the schema version they were projected by."""
    return projected.where(F.col(STATUS) == ROW).select(
        *TableContract(plan.layout).ledger_projected_columns(),
        F.lit(plan.value_schema.version).cast("int").alias(c.SCHEMA_VERSION),
    )


def _unknown_fields(name: str, extra: Mapping[str, int], first: First | None) -> ChangeSignal:
    """The signal of a table's stored events carrying columns its schema lacks
    (``extra``), at the first of them (position, its text, source time in ms)."""
    position, text, millis = first or (None, None, None)
    return ChangeSignal(
        name,
        "unknown_fields",
        columns=tuple(sorted(extra)),
        position=int(position) if position is not None else None,
        position_text=text,
        source_ts_ms=millis,
    )


def routes_of(config: Config) -> Routes:
    """The routing table of ``config``: ``db.table`` → (server or any, table)."""
    tables: dict[str, list[tuple[str | None, str]]] = {}
    for table in config.tables:
        server = config.table_server(table)
        tables.setdefault(str(table.source).lower(), []).append(
            (server.lower() if server else None, str(table.name))
        )
    return Routes(tables)


class LedgerStage:
    """Streams raw change events into the ledger and dead-letter tables."""

    def __init__(
        self,
        spark: SparkSession,
        pipeline: Pipeline,
        on_signals: OnSignals | None = None,
        on_versions: OnVersions | None = None,
        pause: Callable[[float], None] = time.sleep,
        policy: RetryPolicy = DEFAULT_POLICY,
    ) -> None:
        self.spark = spark
        self.pipeline = pipeline
        self.on_signals = on_signals
        """Called with each batch's schema-change signals once the batch is stored."""
        self.on_versions = on_versions
        """Called before projecting with the message-carried schemas not taken yet."""
        self.pause = pause
        """Waits before a catalog step of a batch is redone (:meth:`_retried`)."""
        self.policy = policy
        """How often and how long a catalog step of a batch is redone."""
        self._two_passes_only = False
        """Whether a table of this pipeline cannot be written by the one pass (its ledger
        partitioned otherwise than icetide creates it): found at the first batch."""
        self._taken: set[tuple[str, str]] = set()
        """(table, schema key) already walked and accepted by this process."""
        self._split: ArrowMap | None = None
        """What makes the stream's rows messages (:func:`~icetide.ledger.source.source_rows`)."""
        self._active: set[str] = set()
        """The tables whose messages this process's batches held: those a one-pass batch
        of a pipeline of many tables prepares."""
        self._lock = threading.RLock()  # batches and ticks never overlap
        self.config = config = pipeline.config
        self.query_name = f"icetide_ledger_{config.pipeline}".replace("-", "_")
        self._committed: dict[TableName, int] = {}
        """Table → the last batch this process appended there or found there."""
        self._loaded: dict[TableName, Any] = {}
        """The ledger and dead-letter tables the batch under way loaded (:meth:`_prepared`),
        for its appends."""
        self._held = HeldTables(spark)
        """The ledger and dead-letter tables, loaded once and refreshed at each batch."""
        self._settled: dict[str, int] = {}
        """Table → the schema version the ledger has been seen projecting whole (phase 2
        done): :meth:`tick` has nothing to do for the table until its schema file names
        a newer version."""
        self._query_id: str | None = None
        self.failure: IcetideError | None = None
        """The error that ended a micro-batch, and so the query (a catalog outage past
        the retries' budget, a schema the ledger cannot take)."""
        self.watch: LandingWatch | None = None
        self._wire: Wire | None = None
        """The current batch's registry schemas (None: no registry configured)."""
        if config.transport.type == "files":
            self.watch = LandingWatch(
                config.resolved_path(config.transport.path),
                config.resolved_path(config.state_dir),
                pipeline.reporter,
            )

    # -- tables ------------------------------------------------------------------------
    def refs(self, table: str) -> TableRefs:
        """The Iceberg names of ``table``."""
        return self.pipeline.refs(table)

    @property
    def unrouted_dlt(self) -> TableName:
        """Dead letters whose table cannot be told (malformed JSON, unknown source)."""
        return self.refs(self.config.dead_letter.unrouted_table).dead_letters

    def ensure_tables(self) -> None:
        """Create the namespace, ledger and dead-letter tables when missing.

        A table's steps are catalog round trips (metadata files written and read), not
        Spark jobs, so :data:`CREATE_THREADS` tables are taken at once: at a thousand
        tables the stream's start was minutes of them one after another.
        """
        ensure_namespace(self.spark, self.config.catalog.name, self.config.catalog.namespace)

        def ensure(name: str) -> None:
            refs = self.refs(name)
            contract = self.pipeline.contract(name)
            self.spark.sql(contract.ledger_ddl(refs.cdc))
            # A ledger made by an older release gains the columns added since. The
            # ledger is held from here on: the first batch refreshes it, not loads it.
            present = columns_present(self._held.get(refs.cdc), c.ADDED_LATER)
            upgrades = contract.ledger_upgrades(refs.cdc, present)
            for statement in upgrades:
                self.spark.sql(statement)
            if upgrades:
                self._held.forget(refs.cdc)
            self.spark.sql(TableContract.dead_letter_ddl(refs.dead_letters))
            self._held.get(refs.dead_letters)

        names = [table.name for table in self.config.tables]
        run_all(ensure, names, CREATE_THREADS, "icetide-create")
        self.spark.sql(TableContract.dead_letter_ddl(self.unrouted_dlt))

    # -- idempotent appends ------------------------------------------------------------
    def _query_identity(self) -> str:
        if self._query_id is None:
            for query in self.spark.streams.active:
                if query.name == self.query_name:
                    self._query_id = str(query.id)
            if self._query_id is None:
                self._query_id = "batch"
        return self._query_id

    def _last_committed(self, table: TableName) -> int:
        if table not in self._committed:
            summary = latest_snapshot_property(self.spark, table, c.BATCH_PROPERTY)
            self._committed[table] = stored_batch(summary, self._query_identity())
        return self._committed[table]

    def _append(
        self,
        frame: DataFrame,
        table: TableName,
        batch_id: int,
        properties: dict[str, str] | None = None,
        *,
        aligned: bool = False,
        of: str | None = None,
    ) -> None:
        """Append ``frame`` to ``table`` (of configured table ``of``; None: the unrouted
        dead letters) as batch ``batch_id`` by Spark's writer (:meth:`_once`);
        ``aligned``: first give it the table's current columns
        (:func:`~icetide.lake.align.align_to`)."""

        def write(summary: dict[str, str]) -> None:
            rows = align_to(frame, spark_schema(self.spark, table)) if aligned else frame
            writer = rows.writeTo(table.sql)
            for key, value in summary.items():
                writer = writer.option(f"snapshot-property.{key}", value)
            writer.append()

        self._once(write, table, batch_id, properties, of)

    def _append_files(
        self,
        files: list[WrittenFile],
        target: FileTarget,
        table: TableName,
        batch_id: int,
        properties: dict[str, str] | None = None,
        *,
        of: str | None,
    ) -> None:
        """Commit ``files`` (written by the batch's one job, :mod:`icetide.ledger.table_files`)
        to ``table`` (of configured table ``of``; None: the unrouted dead letters) as batch
        ``batch_id`` (:meth:`_once`)."""

        def write(summary: dict[str, str]) -> None:
            # Loaded for the batch by _prepared, once: an append reads the table's current
            # metadata as it commits. A retry loads it again.
            loaded = self._loaded.pop(table, None) or self._held.get(table)
            append_files(loaded, files, target.partition, summary)

        self._once(write, table, batch_id, properties, of)

    def _once(
        self,
        write: Callable[[dict[str, str]], None],
        table: TableName,
        batch_id: int,
        properties: dict[str, str] | None,
        of: str | None,
    ) -> None:
        """``write`` batch ``batch_id`` to ``table`` in one snapshot whose summary carries
        the batch and query ids and ``properties``, unless the table holds the batch.
        Redone after a catalog outage, reading the table's batch again first: a commit
        may have landed before the failure."""

        def append() -> None:
            crash_point("ledger.before_append")
            if self._last_committed(table) >= batch_id:
                self.pipeline.report(
                    "ledger",
                    f"ledger batch {batch_id}: {table} already has it, skipped",
                    batch=batch_id,
                )
                return
            write(
                {
                    c.BATCH_PROPERTY: str(batch_id),
                    c.QUERY_PROPERTY: self._query_identity(),
                    **(properties or {}),
                }
            )
            crash_point("ledger.after_first_append")
            self._committed[table] = batch_id

        def forget() -> None:
            self._committed = after_failure(self._committed, table)

        self._retried(f"ledger batch {batch_id}: append to {table.name}", append, of, forget)

    def _retried(
        self,
        action: str,
        step: Callable[[], T],
        table: str | None,
        before_retry: Callable[[], None] | None = None,
    ) -> T:
        """``step`` (a catalog step of a batch, for configured table ``table``), redone
        after a commit conflict or a catalog outage as the merge's are
        (:func:`~icetide.spark.retry.retry_step`), each retry reported; ``before_retry``
        runs before each retry. Past the outage budget the outage is raised: it ends the
        batch, and the query, with that one line as its reason."""

        def retried(failures: int, exc: IcetideError, seconds: float) -> None:
            if before_retry is not None:
                before_retry()
            self.pipeline.report(
                "ledger",
                f"{failure_line(exc)}; retry {failures} in {seconds:g}s",
                table=table,
                retry=classify(exc),
                attempt=failures,
                retry_in=seconds,
            )

        return retry_step(action, step, policy=self.policy, on_retry=retried, pause=self.pause)

    # -- one micro-batch ---------------------------------------------------------------
    def tick(self) -> bool:
        """Between batches: take each table's schema changes as far as the ledger can
        (phase 1 on the ledger, the projection switch of phase 2) with no new events.

        Returns at once, False, while a micro-batch is under way: that batch takes the
        same steps for every table it writes, and the caller is ``icetide run``'s merge
        thread, which would otherwise start its next round only once the batch is
        stored (5–13 s a batch while a cold pipeline works off its backlog; the merge
        leg of every event's latency grew by that wait). True when it ran.

        A table whose ledger already projects every column of its current schema
        version is not looked at: nothing is left for a tick to do there until the
        schema changes, and each look loads the ledger and the base tables again: four
        metadata reads a table after every merge round."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            for table in self.config.tables:
                name = table.name
                if self._settled.get(name) == self.pipeline.schema(name).version:
                    continue
                try:
                    if alter_ledger(self.spark, self.pipeline, name):
                        self._held.forget(self.refs(name).cdc)  # perhaps created again
                    plan = projection(self.spark, self.pipeline, name)
                except SchemaError:  # said by the next batch that holds its messages
                    continue
                if plan.values is None:
                    self._settled[name] = plan.layout.version
        finally:
            self._lock.release()
        return True

    def process_batch(self, batch: DataFrame, batch_id: int) -> None:
        """Classify, project and append one micro-batch of the stream (its rows as
        :func:`~icetide.ledger.source.source_rows` gives them)."""
        with self._lock:
            try:
                self._process_batch(batch, batch_id)
            except IcetideError as exc:
                # Spark ends the query with only this error's traceback as text (py4j);
                # the command says the error itself, hint and all (:attr:`failure`).
                self.failure = exc
                raise

    def _process_batch(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        now = datetime.now(UTC)
        summary = BatchSummary(batch_id)
        if self.watch is not None:
            self.watch.check()
            self.watch.skipped()
        messages = as_messages(batch, self._split)
        self._wire = wire_for(self.config, messages)
        self._loaded = {}
        stored = None
        if not self._two_passes_only:
            stored = self._one_pass(batch, batch_id, now, summary)
        if stored is None:
            stored = self._two_passes(messages, batch_id, now, summary)
        receipts, signals = stored
        self._active.update(summary.rows, (name for name in summary.dead_by_table if name))
        self._save_position(batch_id)  # before the line saying the batch is stored
        self.pipeline.report(
            "ledger",
            summary.render(),
            batch=batch_id,
            events=dict(summary.rows),
            dead_letters=dict(summary.dead),
            dead_letters_by_table=summary.dead_by_table,
            seconds=round(time.monotonic() - started, 3),
        )
        self._remember_files(receipts)
        if signals:
            self._signal(signals)

    def _one_pass(
        self, batch: DataFrame, batch_id: int, now: datetime, summary: BatchSummary
    ) -> tuple[list[Receipt], list[ChangeSignal]] | None:
        """Classify, project and write the batch in one Spark job
        (:mod:`icetide.ledger.one_pass`), then commit each table's files; None, having
        written nothing that stays, when the batch holds what the driver must see first
        (:func:`~icetide.ledger.one_pass.driver_first`)."""
        configured = [str(table.name) for table in self.config.tables]
        names = tables_to_prepare(configured, self._active, ONE_PASS_TABLES)
        if not names:
            return None  # no table known active yet: the two passes find them
        _, jobs = self._prepared(names, batch_id, {}, now)
        stray = file_target(self._held.get(self.unrouted_dlt), c.DLT_INGESTED_AT, now.date())
        if len(jobs) < len(names) or stray is None:
            # A table written by Spark's writer: two passes (_tables_batch), in every
            # batch of this process, without preparing every table first again.
            self._two_passes_only = True
            return None
        unrouted = UnroutedJob(self.config.dead_letter.unrouted_table, stray)
        taken: dict[str, set[str]] | None = None
        if self.on_versions is not None:
            taken = {name: set() for name in names}
            for table, key in self._taken:
                if table in taken:
                    taken[table].add(key)
        routes = routes_of(self.config)
        written = classify_and_write(jobs, now, self._wire, routes, taken, unrouted, self._split)
        files, counts, why = task_answer(
            in_core_tasks(batch).mapInArrow(written, FILES_DDL).collect()
        )
        if why is not None:
            for row in files:
                target = jobs[row["table"]].dead if row["table"] in jobs else stray
                if row["ledger_path"] is not None:
                    jobs[row["table"]].ledger.delete(row["ledger_path"])
                if row["dead_path"] is not None:
                    target.delete(row["dead_path"])
            self.pipeline.report(
                "ledger", f"ledger batch {batch_id}: {why}: counted before it is stored"
            )
            return None
        receipts, routed_dead, _, row_events = self._counted(counts, summary)
        names = storing_order(row_events.keys() | routed_dead, row_events)
        stored = self._progress(names, row_events, batch_id)
        tables = {name: jobs[name] for name in names}
        written_files = collected(files)
        signals = self._commit_files(tables, written_files, batch_id, now, summary, stored)
        dead = written_files.get(unrouted.name)
        if dead is not None:
            self._append_files(dead.dead, stray, self.unrouted_dlt, batch_id, of=None)
        return receipts, sorted(signals, key=lambda signal: signal.table)

    def _two_passes(
        self, batch: DataFrame, batch_id: int, now: datetime, summary: BatchSummary
    ) -> tuple[list[Receipt], list[ChangeSignal]]:
        """Classify the batch and count its classes (one job, the classified batch
        cached), act on what must come first (schema changes, new message-carried
        schemas), then store each table's part."""
        classified = batch.mapInArrow(
            classify_batches(routes_of(self.config), self._wire), CLASSIFIED_SCHEMA
        ).withColumn("seq", F.monotonically_increasing_id())
        if len(self.config.tables) > CHUNK_TABLES:
            # Each table's messages together in the cache: the statistics of its batches
            # then let a table's scan skip every other table's (arrival order kept).
            classified = classified.sortWithinPartitions("table", "seq")
        classified = classified.persist()
        try:
            # Receipts (status file) and the carried schemas come out of the same job.
            counts = (
                classified.groupBy("table", "status", "reason", "schema_key")
                .agg(
                    F.count(F.lit(1)).alias("n"),
                    F.slice(
                        F.collect_list(F.when(F.col("status") == DEAD, F.col("message_id"))),
                        1,
                        SAMPLES,
                    ).alias("samples"),
                    F.min("seq").alias("first"),
                    F.min_by("message_id", "seq").alias("first_id"),
                    F.first(
                        F.when(F.col("schema_key").startswith(INLINE_KEY), F.col("raw")),
                        ignorenulls=True,
                    ).alias("sample"),
                )
                .collect()
            )
            signals: list[ChangeSignal] = []
            if any(r.status == SKIP and r.reason == SCHEMA_CHANGE and r.table for r in counts):
                # Before projecting: the batch's rows after a DDL need its layout (a value
                # of a widened column may not fit the old type), and rows before it fit
                # the new layout too (new columns are nullable, renames are aliased).
                self._signal(self._schema_changes(classified))
            refused = self._walk_versions(counts)
            receipts, routed_dead, unrouted, row_events = self._counted(counts, summary)
            signals += self._tables_batch(
                row_events.keys() | routed_dead,
                row_events,
                classified,
                batch_id,
                now,
                summary,
                routed_dead,
                refused,
            )
            if unrouted:
                unrouted_rows = classified.where(
                    (F.col("status") == DEAD) & F.col("table").isNull()
                )
                self._append(self._dead_frame(unrouted_rows, now), self.unrouted_dlt, batch_id)
        finally:
            classified.unpersist()
        return receipts, signals

    @staticmethod
    def _counted(
        counts: Iterable[Any], summary: BatchSummary
    ) -> tuple[list[Receipt], set[str], bool, dict[str, int]]:
        """What a batch's class counts say (rows of table, status, reason, ``n`` and
        dead-letter ``samples``): the landing files' receipts, the tables with routed dead
        letters, whether any message was routed to no table, and each table's row
        events; the skipped and dead-lettered messages counted in ``summary``."""
        receipts: list[Receipt] = []
        routed_dead: set[str] = set()
        unrouted = False
        row_events: dict[str, int] = {}
        for row in counts:
            if row.status == FILE:
                receipt = parse_receipt(row.reason)
                if receipt is not None:
                    receipts.append(receipt)
            elif row.status == SKIP:
                summary.skipped[row.reason] = summary.skipped.get(row.reason, 0) + row.n
            elif row.status == DEAD:
                table_name = None if row.table is None else str(row.table)
                summary.add_dead(row.reason, row.n, list(row.samples), table_name)
                if row.table is None:
                    unrouted = True
                else:
                    routed_dead.add(str(row.table))
            elif row.status == ROW:
                row_events[str(row.table)] = row_events.get(str(row.table), 0) + row.n
        return receipts, routed_dead, unrouted, row_events

    def _schema_changes(self, classified: DataFrame) -> list[ChangeSignal]:
        """The signals of the batch's routed schema-change messages (few: one per DDL)."""
        rows = (
            classified.where(
                (F.col("status") == SKIP)
                & (F.col("reason") == SCHEMA_CHANGE)
                & F.col("table").isNotNull()
            )
            .select("table", "raw")
            .collect()
        )
        found = []
        for row in rows:
            signal = schema_change_signal(str(row.table), message_text(bytes(row.raw)))
            if signal is not None:
                found.append(signal)
        return sorted(found, key=lambda s: (s.table, s.position or 0))

    def _walk_versions(self, counts: Sequence[Any]) -> dict[str, Refused]:
        """Hand the batch's message-carried schemas not taken yet to ``on_versions`` (the
        evolution layer walks the versions they bring, before anything is projected) and
        return the refused ones per table."""
        if self.on_versions is None:
            return {}
        carried: dict[tuple[str, str], CarriedSchema] = {}
        for row in counts:
            if row.status != ROW or row.schema_key is None or row.table is None:
                continue
            table, key = str(row.table), str(row.schema_key)
            if (table, key) in self._taken:
                continue
            seen = carried.get((table, key))
            first = int(row.first) if seen is None else min(seen.first, int(row.first))
            if seen is not None and (seen.text is not None or row.sample is None):
                carried[(table, key)] = replace(seen, first=first)
                continue
            raw = bytes(row.sample) if row.sample is not None else b""
            carried[(table, key)] = carried_schema(
                self.config, table, key, str(row.first_id), raw, first
            )
        if not carried:
            return {}
        ordered = sorted(carried.values(), key=lambda s: (s.table, s.first))
        refused: dict[str, Refused] = {
            t: dict(r) for t, r in self.on_versions(ordered).items() if r
        }
        for schema in ordered:
            if schema.key not in refused.get(schema.table, {}):
                self._taken.add((schema.table, schema.key))
        return refused

    def _signal(self, signals: Sequence[ChangeSignal]) -> None:
        for signal in signals:
            self.pipeline.report(
                "ledger",
                seen_line(signal, acted_on=self.on_signals is not None),
                table=signal.table,
                signal=signal.kind,
            )
        if self.on_signals is not None:
            self.on_signals(signals)
            for table in sorted({s.table for s in signals}):
                try:
                    self._retried(  # phase 1 now
                        f"ledger: schema phase 1 of {table}",
                        partial(alter_ledger, self.spark, self.pipeline, table),
                        table,
                    )
                except SchemaError:  # held at its next batch, with its messages
                    continue

    @property
    def checkpoint(self) -> Path:
        """Spark's checkpoint of the query: local, rebuilt from the saved Kafka position
        when lost (:mod:`icetide.ledger.resume`)."""
        return self.config.resolved_path(self.config.state_dir) / "checkpoints" / "ledger"

    def _save_position(self, batch_id: int) -> None:
        """After the batch is stored: where it ended in Kafka, in the state location, so
        that a query with no checkpoint (a new machine) starts after it."""
        if self.config.transport.type != "kafka":
            return
        offsets = batch_end_offsets(self.checkpoint, batch_id)
        if offsets is not None:
            save_position(state_store(self.config).file(POSITION_FILE), batch_id, offsets)

    def _starting(self) -> dict[str, dict[str, int]] | None:
        """Where a query with no checkpoint starts in Kafka: after the last batch stored
        (saved by :meth:`_save_position`), every partition added since at its earliest;
        None with a checkpoint (it knows better) or nothing saved."""
        if self.config.transport.type != "kafka" or (self.checkpoint / "offsets").is_dir():
            return None
        file = state_store(self.config).file(POSITION_FILE)
        saved = load_position(file)
        if saved is None:
            return None
        starting = starting_offsets(saved, subscribed_partitions(self.config))
        self.pipeline.report(
            "ledger",
            f"ledger: no checkpoint; resuming Kafka at the position saved in {file.where}",
        )
        return starting

    def _remember_files(self, receipts: list[Receipt]) -> None:
        """After the batch is stored: what was read of each file, to spot later changes."""
        if self.watch is not None and receipts:
            self.watch.record(receipts)

    def _dead_frame(self, frame: DataFrame, now: datetime) -> DataFrame:
        return frame.select(
            F.col("message_id"),
            F.col("table").alias("source_table"),
            F.col("reason"),
            F.col("error"),
            # The exact bytes the transport delivered, not a re-encoding of decoded text.
            payload_b64(F.col("raw")).alias("payload_b64"),
            F.lit(now).alias("ingested_at"),
        )

    def _tables_batch(
        self,
        names: Collection[str],
        row_events: Mapping[str, int],
        classified: DataFrame,
        batch_id: int,
        now: datetime,
        summary: BatchSummary,
        routed_dead: set[str],
        refused: Mapping[str, Refused],
    ) -> list[ChangeSignal]:
        """Project each table's messages and store them, busiest first; the tables'
        counts, and their change signals in name order.

        First each table's schema steps (catalog steps, :data:`STORE_THREADS` tables at
        once). Then every table whose ledger and dead-letter tables are partitioned as
        icetide creates them is written by one Spark job for all
        (:meth:`_store_files`); any other by Spark's writer, a job per table
        (:meth:`_store_chunks`). The first failure is raised once every table under way
        has ended: each table's append is skipped on a rerun once there
        (:meth:`_once`), so a table stored before the failure is not stored twice.
        A batch of many tables says how far it is as its tables are stored
        (:class:`~icetide.ledger.summary.BatchProgress`)."""
        ordered = storing_order(names, row_events)
        planned, jobs = self._prepared(ordered, batch_id, refused, now)
        stored = self._progress(ordered, row_events, batch_id)
        signals: list[ChangeSignal] = []
        if jobs:
            signals += self._store_files(jobs, classified, batch_id, now, summary, stored)
        rest = [name for name in ordered if name not in jobs]
        if rest:
            signals += self._store_chunks(
                rest, planned, row_events, classified, batch_id, now, summary, routed_dead, stored
            )
        return sorted(signals, key=lambda signal: signal.table)

    def _prepared(
        self, names: Sequence[str], batch_id: int, refused: Mapping[str, Refused], now: datetime
    ) -> tuple[dict[str, tuple[Projection, Refused | None]], dict[str, TableJob]]:
        """Each of ``names``' projection once its schema steps are taken, with the
        messages it must refuse; and the job of each whose files a Python task can write
        (:func:`~icetide.lake.data_files.file_target`). Catalog reads, not Spark jobs:
        :data:`STORE_THREADS` tables at once."""

        def prepared(name: str) -> tuple[Projection, Refused | None, TableJob | None]:
            plan, table_refused = self._plan(name, batch_id, refused.get(name))
            refs = self.refs(name)
            # _plan loaded the ledger for the batch (not when its schema change was held).
            loaded = self._loaded.get(refs.cdc) or self._held.get(refs.cdc)
            ledger = file_target(loaded, c.INGESTED_AT, now.date())
            dead_letters = self._held.get(refs.dead_letters)
            self._loaded[refs.dead_letters] = dead_letters
            dead = file_target(dead_letters, c.DLT_INGESTED_AT, now.date())
            if ledger is None or dead is None:
                return plan, table_refused, None
            buckets = self.config.table(name).buckets
            return plan, table_refused, TableJob(plan, table_refused, ledger, dead, buckets)

        plans = run_all(prepared, names, STORE_THREADS, "icetide-ledger", True)
        planned = {name: (plan, why) for name, (plan, why, _) in zip(names, plans, strict=True)}
        jobs = {name: job for name, (_, _, job) in zip(names, plans, strict=True) if job}
        return planned, jobs

    def _progress(
        self, names: Collection[str], row_events: Mapping[str, int], batch_id: int
    ) -> Callable[[Sequence[str]], None]:
        """What to call as tables of the batch are stored: a batch of many tables says
        how far it is (:class:`~icetide.ledger.summary.BatchProgress`)."""
        progress = BatchProgress(
            batch_id, len(names), sum(row_events.values()), time.monotonic(), PROGRESS_SECONDS
        )
        counting = threading.Lock()

        def stored(tables: Sequence[str]) -> None:
            with counting:
                due = progress.stored({n: row_events.get(n, 0) for n in tables}, time.monotonic())
                if due is not None:
                    self.pipeline.report("ledger", due[0], **due[1])

        return stored

    def _plan(
        self, name: str, batch_id: int, refused: Refused | None
    ) -> tuple[Projection, Refused | None]:
        """The projection of ``name``'s messages in this batch, with the messages it must
        refuse, once the table's schema steps are taken."""

        cdc = self.refs(name).cdc

        def phases() -> Projection:
            # Each step is a no-op once done, so a retry redoes only what is left. The
            # ledger is read once for the batch: its schema steps, its projection, its
            # files' target and its append (whose commit reads the metadata again).
            # The ledger is held from batch to batch and refreshed (HeldTables); one
            # its schema steps changed, perhaps retired and created again, is loaded anew.
            ledger = self._held.get(cdc)
            try:
                altered = alter_ledger(self.spark, self.pipeline, name, ledger)
            except BaseException:
                self._held.forget(cdc)
                raise
            if altered:
                self._held.forget(cdc)
                ledger = self._held.get(cdc)
            self._loaded[cdc] = ledger
            return projection(self.spark, self.pipeline, name, record=False, ledger=ledger)

        # At each batch: the schema file may have changed (phase 1, then the projection
        # the merge has acknowledged; see ledger/phases.py).
        try:
            plan = self._retried(f"ledger batch {batch_id}: schema phases of {name}", phases, name)
        except SchemaError as exc:
            # This table's ledger cannot take its change: its messages wait in its
            # dead-letter table (replayable), the batch's other tables flow on, and the
            # change is tried again next batch.
            why = (
                f"table {name}: its schema change could not be applied to the ledger "
                f"({exc.message}); replay these with `icetide dlt replay {name} --reason "
                f"{SCHEMA_CHANGE_FAILED}` once it applies"
            )
            self.pipeline.report("ledger", f"schema {name}: held: {why}", table=name)
            return Projection(self.pipeline.schema(name)), {
                ALL_MESSAGES: (SCHEMA_CHANGE_FAILED, why[:500])
            }
        return plan, refused

    def _switched(self, name: str, plan: Projection, batch_id: int) -> None:
        """Once ``name``'s rows are stored: phase 2, the projection switch, if this batch
        made it."""
        if plan.switch_to is not None:
            self._retried(
                f"ledger batch {batch_id}: schema phase 2 of {name}",
                partial(record_projection, self.spark, self.pipeline, name, plan.switch_to),
                name,
            )

    def _store_files(
        self,
        jobs: Mapping[str, TableJob],
        classified: DataFrame,
        batch_id: int,
        now: datetime,
        summary: BatchSummary,
        stored: Callable[[Sequence[str]], None],
    ) -> list[ChangeSignal]:
        """Write every table of ``jobs`` in one Spark job (:mod:`icetide.ledger.table_files`),
        then commit each table's files (:meth:`_commit_files`)."""
        batch = classified.where(
            F.col("table").isin(list(jobs)) & F.col("status").isin(ROW, DEAD)
        ).select(*INPUT_COLUMNS)
        written = collected(
            in_core_tasks(batch)
            .mapInArrow(write_table_files(jobs, now, self._wire), FILES_DDL)
            .collect()
        )
        return self._commit_files(jobs, written, batch_id, now, summary, stored)

    def _commit_files(
        self,
        jobs: Mapping[str, TableJob],
        written: Mapping[str, TableFiles],
        batch_id: int,
        now: datetime,
        summary: BatchSummary,
        stored: Callable[[Sequence[str]], None],
    ) -> list[ChangeSignal]:
        """Commit each table's files of ``jobs``, :data:`STORE_THREADS` tables at once,
        with the merge's figures and the unknown columns in each append's summary; the
        tables' counts added to ``summary``, their change signals returned."""
        ingested_us = micros(now)

        def commit(name: str) -> tuple[BatchSummary, list[ChangeSignal]]:
            job, part = jobs[name], BatchSummary(batch_id)
            signals: list[ChangeSignal] = []
            files = written.get(name)
            if files is None:  # no message of it reached the job (none in this batch)
                self._switched(name, job.plan, batch_id)
                stored([name])
                return part, signals
            refs, tally = self.refs(name), files.tally
            part.rows[name] = tally.rows
            for reason, n, samples in tally.dead():
                part.add_dead(reason, n, samples, name)
            if files.ledger:
                properties: dict[str, str] = {}
                figures = tally.combined_figures()
                if figures is not None:
                    version = job.plan.layout.version
                    properties[FIGURES_PROPERTY] = figures_json(
                        figures, version, job.buckets, ingested_us
                    )
                if tally.extra:
                    part.extra_columns[name] = dict(tally.extra)
                    properties[c.EXTRA_COLUMNS_PROPERTY] = json.dumps(tally.extra, sort_keys=True)
                    signals.append(_unknown_fields(name, tally.extra, tally.first_extra))
                self._append_files(
                    files.ledger, job.ledger, refs.cdc, batch_id, properties, of=name
                )
            if files.dead:
                self._append_files(files.dead, job.dead, refs.dead_letters, batch_id, of=name)
            self._switched(name, job.plan, batch_id)
            stored([name])
            return part, signals

        signals: list[ChangeSignal] = []
        for part, table_signals in run_all(
            commit, list(jobs), STORE_THREADS, "icetide-ledger", True
        ):
            summary.absorb(part)
            signals += table_signals
        return signals

    def _store_chunks(
        self,
        names: Sequence[str],
        planned: Mapping[str, tuple[Projection, Refused | None]],
        row_events: Mapping[str, int],
        classified: DataFrame,
        batch_id: int,
        now: datetime,
        summary: BatchSummary,
        routed_dead: set[str],
        stored: Callable[[Sequence[str]], None],
    ) -> list[ChangeSignal]:
        """Append each of ``names`` by Spark's writer, :data:`CHUNK_TABLES` tables a chunk
        and :data:`STORE_THREADS` chunks at once (:func:`chunks_of`)."""
        chunks = chunks_of(names, row_events)

        def store(chunk: Sequence[str]) -> tuple[BatchSummary, list[ChangeSignal]]:
            part = BatchSummary(batch_id)
            shares = [
                self._share(
                    name,
                    len(chunks) > 1 and row_events.get(name, 0) <= SMALL_SHARE,
                    classified,
                    *planned[name],
                    now,
                )
                for name in chunk
            ]
            signals: list[ChangeSignal] = []
            try:
                stats = self._share_stats(shares)
                for share in shares:
                    signals += self._store(
                        share,
                        classified,
                        stats.get(share.name, []),
                        batch_id,
                        now,
                        part,
                        share.name in routed_dead,
                    )
                    self._switched(share.name, share.plan, batch_id)
            finally:
                for share in shares:
                    share.projected.unpersist()
            stored(chunk)
            return part, signals

        # One chunk runs in this thread and pool; several, in the ledger's pool, with the
        # batch's job properties (its query and batch id, the pool) in their threads.
        several = len(chunks) > 1
        sc = self.spark.sparkContext
        if several:
            sc.setLocalProperty("spark.scheduler.pool", LEDGER_POOL)
        try:
            parts = run_all(store, chunks, STORE_THREADS, "icetide-ledger", True)
        finally:
            if several:
                sc.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]
        signals: list[ChangeSignal] = []
        for part, chunk_signals in parts:
            summary.absorb(part)
            signals += chunk_signals
        return signals

    def _share(
        self,
        name: str,
        one_task: bool,
        classified: DataFrame,
        plan: Projection,
        refused: Refused | None,
        now: datetime,
    ) -> _Share:
        """One table's part of the batch, projected (lazily, persisted once computed);
        ``one_task``: in one task (:data:`SMALL_SHARE`)."""
        # One filter for the table and the status: each DataFrame made here is analysed
        # (and given an encoder) in the JVM, a cost paid per table and batch that at
        # hundreds of tables was most of the driver's work.
        rows = classified.where((F.col("table") == name) & (F.col("status") == ROW)).select(
            "message_id", "raw"
        )
        if one_task:
            rows = rows.coalesce(1)
        projected = rows.mapInArrow(
            project_batches(plan, now, self._wire, refused), projected_spark_schema(plan)
        ).persist()
        return _Share(name, plan, projected, TableContract(plan.layout).target)

    def _share_stats(self, shares: Sequence[_Share]) -> dict[str, list[Any]]:
        """Each table's projection counts by status and reason, with the merge's figures
        (they land in the append's own snapshot summary; lake/ledger_figures.py): one job
        over the projections of ``shares`` (a chunk: never none)."""
        frames = [
            share.projected.groupBy(F.lit(share.name).alias(SHARE), STATUS, REASON).agg(
                F.count(F.lit(1)).alias("n"),
                # Samples of dead letters only: a ROW group's ids (the whole batch) would
                # all be buffered and shuffled, then cut to ten and never read.
                F.slice(
                    F.collect_list(F.when(F.col(STATUS) == DEAD, F.col(c.MESSAGE_ID))), 1, 10
                ).alias("samples"),
                F.sum(F.when(F.size(EXTRA) > 0, 1).otherwise(0)).alias("with_extra"),
                *figure_aggregates(
                    share.stored,
                    self.refs(share.name).catalog,
                    self.config.table(share.name).buckets,
                ),
            )
            for share in shares
        ]
        stats: dict[str, list[Any]] = {}
        # Every frame has the same columns in the same order: a positional union, not
        # one by name (a projection more per table to analyse).
        for row in reduce(DataFrame.union, frames).collect():
            stats.setdefault(row[SHARE], []).append(row)
        return stats

    def _store(
        self,
        share: _Share,
        classified: DataFrame,
        stats: Sequence[Any],
        batch_id: int,
        now: datetime,
        summary: BatchSummary,
        has_routed_dead: bool,
    ) -> list[ChangeSignal]:
        """Append one table's rows to its ledger and its dead letters to its dead-letter
        table; the signal of event columns its schema lacks, if any."""
        name, plan, projected = share.name, share.plan, share.projected
        signals: list[ChangeSignal] = []
        refs = self.refs(name)
        buckets = self.config.table(name).buckets
        ok = sum(r.n for r in stats if r[STATUS] == ROW)
        summary.rows[name] = ok
        for r in stats:
            if r[STATUS] == DEAD:
                summary.add_dead(r[REASON], r.n, list(r.samples), name)
        if ok:
            extra: dict[str, int] = {}
            if any(r[STATUS] == ROW and r.with_extra for r in stats):
                extra, first = self._extra_columns(projected)
                summary.extra_columns[name] = extra
                millis = int(first[2].timestamp() * 1000) if first[2] else None
                signals.append(_unknown_fields(name, extra, (first[0], first[1], millis)))
            rows = ledger_rows(projected, plan)
            appended = [r for r in stats if r[STATUS] == ROW]
            ingested_us = micros(now)
            properties = (
                {
                    FIGURES_PROPERTY: figures_json(
                        appended[0], plan.layout.version, buckets, ingested_us
                    )
                }
                if len(appended) == 1  # else the merge computes them from the rows
                else {}
            )
            if extra:
                properties[c.EXTRA_COLUMNS_PROPERTY] = json.dumps(extra, sort_keys=True)
            # Soft-deleted columns stay in the ledger's row images: written as NULL.
            self._append(rows, refs.cdc, batch_id, properties, aligned=True, of=name)
        if has_routed_dead or any(r[STATUS] == DEAD for r in stats):
            # Built only here: most tables have no dead letter in a batch, and each frame
            # costs an analysis in the JVM.
            dead_projected = projected.where(F.col(STATUS) == DEAD).select(
                F.col(c.MESSAGE_ID).alias("message_id"),
                F.lit(name).alias("table"),
                F.col(REASON).alias("reason"),
                F.col(ERROR).alias("error"),
                F.col(RAW).alias("raw"),
            )
            dead_routed = classified.where(
                (F.col("table") == name) & (F.col("status") == DEAD)
            ).select("message_id", "table", "reason", "error", "raw")
            self._append(
                self._dead_frame(dead_projected.unionByName(dead_routed), now),
                refs.dead_letters,
                batch_id,
                of=name,
            )
        return signals

    @staticmethod
    def _extra_columns(projected: DataFrame) -> tuple[dict[str, int], tuple[Any, Any, Any]]:
        """Event columns the schema lacks → how many stored events carried each; and the
        (position, position text, source time) of the first event carrying any."""
        carrying = projected.where((F.col(STATUS) == ROW) & (F.size(EXTRA) > 0))
        counts = (
            carrying.select(F.explode(EXTRA).alias("column")).groupBy("column").count().collect()
        )
        first = carrying.agg(
            F.min_by(F.struct(c.POSITION, c.POSITION_TEXT, c.SOURCE_TS), F.col(c.POSITION))
        ).first()
        values = tuple(first[0]) if first is not None and first[0] is not None else (None,) * 3
        return {str(r.column): int(r["count"]) for r in counts}, values

    # -- the query ---------------------------------------------------------------------
    def start(self, once: bool) -> StreamingQuery:
        """Start the streaming query; ``once`` processes what is there and stops."""
        self.ensure_tables()
        if self.watch is not None:
            # A run with no new file has no batch: look for changed files now as well.
            self.watch.check()
            self.watch.skipped()
        rows, self._split = source_rows(self.spark, self.config, self._starting())
        writer = (
            rows.writeStream.queryName(self.query_name)
            .option("checkpointLocation", str(self.checkpoint))
            .foreachBatch(self.process_batch)
        )
        if once:
            writer = writer.trigger(availableNow=True)
        else:
            seconds = max(1, int(self.config.schedule.stream_interval.total_seconds()))
            writer = writer.trigger(processingTime=f"{seconds} seconds")
        self._query_id = None
        return writer.start()
