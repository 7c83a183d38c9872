"""As-of benchmark: the table at a source position, against the baselines, in one process.

A demo table's workload (``--events``, merged in ``--rounds`` with late events) is built
once; then, at two targets (the newest position and one in the middle of the stream),
each variant is timed ``--repeat`` times, counting its rows:

* ``asof``: :func:`icetide.merge.asof.table_as_of` (the nearest base snapshot plus the
  ledger's events after it, by the merge's steps);
* ``naive``: the design's baseline over the whole ledger up to the target
  (``ROW_NUMBER() OVER (PARTITION BY key ORDER BY position DESC)``, rank 1, not a delete):
  no snapshot, and wrong for unchanged-TOAST values and key changes;
* ``snapshot``: Iceberg's time travel to the nearest base snapshot (the floor: what a
  read costs with no event applied; exact only at that snapshot).

Prints medians and ratios to ``snapshot``. Never pass/fail on time: machines here are
small and shared.

    python bench/asof_bench.py --events 20000 --rounds 4 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from icetide.config import load_config
from icetide.demo.run import plan_rounds, write_pipeline
from icetide.demo.workload import deliver, generate
from icetide.ledger.stage import LedgerStage
from icetide.merge.asof import table_as_of
from icetide.merge.asof_plan import Start, Target
from icetide.merge.stage import MergeStage
from icetide.pipeline import Pipeline
from icetide.progress import Reporter
from icetide.schema.contract import ledger as c
from icetide.spark.session import build_session

TABLE = "customers"


def timed(run: Callable[[], int], repeat: int) -> tuple[float, int]:
    """The median seconds of ``repeat`` runs, and the rows the last one counted."""
    seconds, rows = [], 0
    for _ in range(repeat):
        started = time.perf_counter()
        rows = run()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), rows


def naive(spark: SparkSession, pipeline: Pipeline, position: Decimal) -> int:
    """The window dedupe over every ledger event up to ``position``: its living rows."""
    ledger = spark.table(pipeline.refs(TABLE).cdc.sql)
    newest_first = Window.partitionBy("id").orderBy(F.col(c.POSITION).desc())
    upto = ledger.where(F.col(c.POSITION) <= F.lit(position).cast(c.POSITION_SQL))
    ranked = upto.where(F.col(c.OP) != "t").withColumn("_rank", F.row_number().over(newest_first))
    return ranked.where((F.col("_rank") == 1) & (F.col(c.OP) != "d")).count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--key-space", type=int, default=5_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="icetide-asof-bench-"))
    config = load_config(write_pipeline(root, warehouse=root / "warehouse", namespace="asof"))
    pipeline = Pipeline(config, reporter=Reporter(Reporter.text(lambda _: None)))
    spark = build_session(config)
    spark.sparkContext.setLogLevel("ERROR")
    workload = generate(7, args.events, tables=[TABLE], key_space=args.key_space)
    started = time.perf_counter()
    for number, part in enumerate(plan_rounds(workload, args.rounds, 7, late_rate=0.05)):
        # Files of about 2,000 events, as capture's rolled files are: the file source
        # reads a landing file whole (a round of 375,000 events in two files did not fit
        # in a 4-GB heap).
        files = max(2, len(part.events) // 2000)
        landing = pipeline.config.resolved_path(config.transport.path)
        deliver(part, landing, seed=number, files=files)
        LedgerStage(spark, pipeline).start(once=True).awaitTermination()
        MergeStage(spark, pipeline).run_once()
    print(
        f"{args.events:,} events of {TABLE} in {args.rounds} merges "
        f"({time.perf_counter() - started:.0f}s to build); medians of {args.repeat}"
    )
    base = pipeline.refs(TABLE).base.dotted
    positions = [ch.position for ch in workload.journal]
    print(f"{'target':<8} {'variant':<9} {'rows':>7} {'seconds':>8} {'x snapshot':>10}")
    for label, position in (("newest", positions[-1]), ("middle", positions[len(positions) // 2])):
        target = Target("position", str(position), Decimal(position))

        def asof(target: Target = target) -> int:
            built = table_as_of(spark, pipeline, TABLE, target)
            try:
                return built.frame.count()
            finally:
                built.release()

        plan = table_as_of(spark, pipeline, TABLE, target).plan

        def snapshot(start: Start | None = plan.start) -> int:
            if start is None:
                return 0
            reader = spark.read.format("iceberg").option("snapshot-id", start.snapshot_id)
            return reader.load(base).count()

        floor, floor_rows = timed(snapshot, args.repeat)
        variants = {
            "snapshot": (floor, floor_rows),
            "asof": timed(asof, args.repeat),
            "naive": timed(lambda p=Decimal(position): naive(spark, pipeline, p), args.repeat),
        }
        for name, (seconds, rows) in variants.items():
            ratio = seconds / floor if floor else float("nan")
            print(f"{label:<8} {name:<9} {rows:>7,} {seconds:>8.2f} {ratio:>10.1f}")
        expected = len(workload.state_at(TABLE, position))
        print(f"{label:<8} {'model':<9} {expected:>7,}  (from {plan.through} for the snapshot)")


if __name__ == "__main__":
    main()
