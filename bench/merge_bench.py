"""Merge benchmark: icetide's merge against the naive MERGE from the design, same process.

Builds a base table of ``--rows`` rows (bucket-partitioned, merge-on-read), then a ledger
batch touching ``--change`` of the keys (updates, some deletes and inserts, with duplicate
events per key), and times, ``--repeat`` times each on fresh copies of the base:

* icetide: the merge stage's prepare steps + version-guarded MERGE;
* naive: ``ROW_NUMBER()`` dedupe + unguarded MERGE (``naive_merge_sql``).

Prints medians and the ratio naive/icetide (above 1 means icetide is faster). Machines here
are small and noisy: read the medians and ratios, not single runs.

    python bench/merge_bench.py --rows 1000000 --change 0.01 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icetide.config.model import Config
from icetide.merge.steps import MergeContext, prepare
from icetide.schema.contract import ledger as c
from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.contract.names import TableName
from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema
from icetide.spark.session import build_session

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
        ],
    }
)


def base_rows(spark: SparkSession, rows: int) -> DataFrame:
    """``rows`` synthetic accounts with positions below every ledger event's."""
    return spark.range(rows).select(
        F.col("id"),
        F.concat(F.lit("owner-"), F.col("id").cast("string")).alias("owner"),
        (F.col("id") % 100000 / 100).cast("decimal(12,2)").alias("balance"),
        F.lit("active").alias("status"),
        F.lit("2024-01-01 00:00:00").cast("timestamp_ntz").alias("updated_at"),
        F.col("id").cast("decimal(38,0)").alias("_icetide_position"),
        F.lit("2024-01-01 00:00:00").cast("timestamp").alias("_icetide_source_ts"),
    )


def ledger_batch(spark: SparkSession, rows: int, change: float) -> DataFrame:
    """Ledger rows: 3 events per changed key (c/u/u or u/u/d), plus new keys."""
    changed = max(1, int(rows * change))
    step = max(1, rows // changed)
    keys = spark.range(0, changed).select((F.col("id") * step).alias("id"))
    news = spark.range(rows, rows + changed // 10).select("id")
    events = keys.unionByName(news).crossJoin(spark.range(3).select(F.col("id").alias("n")))
    after = F.struct(
        F.col("id").alias("id"),
        F.concat(F.lit("owner-"), F.col("id").cast("string")).alias("owner"),
        (F.col("n") + 1).cast("decimal(12,2)").alias("balance"),
        F.lit("changed").alias("status"),
        F.lit("2024-02-01 00:00:00").cast("timestamp_ntz").alias("updated_at"),
    )
    is_delete = (F.col("n") == 2) & (F.col("id") % 10 == 0)
    return events.select(
        F.col("id"),
        F.when(is_delete, "d").otherwise("u").alias(c.OP),
        F.when(
            is_delete,
            F.lit(None).cast(
                "struct<id:bigint,"
                "owner:string,balance:decimal(12,2),status:string,updated_at:timestamp_ntz>"
            ),
        )
        .otherwise(after)
        .alias(c.AFTER),
        F.array().cast("array<string>").alias(c.UNAVAILABLE),
        (F.lit(10**15) + F.col("id") * 10 + F.col("n")).cast("decimal(38,0)").alias(c.POSITION),
        F.current_timestamp().alias(c.SOURCE_TS),
    )


BASE = TableName("lake", "b", "base")
EVENTS = TableName("lake", "b", "events")
CONTRACT = TableContract(SCHEMA, TableSettings(16, "merge-on-read"))


def fresh_base(spark: SparkSession, name: TableName, source: str) -> None:
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(CONTRACT.base_ddl(name))
    spark.sql(f"INSERT INTO {name} SELECT * FROM {source}")


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="base table rows")
    parser.add_argument("--change", type=float, default=0.01, help="share of keys changed")
    parser.add_argument("--repeat", type=int, default=3, help="runs per variant")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="icetide-bench-"))
    config = Config.model_validate(
        {
            "pipeline": "bench",
            "catalog": {"name": "lake", "warehouse": str(work / "warehouse"), "namespace": "b"},
            "spark": {"master": "local[2]", "shuffle_partitions": 16},
            "tables": [{"name": "accounts", "schema": str(work / "unused.yaml")}],
        }
    )
    spark = build_session(config)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.b")
    print(f"bench: {args.rows:,} base rows, {args.change:.1%} of keys changed", file=sys.stderr)
    base_rows(spark, args.rows).writeTo("lake.b.seed").using("iceberg").createOrReplace()
    ledger_batch(spark, args.rows, args.change).writeTo("lake.b.events").using(
        "iceberg"
    ).createOrReplace()
    events = spark.table("lake.b.events").count()
    variants = {
        "icetide": lambda: run_icetide(spark, SCHEMA),
        "naive": lambda: spark.sql(CONTRACT.naive_merge_sql(BASE, EVENTS)),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    for i in range(args.repeat):
        order = list(variants) if i % 2 == 0 else list(reversed(variants))
        for name in order:  # alternate, so warm-up does not favour one side
            run = variants[name]
            fresh_base(spark, BASE, "lake.b.seed")
            seconds = timed(run)
            times[name].append(seconds)
            print(f"  run {i + 1} {name:<8} {seconds:6.2f}s", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"events per batch: {events:,}")
    for name, value in med.items():
        print(f"{name:<8} median {value:6.2f}s  {events / value:,.0f} events/s")
    print(f"ratio naive/icetide: {med['naive'] / med['icetide']:.2f}")
    return 0


def run_icetide(spark: SparkSession, schema: TableSchema) -> None:
    events = spark.table("lake.b.events").withColumn(
        c.BEFORE, F.lit(None).cast(spark.table("lake.b.events").schema[c.AFTER].dataType)
    )
    prepare(events, MergeContext(schema, has_unavailable=False)).createOrReplaceTempView(
        "bench_batch"
    )
    spark.sql(TableContract(schema).merge_sql(BASE, "bench_batch"))


if __name__ == "__main__":
    sys.exit(main())
