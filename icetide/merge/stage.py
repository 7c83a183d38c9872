"""The merge stage: new ledger events since the watermark → version-guarded MERGE.

The watermark (the last ledger snapshot consumed) is a summary property of the base
table's own MERGE snapshot, so the batch and the memory of having applied it commit
together. Replaying any batch is a no-op anyway, because every base row carries the
position that produced it and only newer events apply.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icetide.bootstrap.resnapshot import resnapshot_round, resnapshot_under_way
from icetide.errors import CommitConflictError, SchemaError
from icetide.faults import crash_point
from icetide.lake.alter import int_property, set_properties, table_properties
from icetide.lake.commit import append_with_properties
from icetide.lake.defaults import initial_default_columns
from icetide.lake.ledger_figures import (
    BatchFigures,
    batch_figures,
    key_move,
    micros,
    tombstone,
)
from icetide.lake.payload import payload_b64
from icetide.lake.progress import read_merge_progress, read_new_events
from icetide.lake.tables import (
    TableRefs,
    column_upper_bound,
    current_snapshot_id,
    ensure_base_table,
    iceberg_table,
    lineage_summaries,
    metadata_snapshots,
    snapshot_of,
    table_exists,
)
from icetide.merge.compact import (
    Compaction,
    PackingTurn,
    PackingTurns,
    compact_small_files,
    merges_since_rewrite,
    removes_dangling,
)
from icetide.merge.converge import column_defaults, fill_defaults, fill_rescued
from icetide.merge.inherit import LOST, OLD, Inheritance, applicable, inherit
from icetide.merge.phases import (
    MergeVersion,
    align_images,
    merge_version,
    switch_base,
    version_of,
)
from icetide.merge.steps import MergeContext, changed_keys, prepare
from icetide.merge.strategy import SMALL_BASE_ROWS, apply_batch, choose, touched_buckets
from icetide.schema.contract import ledger as c
from icetide.schema.contract import phases as ph
from icetide.schema.contract.base import (
    EVENTS_PROPERTY,
    POSITION,
    STRATEGY_PROPERTY,
    WATERMARK_PROPERTY,
)
from icetide.schema.contract.builder import TableContract
from icetide.schema.contract.names import TableName
from icetide.schema.model import TableSchema
from icetide.schema.quoting import literal
from icetide.spark.errors import jvm_boundary
from icetide.spark.retry import retry_conflicts

if TYPE_CHECKING:
    from icetide.pipeline import Pipeline

IN_ORDER = "in order: no version guard or tombstone history needed"
"""What the merge log line and the commit's strategy property say of the in-order path."""


@dataclass(frozen=True)
class MergeResult:
    """What one merge of one table did."""

    table: str
    events: int
    start_snapshot: int | None
    end_snapshot: int | None
    seconds: float
    strategy: str | None = None
    """How the batch met the base (:mod:`icetide.merge.strategy`), None when nothing merged."""
    reason: str = ""
    """Why that strategy: configured, or what ``auto`` saw."""
    touched_buckets: int | None = None
    buckets: int | None = None
    compaction: Compaction | None = None
    """The small-file rewrite after the merge (:mod:`icetide.merge.compact`), if one ran."""
    in_order: bool = False
    """Every event was newer than every base row and remembered delete: the MERGE ran
    without its version guard and tombstone history (:meth:`MergeStage.merge_table`)."""

    def render(self) -> str:
        """One progress line."""
        if self.events == 0:
            return f"merge {self.table}: up to date"
        if self.start_snapshot is None:
            span = f"the ledger up to snapshot {self.end_snapshot} (first merge)"
        else:
            span = f"ledger snapshots after {self.start_snapshot} up to {self.end_snapshot}"
        line = f"merge {self.table}: {self.events:,} events from {span} in {self.seconds:.1f}s"
        if self.strategy is None:
            return line
        touched = (
            f", {self.touched_buckets}/{self.buckets} buckets touched"
            if self.touched_buckets is not None and self.strategy != "shuffle"
            else ""
        )
        line = f"{line} by {self.strategy} ({self.reason}{touched})"
        if self.in_order:
            line += f"; {IN_ORDER}"
        c = self.compaction
        if c is not None and c.rewritten:
            line += f"; {c.rewritten} small files bin-packed into {c.added}"
            if c.dangling_removed:
                line += f", {c.dangling_removed} dangling delete files removed"
        elif c is not None and c.deferred:
            line += "; small files packed at its next merge (another table packs this round)"
        return line


def _replace_blocker(
    in_order: bool, keep: Collection[str], has_moves: bool, base_snapshot: int | None
) -> str | None:
    """Why the batch cannot be applied by ``delete_insert`` (which replaces each key's
    row whole, without reading it), or None when it can."""
    if not in_order:
        return "the batch is not known to be newer than the base (in order)"
    if keep:
        columns = ", ".join(sorted(keep))
        return f"events leave {columns} unchanged (TOAST): the stored values are read"
    if has_moves:
        return "key changes take values from the old rows"
    if base_snapshot is None:
        return "the base has no snapshot yet"
    return None


class MergeStage:
    """Merges each table's new ledger events into its base table."""

    def __init__(self, spark: SparkSession, pipeline: Pipeline) -> None:
        self.spark = spark
        self.pipeline = pipeline
        self.config = pipeline.config
        self._turns = PackingTurns()
        """Which table packs its small files in each round (:mod:`icetide.merge.compact`)."""

    def refs(self, table: str) -> TableRefs:
        """The Iceberg names of ``table``."""
        return self.pipeline.refs(table)

    def ensure_base(self, name: str, contract: TableContract | None = None) -> None:
        """Create the base table (and namespace) when missing, at ``contract``'s version
        (default: the current schema)."""
        ensure_base_table(
            self.spark, self.refs(name).base, contract or self.pipeline.contract(name)
        )

    def run_once(self, before_each: Callable[[], None] | None = None) -> list[MergeResult]:
        """Merge every configured table once, ``merge.parallel_tables`` at a time; the
        results in config order. ``before_each`` runs before each table's merge (a stop
        check: raising there merges no more tables).

        Tables are merged in threads of this one SparkSession: one merge's planning,
        commits and Python work on the driver overlap another's tasks (the demo's three
        small tables merged two at a time: docs/merge-performance.md). A merge refused
        because another writer (maintenance) committed first is merged again: it
        committed nothing, and a replayed batch is a no-op anyway. The first failure is
        raised once every merge under way has ended.
        """

        def one(name: str) -> MergeResult:
            if before_each is not None:
                before_each()
            return retry_conflicts(f"merge of {name}", partial(self.merge_table, name, turn))

        names = [t.name for t in self.config.tables]
        turn = self._turns.open_round()
        try:
            workers = min(self.config.merge.parallel_tables, len(names))
            if workers <= 1:
                return [one(name) for name in names]
            with ThreadPoolExecutor(workers, thread_name_prefix="icetide-merge") as pool:
                futures = [pool.submit(one, name) for name in names]
                wait(futures)
            return [future.result() for future in futures]
        finally:
            self._turns.close_round(turn)

    def merge_table(self, name: str, turn: PackingTurn | None = None) -> MergeResult:
        """Merge the new ledger events of one table. ``turn``: its round's one turn to
        pack small files; None (one table merged alone) packs whenever due."""
        started = time.monotonic()
        refs = self.refs(name)
        # One schema for the whole batch: the ledger's layout version, read before the
        # end snapshot (merge/phases.py).
        run = merge_version(self.spark, self.pipeline, name)
        contract = run.contract
        schema = contract.target  # the ledger's and base's names and types
        self.ensure_base(name, contract)
        if resnapshot_under_way(self.pipeline, name):
            return self._resnapshot(name, run, started)
        # Loaded once for what the merge asks of the base before its MERGE (its
        # snapshots; an ALTER by switch_base below changes none of them).
        base_table = iceberg_table(self.spark, refs.base)
        progress = read_merge_progress(self.spark, refs.base, base_table)
        bootstrap = progress.bootstrap
        if bootstrap is not None and bootstrap[1] == "running":
            self.pipeline.report(
                "merge",
                f"merge {name}: waiting for bootstrap {bootstrap[0]} to finish",
                table=name,
                waiting_for=bootstrap[0],
            )
            return MergeResult(name, 0, None, None, 0.0)
        if not table_exists(self.spark, refs.cdc):
            return MergeResult(name, 0, None, None, 0.0)
        try:
            switch_base(self.spark, self.pipeline, name, contract)
        except SchemaError:
            # No ALTER takes the base to the ledger's layout (an approved key change,
            # narrowing or type-category change): rebuild it from the source.
            return self._resnapshot(name, run, started)
        crash_point("merge.after_switch")
        ledger = iceberg_table(self.spark, refs.cdc)  # loaded once: end and figures
        snapshot = ledger.currentSnapshot()
        end = None if snapshot is None else int(snapshot.snapshotId())
        start = progress.watermark
        if end is None or end == start:
            self._converge(name, run, end)
            return MergeResult(name, 0, start, end, 0.0)
        events = align_images(
            read_new_events(self.spark, refs.cdc, start, end), self.pipeline, name, schema
        )
        configured = self.config.table(name).merge.strategy
        pre = snapshot_of(base_table)
        rows = int(pre.summary.get("total-records", "0") or 0) if pre is not None else 0
        may_prune = configured in ("bucket_join_pruned", "delete_insert") or (
            configured == "auto" and rows >= SMALL_BASE_ROWS
        )
        cutoff = datetime.now(UTC) - self.config.merge.tombstone_retention
        figures = self._recorded_figures(ledger, start, end, cutoff, contract)
        history: DataFrame | None = None
        in_order = False
        key_changes = True  # unless the ledger's figures say none
        if figures is not None:
            # The ledger recorded them with the events (spark/ledger_figures.py): no Spark job.
            count, batch_truncate = figures.count, figures.truncate
            truncated_before = max(
                (m for m in (batch_truncate, figures.earlier) if m is not None), default=None
            )
            keep = figures.unavailable
            has_moves = figures.moves
            key_changes = figures.key_changes
            touched: list[int] | None = list(figures.touched) if may_prune else None
            in_order = self._in_order(figures, refs.base, base_table)
            if (figures.history_tombstones > 0 and not in_order) or has_moves:
                # Without it when there is nothing to remember (no delete, truncate or
                # key change) or nothing remembered could win over the batch. A key
                # change's look-up of lost values needs it (merge/inherit.py).
                history = self._history(refs.cdc, start, schema, cutoff)
        else:
            history = self._history(refs.cdc, start, schema, cutoff)
            count, batch_truncate, truncated_before, keep, has_moves, touched = self._figures(
                events, history, schema, contract, refs.base, may_prune
            )
        if batch_truncate is not None:
            # Its own commit, before the MERGE that carries the watermark: if we die in
            # between, the replay deletes the same rows again and nothing else.
            self.spark.sql(
                f"DELETE FROM {refs.base} WHERE {POSITION} < "
                f"CAST({literal(str(batch_truncate))} AS {c.POSITION_SQL})"
            )
            crash_point("merge.after_truncate")
        # Columns some event left out (unchanged TOAST): only they can keep a stored
        # value, so only they are read from the base by the MERGE.
        has_unavailable = bool(keep)
        moves: DataFrame | None = None
        inheritance: Inheritance | None = None
        try:
            if has_moves:
                # After the truncate's DELETE: an old row it removed has no values to give.
                inheritance = inherit(
                    self.spark, events, history, refs.base, schema, refs.cdc, start
                )
                resolved = inheritance.resolved
                self._dead_letter_lost(name, schema, resolved.where(F.size(LOST) > 0))
                moves = applicable(resolved, schema)
            ctx = MergeContext(
                schema, history, truncated_before, has_unavailable, moves, key_changes
            )
            before = (
                current_snapshot_id(self.spark, refs.base)  # after the truncate's DELETE
                if batch_truncate is not None
                else (None if pre is None else pre.snapshot_id)
            )
            blocker = _replace_blocker(in_order, keep, has_moves, before)
            choice = choose(configured, rows, count, blocker)
            properties = {
                WATERMARK_PROPERTY: str(end),
                EVENTS_PROPERTY: str(count),
                STRATEGY_PROPERTY: f"{choice.strategy}: {choice.reason}"
                + (f"; {IN_ORDER}" if in_order else ""),
            }
            applied = apply_batch(
                self.spark,
                choice.strategy,
                contract,
                refs.base,
                lambda: prepare(events, ctx),
                f"icetide_batch_{name}",
                properties,
                keep,
                touched,
                guarded=not in_order,
                keys=(
                    changed_keys(events, schema, key_changes)
                    if choice.strategy == "delete_insert"
                    else None
                ),
            )
            after: Any = iceberg_table(self.spark, refs.base)
            committed = snapshot_of(after)
            if (None if committed is None else committed.snapshot_id) == before:
                self._commit_watermark_only(refs.base, properties)
                after = None  # read again below
            crash_point("merge.after_commit")
        finally:
            if inheritance is not None:
                inheritance.release()
        self._converge(name, run, end, after)
        compaction = self._compact(name, refs.base, contract, turn, after)
        result = MergeResult(
            name,
            count,
            start,
            end,
            time.monotonic() - started,
            choice.strategy,
            choice.reason,
            applied.touched_buckets,
            applied.buckets,
            compaction,
            in_order,
        )
        self.pipeline.report(
            "merge",
            result.render(),
            table=name,
            events=count,
            start_snapshot=start,
            end_snapshot=end,
            seconds=round(result.seconds, 3),
            strategy=choice.strategy,
            strategy_reason=choice.reason,
            touched_buckets=applied.touched_buckets,
            compacted_files=compaction.rewritten if compaction else 0,
            dangling_deletes_removed=compaction.dangling_removed if compaction else 0,
            packing_deferred=bool(compaction and compaction.deferred),
            in_order=in_order,
        )
        return result

    def _recorded_figures(
        self,
        ledger: Any,
        start: int | None,
        end: int,
        cutoff: datetime,
        contract: TableContract,
    ) -> BatchFigures | None:
        """The batch's figures from the ledger's snapshot summaries, or None when a
        snapshot lacks them (:func:`~icetide.lake.ledger_figures.batch_figures`)."""
        _, lineage = metadata_snapshots(self.spark, ledger)
        cutoff_us = micros(cutoff)
        return batch_figures(
            lineage, start, end, cutoff_us, contract.schema.version, contract.settings.buckets
        )

    def _in_order(self, figures: BatchFigures, base: TableName, loaded: Any) -> bool:
        """Whether every event of the batch is newer than every row of ``base`` (its
        Iceberg table ``loaded``) and every tombstone the merge would remember (see
        :meth:`~icetide.lake.ledger_figures.BatchFigures.in_order`).

        The base's newest position comes from its file metrics, not from what the
        merges recorded, so rows a bootstrap or re-snapshot copied count as well.
        Unknown (figures without positions, metrics off) answers False: the guarded
        path is always right, only slower.
        """
        if not figures.positions_recorded:
            return False
        newest = column_upper_bound(self.spark, base, POSITION, loaded)
        return newest.known and figures.in_order(newest.value)

    def _figures(
        self,
        events: DataFrame,
        history: DataFrame | None,
        schema: TableSchema,
        contract: TableContract,
        base: TableName,
        may_prune: bool,
    ) -> tuple[int, Decimal | None, Decimal | None, frozenset[str], bool, list[int] | None]:
        """The batch's figures from its rows, when the ledger did not record them: its
        event count, its newest truncate, the newest truncate before the next merge's
        rows may apply (the history's too), the placeholder columns, whether a key change
        lacks values, and the buckets it touches (None unless ``may_prune``).

        One job for all of them; the earlier truncates come from the same job (a scan
        Iceberg narrows to the row groups holding a 't')."""
        figures = events.select(
            F.lit(1).alias("n"),
            F.when(F.col(c.OP) == "t", F.col(c.POSITION)).alias("truncate"),
            F.col(c.UNAVAILABLE).alias("unavailable"),
            F.when(key_move(schema), 1).alias("moves"),
            *(touched_buckets(contract, base) if may_prune else ()),
        )
        if history is not None:
            earlier = history.where(F.col(c.OP) == "t").select(F.col(c.POSITION).alias("earlier"))
            figures = figures.unionByName(earlier, allowMissingColumns=True)
        stats = figures.agg(
            F.sum("n").alias("n"),
            F.max("truncate").alias("truncate"),
            F.array_distinct(F.flatten(F.collect_set("unavailable"))).alias("unavailable"),
            F.max("moves").alias("moves"),
            *(
                [F.array_union(F.collect_set("bucket"), F.collect_set("old_bucket")).alias("b")]
                if may_prune
                else []
            ),
            *([F.max("earlier").alias("earlier")] if history is not None else []),
        ).first()
        assert stats is not None
        batch_truncate = stats["truncate"]
        marks = [
            m
            for m in (batch_truncate, stats["earlier"] if history is not None else None)
            if m is not None
        ]
        return (
            int(stats["n"] or 0),
            batch_truncate,
            max(marks) if marks else None,
            frozenset(stats["unavailable"] or ()),
            bool(stats["moves"]),
            sorted(stats["b"]) if may_prune else None,
        )

    def _resnapshot(self, name: str, run: MergeVersion, started: float) -> MergeResult:
        """One round of ``name``'s re-snapshot (:mod:`icetide.bootstrap.resnapshot`):
        the next chunk of the copy into its rebuilt base; the table's merge waits
        until the last one, the other tables' merges go on."""
        version = run.contract.schema.version
        done = resnapshot_round(
            self.spark,
            self.pipeline,
            name,
            chunk_rows=self.config.table(name).merge.resnapshot_chunk_rows,
        )
        if done:
            set_properties(
                self.spark,
                self.refs(name).base,
                dict.fromkeys((ph.BASE_ALTERED, ph.DATA_FILLED), str(int(time.time() * 1000))),
            )
        state = "rebuilt; merging its ledger from the next round" if done else "under way"
        self.pipeline.report(
            "merge",
            f"re-snapshot {name} (schema version {version}): {state}",
            table=name,
            version=version,
            resnapshot="done" if done else "running",
        )
        return MergeResult(name, 0, None, None, time.monotonic() - started)

    def _compact(
        self,
        name: str,
        base: TableName,
        contract: TableContract,
        turn: PackingTurn | None,
        loaded: Any = None,
    ) -> Compaction | None:
        """Bin-pack the base's small files when ``merge.compact_every`` merges have added
        files since its last rewrite (:mod:`icetide.merge.compact`). ``loaded``: the
        base's Iceberg table as of the merge's commit, when the caller has it."""
        every = self.config.table(name).merge.compact_every
        if every == 0:
            return None
        loaded = loaded or iceberg_table(self.spark, base)
        snapshot = snapshot_of(loaded)
        if snapshot is None:
            return None
        summaries = list(lineage_summaries(self.spark, base, loaded))
        if not self._turns.due(name, merges_since_rewrite(summaries), every):
            return None
        if not self._turns.take(turn, name):
            return Compaction(0, 0, deferred=True)
        try:
            with jvm_boundary(f"bin-packing the small files of {base}"):
                return compact_small_files(
                    self.spark,
                    base,
                    snapshot.summary,
                    contract.settings.buckets,
                    self.config.maintenance.target_file_size,
                    remove_dangling=removes_dangling(summaries),
                )
        except CommitConflictError as exc:
            # Rows are unchanged either way; the next merge tries again.
            self.pipeline.report(
                "merge",
                f"merge {name}: small-file rewrite left to the next merge ({exc})",
                table=name,
            )
            return None

    def _converge(self, name: str, run: MergeVersion, end: int | None, loaded: Any = None) -> None:
        """Phase 3 once the ledger projects this version: every ledger row still holding
        a new column's value in ``_rescued`` is in snapshot ``end``, and merged.
        ``loaded``: the base's Iceberg table, when the caller has it as of now."""
        version = run.contract.schema.version
        base = self.refs(name).base
        props = table_properties(self.spark, base, loaded)
        done = int_property(props, ph.DATA_VERSION)
        if done is None or done >= version or (run.projected or 0) < version:
            return
        since = version_of(self.pipeline, name, done)
        rescued = (
            fill_rescued(self.spark, self.pipeline, name, run.contract, since, end) if end else 0
        )
        constants = column_defaults(run.contract.schema)
        if run.contract.settings.format_version >= 3:  # read as initial-default: no fill
            initial = initial_default_columns(self.spark, base)
            target = run.contract.target
            constants = {i: v for i, v in constants.items() if target.find(i).name not in initial}
        defaults = fill_defaults(
            self.spark,
            self.pipeline,
            name,
            run.contract,
            since,
            run.change_position,
            constants,
        )
        crash_point("merge.after_fill")
        set_properties(
            self.spark,
            base,
            {ph.DATA_VERSION: str(version), ph.DATA_FILLED: str(int(time.time() * 1000))},
        )
        self.pipeline.report(
            "merge",
            f"schema {name}: data converged at version {version} (phase 3: {rescued:,} "
            f"rescued events, {defaults} default columns)",
            table=name,
            version=version,
            phase=3,
            rescued=rescued,
        )

    def _history(
        self, ledger: TableName, start: int | None, schema: TableSchema, cutoff: datetime
    ) -> DataFrame | None:
        """Deletes and truncates merged before this batch, ingested at ``cutoff`` or later
        (the retention window)."""
        if start is None:
            return None
        earlier = self.spark.read.format("iceberg").option("snapshot-id", start)
        rows = (
            earlier.load(ledger.dotted)
            .where(F.col(c.INGESTED_AT) >= F.lit(cutoff))
            .where(tombstone(schema))
        )
        return align_images(rows, self.pipeline, schema.table, schema)

    def _dead_letter_lost(self, name: str, schema: TableSchema, lost: DataFrame) -> None:
        """Dead-letter the key changes whose unavailable values were found nowhere.

        Before the MERGE commits, so a crash in between reruns the batch: a message id the
        dead-letter table already holds for this reason is not written again.
        """
        keys = schema.primary_key
        new_key = F.to_json(F.struct(*[F.col(k) for k in keys]))
        old_key = F.coalesce(
            F.to_json(F.col(OLD)), F.lit("an unknown key (no delete of the same source event)")
        )
        error = F.concat(
            F.lit(f"table {name}: primary-key change from "),
            old_key,
            F.lit(" to "),
            new_key,
            F.lit(" at "),
            F.col(c.POSITION_TEXT),
            F.lit(": columns "),
            F.array_join(F.col(LOST), ", "),
            F.lit(
                " were unchanged TOAST values (PostgreSQL does not send them) and the old "
                "row is neither in the batch nor in the mirror (nor its retained snapshots), "
                "so their values are unknown; "
                "the change was not applied rather than writing NULLs. Re-copy the row "
                "(icetide bootstrap), or set REPLICA IDENTITY FULL on the source table so "
                "key changes carry every value"
            ),
        )
        payload = F.to_json(
            F.struct(
                F.col(c.OP).alias("op"),
                F.col(OLD).alias("old_key"),
                F.col(c.AFTER).alias("after"),
                F.col(LOST).alias("unavailable"),
                F.col(c.POSITION_TEXT).alias("position"),
                F.col(c.TX_ID).alias("tx_id"),
            ),
            {"ignoreNullFields": "false"},
        )
        dead = lost.select(
            F.col(c.MESSAGE_ID).alias("message_id"),
            F.lit(name).alias("source_table"),
            F.lit(c.UNAVAILABLE_VALUE_LOST).alias("reason"),
            error.alias("error"),
            payload_b64(F.encode(payload, "UTF-8")).alias("payload_b64"),
            F.lit(datetime.now(UTC)).alias("ingested_at"),
        )
        if lost.isEmpty():  # the usual case: a look at the cached moves, no table read
            return
        dead_letters = self.refs(name).dead_letters
        self.spark.sql(TableContract.dead_letter_ddl(dead_letters))
        written = (
            self.spark.table(dead_letters.sql)
            .where(F.col("reason") == c.UNAVAILABLE_VALUE_LOST)
            .select("message_id")
        )
        fresh = dead.join(written, "message_id", "left_anti").persist()
        try:
            count = fresh.count()
            if count:
                fresh.writeTo(dead_letters.sql).append()
                crash_point("merge.after_dead_letters")
                self.pipeline.report(
                    "merge",
                    f"merge {name}: {count:,} key changes with unknown unchanged-TOAST values "
                    f"not applied, dead-lettered to {dead_letters} ({c.UNAVAILABLE_VALUE_LOST})",
                    table=name,
                    dead_letters=count,
                )
        finally:
            fresh.unpersist()

    def _commit_watermark_only(self, base: TableName, properties: dict[str, str]) -> None:
        """A MERGE that changed nothing made no snapshot: record the watermark anyway."""
        append_with_properties(self.spark.table(base.sql).limit(0), base, properties)
