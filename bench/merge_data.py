"""Synthetic tables for the merge benchmarks: a real pipeline's base and ledger tables.

The base is seeded once per layout (``bucket(N, id)``, merge-on-read v2, v3 deletion
vectors or copy-on-write) and every timed merge starts from that seed again by rolling
the table back to its seed snapshot, which is instant: no variant pays for a copy, and
all see the same files. The ledger holds ``history`` earlier batches (so the merge's
tombstone history is a realistic size) and then the batch under test; the seeded base's
watermark is the ledger snapshot just before that batch, so the stage merges exactly it.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from icetide.config.model import Config
from icetide.lake.commit import append_with_properties
from icetide.lake.ledger_figures import FIGURES_PROPERTY, figure_aggregates, figures_json
from icetide.lake.tables import current_snapshot_id
from icetide.pipeline import Pipeline
from icetide.progress import Reporter
from icetide.schema.contract import history as h
from icetide.schema.contract import ledger as c
from icetide.schema.contract.base import WATERMARK_PROPERTY
from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.contract.names import TableName
from icetide.schema.file import dump_schema_file, schema_from_dict

SCHEMA = schema_from_dict(
    {
        "table": "accounts",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {"id": 2, "name": "owner", "type": "string"},
            {"id": 3, "name": "balance", "type": "decimal(12,2)"},
            {"id": 4, "name": "status", "type": "string"},
            {"id": 5, "name": "updated_at", "type": "timestamp"},
            {"id": 6, "name": "note", "type": "string"},
        ],
    }
)
ROW_TYPE = (
    "struct<id:bigint,owner:string,balance:decimal(12,2),status:string,"
    "updated_at:timestamp_ntz,note:string>"
)
CATALOG, NAMESPACE = "lake", "b"
BUCKETS = 16


@dataclass(frozen=True)
class Mix:
    """Shares of a batch's changed keys that are updates, deletes and new inserts, and
    how many events each key gets (hot keys: many events per key)."""

    updates: float = 0.8
    deletes: float = 0.1
    inserts: float = 0.1
    events_per_key: int = 3

    @property
    def label(self) -> str:
        u, d, i = (round(x * 100) for x in (self.updates, self.deletes, self.inserts))
        return f"u{u}/d{d}/i{i} x{self.events_per_key}"


def bench_config(
    work: Path,
    buckets: int = BUCKETS,
    strategy: str = "auto",
    compact_every: int | None = None,
    history: bool = False,
    catalog: dict[str, object] | None = None,
) -> Config:
    """A pipeline config for the benchmark tables (one per layout) in ``work``; with
    ``history``, each keeps an SCD type 2 history (``history: scd2``); its ``catalog:``
    is ``catalog`` when given (a REST catalog on an object store, say), else a Hadoop
    catalog in ``work``."""
    merge: dict[str, object] = {"strategy": strategy}
    if compact_every is not None:
        merge["compact_every"] = compact_every
    tables = [
        {
            "name": layout["table"],
            "schema": str(work / "schemas" / f"{layout['table']}.yaml"),
            "buckets": buckets,
            "mode": layout["mode"],
            "merge": merge,
            "history": "scd2" if history else "off",
        }
        for layout in LAYOUTS.values()
    ]
    for layout in LAYOUTS.values():
        dump_schema_file(
            SCHEMA.renamed(layout["table"]), work / "schemas" / f"{layout['table']}.yaml"
        )
    doc = {
        "pipeline": "bench",
        "state_dir": str(work / "state"),
        "catalog": catalog
        or {"name": CATALOG, "warehouse": str(work / "warehouse"), "namespace": NAMESPACE},
        "spark": {"master": "local[2]", "shuffle_partitions": buckets},
        "tables": tables,
    }
    path = work / "icetide.yaml"
    path.write_text(json.dumps(doc))
    return Config.model_validate(doc)


def work_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="icetide-bench-", dir="/tmp"))


def pipeline(config: Config, log: list[str] | None = None) -> Pipeline:
    sinks = [Reporter.lines(log)] if log is not None else [lambda _record: None]
    schemas = {layout["table"]: SCHEMA.renamed(layout["table"]) for layout in LAYOUTS.values()}
    return Pipeline(config, schemas, Reporter(*sinks))


def seed_rows(spark: SparkSession, rows: int) -> DataFrame:
    """``rows`` accounts, each at a position below every ledger event's."""
    return spark.range(rows).select(
        F.col("id"),
        F.concat(F.lit("owner-"), F.col("id").cast("string")).alias("owner"),
        (F.col("id") % 100000 / 100).cast("decimal(12,2)").alias("balance"),
        F.lit("active").alias("status"),
        F.lit("2024-01-01 00:00:00").cast("timestamp_ntz").alias("updated_at"),
        F.lit("a note of some length to make rows realistic").alias("note"),
        F.col("id").cast("decimal(38,0)").alias("_icetide_position"),
        F.lit("2024-01-01 00:00:00").cast("timestamp").alias("_icetide_source_ts"),
    )


def _after(n: Column) -> Column:
    return F.struct(
        F.col("id").alias("id"),
        F.concat(F.lit("owner-"), F.col("id").cast("string")).alias("owner"),
        (n + 1).cast("decimal(12,2)").alias("balance"),
        F.lit("changed").alias("status"),
        F.lit("2024-02-01 00:00:00").cast("timestamp_ntz").alias("updated_at"),
        F.lit("a note of some length to make rows realistic").alias("note"),
    )


def ledger_batch(
    spark: SparkSession, rows: int, change: float, mix: Mix, batch: int, salt: int = 0
) -> DataFrame:
    """One batch of ledger rows touching ``change`` of the ``rows`` keys.

    Updated and deleted keys are spread over the whole key range (every bucket is
    touched, the hard case); inserted keys are new. Each key gets
    ``mix.events_per_key`` events; a deleted key's last event is its ``d``. Positions grow
    with ``batch`` so later batches are newer.
    """
    changed = max(1, int(rows * change))
    existing = max(1, int(changed * (mix.updates + mix.deletes)))
    step = max(1, rows // existing)
    deletes_every = round(1 / mix.deletes) if mix.deletes > 0 else 0
    keys = spark.range(0, existing).select(((F.col("id") * step + salt) % rows).alias("id"))
    inserted = int(changed * mix.inserts)
    first_new = rows + (batch + 1) * 10**8
    news = spark.range(first_new, first_new + inserted).select("id")
    per_key = spark.range(mix.events_per_key).select(F.col("id").alias("n"))
    events = keys.withColumn("new", F.lit(False)).unionByName(news.withColumn("new", F.lit(True)))
    events = events.crossJoin(per_key)
    last = F.col("n") == mix.events_per_key - 1
    is_delete = (
        (~F.col("new") & last & (F.col("id") % deletes_every == 0))
        if deletes_every
        else F.lit(False)
    )
    op = F.when(is_delete, "d").when(F.col("new") & (F.col("n") == 0), "c").otherwise("u")
    position = (F.lit(10**15) + F.lit(batch) * F.lit(10**13) + F.col("id") * 100 + F.col("n")).cast(
        "decimal(38,0)"
    )
    return events.select(
        F.col("id"),
        op.alias(c.OP),
        F.when(is_delete, F.lit(None).cast(ROW_TYPE)).otherwise(_after(F.col("n"))).alias(c.AFTER),
        F.lit(None).cast(ROW_TYPE).alias(c.BEFORE),
        F.array().cast("array<string>").alias(c.UNAVAILABLE),
        position.alias(c.POSITION),
        position.cast("string").alias(c.POSITION_TEXT),
        F.current_timestamp().alias(c.SOURCE_TS),
        F.lit("tx").alias(c.TX_ID),
        F.concat(F.lit(f"m{batch}-"), F.col("id").cast("string"), F.col("n").cast("string")).alias(
            c.MESSAGE_ID
        ),
        F.current_timestamp().alias(c.INGESTED_AT),
        F.lit(SCHEMA.version).alias(c.SCHEMA_VERSION),
        F.lit(None).cast("string").alias(c.RESCUED),
    )


BASE = TableName(CATALOG, NAMESPACE, "accounts")
LEDGER = TableName(CATALOG, NAMESPACE, "accounts_cdc")
SEED = TableName(CATALOG, NAMESPACE, "accounts_seed")
LAYOUTS: dict[str, dict[str, str]] = {
    "mor-v2": {"format-version": "2", "mode": "merge-on-read", "table": "accounts"},
    "mor-v3": {"format-version": "3", "mode": "merge-on-read", "table": "accounts_v3"},
    "cow": {"format-version": "2", "mode": "copy-on-write", "table": "accounts_cow"},
}
"""Base layouts: merge-on-read with v2 position deletes, with v3 deletion vectors, and
copy-on-write. Each is its own pipeline table, with its own (identical) ledger."""


@dataclass
class Tables:
    """The benchmark's tables and the snapshots a run starts from."""

    spark: SparkSession
    config: Config
    rows: int
    seeds: dict[str, int]
    """Layout → the seeded base table's snapshot, to roll back to."""
    batches: dict[str, int]
    """Layout → the ledger snapshot holding the batch under test."""
    before_batch: dict[str, int]
    """Layout → the ledger snapshot before it: the seeded base's watermark."""
    history_seeds: dict[str, int] = field(default_factory=dict)
    """Layout → the seeded history table's snapshot (``--history``), to roll back to."""

    @staticmethod
    def table(layout: str) -> str:
        return LAYOUTS[layout]["table"]

    @staticmethod
    def base(layout: str) -> TableName:
        return TableName(CATALOG, NAMESPACE, LAYOUTS[layout]["table"])

    @staticmethod
    def ledger(layout: str) -> TableName:
        return Tables.base(layout).suffixed(c.SUFFIX)

    @staticmethod
    def history(layout: str) -> TableName:
        """The base's history table (``--history``)."""
        return Tables.base(layout).suffixed(h.SUFFIX)

    def reset(self, layout: str) -> None:
        """The base of ``layout`` as seeded, its ledger ending at the batch under test."""
        rollback(self.spark, self.base(layout), self.seeds[layout])
        if layout in self.history_seeds:
            rollback(self.spark, self.history(layout), self.history_seeds[layout])
        if current_snapshot_id(self.spark, self.ledger(layout)) != self.batches[layout]:
            rollback(self.spark, self.ledger(layout), self.batches[layout])


def rollback(spark: SparkSession, table: TableName, snapshot: int) -> None:
    spark.sql(f"CALL {CATALOG}.system.rollback_to_snapshot('{NAMESPACE}.{table.name}', {snapshot})")


def contract(layout: str, buckets: int = BUCKETS) -> TableContract:
    mode = LAYOUTS[layout]["mode"]
    return TableContract(SCHEMA, TableSettings(buckets, mode))  # type: ignore[arg-type]


def create_base(spark: SparkSession, layout: str, buckets: int = BUCKETS) -> TableName:
    """An empty base table of ``layout``."""
    name = Tables.base(layout)
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    ddl = contract(layout, buckets).base_ddl(name)
    version = LAYOUTS[layout]["format-version"]
    spark.sql(ddl.replace("'format-version'='2'", f"'format-version'='{version}'"))
    return name


def append_ledger(frame: DataFrame, ledger: TableName, buckets: int, figures: bool = True) -> None:
    """Append a ledger batch with the merge figures in its snapshot summary, as the
    ledger stage records them (icetide/lake/ledger_figures.py; there they ride on the
    aggregate it runs over every batch anyway, here a separate one, not timed)."""
    if not figures:  # as a ledger written before the figures: the merge computes them
        frame.writeTo(ledger.sql).append()
        return
    frame = frame.persist()
    try:
        row = frame.agg(*figure_aggregates(SCHEMA, CATALOG, buckets)).first()
        ingested = frame.agg(F.unix_micros(F.max(c.INGESTED_AT))).first()
        assert row is not None and ingested is not None
        recorded = figures_json(row, SCHEMA.version, buckets, int(ingested[0]))
        append_with_properties(frame, ledger, {FIGURES_PROPERTY: recorded})
    finally:
        frame.unpersist()


def build_tables(
    spark: SparkSession,
    config: Config,
    rows: int,
    change: float,
    mix: Mix,
    history: int = 5,
    layouts: tuple[str, ...] = ("mor-v2",),
    buckets: int = BUCKETS,
    figures: bool = True,
) -> Tables:
    """Seed the base (one per layout) and its ledger: ``history`` batches, then the one
    under test."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
    seed_rows(spark, rows).writeTo(SEED.sql).using("iceberg").createOrReplace()
    tables = Tables(spark, config, rows, {}, {}, {})
    for layout in layouts:
        ledger = Tables.ledger(layout)
        spark.sql(f"DROP TABLE IF EXISTS {ledger}")
        spark.sql(contract(layout, buckets).ledger_ddl(ledger))
        for i in range(history):
            append_ledger(
                ledger_batch(spark, rows, change, mix, i, salt=i + 1), ledger, buckets, figures
            )
        before = current_snapshot_id(spark, ledger)
        assert before is not None
        name = create_base(spark, layout, buckets)
        append_with_properties(
            spark.table(SEED.sql).repartition(buckets * 2, "id"),
            name,
            {WATERMARK_PROPERTY: str(before)},
        )
        seed = current_snapshot_id(spark, name)
        assert seed is not None
        append_ledger(ledger_batch(spark, rows, change, mix, history), ledger, buckets, figures)
        end = current_snapshot_id(spark, ledger)
        assert end is not None
        tables.seeds[layout], tables.before_batch[layout], tables.batches[layout] = (
            seed,
            before,
            end,
        )
    return tables
