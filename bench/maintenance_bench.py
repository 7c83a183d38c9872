"""Maintenance benchmark: what small files cost a reader, and what maintenance costs a writer.

1. Read time: ``--merges`` small merges (default 200) into a bucket(16) merge-on-read base
   table, then the median time of a full read (``count`` and a ``sum`` over every column
   hash, so every data and delete file is opened) ``--repeat`` times, before and after
   ``maintain_table``; the ratio before/after is how much maintenance speeds up reads.
   Then the acceptance checks at that scale (the test runs 8 merges): at most one data
   file per bucket, no delete files, and the base's rows unchanged; exit 1 if not.
2. Throughput: ``--throughput-merges`` more rounds (deliver, stream, merge; default
   ``--merges``) alone, then the same number with maintenance running in a thread beside
   them; events merged per second of each and their ratio is the cost of maintenance
   beside live merges.
3. ``--soak-minutes M`` (instead of 1 and 2): merges (5% of events arriving a round
   late) and maintenance (every ``--maintenance-pause`` seconds) side by side for M
   minutes, on a fresh table, then the rest of the ``--soak-rounds`` at once; checks
   that every merge commit is on the base table's lineage (none lost to a maintenance
   commit) and that the base equals the generator's model, and prints the merges,
   maintenance runs and conflicts retried. The acceptance run of "several minutes" that
   a test cannot afford.

Everything runs in one local Spark (``local[2]``) in a temporary folder. Machines here
are small and shared: compare the ratios, not single timings.

    python bench/maintenance_bench.py --merges 200 --repeat 3
    python bench/maintenance_bench.py --merges 40           # a quick look
    python bench/maintenance_bench.py --soak-minutes 5
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
from icetide.demo.run import compare_all, plan_rounds, write_pipeline
from icetide.demo.workload import Workload, deliver, generate
from icetide.ledger.stage import LedgerStage
from icetide.maintenance.files import data_files_per_partition, file_counts
from icetide.maintenance.run import MaintenanceResult, maintain_table
from icetide.merge.stage import MergeResult, MergeStage
from icetide.pipeline import Pipeline
from icetide.progress import Reporter
from icetide.schema.contract.base import WATERMARK_PROPERTY
from icetide.schema.quoting import literal
from icetide.spark.retry import retry_step
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
            events += retry_step("merge", partial(merge.merge_table, TABLE)).events
    finally:
        query.stop()
    return events, time.perf_counter() - started


def lineage_watermarks(spark: SparkSession, pipeline: Pipeline) -> set[int]:
    """The ledger snapshots recorded by the merge commits on the base's current lineage."""
    base = pipeline.refs(TABLE).base
    mark = f"s.summary[{literal(WATERMARK_PROPERTY)}]"
    return {
        int(r[0])
        for r in spark.sql(
            f"SELECT {mark} FROM {base.child('snapshots')} s "
            f"JOIN {base.child('history')} h ON s.snapshot_id = h.snapshot_id "
            f"WHERE h.is_current_ancestor AND {mark} IS NOT NULL"
        ).collect()
    }


def soak(root: Path, minutes: float, events_per_merge: int, rounds: int, pause: float) -> bool:
    """Part 3 (module doc); True when nothing was lost and the base equals the model."""
    path = write_pipeline(
        root, buckets=4, namespace="soak", extra={"schedule": {"stream_interval": "100ms"}}
    )
    config = load_config(path)
    pipeline = Pipeline(config, reporter=Reporter(lambda _: None))
    spark = build_session(config)
    landing = config.resolved_path(config.transport.path)
    workload = generate(43, rounds * events_per_merge, tables=[TABLE], key_space=500)
    parts = plan_rounds(workload, rounds, 43, late_rate=0.05)
    query = LedgerStage(spark, pipeline).start(once=False)
    merge = MergeStage(spark, pipeline)
    merges: list[MergeResult] = []

    def one_round(number: int, delivered: list[Workload]) -> None:
        for k, part in enumerate(delivered):
            deliver(part, landing, seed=number * 10 + k, files=1, duplicate_rate=0.0)
        query.processAllAvailable()
        merges.append(retry_step("merge", partial(merge.merge_table, TABLE)))

    one_round(0, parts[:1])  # the base exists before maintenance starts
    done = threading.Event()
    runs: list[MaintenanceResult] = []
    failures: list[BaseException] = []

    def maintain_loop() -> None:
        try:
            while not done.is_set():
                runs.append(maintain_table(spark, pipeline, TABLE))
                done.wait(pause)  # as icetide run's maintenance.interval, but short
        except BaseException as exc:  # reported below
            failures.append(exc)

    worker = threading.Thread(target=maintain_loop, name="maintenance")
    worker.start()
    started = time.monotonic()
    deadline = started + minutes * 60
    number = 1
    try:
        while number < len(parts) and time.monotonic() < deadline:
            one_round(number, parts[number : number + 1])
            number += 1
        one_round(number, parts[number:])  # the rest of the workload at once
        # One maintenance run that began after the last merge, so one ran beside them all.
        seen = len(runs)
        while len(runs) <= seen + 1 and not failures and worker.is_alive():
            worker.join(0.5)
    finally:
        done.set()
        worker.join()
        query.stop()
    elapsed = time.monotonic() - started
    applied = [m for m in merges if m.events]
    lineage = lineage_watermarks(spark, pipeline)
    lost = [m.end_snapshot for m in applied if m.end_snapshot not in lineage]
    comparisons = compare_all(spark, config, workload)
    conflicts = sum(t.conflicts_retried for r in runs for t in r.tables)
    matches = all(c.matches for c in comparisons)
    print(
        f"soak: {elapsed / 60:.1f} min, {len(applied)} merges ({number} rounds delivered one "
        f"by one of {len(parts)}), {len(runs)} maintenance runs beside them, {conflicts} "
        f"commit conflicts retried, maintenance failures {len(failures)}; merge commits "
        f"lost: {len(lost)}; base equals the model: {matches}"
    )
    for c in comparisons:
        if not c.matches:
            print(
                f"  {c.table}: {len(c.missing)} missing, {len(c.extra)} extra, "
                f"{len(c.differing)} differing"
            )
    spark.stop()
    return matches and not lost and not failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merges", type=int, default=200)
    parser.add_argument("--events-per-merge", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--throughput-merges", type=int, default=None)
    parser.add_argument("--soak-minutes", type=float, default=None)
    parser.add_argument("--soak-rounds", type=int, default=400, help="rounds the workload has")
    parser.add_argument(
        "--maintenance-pause", type=float, default=5.0, help="seconds between maintenance runs"
    )
    args = parser.parse_args()
    if args.soak_minutes is not None:
        with tempfile.TemporaryDirectory() as tmp:
            ok = soak(
                Path(tmp),
                args.soak_minutes,
                args.events_per_merge,
                args.soak_rounds,
                args.maintenance_pause,
            )
            raise SystemExit(0 if ok else 1)
    throughput = args.throughput_merges or args.merges
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
        rounds_total = args.merges + 2 * throughput
        total = rounds_total * args.events_per_merge
        workload = generate(7, total, tables=[TABLE], key_space=2000)
        parts = plan_rounds(workload, rounds_total, 7, late_rate=0.0)
        base = pipeline.refs(TABLE).base.sql

        rounds(spark, pipeline, landing, parts[: args.merges], seed=0)
        counts = file_counts(spark, pipeline.refs(TABLE).base)
        rows = sorted(spark.table(base).collect())
        before = read_seconds(spark, base, args.repeat)
        maintained = maintain_table(spark, pipeline, TABLE)
        after = read_seconds(spark, base, args.repeat)
        print(
            f"read after {args.merges} merges: {before:.2f}s with {counts.data_files} data / "
            f"{counts.delete_files} delete files; after maintain ({maintained.seconds:.0f}s): "
            f"{after:.2f}s; ratio {before / after:.2f}x"
        )
        compacted = file_counts(spark, pipeline.refs(TABLE).base)
        per_bucket = data_files_per_partition(spark, pipeline.refs(TABLE).base)
        checks = {
            "at most one data file per bucket": max(per_bucket.values()) == 1,
            "no delete files": compacted.delete_files == 0,
            "base rows unchanged": sorted(spark.table(base).collect()) == rows,
        }
        print(
            "after maintain: "
            + ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in checks.items())
        )
        if not all(checks.values()):
            raise SystemExit(1)

        alone_events, alone = rounds(
            spark, pipeline, landing, parts[args.merges : args.merges + throughput], seed=10_000
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
                spark, pipeline, landing, parts[args.merges + throughput :], seed=20_000
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
