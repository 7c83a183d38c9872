"""``icetide bootstrap``: copy one source's tables into their empty base tables.

:class:`Bootstrap` takes the hand-off on the source (the MySQL low watermark, the
PostgreSQL slot's snapshot), records capture's start offset, then copies each table in
chunks; see :mod:`icetide.bootstrap` for why the hand-off is exact.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icetide.bootstrap.jdbc import TableReader, read_name
from icetide.bootstrap.mysql import MySQLReader
from icetide.bootstrap.plan import NUMERIC_KEYS, Chunk, plan_chunks
from icetide.bootstrap.postgres import PgSnapshot, PostgresSnapshotReader
from icetide.bootstrap.sink import CONVERSION_ERROR, SOURCE_ROW, sink_frame
from icetide.bootstrap.state import (
    RESNAPSHOT,
    State,
    load_state,
    new_state,
    offset_text,
    save_state,
    state_path,
)
from icetide.bootstrap.write import chunks_done, mark, write_chunk
from icetide.capture.errors import CaptureError
from icetide.capture.mysql.handoff import mysql_watermark
from icetide.capture.postgres.handoff import Resuming, postgres_handoff
from icetide.capture.runner import offset_store
from icetide.config.sections import SourceConfig
from icetide.config.tables import TableConfig
from icetide.events.position import lsn_position, parse_lsn
from icetide.events.project import TYPE_MISMATCH
from icetide.events.sink_values import CONVERSION_FAILED
from icetide.lake.payload import payload_b64
from icetide.lake.progress import read_bootstrap_state
from icetide.lake.tables import ensure_base_table, table_exists
from icetide.schema.contract.base import POSITION, SOURCE_TS
from icetide.schema.contract.builder import TableContract
from icetide.schema.contract.names import TableName
from icetide.schema.model import TableSchema
from icetide.schema.quoting import quote
from icetide.sources.connect import connect_postgres

if TYPE_CHECKING:
    from icetide.pipeline import Pipeline


@dataclass(frozen=True)
class TableBootstrap:
    """What bootstrapping one table did."""

    table: str
    rows: int
    chunks: int
    skipped: int
    seconds: float

    def render(self) -> str:
        """One result line."""
        resumed = f", {self.skipped} already done" if self.skipped else ""
        return (
            f"bootstrap {self.table}: {self.rows:,} rows in {self.chunks} chunks{resumed} "
            f"({self.seconds:.1f}s)"
        )


class Bootstrap:
    """Copies the tables of one source into their base tables; see :mod:`icetide.bootstrap`."""

    def __init__(
        self,
        spark: SparkSession,
        pipeline: Pipeline,
        source: SourceConfig,
        *,
        chunk_rows: int = 200_000,
        parallelism: int = 2,
        fetch_size: int = 10_000,
        between_chunks: Callable[[], None] = lambda: None,
        resnapshot: str | None = None,
    ) -> None:
        self.spark, self.pipeline, self.source = spark, pipeline, source
        self.config = config = pipeline.config
        self.chunk_rows, self.parallelism, self.fetch_size = chunk_rows, parallelism, fetch_size
        self.between_chunks = between_chunks
        """Called before each chunk; the CLI's stop check raises there on Ctrl-C, which
        is safe because every chunk is its own commit and a rerun resumes at the next."""
        self.state_file = state_path(config, source)
        self.resnapshot = resnapshot
        """The table a re-snapshot run by the merge copies (:mod:`icetide.bootstrap.
        resnapshot`): recorded in the state, so the merge knows the bootstrap is its own."""

    def run(
        self, tables: Sequence[str] | None = None, *, replace: bool = False
    ) -> list[TableBootstrap]:
        """Bootstrap ``tables`` (default: every table of the source)."""
        every = self.config.source_tables(self.source)
        chosen = [t for t in every if not tables or t.name in tables]
        store = offset_store(self.config, self.source)
        with ExitStack() as stack:
            state = load_state(self.state_file)
            resumed = state is not None
            reader: TableReader
            if self.source.type == "mysql":
                state = state or self._mysql_state()
                reader = MySQLReader(self.source)
            else:
                tables_of_source = [str(t.source) for t in every]
                state, reader = self._postgres_reader(stack, state, tables_of_source, store.load())
            if resumed:
                self.pipeline.report(
                    "bootstrap",
                    f"bootstrap {self.source.name}: resuming {state['id']} "
                    f"(capture starts at {offset_text(state)})",
                )
            else:
                if self.resnapshot is not None:
                    state[RESNAPSHOT] = self.resnapshot
                save_state(self.state_file, state)
            if store.load() is None:
                store.save(state["offset"], position=offset_text(state))
            results = []
            for table in chosen:
                refs = self.pipeline.refs(table.name)
                current = (
                    read_bootstrap_state(self.spark, refs.base)
                    if table_exists(self.spark, refs.base)
                    else None
                )
                if current == (state["id"], "done"):
                    continue
                if current is None or current[0] != state["id"]:
                    self._claim(table, refs.base, state["id"], replace)
                results.append(self._copy(table, refs.base, state, reader))
                mark(self.spark, refs.base, state["id"], "done", self._log_position())
                self.pipeline.report("bootstrap", results[-1].render())
        self.state_file.delete()
        return results

    def _log_position(self) -> int:
        """The source's log position now (packed): read after a table's copy, the
        position its copy and the ledger are exact from (an as-of before it is refused)."""
        if self.source.type == "mysql":
            return mysql_watermark(self.source).position.key
        conn = connect_postgres(self.source)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_current_wal_insert_lsn()::text")
                row = cur.fetchone()
        finally:
            conn.close()
        return lsn_position(parse_lsn(str(row[0])), 0).key

    def _mysql_state(self) -> State:
        watermark = mysql_watermark(self.source)
        self.pipeline.report(
            "bootstrap", f"bootstrap {self.source.name}: low watermark {watermark.position.text}"
        )
        return new_state(watermark.offset, watermark.position)

    def _postgres_reader(
        self,
        stack: ExitStack,
        state: State | None,
        tables: list[str],
        saved_offset: dict[str, Any] | None,
    ) -> tuple[State, PostgresSnapshotReader]:
        """The state (new unless resuming) and a reader in the hand-off's snapshot, open
        until ``stack`` closes.

        Rows are stamped with position 0, not with the slot's consistent point: see
        :mod:`icetide.bootstrap` for why.
        """
        resuming = Resuming(state["id"], offset_text(state)) if state is not None else None
        handoff = stack.enter_context(
            postgres_handoff(self.source, tables, resuming, saved_offset, self.pipeline.reporter)
        )
        if state is None:
            assert handoff.start is not None
            start = handoff.start
            state = new_state(
                start.offset, lsn_position(0), offset_text=start.text, snapshot=start.how
            )
        snapshot = PgSnapshot(handoff.snapshot, handoff.snapshot_text)
        return state, PostgresSnapshotReader(self.source, handoff.conn, snapshot)

    def _claim(self, table: TableConfig, base: TableName, bootstrap_id: str, replace: bool) -> None:
        """Make sure the base is empty (or dropped, with ``replace``) and mark it running."""
        if table_exists(self.spark, base):
            if replace:
                self.spark.sql(f"DROP TABLE {base} PURGE")
            elif self.spark.table(base.sql).limit(1).count() > 0:
                raise CaptureError(
                    f"base table {base} of {table.name!r} already has rows",
                    hint="bootstrap fills an empty mirror; pass --replace to drop and reload it",
                )
        ensure_base_table(self.spark, base, self.pipeline.contract(table.name))
        mark(self.spark, base, bootstrap_id, "running")

    def _plan(
        self, table: TableConfig, state: State, reader: TableReader, schema: TableSchema
    ) -> list[Chunk]:
        """The table's chunks, planned once per bootstrap: a resume must split the keys
        exactly as the first run did, or chunks would overlap or leave gaps."""
        key = schema.primary_key[0]
        plans = state.setdefault("plans", {})
        plan = plans.get(table.name)
        if plan is None:
            numeric = schema.key_columns[0].type.name in NUMERIC_KEYS
            low, high, count = reader.key_range(table, key) if numeric else (None, None, 1)
            plan = {
                "low": low,
                "high": high,
                "rows": count,
                "chunk_rows": self.chunk_rows,
                "parts": self.parallelism,
            }
            plans[table.name] = plan
            save_state(self.state_file, state)
        return plan_chunks(
            reader.quote(read_name(schema, key)),
            plan["low"],
            plan["high"],
            plan["rows"],
            plan["chunk_rows"],
            plan["parts"],
        )

    def _copy(
        self, table: TableConfig, base: TableName, state: State, reader: TableReader
    ) -> TableBootstrap:
        started = time.monotonic()
        schema = self.pipeline.schema(table.name)
        chunks = self._plan(table, state, reader, schema)
        done = chunks_done(self.spark, base, state["id"])
        stamp = F.lit(str(state["position"])).cast("decimal(38,0)").alias(POSITION)
        loaded_at = F.lit(datetime.now(UTC).replace(tzinfo=None)).cast("timestamp").alias(SOURCE_TS)
        rows = 0
        finished = len(done)
        for chunk in chunks:
            if chunk.index in done:
                continue
            self.between_chunks()
            frame = reader.chunk(self.spark, table, schema, chunk, self.fetch_size)
            frame = frame.select("*", stamp, loaded_at)
            held: list[DataFrame] = []
            if CONVERSION_ERROR in frame.columns:
                # The reader could not turn some values into the column's type (an array
                # of other dimensions than the column's list): dead letters, as capture's
                # change of the row would be (type_mismatch).
                frame = self._dead_letters(frame, table, state["id"], chunk.index, TYPE_MISMATCH)
                held.append(frame)
                frame = frame.where(F.col(CONVERSION_ERROR).isNull())
                frame = frame.drop(CONVERSION_ERROR, SOURCE_ROW)
            if schema.sink.maps:
                converted = self._to_sink(frame, table, state["id"], chunk.index)
                held.append(converted)
                frame = converted.where(F.col(CONVERSION_ERROR).isNull())
                frame = frame.drop(CONVERSION_ERROR, SOURCE_ROW)
            rows += write_chunk(self.spark, frame, base, table.name, state["id"], chunk.index)
            for persisted in held:
                persisted.unpersist()
            finished += 1
            self.pipeline.report(
                "bootstrap",
                f"bootstrap {table.name}: chunk {chunk.index + 1}/{len(chunks)}, "
                f"{rows:,} rows ({rows / max(time.monotonic() - started, 1e-9):,.0f} rows/s)",
                table=table.name,
                rows=rows,
                done=finished,
                total=len(chunks),
                bar=f"bootstrap {table.name}",
            )
        return TableBootstrap(table.name, rows, len(chunks), len(done), time.monotonic() - started)

    def _to_sink(
        self, frame: DataFrame, table: TableConfig, bootstrap_id: str, index: int
    ) -> DataFrame:
        """The chunk in the sink's names, types and conversions (as the ledger writes
        rows), persisted (the caller unpersists it after the chunk's commit); a row with
        a value the sink cannot convert goes to the dead-letter table
        (``conversion_failed``, its source values as the payload) before the chunk
        commits, so a resumed chunk may dead-letter it again but never loses it."""
        contract = self.pipeline.contract(table.name)
        converted = sink_frame(frame, contract, keep=[POSITION, SOURCE_TS])
        return self._dead_letters(
            converted, table, bootstrap_id, index, CONVERSION_FAILED, contract.target
        )

    def _dead_letters(
        self,
        frame: DataFrame,
        table: TableConfig,
        bootstrap_id: str,
        index: int,
        reason: str,
        columns: TableSchema | None = None,
    ) -> DataFrame:
        """``frame`` persisted, after its rows with a :data:`CONVERSION_ERROR` went to the
        table's dead-letter table with ``reason`` (message id ``bootstrap/<id>/<chunk>/
        <key>``, the row's source values as the payload); ``columns``: the schema the
        frame's key columns are named by (default: the table's)."""
        frame = frame.persist()
        failed = frame.where(F.col(CONVERSION_ERROR).isNotNull())
        if failed.limit(1).count():
            schema = self.pipeline.schema(table.name)
            named = columns if columns is not None else schema
            dead_letters = self.pipeline.refs(table.name).dead_letters
            self.spark.sql(TableContract.dead_letter_ddl(dead_letters))
            keys = [F.col(quote(named.find(k.id).name)).cast("string") for k in schema.key_columns]
            failed.select(
                F.concat_ws(
                    "/", F.lit("bootstrap"), F.lit(bootstrap_id), F.lit(str(index)), *keys
                ).alias("message_id"),
                F.lit(table.name).alias("source_table"),
                F.lit(reason).alias("reason"),
                F.col(CONVERSION_ERROR).alias("error"),
                payload_b64(F.encode(F.col(SOURCE_ROW), "UTF-8")).alias("payload_b64"),
                F.current_timestamp().alias("ingested_at"),
            ).writeTo(dead_letters.sql).append()
        return frame
