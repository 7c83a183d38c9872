"""A table as of any source position or source commit time, as a Spark DataFrame.

Iceberg's time travel answers only at the base's snapshots, one per merge, minutes apart
and not tied to source positions. The ledger holds every event with its exact position,
so the table at any position ``P`` is rebuilt from the nearest base snapshot at or before
``P`` (:func:`~icetide.merge.asof_plan.plan_asof`) and the ledger's events after that
snapshot's watermark up to ``P``, by the merge's own steps
(:func:`~icetide.merge.steps.prepare`: version guard, remembered deletes, truncates,
key changes, unchanged-TOAST values, :mod:`icetide.merge.inherit`). The snapshot's rows
enter those steps as events at the positions they carry, so the version guard between
them and the ledger's events is the same ``max`` by position that deduplicates a batch;
the result is a DataFrame where the merge makes a commit.

A time is mapped to the newest position whose source commit time (the ledger's
``_source_ts``) is at or before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from icetide.lake.alter import table_properties
from icetide.lake.ledger_figures import key_move, tombstone
from icetide.lake.progress import read_new_events
from icetide.lake.tables import (
    iceberg_table,
    lineage_snapshots,
    metadata_snapshots,
    table_exists,
)
from icetide.merge.asof_plan import AsOfPlan, Reach, Start, Target, Unreachable, plan_asof
from icetide.merge.asof_shape import Shape, shape_at
from icetide.merge.converge import column_defaults, new_columns, rescued_values
from icetide.merge.inherit import applicable, inherit
from icetide.merge.phases import align_images, merge_version
from icetide.merge.steps import MergeContext, prepare
from icetide.schema.contract import base as b
from icetide.schema.contract import ledger as c
from icetide.schema.contract.builder import value_slot
from icetide.schema.contract.names import TableName
from icetide.schema.contract.phases import VERSION_POSITIONS, read_version_positions
from icetide.schema.model import TableSchema
from icetide.schema.quoting import quote

if TYPE_CHECKING:
    from icetide.pipeline import Pipeline


@dataclass(frozen=True)
class AsOf:
    """A table as of a target: its rows and how they were made."""

    table: str
    target: Target
    plan: AsOfPlan
    frame: DataFrame
    """The base table's columns (icetide's position and source time included)."""
    shape: Shape | None = None
    """The columns the source had at the target (None: the current ones)."""
    cached: tuple[DataFrame, ...] = ()
    """Frames the key changes' inheritance caches (read twice); :meth:`release` them
    once ``frame`` has been read."""

    def release(self) -> None:
        """Drop what building ``frame`` cached (nothing unless a key change needed
        inherited values)."""
        for frame in self.cached:
            frame.unpersist()

    def describe(self) -> str:
        """One line for people: what was asked and where it started."""
        if self.plan.start is None:
            start = "an empty table and the ledger from its first event"
        elif self.plan.start.watermark is None:
            start = f"the bootstrap copy (base snapshot {self.plan.start.snapshot_id})"
        else:
            start = (
                f"base snapshot {self.plan.start.snapshot_id} (through position "
                f"{self.plan.through})"
            )
        said = f"{self.table} as of {self.target.text} (position {self.plan.target}) from {start}"
        if self.shape is not None:
            said += f", in schema version {self.shape.version} (the columns the source had then)"
            if self.shape.gone:
                said += f"; not rebuilt, dropped since: {', '.join(self.shape.gone)}"
        return said


def table_as_of(spark: SparkSession, pipeline: Pipeline, table: str, target: Target) -> AsOf:
    """``table`` exactly as its source had it at ``target``.

    Raises :class:`~icetide.merge.asof_plan.Unreachable` (saying the earliest reachable
    point) when the target is older than what the ledger and the kept base snapshots hold.
    """
    refs = pipeline.refs(table)
    if not table_exists(spark, refs.cdc):
        raise Unreachable(
            f"table {table}: its ledger {refs.cdc} does not exist yet",
            earliest=None,
            hint="run the ledger stage first (icetide run)",
        )
    contract = merge_version(spark, pipeline, table).contract
    schema = contract.target
    end, ledger_ids = _ledger_lineage(spark, refs.cdc)
    if end is None:
        raise Unreachable(
            f"table {table}: its ledger {refs.cdc} holds no event yet",
            earliest=None,
            hint="run the ledger stage once events have arrived (icetide run)",
        )
    ledger = spark.read.format("iceberg").option("snapshot-id", end).load(refs.cdc.dotted)
    position = _target_position(ledger, target, table)
    base_exists = table_exists(spark, refs.base)
    starts = _starts(spark, refs.base) if base_exists else []

    def reach() -> Reach:
        first = ledger.agg(F.min(c.POSITION)).first()
        first_event = None if first is None else first[0]
        return Reach(first_event, _copied(spark, refs.base, starts, first_event))

    plan = plan_asof(
        position,
        starts,
        lambda s: _through(spark, refs.base, refs.cdc, s),
        reach,
        lambda snapshot: snapshot in ledger_ids,
    )
    upto = F.col(c.POSITION) <= F.lit(plan.target).cast(c.POSITION_SQL)
    start = plan.start
    if start is None:
        events = ledger.where(upto)
        history = None
    else:
        # Nothing appended after the start's watermark: no events, only its deletes.
        if start.watermark == end:
            events = ledger.limit(0)
        else:
            events = read_new_events(spark, refs.cdc, start.watermark, end).where(upto)
        history = None
        if start.watermark is not None:
            history = (
                spark.read.format("iceberg")
                .option("snapshot-id", start.watermark)
                .load(refs.cdc.dotted)
                .where(tombstone(schema) & upto)
            )
    events = align_images(events, pipeline, table, schema)
    if history is not None:
        history = align_images(history, pipeline, table, schema)
    stored: DataFrame | None = None
    if start is not None:
        reader = spark.read.format("iceberg").option("snapshot-id", start.snapshot_id)
        stored = _by_current_names(reader.load(refs.base.dotted), refs.base, start.snapshot_id)
        events = events.unionByName(
            _rows_as_events(stored, events, pipeline, table, schema), allowMissingColumns=True
        )
    rows, cached = _apply(spark, refs.base, events, history, stored, schema)
    frame = _rescued(rows.selectExpr(*contract.row_select()), ledger.where(upto), pipeline, schema)
    starts_at = read_version_positions(table_properties(spark, refs.cdc).get(VERSION_POSITIONS))
    history_versions = pipeline.schemas.history(table).versions
    shape = shape_at(history_versions, schema, starts_at, plan.target, column_defaults(schema))
    plain = [quote(col.name) for col in schema.columns] + [b.POSITION, b.SOURCE_TS]
    if list(shape.select) != plain:
        frame = frame.selectExpr(*shape.select)
    older = shape if shape.version != schema.version else None
    return AsOf(table, target, plan, frame, older, cached)


def _rescued(
    frame: DataFrame, ledger: DataFrame, pipeline: Pipeline, schema: TableSchema
) -> DataFrame:
    """``frame`` with the values of columns added since the first version that the
    events making its rows kept in ``_rescued`` (written before the ledger projected the
    column): the merge's data convergence fills the base so
    (:func:`~icetide.merge.converge.fill_rescued`), and a start snapshot older than that
    fill, or the ledger's events, still lack them. Joined on key and position: only the
    event that made the row gives its value."""
    table = schema.table
    first = pipeline.schemas.history(table).versions[0]
    added = [col for col in new_columns(schema, first) if col.name in frame.columns]
    if not added or c.RESCUED not in ledger.columns:
        return frame
    values = rescued_values(ledger, pipeline, table, schema, added).alias("s")
    keys = [k.name for k in schema.key_columns]
    on = [F.col(f"t.{quote(k)}") == F.col(f"s.{quote(k)}") for k in keys]
    on.append(F.col(f"t.{b.POSITION}") == F.col(f"s.{c.POSITION}"))
    filled = {col.name: col for col in added}
    out = []
    for name in frame.columns:
        mine = F.col(f"t.{quote(name)}")
        if name in filled:
            slot = F.col(f"s.{value_slot(filled[name].id)}")
            mine = F.when(slot.isNull(), mine).otherwise(slot["v"])
        out.append(mine.alias(name))
    return frame.alias("t").join(values, on, "left").select(*out)


def _apply(
    spark: SparkSession,
    base: TableName,
    events: DataFrame,
    history: DataFrame | None,
    stored: DataFrame | None,
    schema: TableSchema,
) -> tuple[DataFrame, tuple[DataFrame, ...]]:
    """The merge's steps over ``events`` (the start's rows among them): one row per
    living key, as the batch the MERGE would apply, deletes dropped; and the frames the
    inheritance cached."""
    # One job for both: the newest truncate (the batch's or one merged before), and
    # whether a key change left values out.
    figures = events.select(
        F.when(F.col(c.OP) == "t", F.col(c.POSITION)).alias("truncate"),
        F.when(key_move(schema), 1).alias("moves"),
    )
    if history is not None:
        figures = figures.unionByName(
            history.select(
                F.when(F.col(c.OP) == "t", F.col(c.POSITION)).alias("truncate"),
                F.lit(None).cast("int").alias("moves"),
            )
        )
    found = figures.agg(F.max("truncate"), F.max("moves")).first()
    truncated_before = None if found is None else found[0]
    moves = None
    cached: tuple[DataFrame, ...] = ()
    if found is not None and found[1] is not None:
        if stored is None:  # no first key is found in a base that is not there
            image = events.schema[c.AFTER].dataType
            assert isinstance(image, StructType)
            stored = spark.createDataFrame([], image)
        inheritance = inherit(spark, events, history, base, schema, stored=stored)
        moves = applicable(inheritance.resolved, schema)
        cached = (inheritance.resolved, inheritance.moves)
    ctx = MergeContext(schema, history, truncated_before, True, moves, True)
    return prepare(events, ctx).where(F.col(c.OP) != "d"), cached


def _by_current_names(stored: DataFrame, base: TableName, snapshot_id: int) -> DataFrame:
    """A base snapshot's rows under the names their columns have now.

    Iceberg reads a snapshot with the schema it was written with, so a column renamed
    since comes under its old name, and after two columns traded names each comes under
    the other's: matched by name, their values would swap. Iceberg's field ids say which
    is which."""
    table = iceberg_table(stored.sparkSession, base)
    schema_id = table.snapshot(snapshot_id).schemaId()
    if schema_id is None:
        return stored
    then, now = table.schemas().get(schema_id), table.schema()
    names = {}
    for field in then.columns():
        current = now.findField(field.fieldId())
        if current is not None:
            names[str(field.name())] = str(current.name())
    if all(names.get(n) == n for n in stored.columns):
        return stored
    # A column dropped for good since is left out: a column added later may have its name.
    kept = [n for n in stored.columns if n in names]
    return stored.select(*[F.col(quote(n)).alias(names[n]) for n in kept])


def _rows_as_events(
    stored: DataFrame, events: DataFrame, pipeline: Pipeline, table: str, schema: TableSchema
) -> DataFrame:
    """A base snapshot's rows as ledger events at the positions they carry (``r``,
    every value available), in the ledger events' row image."""
    columns = [name for name in stored.columns if name not in (b.POSITION, b.SOURCE_TS)]
    image = F.struct(*[F.col(quote(name)) for name in columns])
    image_type = stored.select(image).schema[0].dataType
    rows = stored.select(
        *[F.col(quote(k)) for k in schema.primary_key],
        F.lit("r").alias(c.OP),
        image.alias(c.AFTER),
        F.lit(None).cast(image_type).alias(c.BEFORE),
        F.array().cast("array<string>").alias(c.UNAVAILABLE),
        F.col(b.POSITION).alias(c.POSITION),
        F.col(b.SOURCE_TS).alias(c.SOURCE_TS),
    )
    aligned = align_images(rows, pipeline, table, schema)
    after = events.schema[c.AFTER].dataType
    return aligned.select(
        *[F.col(quote(k)) for k in schema.primary_key],
        c.OP,
        F.col(c.AFTER).cast(after).alias(c.AFTER),
        F.col(c.BEFORE).cast(events.schema[c.BEFORE].dataType).alias(c.BEFORE),
        c.UNAVAILABLE,
        c.POSITION,
        c.SOURCE_TS,
    )


def _target_position(ledger: DataFrame, target: Target, table: str) -> Decimal:
    """The target as a position: itself, or the newest position committed at or before
    the target time."""
    if target.position is not None:
        return target.position
    assert target.time is not None
    row = ledger.agg(
        F.max(F.when(F.col(c.SOURCE_TS) <= F.lit(target.time), F.col(c.POSITION))),
        F.min(c.SOURCE_TS),
    ).first()
    assert row is not None
    if row[0] is None:
        earliest = "the ledger holds no event" if row[1] is None else f"its first is at {row[1]}"
        raise Unreachable(
            f"table {table}: no source commit at or before {target.time.isoformat()} is in "
            f"the ledger ({earliest})",
            earliest=None,
            hint="ask for a later time, or for a position",
        )
    return Decimal(row[0])


def _ledger_lineage(spark: SparkSession, ledger: TableName) -> tuple[int | None, set[int]]:
    """The ledger's current snapshot and the ids of the snapshots it keeps."""
    current, listed = metadata_snapshots(spark, iceberg_table(spark, ledger))
    return current, {s.snapshot_id for s in listed}


def _starts(spark: SparkSession, base: TableName) -> list[Start]:
    """The base snapshots an as-of can start from, oldest first: each merge's (its
    watermark in its summary) and a finished bootstrap's."""
    starts = []
    exact_from = None  # a bootstrap's, carried to the merges after it
    for snapshot in reversed(list(lineage_snapshots(spark, base))):
        summary = snapshot.summary
        if summary.get(b.BOOTSTRAP_STATE) == "done":
            found = summary.get(b.BOOTSTRAP_EXACT_FROM)
            exact_from = None if found is None else int(found)
        if b.WATERMARK_PROPERTY in summary:
            watermark = int(summary[b.WATERMARK_PROPERTY])
            starts.append(Start(snapshot.snapshot_id, watermark, exact_from))
        elif summary.get(b.BOOTSTRAP_STATE) == "done":
            starts.append(Start(snapshot.snapshot_id, None, exact_from))
    return starts


def _through(
    spark: SparkSession, base: TableName, ledger: TableName, start: Start
) -> Decimal | None:
    """The newest position ``start`` applied: the newest in the ledger its merges
    consumed (its watermark's snapshot), or for a bootstrap's copy the newest row it
    holds (the hand-off). One aggregate, which Iceberg answers from file metrics."""
    if start.watermark is None:
        read = spark.read.format("iceberg").option("snapshot-id", start.snapshot_id)
        newest = read.load(base.dotted).agg(F.max(b.POSITION)).first()
    else:
        read = spark.read.format("iceberg").option("snapshot-id", start.watermark)
        newest = read.load(ledger.dotted).agg(F.max(c.POSITION)).first()
    return None if newest is None or newest[0] is None else Decimal(newest[0])


def _copied(
    spark: SparkSession, base: TableName, starts: list[Start], first_event: Decimal | None
) -> bool:
    """Whether the base holds rows from before the ledger's first event (a bootstrap's
    copy): its oldest kept start holds a row older than that event."""
    if any(s.watermark is None for s in starts):
        return True
    if not starts:
        return False
    oldest = spark.read.format("iceberg").option("snapshot-id", starts[0].snapshot_id)
    row = oldest.load(base.dotted).agg(F.min(b.POSITION)).first()
    low = None if row is None else row[0]
    return low is not None and (first_event is None or Decimal(low) < first_event)
