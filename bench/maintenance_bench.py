"""Maintenance benchmark: what small files cost a reader, and what maintenance costs a writer.

1. Read time: ``--merges`` small merges (default 200) into a bucket(16) merge-on-read base
   table, then the median time of a full read (``count`` and a ``sum`` over every column
   hash, so every data and delete file is opened) ``--repeat`` times, before and after
   ``maintain_table``; the ratio before/after is how much maintenance speeds up reads.
2. Throughput: ``--merges`` more rounds (deliver, stream, merge) alone, then the same
   number with maintenance running in a thread beside them; events merged per second of
   each and their ratio is the cost of maintenance beside live merges.

Everything runs in one local Spark (``local[2]``) in a temporary folder. Machines here
are small and shared: compare the ratios, not single timings.

    python bench/maintenance_bench.py --merges 200 --repeat 3
    python bench/maintenance_bench.py --merges 40           # a quick look
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from functools import partial
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.config import load_config
from icetide.demo.run import plan_rounds, write_pipeline
from icetide.demo.workload import Workload, deliver, generate
from icetide.ledger.stage import LedgerStage
from icetide.maintenance.files import file_counts
from icetide.maintenance.run import MaintenanceResult, maintain_table
from icetide.merge.stage import MergeStage
from icetide.pipeline import Pipeline
from icetide.progress import Reporter
from icetide.spark.retry import retry_conflicts
from icetide.spark.session import build_session

TABLE = "customers"


def read_seconds(spark: SparkSession, table: str, repeat: int) -> float:
    """Median seconds of a full read of ``table``."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        frame = spark.table(table)
        frame.agg(F.count(F.lit(1)), F.sum(F.hash(*frame.columns))).collect()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def rounds(
    spark: SparkSession, pipeline: Pipeline, landing: Path, parts: list[Workload], seed: int
) -> tuple[int, float]:
    """Deliver, stream and merge each part; (events merged, seconds)."""
    query = LedgerStage(spark, pipeline).start(once=False)
    merge = MergeStage(spark, pipeline)
    events = 0
    started = time.perf_counter()
    try:
        for number, part in enumerate(parts):
            deliver(part, landing, seed=seed + number, files=1, duplicate_rate=0.0)
            query.processAllAvailable()
            events += retry_conflicts("merge", partial(merge.merge_table, TABLE)).events
    finally:
        query.stop()
    return events, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merges", type=int, default=200)
    parser.add_argument("--events-per-merge", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = write_pipeline(
            root,
            buckets=16,
            extra={"schedule": {"stream_interval": "100ms"}},
        )
        config = load_config(path)
        pipeline = Pipeline(config, reporter=Reporter(lambda _: None))
        spark = build_session(config)
        landing = config.resolved_path(config.transport.path)
        total = args.merges * args.events_per_merge
        workload = generate(7, total * 3, tables=[TABLE], key_space=2000)
        parts = plan_rounds(workload, args.merges * 3, 7, late_rate=0.0)
        base = pipeline.refs(TABLE).base.sql

        rounds(spark, pipeline, landing, parts[: args.merges], seed=0)
        counts = file_counts(spark, pipeline.refs(TABLE).base)
        before = read_seconds(spark, base, args.repeat)
        maintained = maintain_table(spark, pipeline, TABLE)
        after = read_seconds(spark, base, args.repeat)
        print(
            f"read after {args.merges} merges: {before:.2f}s with {counts.data_files} data / "
            f"{counts.delete_files} delete files; after maintain ({maintained.seconds:.0f}s): "
            f"{after:.2f}s; ratio {before / after:.2f}x"
        )

        alone_events, alone = rounds(
            spark, pipeline, landing, parts[args.merges : 2 * args.merges], seed=10_000
        )
        done = threading.Event()
        runs: list[MaintenanceResult] = []

        def maintain_loop() -> None:
            while not done.is_set():
                runs.append(maintain_table(spark, pipeline, TABLE))

        worker = threading.Thread(target=maintain_loop)
        worker.start()
        try:
            beside_events, beside = rounds(
                spark, pipeline, landing, parts[2 * args.merges :], seed=20_000
            )
        finally:
            done.set()
            worker.join()
        alone_rate, beside_rate = alone_events / alone, beside_events / beside
        print(
            f"merge throughput alone: {alone_rate:,.0f} events/s; with maintenance beside "
            f"({len(runs)} runs): {beside_rate:,.0f} events/s; ratio {beside_rate / alone_rate:.2f}"
        )
        spark.stop()


if __name__ == "__main__":
    main()
