"""The merge stage: new ledger events since the watermark → version-guarded MERGE.

The watermark (the last ledger snapshot consumed) is a summary property of the base
table's own MERGE snapshot, so the batch and the memory of having applied it commit
together. Replaying any batch is a no-op anyway, because every base row carries the
position that produced it and only newer events apply.

What the merge does with a batch is decided in pure code
(:func:`~icetide.merge.strategy.plan_batch`); this module reads what the plan needs and
carries it out, and :mod:`icetide.merge.round` holds the work of a round besides the
batch.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icetide.bootstrap.resnapshot import resnapshot_under_way
from icetide.errors import IcetideError, SchemaError, failure_line
from icetide.faults import crash_point
from icetide.lake.alter import table_properties
from icetide.lake.commit import append_with_properties
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
    iceberg_table_if_exists,
    metadata_snapshots,
    snapshot_of,
    snapshots_since,
)
from icetide.merge.compact import Compaction, PackingTurn
from icetide.merge.history import HistoryKeeper, SameBatch
from icetide.merge.inherit import LOST, OLD, Inheritance, applicable, inherit
from icetide.merge.phases import MergeVersion, align_images, switch_base, version_run
from icetide.merge.race import ATTEMPT_PROPERTY, ConcurrentMergeError, concurrent_merges
from icetide.merge.round import MergeRounds
from icetide.merge.steps import MergeContext, changed_keys, prepare
from icetide.merge.strategy import (
    IN_ORDER,
    Applied,
    BaseState,
    BatchPlan,
    apply_batch,
    plan_batch,
    prunes_buckets,
    republish_line,
    touched_buckets,
)
from icetide.schema.contract import ledger as c
from icetide.schema.contract.base import POSITION
from icetide.schema.contract.builder import TableContract
from icetide.schema.contract.names import TableName
from icetide.schema.model import TableSchema
from icetide.schema.quoting import literal
from icetide.spark.retry import classify, retry_step
from icetide.stopping import Stopped

if TYPE_CHECKING:
    from icetide.pipeline import Pipeline


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
    without its version guard and tombstone history
    (:attr:`~icetide.merge.strategy.BatchPlan.in_order`)."""

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


@dataclass(frozen=True)
class _Merged:
    """One batch merged: its plan, what its strategy did, and the base's Iceberg table
    as of its commit (None: the steps after the batch read it again)."""

    plan: BatchPlan
    applied: Applied
    after: Any


class MergeStage:
    """Merges each table's new ledger events into its base table.

    For each table of a round (:mod:`icetide.merge.round`, which also holds the
    re-snapshot chunks, phase-3 fills and small-file packing around a batch), the stage
    reads what the batch's plan needs (the ledger's figures, the base's snapshot and
    newest position), plans the batch in pure code
    (:func:`~icetide.merge.strategy.plan_batch`) and carries the plan out.
    """

    def __init__(self, spark: SparkSession, pipeline: Pipeline) -> None:
        self.spark = spark
        self.pipeline = pipeline
        self.config = pipeline.config
        self.rounds = MergeRounds(spark, pipeline)
        """The rounds' packing turns and the work besides each batch."""
        self.history = HistoryKeeper(spark, pipeline)
        """The SCD type 2 history of the tables configured with one."""

    def refs(self, table: str) -> TableRefs:
        """The Iceberg names of ``table``."""
        return self.pipeline.refs(table)

    def ensure_base(self, name: str, contract: TableContract | None = None) -> Any:
        """Create the base table (and namespace) when missing, at ``contract``'s version
        (default: the current schema); its Iceberg table as loaded now."""
        return ensure_base_table(
            self.spark, self.refs(name).base, contract or self.pipeline.contract(name)
        )

    def run_once(
        self,
        before_each: Callable[[], None] | None = None,
        pause: Callable[[float], None] = time.sleep,
    ) -> list[MergeResult]:
        """Merge every configured table once, ``merge.parallel_tables`` at a time
        (:meth:`~icetide.merge.round.MergeRounds.run`); the results in the round's
        order (config order, unless :attr:`~icetide.merge.round.MergeRounds.due` says).
        ``before_each`` runs before each table's merge (a stop check: raising there
        merges no more tables); ``pause`` waits before a retry (one a stop request cuts
        short, so a Ctrl-C during a catalog outage does not wait out the backoff).

        A merge refused because another writer (maintenance, another merge) committed
        first is merged again from a fresh read: it committed nothing, and a replayed
        batch is a no-op anyway. A merge that met a catalog outage is merged again after
        a pause that doubles each time, within a budget
        (:func:`~icetide.spark.retry.retry_step`): whether its commit landed or not, the
        fresh read of the watermark says where to go on from.
        """

        def one(name: str, turn: PackingTurn) -> MergeResult:
            if before_each is not None:
                before_each()

            def retried(failures: int, exc: IcetideError, seconds: float) -> None:
                kind = classify(exc)
                self.pipeline.report(
                    "merge",
                    f"{failure_line(exc)}; "
                    + (
                        f"retry {failures} in {seconds:g}s"
                        if kind == "outage"
                        else f"merging it again from a fresh read (retry {failures})"
                    ),
                    table=name,
                    retry=kind,
                    attempt=failures,
                    retry_in=seconds,
                )

            try:
                return retry_step(
                    f"merge of {name}",
                    partial(self.merge_table, name, turn),
                    on_retry=retried,
                    pause=pause,
                )
            except Stopped:
                raise
            except Exception as exc:
                # Named per table, so the status page can say which table is failing
                # (the round's failure restarts the whole merge task).
                why = failure_line(exc)
                self.pipeline.report(
                    "merge", f"merge {name}: failed ({why})", table=name, failed=why
                )
                raise

        began = time.monotonic()
        results = self.rounds.run(one)
        seconds = time.monotonic() - began
        merged = sum(1 for r in results if r.events)
        waiting = 0 if self.rounds.due is None else self.rounds.due.waiting
        if merged or seconds >= 1.0:  # an idle round is worth a line once it costs a second
            later = f"; {waiting:,} waiting for the next round" if waiting else ""
            self.pipeline.report(
                "merge",
                f"merge round: {merged} of {len(results)} table(s) visited merged events "
                f"in {seconds:.1f}s ({len(self.config.tables):,} configured{later})",
                round_seconds=round(seconds, 3),
                merged=merged,
                visited=len(results),
                waiting=waiting,
            )
        return results

    def merge_table(self, name: str, turn: PackingTurn | None = None) -> MergeResult:
        """Merge the new ledger events of one table, in the order of a round
        (:mod:`icetide.merge.round`): a chunk of a re-snapshot under way instead of a
        batch; else the batch (:meth:`_merge_batch`), then phase 3 and the small-file
        packing. ``turn``: its round's one turn to pack small files; None (one table
        merged alone) packs whenever due."""
        started = time.monotonic()
        refs = self.refs(name)
        # The catalog loads of the batch's tables before its MERGE: one of the ledger and
        # one of the base (each a round trip on a REST catalog; icetide's catalogs cache
        # no table, so each load sees every other writer's commit up to then).
        # The ledger, loaded once: its layout version (the schema the batch runs,
        # merge/phases.py) and its end snapshot come from the same metadata, so every row
        # up to that snapshot was written in that layout or an older one.
        ledger = iceberg_table_if_exists(self.spark, refs.cdc)
        layout = {} if ledger is None else table_properties(self.spark, refs.cdc, ledger)
        run = version_run(self.pipeline, name, layout)
        contract = run.contract
        # The base, loaded once (created first when missing) for what the merge asks of
        # it before its MERGE: its watermark and bootstrap state, its properties, its
        # snapshot and file bounds. The merge is the only writer of its watermark; an
        # ALTER by switch_base below changes none of its snapshots.
        base_table = self.ensure_base(name, contract)
        if resnapshot_under_way(self.pipeline, name):
            return self._resnapshot(name, run, started)
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
        if ledger is None:
            return MergeResult(name, 0, None, None, 0.0)
        try:
            switch_base(self.spark, self.pipeline, name, contract, base_table)
        except SchemaError:
            # No ALTER takes the base to the ledger's layout (an approved key change,
            # narrowing or type-category change): rebuild it from the source.
            return self._resnapshot(name, run, started)
        crash_point("merge.after_switch")
        snapshot = ledger.currentSnapshot()
        end = None if snapshot is None else int(snapshot.snapshotId())
        start = progress.watermark
        self.history.before_batch(name, run, start)
        if end is None or end == start:
            self.history.after_batch(name, run, end)
            self.rounds.converge(name, run, end)
            return MergeResult(name, 0, start, end, 0.0)
        merged = self._merge_batch(name, run, base_table, ledger, start, end)
        plan, applied = merged.plan, merged.applied
        compaction = self.rounds.after_batch(name, run, end, turn, merged.after)
        result = MergeResult(
            name,
            plan.events,
            start,
            end,
            time.monotonic() - started,
            plan.strategy,
            plan.choice.reason,
            applied.touched_buckets,
            applied.buckets,
            compaction,
            plan.in_order,
        )
        self.pipeline.report(
            "merge",
            result.render(),
            table=name,
            events=plan.events,
            start_snapshot=start,
            end_snapshot=end,
            seconds=round(result.seconds, 3),
            strategy=plan.strategy,
            strategy_reason=plan.choice.reason,
            touched_buckets=applied.touched_buckets,
            compacted_files=compaction.rewritten if compaction else 0,
            dangling_deletes_removed=compaction.dangling_removed if compaction else 0,
            packing_deferred=bool(compaction and compaction.deferred),
            in_order=plan.in_order,
        )
        return result

    def _merge_batch(
        self,
        name: str,
        run: MergeVersion,
        base_table: Any,
        ledger: Any,
        start: int | None,
        end: int,
    ) -> _Merged:
        """Merge the events of the ledger snapshots after ``start`` up to ``end``: read
        the figures, plan the batch (:func:`~icetide.merge.strategy.plan_batch`) and run
        the plan. ``base_table`` and ``ledger``: the Iceberg tables as loaded before."""
        refs = self.refs(name)
        contract = run.contract
        schema = contract.target  # the ledger's and base's names and types
        # A load of the ledger by Spark's reader, which takes a name and not the table
        # loaded above; it reads the snapshots ``start``..``end`` named, so what it loads
        # later cannot change the batch.
        events = align_images(
            read_new_events(self.spark, refs.cdc, start, end), self.pipeline, name, schema
        )
        configured = self.config.table(name).merge.strategy
        pre = snapshot_of(base_table)
        base = BaseState(
            rows=int(pre.summary.get("total-records", "0") or 0) if pre is not None else 0,
            snapshot_id=None if pre is None else pre.snapshot_id,
        )
        cutoff = datetime.now(UTC) - self.config.merge.tombstone_retention
        history: DataFrame | None = None
        # The ledger recorded them with the events (lake/ledger_figures.py): no Spark job.
        figures = self._recorded_figures(ledger, start, end, cutoff, contract)
        if figures is None:
            history = self._history(refs.cdc, start, schema, cutoff)
            figures = self._computed_figures(
                events, history, contract, refs.base, prunes_buckets(configured, base.rows)
            )
        in_order = self._in_order(figures, refs.base, base_table)
        plan = plan_batch(figures, base, configured, in_order, end)
        # Tags this attempt's commits, to tell another merge's apart (merge/race.py).
        attempt = uuid.uuid4().hex
        plan = replace(plan, properties={**plan.properties, ATTEMPT_PROPERTY: attempt})
        crash_point("merge.after_plan")  # planned from the watermark read, nothing written
        if not plan.history:
            history = None
        elif history is None:
            history = self._history(refs.cdc, start, schema, cutoff)
        if plan.truncate is not None:
            # Its own commit, before the MERGE that carries the watermark: if we die in
            # between, the replay deletes the same rows again and nothing else.
            self.spark.sql(
                f"DELETE FROM {refs.base} WHERE {POSITION} < "
                f"CAST({literal(str(plan.truncate))} AS {c.POSITION_SQL})"
            )
            crash_point("merge.after_truncate")
        moves: DataFrame | None = None
        inheritance: Inheritance | None = None
        try:
            if plan.moves:
                # After the truncate's DELETE: an old row it removed has no values to give.
                inheritance = inherit(
                    self.spark, events, history, refs.base, schema, refs.cdc, start
                )
                resolved = inheritance.resolved
                self._dead_letter_lost(name, schema, resolved.where(F.size(LOST) > 0))
                moves = applicable(resolved, schema)
            ctx = MergeContext(
                schema, history, plan.truncated_before, bool(plan.keep), moves, plan.key_changes
            )
            before = (
                current_snapshot_id(self.spark, refs.base)  # after the truncate's DELETE
                if plan.truncate is not None
                else base.snapshot_id
            )
            applied = apply_batch(
                self.spark,
                plan.strategy,
                contract,
                refs.base,
                lambda: prepare(events, ctx),
                f"icetide_batch_{name}",
                plan.properties,
                plan.keep,
                plan.touched,
                guarded=plan.guarded,
                keys=(
                    changed_keys(events, schema, plan.key_changes)
                    if plan.strategy == "delete_insert"
                    else None
                ),
                on_diverged=lambda exc, attempt: self.pipeline.report(
                    "merge",
                    republish_line(name, failure_line(exc), attempt),
                    table=name,
                    retry="branch",
                    attempt=attempt,
                ),
            )
            # Loaded again after the commit, and needed: the race check below must see
            # every commit made since the plan's load, another writer's included (the
            # MERGE's own loads happen inside Spark and Iceberg: its analysis, its scan,
            # and the commit's refreshes). The steps after the batch reuse this load.
            after: Any = iceberg_table(self.spark, refs.base)
            committed = snapshot_of(after)
            if (None if committed is None else committed.snapshot_id) == before:
                self._commit_watermark_only(refs.base, plan.properties)
                after = None  # read again by the steps after the batch
            crash_point("merge.after_commit")
            # From the snapshot planned from (before the truncate's DELETE, if any).
            planned = base.snapshot_id
            lineage = snapshots_since(after or iceberg_table(self.spark, refs.base), planned)
            raced = concurrent_merges(lineage, planned, attempt)
            if raced:
                raise ConcurrentMergeError(name, raced)
            # After the base's commit (merge/history.py says why in this order).
            same = SameBatch(
                plan.in_order, moves, figures.unavailable, figures.truncate is not None
            )
            self.history.after_batch(name, run, end, start, same)
        finally:
            if inheritance is not None:
                inheritance.release()
        return _Merged(plan, applied, after)

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

    def _computed_figures(
        self,
        events: DataFrame,
        history: DataFrame | None,
        contract: TableContract,
        base: TableName,
        with_buckets: bool,
    ) -> BatchFigures:
        """The batch's figures from its rows, when the ledger did not record them: its
        event count, its newest truncate and the history's, the placeholder columns,
        whether a key change lacks values, and the buckets it touches (only
        ``with_buckets``). Neither its positions nor the history's tombstones are
        counted, so the batch is never taken as in order and the history is read.

        One job for all of them; the earlier truncates come from the same job (a scan
        Iceberg narrows to the row groups holding a 't')."""
        schema = contract.target
        rows = events.select(
            F.lit(1).alias("n"),
            F.when(F.col(c.OP) == "t", F.col(c.POSITION)).alias("truncate"),
            F.col(c.UNAVAILABLE).alias("unavailable"),
            F.when(key_move(schema), 1).alias("moves"),
            *(touched_buckets(contract, base) if with_buckets else ()),
        )
        if history is not None:
            earlier = history.where(F.col(c.OP) == "t").select(F.col(c.POSITION).alias("earlier"))
            rows = rows.unionByName(earlier, allowMissingColumns=True)
        stats = rows.agg(
            F.sum("n").alias("n"),
            F.max("truncate").alias("truncate"),
            F.array_distinct(F.flatten(F.collect_set("unavailable"))).alias("unavailable"),
            F.max("moves").alias("moves"),
            *(
                [F.array_union(F.collect_set("bucket"), F.collect_set("old_bucket")).alias("b")]
                if with_buckets
                else []
            ),
            *([F.max("earlier").alias("earlier")] if history is not None else []),
        ).first()
        assert stats is not None
        return BatchFigures(
            count=int(stats["n"] or 0),
            truncate=stats["truncate"],
            earlier=stats["earlier"] if history is not None else None,
            unavailable=frozenset(stats["unavailable"] or ()),
            moves=bool(stats["moves"]),
            touched=tuple(sorted(stats["b"])) if with_buckets else (),
            history_tombstones=None,
        )

    def _resnapshot(self, name: str, run: MergeVersion, started: float) -> MergeResult:
        """One chunk of ``name``'s re-snapshot instead of a batch
        (:meth:`~icetide.merge.round.MergeRounds.resnapshot_chunk`)."""
        self.rounds.resnapshot_chunk(name, run)
        return MergeResult(name, 0, None, None, time.monotonic() - started)

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
