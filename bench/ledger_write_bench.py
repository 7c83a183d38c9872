"""A micro-batch of many tables stored in one Spark job, against one append per table.

The ledger stage appends each table's rows of a micro-batch through Spark's Iceberg
writer: a Spark job (and a DataFrame plan analysed, optimised and compiled in the JVM)
per table and batch, which at hundreds of tables is most of a batch's time
(bench/results/tables.md). This benchmark measures the other way before it is built:

* ``per_table`` (what the stage does, less its figures job): for each table, its rows
  projected by icetide's projection (``project_batches``) and appended with
  ``writeTo(...).append()``, one job each;
* ``one_job``: one ``mapInArrow`` over the whole batch whose Python tasks project each
  table's rows the same way and write them as a Parquet file in the table's data folder,
  with the Iceberg table's field ids (PyIceberg's ``schema_to_pyarrow``); then, from the
  driver, one Iceberg commit per table (``newFastAppend`` through Iceberg's Java API,
  each file's metrics read from its footer by ``ParquetUtil.fileMetrics``), four tables
  at a time: no Spark job per table.

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
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from tables_bench import message_pool, table_schema, write_pipeline, zipf_weights

from icetide.config import load_config
from icetide.lake.align import align_to
from icetide.lake.tables import iceberg_table, spark_schema
from icetide.ledger.decode import ROW, STATUS, Projection, project_batches, projected_spark_schema
from icetide.ledger.phases import projection
from icetide.ledger.stage import CHUNK_TABLES, SMALL_SHARE, LedgerStage, ledger_rows
from icetide.pipeline import Pipeline
from icetide.schema.contract import ledger as c
from icetide.spark.jvm import jvm_class
from icetide.spark.session import build_session

SECOND_CATALOG = "lakeb"
COMMIT_THREADS = 4
FILES_DDL = "table STRING, path STRING, size BIGINT, rows BIGINT"
"""What ``one_job``'s tasks answer: one row per Parquet file written."""
FILES_SCHEMA = pa.schema(
    [("table", pa.string()), ("path", pa.string()), ("size", pa.int64()), ("rows", pa.int64())]
)


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


Job = tuple[Projection, str, str, int]
"""A table's projection, Iceberg schema (JSON), data folder and schema version."""


def file_writer(
    jobs: dict[str, Job], now: datetime
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of ``one_job``: each input batch's rows by table,
    projected, written as one Parquet file per table with the table's field ids; one
    output row per file."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyiceberg.io.pyarrow import schema_to_pyarrow
        from pyiceberg.schema import Schema

        prepared: dict[str, tuple[Any, pa.Schema, str, int]] = {}
        for batch in batches:
            names = batch.column("table")
            for name in pc.unique(names).to_pylist():
                if name not in prepared:
                    plan, schema_json, folder, version = jobs[name]
                    target = schema_to_pyarrow(Schema.model_validate_json(schema_json))
                    prepared[name] = (project_batches(plan, now), target, folder, version)
                project, target, folder, version = prepared[name]
                mine = batch.filter(pc.equal(names, name)).select(["message_id", "raw"])
                projected = pa.Table.from_batches(
                    [b.filter(pc.equal(b.column(STATUS), ROW)) for b in project(iter([mine]))]
                )
                count = projected.num_rows
                if not count:
                    continue
                columns = []
                for field in target:
                    if field.name == c.SCHEMA_VERSION:
                        columns.append(pa.array([version] * count, field.type))
                    elif field.name in projected.column_names:
                        columns.append(projected.column(field.name).cast(field.type))
                    else:  # a column the table keeps and the schema dropped: NULL
                        columns.append(pa.nulls(count, field.type))
                os.makedirs(folder, exist_ok=True)
                path = f"{folder}/{uuid.uuid4()}.parquet"
                pq.write_table(
                    pa.Table.from_arrays(columns, schema=target), path, compression="zstd"
                )
                row = {"table": name, "path": path, "size": os.path.getsize(path), "rows": count}
                yield pa.RecordBatch.from_pylist([row], schema=FILES_SCHEMA)

    return run


def one_job(
    spark: SparkSession,
    pipeline: Pipeline,
    batch: DataFrame,
    now: datetime,
    split: dict[str, list[float]],
) -> None:
    """One Spark job writes every table's file; the driver commits each table."""
    started = time.monotonic()
    jobs: dict[str, Job] = {}
    loaded: dict[str, Any] = {}
    parser = jvm_class("org.apache.iceberg.SchemaParser")
    for table in pipeline.config.tables:
        plan = projection(spark, pipeline, table.name, record=False)
        ledger = iceberg_table(spark, pipeline.refs(table.name).cdc)
        loaded[table.name] = ledger
        field = ledger.spec().fields().get(0)  # the ledger's days(_ingested_at)
        partition = f"{field.name()}={now.strftime('%Y-%m-%d')}"
        folder = f"{str(ledger.location()).removeprefix('file:')}/data/{partition}"
        jobs[table.name] = (
            plan,
            str(parser.toJson(ledger.schema())),
            folder,
            plan.value_schema.version,
        )
    files = batch.mapInArrow(file_writer(jobs, now), FILES_DDL).collect()
    split.setdefault("job", []).append(time.monotonic() - started)
    started = time.monotonic()
    by_table: dict[str, list[Any]] = defaultdict(list)
    for row in files:
        by_table[row.table].append(row)
    parquet = jvm_class("org.apache.iceberg.parquet.ParquetUtil")
    metrics_config = jvm_class("org.apache.iceberg.MetricsConfig")
    data_files = jvm_class("org.apache.iceberg.DataFiles")
    parquet_format = jvm_class("org.apache.iceberg.FileFormat").PARQUET

    def commit(name: str) -> None:
        rows = by_table[name]
        ledger = loaded[name]
        append = ledger.newFastAppend()
        config = metrics_config.forTable(ledger)
        partition = rows[0].path.rsplit("/", 2)[-2]
        for row in rows:
            metrics = parquet.fileMetrics(ledger.io().newInputFile(row.path), config)
            append = append.appendFile(
                data_files.builder(ledger.spec())
                .withPath(row.path)
                .withFormat(parquet_format)
                .withFileSizeInBytes(row.size)
                .withMetrics(metrics)
                .withPartitionPath(partition)
                .build()
            )
        append.commit()

    # Catalog round trips, not Spark jobs: a few tables at once, as the ledger's appends
    # and the merge's commits are.
    with ThreadPoolExecutor(COMMIT_THREADS) as pool:
        list(pool.map(commit, by_table))
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
