"""A micro-batch of many tables stored in one Spark job, against one append per table.

The ledger stage stores a micro-batch's tables in one Spark job: its Python tasks
project each table's messages and write them as the table's Parquet files, and the
driver commits each table's files through Iceberg's API (icetide/ledger/table_files.py).
Before, each table was appended through Spark's Iceberg writer: a Spark job (and a
DataFrame plan analysed, optimised and compiled in the JVM) per table and batch, which
at hundreds of tables was most of a batch's time (bench/results/tables.md). This
benchmark measures the two ways on the same messages:

* ``per_table`` (Spark's writer, the way the stage still appends a ledger partitioned
  otherwise than icetide creates it, less its figures job): for each table, its rows
  projected by icetide's projection (``project_batches``) and appended with
  ``writeTo(...).append()``, one job each;
* ``one_job`` (the stage's way, its own functions): one ``mapInArrow`` over the whole
  batch (``write_table_files``) whose tasks project each table's rows the same way and
  write its files with the Iceberg table's field ids; then one commit per table from the
  driver (``append_files``), four tables at a time: no Spark job per table.

Both store the same messages (``bench/tables_bench.py``'s generated tables, every type,
Zipf-distributed) into two warehouses of one Spark session, in alternating order each
round. At the end every table's rows must be equal in both (every column, nested ones
included, compared as JSON), and PyIceberg, an independent reader, must read the
``one_job`` tables' row counts from their metadata alone; a difference fails the run.

Prints each round's seconds, the ratio per_table / one_job and the ``one_job`` split
(its job, its commits), then the medians. Never pass/fail on time.

    python bench/ledger_write_bench.py --tables 200 --events 40000 --rounds 4
    python bench/ledger_write_bench.py --tables 1000 --events 100000 --rounds 2 --no-compare
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from tables_bench import message_pool, table_schema, write_pipeline, zipf_weights

from icetide.config import load_config
from icetide.lake.align import align_to
from icetide.lake.data_files import append_files, file_target
from icetide.lake.tables import iceberg_table, spark_schema
from icetide.ledger.decode import ROW, project_batches, projected_spark_schema
from icetide.ledger.phases import projection
from icetide.ledger.stage import CHUNK_TABLES, SMALL_SHARE, LedgerStage, ledger_rows
from icetide.ledger.table_files import (
    FILES_DDL,
    INPUT_COLUMNS,
    TableJob,
    collected,
    write_table_files,
)
from icetide.pipeline import Pipeline
from icetide.schema.contract import ledger as c
from icetide.spark.session import build_session

SECOND_CATALOG = "lakeb"
COMMIT_THREADS = 4


def pipelines(work: Path, tables: int, events: int, seed: int) -> tuple[dict[str, Path], list[Any]]:
    """Two pipelines of the same generated tables (``per_table`` in catalog ``lake``,
    ``one_job`` in :data:`SECOND_CATALOG`), and the batch's message pool."""
    rng = random.Random(seed)
    schemas = [table_schema(i, rng) for i in range(tables)]
    pool = message_pool(schemas, zipf_weights(tables, 1.1), events, seed)
    settings = argparse.Namespace(
        spark_conf=[],
        stream_interval="1s",
        merge_interval="10s",
        parallel_tables=2,
        round_tables=32,
        buckets=4,
    )
    configs = {}
    for variant in ("per_table", "one_job"):
        (work / variant).mkdir(parents=True)
        configs[variant] = write_pipeline(work / variant, schemas, settings)
    doc = yaml.safe_load(configs["one_job"].read_text())
    doc["catalog"]["name"] = SECOND_CATALOG
    configs["one_job"].write_text(yaml.safe_dump(doc, sort_keys=False))
    return configs, pool


def batch_frame(spark: SparkSession, pool: list[Any], round_: int) -> DataFrame:
    """The round's messages as the ledger's classified batch holds them: table, id, raw
    bytes, each table's together (as a batch of many tables is sorted)."""
    rows = []
    for i, message in enumerate(pool):
        position = round_ * len(pool) + i + 1
        line = message.at(1_700_000_000_000 + position, position)
        rows.append((json.loads(line)["source"]["table"], f"m{round_}-{i}", line.encode()))
    frame = spark.createDataFrame(rows, "table string, message_id string, raw binary")
    return frame.sortWithinPartitions("table").persist()


def per_table(
    spark: SparkSession,
    pipeline: Pipeline,
    batch: DataFrame,
    now: datetime,
    events: Mapping[str, int],
) -> None:
    """One projection and append per table, as the ledger stage stores a batch (its
    tables one after another, where the stage takes four chunks at a time; ``events``:
    each table's messages)."""
    for table in pipeline.config.tables:
        plan = projection(spark, pipeline, table.name, record=False)
        rows = batch.where(F.col("table") == table.name).select("message_id", "raw")
        if len(pipeline.config.tables) > CHUNK_TABLES and events[table.name] <= SMALL_SHARE:
            rows = rows.coalesce(1)  # as the stage projects a small table: one task
        projected = rows.mapInArrow(project_batches(plan, now), projected_spark_schema(plan))
        ledger = pipeline.refs(table.name).cdc
        rows = ledger_rows(projected, plan)
        align_to(rows, spark_schema(spark, ledger)).writeTo(ledger.sql).append()


def one_job(
    spark: SparkSession,
    pipeline: Pipeline,
    batch: DataFrame,
    now: datetime,
    split: dict[str, list[float]],
) -> None:
    """What the ledger stage does: one Spark job writes every table's files
    (:func:`~icetide.ledger.table_files.write_table_files`), then the driver commits
    each table's (:func:`~icetide.lake.data_files.append_files`), four at a time."""
    started = time.monotonic()
    jobs: dict[str, TableJob] = {}
    for table in pipeline.config.tables:
        plan = projection(spark, pipeline, table.name, record=False)
        refs = pipeline.refs(table.name)
        ledger = file_target(iceberg_table(spark, refs.cdc), c.INGESTED_AT, now.date())
        dead = file_target(iceberg_table(spark, refs.dead_letters), c.DLT_INGESTED_AT, now.date())
        assert ledger is not None and dead is not None
        jobs[table.name] = TableJob(plan, None, ledger, dead, table.buckets)
    rows = batch.withColumn("status", F.lit(ROW)).withColumn("reason", F.lit(None).cast("string"))
    rows = rows.withColumn("error", F.lit(None).cast("string")).select(*INPUT_COLUMNS)
    written = collected(rows.mapInArrow(write_table_files(jobs, now, None), FILES_DDL).collect())
    split.setdefault("job", []).append(time.monotonic() - started)
    started = time.monotonic()

    def commit(name: str) -> None:
        files = written[name]
        job = jobs[name]
        ledger = iceberg_table(spark, pipeline.refs(name).cdc)
        append_files(ledger, files.ledger, job.ledger.partition, {})

    # Catalog round trips, not Spark jobs: a few tables at once, as the ledger's appends
    # and the merge's commits are.
    with ThreadPoolExecutor(COMMIT_THREADS) as pool:
        list(pool.map(commit, written))
    split.setdefault("commits", []).append(time.monotonic() - started)


def compare(spark: SparkSession, mirrors: dict[str, Pipeline]) -> list[str]:
    """Tables whose rows differ between the two warehouses (every column, as JSON), or
    whose ``one_job`` row count PyIceberg reads otherwise than Spark."""
    from pyiceberg.table import StaticTable

    differing = []
    for table in mirrors["per_table"].config.tables:
        sides = [
            spark.table(mirrors[v].refs(table.name).cdc.sql).select(
                F.to_json(F.struct("*")).alias("row")
            )
            for v in ("per_table", "one_job")
        ]
        same = sides[0].exceptAll(sides[1]).isEmpty() and sides[1].exceptAll(sides[0]).isEmpty()
        ledger = iceberg_table(spark, mirrors["one_job"].refs(table.name).cdc)
        metadata = str(ledger.operations().current().metadataFileLocation())
        read = StaticTable.from_metadata(metadata).scan().to_arrow().num_rows
        if not same or read != sides[1].count() or read != sides[0].count():
            differing.append(table.name)
    return differing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--events", type=int, default=40000, help="messages a batch")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--json", type=Path, help="append the result as a JSON line here")
    parser.add_argument(
        "--no-compare",
        action="store_true",
        help="skip the comparison of the two warehouses (a few Spark jobs and a PyIceberg "
        "scan a table: at 1,000 tables longer than the rounds)",
    )
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="icetide-ledger-write-"))
    configs, pool = pipelines(work, args.tables, args.events, args.seed)
    spark = build_session(load_config(configs["per_table"]))
    prefix = f"spark.sql.catalog.{SECOND_CATALOG}"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{prefix}.type", "hadoop")
    spark.conf.set(f"{prefix}.warehouse", str(work / "one_job" / "warehouse"))
    mirrors = {v: Pipeline(load_config(path)) for v, path in configs.items()}
    for mirror in mirrors.values():
        LedgerStage(spark, mirror).ensure_tables()
    events: Counter[str] = Counter()
    for message in pool:
        events[json.loads(message.line)["source"]["table"]] += 1
    seconds: dict[str, list[float]] = {"per_table": [], "one_job": []}
    split: dict[str, list[float]] = {}
    for round_ in range(args.rounds):
        batch = batch_frame(spark, pool, round_)
        batch.count()
        now = datetime.now(UTC)
        order = ["per_table", "one_job"] if round_ % 2 == 0 else ["one_job", "per_table"]
        for variant in order:
            started = time.monotonic()
            if variant == "per_table":
                per_table(spark, mirrors[variant], batch, now, events)
            else:
                one_job(spark, mirrors[variant], batch, now, split)
            seconds[variant].append(time.monotonic() - started)
        batch.unpersist()
        line = {v: round(s[-1], 2) for v, s in seconds.items()}
        line |= {f"one_job_{k}": round(v[-1], 2) for k, v in split.items()}
        print(json.dumps({"round": round_, **line}), flush=True)
    differing = [] if args.no_compare else compare(spark, mirrors)
    result = {
        "tables": args.tables,
        "events": args.events,
        "rounds": args.rounds,
        "median_s": {v: round(statistics.median(s), 2) for v, s in seconds.items()},
        "ratio": [
            round(a / b, 2) for a, b in zip(seconds["per_table"], seconds["one_job"], strict=True)
        ],
        "one_job_split_median_s": {k: round(statistics.median(v), 2) for k, v in split.items()},
        "compared": not args.no_compare,
        "differing_tables": differing,
        "load_average": os.getloadavg(),
    }
    print(json.dumps(result))
    if args.json:
        with args.json.open("a") as out:
            out.write(json.dumps(result) + "\n")
    if differing:
        print(f"rows differ in {len(differing)} tables: {differing[:10]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
