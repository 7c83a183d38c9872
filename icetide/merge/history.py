"""The SCD type 2 history (``<table>_history``) kept by the merge, beside the base.

For a table with ``history: scd2``, each merge also brings the history up to the
ledger snapshot the base now holds. The interval rule is
:func:`icetide.merge.history_plan.versions`; this module runs it in Spark over the keys
a ledger range touches: their versions already kept, turned back into the events that
made them (an end no version starts at was a delete), the range's events (key changes
split into the old key's delete and the new key's event), and the deletes and
truncates merged before the range (a delete that came before its insert), deduplicated
by position. One window per key ordered by position then gives each version its end
(``lead``) and each left-out column its value (the newest one given before it). Only
versions that are new or changed are written, by one MERGE on (key, start): the cost is
the touched keys' history, not the table's.

**An in-order range is appended instead** (the usual case, decided by
:func:`~icetide.merge.history_plan.appendable` from what the base's batch knew: every
event newer than every row and remembered delete, no truncate, no column left out).
Then nothing kept changes but each touched key's open version, which ends at the key's
first event of the range, and the new versions are the range's events in position
order: one window over the range alone gives both, a MERGE with no insert (its source
broadcast, so the history is read in place) ends the open versions, and an append adds
the new ones. Both commits are made on a branch of the history and published together
(:func:`~icetide.merge.strategy.on_branch`), so a reader never sees one without the
other. The general recompute reads the touched keys' versions, runs two windows over
them, stages its rows bucketed and MERGEs them: measured, two to four times the append's
time (bench/results/merge-history.md).

**Exactly once, in this order, without a transaction across tables.** The base commits
first (its watermark in its MERGE snapshot), then the history commits its rows with its
own watermark (:data:`~icetide.schema.contract.history.WATERMARK_PROPERTY`). The history
is written for the range after its own watermark, whatever the base's, so a crash
between the two commits leaves it behind, and the next merge (a batch, or a round with
nothing new for the base) catches it up from there. Replaying a range the history holds
changes nothing, as every event is deduplicated by position against the versions kept:
a crash after the history's MERGE is harmless too. The append is taken only for the
base's own batch with the history's watermark at the batch's start, so its range is
never one the history holds; a crash before its publish leaves main as it was. The
base goes first because every reader (and the freshness check) depends on it; the
history is derived from the same ledger and never gets ahead of the base.

**Where it starts.** The first time, the history is seeded from the base as it is
before the merge's batch: each row opens a version at the position it carries (a
bootstrap's copy opens at the hand-off position), committed with the base's watermark.

**Schema changes** reach the history as the same Iceberg schema update as the base
(adds, renames by field id, widenings), in one commit, with drops always soft: no ALTER
rewrites a version.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, StringType

from icetide.faults import crash_point
from icetide.lake.alter import int_property, kept_columns, table_properties
from icetide.lake.commit import append_with_properties, with_commit_properties
from icetide.lake.ledger_figures import tombstone
from icetide.lake.progress import read_new_events
from icetide.lake.schema_update import commit_version
from icetide.lake.tables import (
    current_snapshot_id,
    iceberg_table,
    lineage_summaries,
    snapshots_since,
    table_exists,
)
from icetide.merge.history_plan import appendable
from icetide.merge.phases import MergeVersion, align_images, version_of
from icetide.merge.steps import (
    MergeContext,
    inherit_unavailable,
    split_all_key_changes,
    tombstone_rows,
)
from icetide.merge.strategy import (
    NO_RUNTIME_PRUNING,
    on_branch,
    scoped_conf,
    spj_conf,
    stage_batch,
    staging_table,
)
from icetide.schema.contract import base as b
from icetide.schema.contract import history as h
from icetide.schema.contract import ledger as c
from icetide.schema.contract.builder import TableContract
from icetide.schema.contract.update import version_update
from icetide.schema.model import TableSchema
from icetide.schema.quoting import qualified, quote

if TYPE_CHECKING:
    from icetide.pipeline import Pipeline
    from icetide.schema.contract.names import TableName

BEFORE_COMMIT = "merge.history.before_commit"
"""Crash point: the history's rows computed, its MERGE not committed."""
AFTER_COMMIT = "merge.history.after_commit"
"""Crash point: the history committed, the merge's round not finished."""
_PRIO = "_icetide_prio"
_OLD_TO = "_icetide_old_to"
_NEXT = "_icetide_next"
_NEXT_TS = "_icetide_next_ts"
_RANK = "_icetide_rank"
_PREV = "_icetide_prev"
NAMES = ArrayType(StringType())
"""The chain's ``_inherited``: the names of the columns a version took from the one
before it."""


def no_names() -> Column:
    """An empty :data:`NAMES` (a function: a Column needs the running session)."""
    return F.array().cast(NAMES)


@dataclass(frozen=True)
class SameBatch:
    """What the base's batch knew about the range, when the history's range is the same
    one: whether it was in order (no late event: the deletes merged before it cannot
    change a version, so they are not read), and the key changes it filled in."""

    in_order: bool
    moves: DataFrame | None = None
    unavailable: frozenset[str] | None = None
    """The columns some event of the range left out (None: not known)."""
    truncated: bool = True
    """Whether the range holds a truncate."""


def history_enabled(pipeline: Pipeline, name: str) -> bool:
    """Whether ``name`` keeps a history (``history: scd2``)."""
    return pipeline.config.table(name).history == "scd2"


def read_history_watermark(spark: SparkSession, table: TableName) -> tuple[bool, int | None]:
    """``(seeded, watermark)``: whether the history has been seeded, and the last ledger
    snapshot it holds (None: none yet, the ledger from its start comes next)."""
    return h.history_watermark(lineage_summaries(spark, table))


class HistoryKeeper:
    """Keeps the history of the merge's tables (see the module)."""

    def __init__(self, spark: SparkSession, pipeline: Pipeline, appends: bool = True) -> None:
        self.spark = spark
        self.pipeline = pipeline
        self.appends = appends
        """False: every range takes the general recompute, also one that could be
        appended (the tests compare the two)."""

    def before_batch(self, name: str, run: MergeVersion, base_watermark: int | None) -> None:
        """Create the history when missing, take it to the run's schema version, and seed
        it from the base (as it is before the batch) the first time."""
        if not history_enabled(self.pipeline, name):
            return
        refs = self.pipeline.refs(name)
        self._ensure(name, run.contract)
        seeded, _ = read_history_watermark(self.spark, refs.history)
        if seeded:
            return
        schema = run.contract.target
        stored = self.spark.table(refs.history.sql).schema[h.INHERITED].dataType
        base = self.spark.table(refs.base.sql).select(
            *[quote(col.name) for col in schema.columns],
            F.col(b.SOURCE_TS).alias(h.VALID_FROM),
            F.lit(None).cast("timestamp").alias(h.VALID_TO),
            F.col(b.POSITION).alias(h.FROM_POSITION),
            F.lit(None).cast(c.POSITION_SQL).alias(h.TO_POSITION),
            F.lit(True).alias(h.IS_CURRENT),
            F.lit("r").alias(h.OP),
            inherited_stored(no_names(), stored).alias(h.INHERITED),
        )
        mark = h.NO_WATERMARK if base_watermark is None else str(base_watermark)
        writer = base.writeTo(refs.history.sql).option(
            f"snapshot-property.{h.WATERMARK_PROPERTY}", mark
        )
        writer.append()

    def after_batch(
        self,
        name: str,
        run: MergeVersion,
        end: int | None,
        batch_start: int | None = None,
        same: SameBatch | None = None,
    ) -> int:
        """Bring the history up to ledger snapshot ``end`` (the base's watermark now);
        ``same``: what the base's batch of the ledger snapshots after ``batch_start``
        knew, used when the history's range is that batch's. The number of versions
        written or changed (0: nothing to do)."""
        if end is None or not history_enabled(self.pipeline, name):
            return 0
        refs = self.pipeline.refs(name)
        if not table_exists(self.spark, refs.history):
            return 0  # created before the batch; a merge with no base yet has none
        self._ensure(name, run.contract)
        seeded, start = read_history_watermark(self.spark, refs.history)
        if seeded and start == end:
            return 0
        if not seeded or start != batch_start:
            same = None  # catching up: the range is not the batch's
        schema = run.contract.target
        events = align_images(
            read_new_events(self.spark, refs.cdc, start, end), self.pipeline, name, schema
        )
        if (
            self.appends
            and same is not None
            and appendable(same.in_order, same.truncated, same.unavailable)
        ):
            return self._append(name, refs.history, schema, events, same.moves, end)
        remembered = None
        if same is None or not same.in_order:
            remembered = self._remembered(refs.cdc, start, schema)
        moves = same.moves if same is not None else None
        changed = version_rows(
            self.spark.table(refs.history.sql),
            events,
            remembered,
            schema,
            moves,
            None if same is None or not same.in_order else same.unavailable,
            True if same is None else same.truncated,
        ).persist()
        started = time.monotonic()
        try:
            written = changed.count()
            computed = time.monotonic() - started
            properties = {h.WATERMARK_PROPERTY: str(end)}
            if written == 0:
                crash_point(BEFORE_COMMIT)
                empty = self.spark.table(refs.history.sql).limit(0)
                empty.writeTo(refs.history.sql).option(
                    f"snapshot-property.{h.WATERMARK_PROPERTY}", str(end)
                ).append()
            else:
                self._merge(refs.history, run.contract, changed, properties)
            crash_point(AFTER_COMMIT)
        finally:
            changed.unpersist()
        seconds = time.monotonic() - started
        self.pipeline.report(
            "merge",
            f"history {name}: {written:,} versions written or ended up to ledger snapshot "
            f"{end} in {seconds:.1f}s ({computed:.1f}s computing them)"
            + ("" if same is not None else "; caught up from its own watermark"),
            table=name,
            history_versions=written,
            history_seconds=round(seconds, 3),
            history_compute_seconds=round(computed, 3),
        )
        return written

    def _append(
        self,
        name: str,
        table: TableName,
        schema: TableSchema,
        events: DataFrame,
        moves: DataFrame | None,
        end: int,
    ) -> int:
        """Keep an in-order range (:func:`~icetide.merge.history_plan.appendable`): end
        each touched key's open version at its first event, and append the range's
        versions, on a branch of the history that main is then fast-forwarded to, so
        both commits (each with the watermark) become visible as one.

        No staging table, no second window over versions kept: the open versions are
        found by one MERGE whose source (a row per touched key) is broadcast to the
        history's scan tasks, which skip the files holding no open version by their
        ``_is_current`` bounds."""
        started = time.monotonic()
        ordered = appended_versions(events, schema, moves).persist()
        kept = self.spark.table(table.sql).schema
        versions = new_versions(ordered, schema, kept[h.INHERITED].dataType)
        given = set(versions.columns)
        rows = versions.select(
            *[
                F.col(quote(f.name))
                if f.name in given
                else F.lit(None).cast(f.dataType).alias(f.name)
                for f in kept.fields
            ]
        )
        view = f"icetide_history_ends_{name}"
        properties = {h.WATERMARK_PROPERTY: str(end)}

        steps: dict[str, float] = {}

        def write(_loaded: object, branch: str) -> None:
            mark = time.monotonic()
            F.broadcast(open_ends(ordered, schema)).createOrReplaceTempView(view)
            try:
                with scoped_conf(self.spark, NO_RUNTIME_PRUNING):
                    sql = close_open_sql(table, branch, view, schema)
                    with_commit_properties(self.spark, properties, lambda: self.spark.sql(sql))
            finally:
                self.spark.catalog.dropTempView(view)
            steps["end"] = time.monotonic() - mark
            append_with_properties(rows, table, properties, branch=branch)
            steps["append"] = time.monotonic() - mark - steps["end"]

        head = current_snapshot_id(self.spark, table)
        try:
            on_branch(self.spark, table, write, BEFORE_COMMIT)
            crash_point(AFTER_COMMIT)
        finally:
            ordered.unpersist()
        # The rows the commits just published added: the ended versions rewritten, the
        # new ones appended.
        written = sum(
            int(s.summary.get("added-records", "0"))
            for s in snapshots_since(iceberg_table(self.spark, table), head)
        )
        seconds = time.monotonic() - started
        self.pipeline.report(
            "merge",
            f"history {name}: {written:,} versions written or ended up to ledger snapshot "
            f"{end} in {seconds:.1f}s (in order: appended; {steps['end']:.1f}s ending the open "
            f"versions, {steps['append']:.1f}s appending)",
            table=name,
            history_versions=written,
            history_seconds=round(seconds, 3),
            history_end_seconds=round(steps["end"], 3),
            history_append_seconds=round(steps["append"], 3),
            history_appended=True,
        )
        return written

    def _merge(
        self,
        table: TableName,
        contract: TableContract,
        changed: DataFrame,
        properties: dict[str, str],
    ) -> None:
        """MERGE the new and changed versions on (key, start), in one commit carrying
        ``properties``."""
        schema = contract.target
        # Staged bucketed like the history, so the MERGE joins bucket to bucket without
        # shuffling the history (as the base's bucket join, merge/strategy.py).
        staging = staging_table(table)
        stage_batch(changed, contract, staging)
        on = " AND ".join(
            f"t.{quote(k)} = s.{quote(k)}" for k in [*schema.primary_key, h.FROM_POSITION]
        )
        # Named columns, not ``*``: a soft-dropped column the history keeps is left as
        # it is in a version that had it, and NULL in a new one.
        names = [quote(name) for name in changed.columns]
        matched = {quote(k) for k in [*schema.primary_key, h.FROM_POSITION]}
        updates = ", ".join(f"t.{n} = s.{n}" for n in names if n not in matched)
        sql = (
            f"MERGE INTO {table} t USING {staging.sql} s ON {on} "
            f"WHEN MATCHED THEN UPDATE SET {updates} "
            f"WHEN NOT MATCHED THEN INSERT ({', '.join(names)}) "
            f"VALUES ({', '.join(f's.{n}' for n in names)})"
        )

        def run() -> None:
            crash_point(BEFORE_COMMIT)
            with spj_conf(self.spark):
                self.spark.sql(sql)

        with_commit_properties(self.spark, properties, run)

    def _remembered(
        self, ledger: TableName, start: int | None, schema: TableSchema
    ) -> DataFrame | None:
        """The deletes and truncates merged before the range, within the merge's
        tombstone retention (the base remembers the same ones)."""
        if start is None:
            return None
        cutoff = datetime.now(UTC) - self.pipeline.config.merge.tombstone_retention
        rows = (
            self.spark.read.format("iceberg")
            .option("snapshot-id", start)
            .load(ledger.dotted)
            .where(F.col(c.INGESTED_AT) >= F.lit(cutoff))
            .where(tombstone(schema))
        )
        return align_images(rows, self.pipeline, schema.table, schema)

    def _ensure(self, name: str, contract: TableContract) -> None:
        """The history exists and has ``contract``'s schema version: created at it, or
        taken to it from the version it has by the base's own schema update, drops soft."""
        refs = self.pipeline.refs(name)
        table = refs.history
        if not table_exists(self.spark, table):
            self.spark.sql(h.history_ddl(contract, table))
            self.spark.sql(h.sort_order_sql(contract, table))
            return
        props = table_properties(self.spark, table)
        layout = int_property(props, c.SCHEMA_VERSION_PROPERTY)
        version = contract.schema.version
        if layout is None or layout >= version:
            return
        old = TableContract(version_of(self.pipeline, name, layout), contract.settings)
        own = [col.name for col in old.target.columns] + list(h.META_COLUMNS)
        kept = kept_columns(self.spark, table, own)
        ops = version_update(old, contract, "soft", kept).base
        commit_version(self.spark, table, ops, version, {c.SCHEMA_VERSION_PROPERTY: str(version)})
        self.pipeline.report(
            "merge",
            f"schema {name}: history table at version {version}",
            table=name,
            version=version,
        )


def _events(frame: DataFrame, schema: TableSchema, prio: int) -> DataFrame:
    """Ledger events (split, :func:`~icetide.merge.steps.split_all_key_changes`) as chain rows: key,
    op, position, time, left-out columns and each column's value."""
    return frame.select(
        *[quote(k) for k in schema.primary_key],
        F.col(c.OP).alias(h.OP),
        F.col(c.POSITION).alias(h.FROM_POSITION),
        F.col(c.SOURCE_TS).alias(h.VALID_FROM),
        F.coalesce(F.col(c.UNAVAILABLE), no_names()).alias(h.INHERITED),
        *[
            F.col(qualified(c.AFTER, col.name)).alias(col.name)
            for col in schema.columns
            if col.name not in schema.primary_key
        ],
        F.lit(prio).alias(_PRIO),
        F.lit(None).cast(c.POSITION_SQL).alias(_OLD_TO),
    )


def version_rows(
    history: DataFrame,
    events: DataFrame,
    remembered: DataFrame | None,
    schema: TableSchema,
    moves: DataFrame | None = None,
    unavailable: frozenset[str] | None = None,
    truncated: bool = True,
) -> DataFrame:
    """The versions of the keys ``events`` touch that are new or changed, in the
    history's columns (see the module): what the MERGE writes.

    ``history``: the history table; ``events``: the range's ledger rows;
    ``remembered``: the deletes and truncates merged before it (None: none can matter);
    ``moves``: the range's key changes with their left-out values filled in
    (:func:`~icetide.merge.inherit.inherit`), when the base's batch computed them;
    ``unavailable``: the columns some event of the range leaves out (None: any);
    ``truncated``: whether the range may hold a truncate.
    """
    keys = list(schema.primary_key)
    qkeys = [quote(k) for k in keys]
    values = [col.name for col in schema.columns if col.name not in keys]
    stored = history.schema[h.INHERITED].dataType
    ctx = MergeContext(schema, moves=moves)
    rows = events.where(F.col(c.OP) != "t")
    truncates = events.where(F.col(c.OP) == "t").select(c.POSITION, c.SOURCE_TS)
    split = split_all_key_changes(inherit_unavailable(rows, ctx), schema)
    chain = _events(split, schema, 1)
    touched = chain.select(*qkeys)
    if truncated:
        # A truncate in the range ends every version open at it, of any key.
        at = F.broadcast(truncates.select(F.col(c.POSITION).alias("_icetide_cut")))
        open_then = (F.col(h.FROM_POSITION) < F.col("_icetide_cut")) & (
            F.col(h.TO_POSITION).isNull() | (F.col(h.TO_POSITION) > F.col("_icetide_cut"))
        )
        touched = touched.unionByName(history.join(at, open_then, "left_semi").select(*qkeys))
    touched = touched.distinct()
    if remembered is not None:
        gone = split_all_key_changes(
            tombstone_rows(remembered.where(F.col(c.OP) != "t"), schema), schema
        )
        gone = _events(gone.where(F.col(c.OP) == "d"), schema, 2)
        chain = chain.unionByName(gone.join(touched, keys, "left_semi"))
        truncates = truncates.unionByName(
            remembered.where(F.col(c.OP) == "t").select(c.POSITION, c.SOURCE_TS)
        )
    if remembered is None and not truncated:
        # In order (no event before any kept position): only each key's open version can
        # change (it ends), so the closed ones are not read.
        history = history.where(F.col(h.IS_CURRENT))
    kept = history.join(touched, keys, "left_semi")
    opens = kept.select(
        *qkeys,
        h.OP,
        h.FROM_POSITION,
        h.VALID_FROM,
        inherited_names(F.col(h.INHERITED), stored).alias(h.INHERITED),
        *[quote(v) for v in values],
        F.lit(0).alias(_PRIO),
        F.col(h.TO_POSITION).alias(_OLD_TO),
    )
    ends = kept.where(F.col(h.TO_POSITION).isNotNull()).select(
        *qkeys,
        F.lit("d").alias(h.OP),
        F.col(h.TO_POSITION).alias(h.FROM_POSITION),
        F.col(h.VALID_TO).alias(h.VALID_FROM),
        no_names().alias(h.INHERITED),
        *[F.lit(None).cast(history.schema[v].dataType).alias(v) for v in values],
        F.lit(3).alias(_PRIO),
        F.lit(None).cast(c.POSITION_SQL).alias(_OLD_TO),
    )
    cut = touched.crossJoin(F.broadcast(truncates)).select(
        *qkeys,
        F.lit("d").alias(h.OP),
        F.col(c.POSITION).alias(h.FROM_POSITION),
        F.col(c.SOURCE_TS).alias(h.VALID_FROM),
        no_names().alias(h.INHERITED),
        *[F.lit(None).cast(history.schema[v].dataType).alias(v) for v in values],
        F.lit(4).alias(_PRIO),
        F.lit(None).cast(c.POSITION_SQL).alias(_OLD_TO),
    )
    every = opens.unionByName(chain).unionByName(ends).unionByName(cut)
    # One position is one event: the first by priority (a version kept, then the range).
    same = Window.partitionBy(*qkeys, h.FROM_POSITION).orderBy(_PRIO)
    every = every.withColumn(_RANK, F.row_number().over(same)).where(F.col(_RANK) == 1)
    by_key = Window.partitionBy(*qkeys).orderBy(h.FROM_POSITION)
    upto = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    living = F.col(h.OP) != "d"
    resolved: list[Column] = []
    for v in values:
        if unavailable is not None and v not in unavailable:
            resolved.append(F.col(quote(v)))
            continue
        left_out = F.array_contains(F.col(h.INHERITED), v)
        given = F.last(F.when(living & ~left_out, F.struct(F.col(quote(v)).alias("v"))), True)
        fallback = F.first(F.when(living & left_out, F.struct(F.col(quote(v)).alias("v"))), True)
        value = F.coalesce(given.over(upto), fallback.over(upto)).getField("v")
        resolved.append(F.when(left_out, value).otherwise(F.col(quote(v))).alias(v))
    chained = every.select(
        *qkeys,
        h.OP,
        h.FROM_POSITION,
        h.VALID_FROM,
        h.INHERITED,
        _PRIO,
        _OLD_TO,
        *[F.col(quote(v)).alias(f"_icetide_was_{i}") for i, v in enumerate(values)],
        *resolved,
        F.lead(h.FROM_POSITION).over(by_key).alias(_NEXT),
        F.lead(h.VALID_FROM).over(by_key).alias(_NEXT_TS),
    ).where(living)
    moved_end = ~F.col(_NEXT).eqNullSafe(F.col(_OLD_TO))
    regiven = F.lit(False)
    for i, v in enumerate(values):
        if unavailable is not None and v not in unavailable:
            continue
        regiven = regiven | ~F.col(quote(v)).eqNullSafe(F.col(f"_icetide_was_{i}"))
    changed = chained.where((F.col(_PRIO) != 0) | moved_end | regiven)
    return changed.select(*_version_columns(schema, stored))


def appended_versions(
    events: DataFrame, schema: TableSchema, moves: DataFrame | None = None
) -> DataFrame:
    """An in-order range's events (key changes split, ``moves`` as in
    :func:`version_rows`) as chain rows, each with the next event's position and time
    of its key and the previous one's position: one window over the range alone, read
    by :func:`new_versions` and :func:`open_ends`.

    A duplicate shares its position with its copy: the copy ordered last is the one
    kept (its next position is the next event's), the first one tells the key's first
    position (no previous position)."""
    qkeys = [quote(k) for k in schema.primary_key]
    ctx = MergeContext(schema, moves=moves)
    split = split_all_key_changes(
        inherit_unavailable(events.where(F.col(c.OP) != "t"), ctx), schema
    )
    by_key = Window.partitionBy(*qkeys).orderBy(h.FROM_POSITION)
    return _events(split, schema, 1).select(
        "*",
        F.lead(h.FROM_POSITION).over(by_key).alias(_NEXT),
        F.lead(h.VALID_FROM).over(by_key).alias(_NEXT_TS),
        F.lag(h.FROM_POSITION).over(by_key).alias(_PREV),
    )


def new_versions(ordered: DataFrame, schema: TableSchema, stored: DataType) -> DataFrame:
    """The versions an in-order range opens (from :func:`appended_versions`), in the
    history's columns (``stored``: its ``_inherited`` type): each living event once,
    ending at its key's next event, the last one current."""
    once = F.col(_NEXT).isNull() | (F.col(_NEXT) != F.col(h.FROM_POSITION))
    return ordered.where(once & (F.col(h.OP) != "d")).select(*_version_columns(schema, stored))


def open_ends(ordered: DataFrame, schema: TableSchema) -> DataFrame:
    """Per key an in-order range touches, where its open version kept ends: at the
    key's first event of the range (from :func:`appended_versions`)."""
    return ordered.where(F.col(_PREV).isNull()).select(
        *[quote(k) for k in schema.primary_key],
        F.col(h.FROM_POSITION).alias(h.TO_POSITION),
        F.col(h.VALID_FROM).alias(h.VALID_TO),
    )


def close_open_sql(table: TableName, branch: str, ends: str, schema: TableSchema) -> str:
    """End the open versions of the keys in the view ``ends`` (:func:`open_ends`) on
    ``branch`` of the history ``table``: a MERGE with no insert, so Spark joins inner
    and the (broadcast) view meets the history where it lies.

    >>> from icetide.schema.contract.names import TableName
    >>> from icetide.schema.model import Column
    >>> from icetide.schema.types import LongType
    >>> schema = TableSchema("t", (Column(1, "id", LongType(), False),), ("id",))
    >>> print(close_open_sql(TableName("lake", "s", "t_history"), "b", "ends", schema))
    MERGE INTO `lake`.`s`.`t_history`.`branch_b` t USING `ends` s ON t.`id` = s.`id` \
AND t._is_current WHEN MATCHED THEN UPDATE SET t._to_position = s._to_position, \
t._valid_to = s._valid_to, t._is_current = false
    """
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in schema.primary_key)
    return (
        f"MERGE INTO {table.branch(branch)} t USING {quote(ends)} s "
        f"ON {on} AND t.{h.IS_CURRENT} WHEN MATCHED THEN UPDATE SET "
        f"t.{h.TO_POSITION} = s.{h.TO_POSITION}, t.{h.VALID_TO} = s.{h.VALID_TO}, "
        f"t.{h.IS_CURRENT} = false"
    )


def inherited_names(value: Column, stored: DataType) -> Column:
    """A history's ``_inherited`` (``stored``: its type in the table) as the array of
    column names the chain reads, empty when none (see
    :data:`~icetide.schema.contract.history.INHERITED`)."""
    if isinstance(stored, ArrayType):
        return F.coalesce(value, no_names())
    return F.coalesce(F.from_json(value, NAMES), no_names())


def inherited_stored(names: Column, stored: DataType) -> Column:
    """The chain's array of column names as the history stores ``_inherited``
    (``stored``: its type in the table): JSON text, NULL when empty; the array itself
    in a history created with the array type."""
    if isinstance(stored, ArrayType):
        return names
    return F.when(F.size(names) > 0, F.to_json(names))


def _version_columns(schema: TableSchema, stored: DataType) -> list[Column | str]:
    """A chain row (an event with its key's next position and time) as a history row
    (``stored``: its ``_inherited`` type): it ends where the next event starts, and is
    current when none follows."""
    return [
        *[quote(col.name) for col in schema.columns],
        h.VALID_FROM,
        F.col(_NEXT_TS).alias(h.VALID_TO),
        h.FROM_POSITION,
        F.col(_NEXT).alias(h.TO_POSITION),
        F.col(_NEXT).isNull().alias(h.IS_CURRENT),
        h.OP,
        inherited_stored(F.col(h.INHERITED), stored).alias(h.INHERITED),
    ]
