"""The merge stage: new ledger events since the watermark → version-guarded MERGE.

The watermark (the last ledger snapshot consumed) is a summary property of the base
table's own MERGE snapshot, so the batch and the memory of having applied it commit
together. Replaying any batch is a no-op anyway, because every base row carries the
position that produced it and only newer events apply.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icetide.config import Config
from icetide.faults import crash_point
from icetide.ledger import contract as c
from icetide.merge.statement import merge_sql
from icetide.merge.steps import MergeContext, key_changed, prepare
from icetide.merge.tables import (
    BOOTSTRAP_ID,
    BOOTSTRAP_STATE,
    EVENTS_PROPERTY,
    POSITION,
    WATERMARK_PROPERTY,
    base_ddl,
    identifier_fields_sql,
)
from icetide.schema.model import TableSchema
from icetide.spark.commit import append_with_properties, with_commit_properties
from icetide.spark.sql import literal
from icetide.spark.tables import (
    TableRefs,
    current_snapshot_id,
    ensure_namespace,
    latest_snapshot_property,
    table_exists,
)

Log = Callable[[str], None]


@dataclass(frozen=True)
class MergeResult:
    """What one merge of one table did."""

    table: str
    events: int
    start_snapshot: int | None
    end_snapshot: int | None
    seconds: float

    def render(self) -> str:
        """One progress line."""
        if self.events == 0:
            return f"merge {self.table}: up to date"
        if self.start_snapshot is None:
            span = f"the ledger up to snapshot {self.end_snapshot} (first merge)"
        else:
            span = f"ledger snapshots after {self.start_snapshot} up to {self.end_snapshot}"
        return f"merge {self.table}: {self.events:,} events from {span} in {self.seconds:.1f}s"


def read_watermark(spark: SparkSession, base: str) -> int | None:
    """The last ledger snapshot merged into ``base``; None before the first merge."""
    summary = latest_snapshot_property(spark, base, WATERMARK_PROPERTY)
    return int(summary[WATERMARK_PROPERTY]) if summary else None


def read_bootstrap_state(spark: SparkSession, base: str) -> tuple[str, str] | None:
    """``(bootstrap id, running|done)`` of the newest bootstrap of ``base``, or None."""
    summary = latest_snapshot_property(spark, base, BOOTSTRAP_STATE)
    if summary is None:
        return None
    return summary.get(BOOTSTRAP_ID, ""), summary[BOOTSTRAP_STATE]


def read_new_events(spark: SparkSession, ledger: str, start: int | None, end: int) -> DataFrame:
    """Ledger rows appended after snapshot ``start`` up to and including ``end``."""
    reader = spark.read.format("iceberg")
    if start is None:
        reader = reader.option("snapshot-id", end)
    else:
        reader = reader.option("start-snapshot-id", start).option("end-snapshot-id", end)
    return reader.load(ledger.replace("`", ""))


class MergeStage:
    """Merges each table's new ledger events into its base table."""

    def __init__(
        self,
        spark: SparkSession,
        config: Config,
        schemas: dict[str, TableSchema],
        log: Log = print,
    ) -> None:
        self.spark = spark
        self.config = config
        self.schemas = schemas
        self.log = log

    def refs(self, table: str) -> TableRefs:
        """The Iceberg names of ``table``."""
        return TableRefs.of(self.config, table)

    def ensure_base(self, name: str) -> None:
        """Create the base table (and namespace) when missing."""
        table = self.config.table(name)
        base = self.refs(name).base
        if table_exists(self.spark, base):
            return
        ensure_namespace(self.spark, self.config.catalog.name, self.config.catalog.namespace)
        schema = self.schemas[name]
        self.spark.sql(base_ddl(base, schema, table.buckets, table.mode))
        self.spark.sql(identifier_fields_sql(base, schema))

    def run_once(self) -> list[MergeResult]:
        """Merge every configured table once."""
        return [self.merge_table(t.name) for t in self.config.tables]

    def merge_table(self, name: str) -> MergeResult:
        """Merge the new ledger events of one table."""
        started = time.monotonic()
        refs = self.refs(name)
        self.ensure_base(name)
        bootstrap = read_bootstrap_state(self.spark, refs.base)
        if bootstrap is not None and bootstrap[1] == "running":
            self.log(f"merge {name}: waiting for bootstrap {bootstrap[0]} to finish")
            return MergeResult(name, 0, None, None, 0.0)
        if not table_exists(self.spark, refs.cdc):
            return MergeResult(name, 0, None, None, 0.0)
        end = current_snapshot_id(self.spark, refs.cdc)
        start = read_watermark(self.spark, refs.base)
        if end is None or end == start:
            return MergeResult(name, 0, start, end, 0.0)
        events = read_new_events(self.spark, refs.cdc, start, end)
        stats = events.agg(
            F.count(F.lit(1)).alias("n"),
            F.max(F.when(F.col(c.OP) == "t", F.col(c.POSITION))).alias("truncate"),
            F.max(F.size(c.UNAVAILABLE)).alias("unavailable"),
        ).first()
        assert stats is not None
        count, batch_truncate = int(stats["n"]), stats["truncate"]
        history = self._history(refs.cdc, start, self.schemas[name])
        truncated_before = self._truncated_before(history, batch_truncate)
        if batch_truncate is not None:
            # Its own commit, before the MERGE that carries the watermark: if we die in
            # between, the replay deletes the same rows again and nothing else.
            self.spark.sql(
                f"DELETE FROM {refs.base} WHERE {POSITION} < "
                f"CAST({literal(str(batch_truncate))} AS {c.POSITION_SQL})"
            )
            crash_point("merge.after_truncate")
        has_unavailable = (stats["unavailable"] or 0) > 0
        ctx = MergeContext(self.schemas[name], history, truncated_before, has_unavailable)
        source = prepare(events, ctx)
        view = f"icetide_batch_{name}"
        source.createOrReplaceTempView(view)
        before = current_snapshot_id(self.spark, refs.base)
        properties = {WATERMARK_PROPERTY: str(end), EVENTS_PROPERTY: str(count)}

        def apply() -> None:
            crash_point("merge.before_commit")
            self.spark.sql(merge_sql(refs.base, view, self.schemas[name]))

        with_commit_properties(self.spark, properties, apply)
        if current_snapshot_id(self.spark, refs.base) == before:
            self._commit_watermark_only(refs.base, properties)
        crash_point("merge.after_commit")
        self.spark.catalog.dropTempView(view)
        result = MergeResult(name, count, start, end, time.monotonic() - started)
        self.log(result.render())
        return result

    def _history(self, ledger: str, start: int | None, schema: TableSchema) -> DataFrame | None:
        """Deletes and truncates merged before this batch, within the retention window."""
        if start is None:
            return None
        cutoff = datetime.now(UTC) - self.config.merge.tombstone_retention
        earlier = self.spark.read.format("iceberg").option("snapshot-id", start)
        return (
            earlier.load(ledger.replace("`", ""))
            .where(F.col(c.INGESTED_AT) >= F.lit(cutoff))
            .where(F.col(c.OP).isin("d", "t") | key_changed(schema))
        )

    def _truncated_before(
        self, history: DataFrame | None, batch_truncate: Decimal | None
    ) -> Decimal | None:
        marks = [batch_truncate] if batch_truncate is not None else []
        if history is not None:
            row = history.where(F.col(c.OP) == "t").agg(F.max(c.POSITION)).first()
            if row is not None and row[0] is not None:
                marks.append(row[0])
        return max(marks) if marks else None

    def _commit_watermark_only(self, base: str, properties: dict[str, str]) -> None:
        """A MERGE that changed nothing made no snapshot: record the watermark anyway."""
        append_with_properties(self.spark.table(base).limit(0), base, properties)
