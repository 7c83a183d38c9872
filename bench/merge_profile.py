"""Profile one merge: Spark jobs per merge, where their time goes, and the MERGE's plan.

Seeds a ``--rows`` base and a ledger (earlier batches, then one of ``--change``), runs the
merge stage ``--repeat`` times from the same start (the base rolled back in between),
with Spark's event log on, and prints per call site: jobs, their summed wall time, and
the share of the merge. ``--explain`` prints the MERGE's formatted physical plan.

    python bench/merge_profile.py --rows 1000000 --change 0.01 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from merge_data import (
    BASE,
    CATALOG,
    LEDGER,
    NAMESPACE,
    Mix,
    bench_config,
    build_tables,
    contract,
    pipeline,
    work_dir,
)

from icetide.merge.stage import MergeStage
from icetide.schema.contract.names import TableName
from icetide.spark.session import build_session


def task_cpu(log_dir: Path) -> list[tuple[float, float]]:
    """``(launched, executor CPU seconds)`` of every task in the event logs."""
    tasks = []
    for path in log_dir.iterdir():
        for line in path.read_text().splitlines():
            if '"SparkListenerTaskEnd"' not in line:
                continue
            event = json.loads(line)
            info, metrics = event.get("Task Info") or {}, event.get("Task Metrics") or {}
            cpu = metrics.get("Executor CPU Time", 0) / 1e9
            tasks.append((info.get("Launch Time", 0) / 1000, cpu))
    return tasks


def stage_times(log_dir: Path) -> list[tuple[float, float, int, str]]:
    """``(submitted, seconds, tasks, name)`` of every completed stage in the event logs
    (epoch seconds): which stages of a merge run one task while a core idles."""
    stages = []
    for path in log_dir.iterdir():
        for line in path.read_text().splitlines():
            if '"SparkListenerStageCompleted"' not in line:
                continue
            info = json.loads(line)["Stage Info"]
            began, ended = info.get("Submission Time"), info.get("Completion Time")
            if began is None or ended is None:
                continue
            stages.append(
                (began / 1000, (ended - began) / 1000, info["Number of Tasks"], info["Stage Name"])
            )
    return sorted(stages)


def job_times(log_dir: Path) -> list[tuple[float, float, str]]:
    """``(submitted, seconds, call site)`` of every job in the event logs under ``log_dir``
    (epoch seconds)."""
    starts: dict[int, tuple[str, int]] = {}
    jobs: list[tuple[float, float, str]] = []
    for path in log_dir.iterdir():
        for line in path.read_text().splitlines():
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerJobStart":
                props = event.get("Properties") or {}
                site = props.get("callSite.short") or "?"
                sql = props.get("spark.job.description") or ""
                starts[event["Job ID"]] = (f"{site} {sql[:40]}".strip(), event["Submission Time"])
            elif kind == "SparkListenerJobEnd" and event["Job ID"] in starts:
                site, began = starts[event["Job ID"]]
                jobs.append((began / 1000, (event["Completion Time"] - began) / 1000, site))
    return sorted(jobs)


WALL: dict[str, list[float]] = defaultdict(list)
EXPLAINED: set[str] = set()


def instrument(explain: bool = False) -> None:
    """Time every driver call that runs Spark work, by its icetide call site (wall time,
    including planning and commits, which job times leave out)."""
    import traceback

    from pyspark.sql import DataFrame, SparkSession

    def wrap(owner: type, name: str) -> None:
        original = getattr(owner, name)

        def timed(*args: object, **kw: object) -> object:
            frames = [f for f in traceback.extract_stack()[:-1] if "/icetide/" in f.filename]
            site = name
            if frames:
                site += f" at {frames[-1].filename.split('/icetide/')[-1]}:{frames[-1].lineno}"
            began = time.perf_counter()
            try:
                return original(*args, **kw)
            finally:
                if frames:
                    WALL[site].append(time.perf_counter() - began)

        setattr(owner, name, timed)

    for method in ("collect", "first", "count", "isEmpty"):
        wrap(DataFrame, method)
    wrap(SparkSession, "sql")
    if explain:
        timed_sql = SparkSession.sql

        def explained(self: SparkSession, query: str, *args: object, **kw: object) -> object:
            shape = query.split(" USING ")[-1][:60]
            if query.startswith("MERGE INTO") and shape not in EXPLAINED:
                EXPLAINED.add(shape)
                plan = timed_sql(self, f"EXPLAIN FORMATTED {query}").collect()[0][0]
                print(f"\n-- plan of {query[:100]}\n{plan}", file=sys.stderr)
            return timed_sql(self, query, *args, **kw)

        SparkSession.sql = explained  # type: ignore[method-assign]


def report(
    name: str,
    seconds: list[float],
    windows: list[tuple[float, float]],
    jobs: list[tuple[float, float, str]],
    tasks: list[tuple[float, float]],
    stages: list[tuple[float, float, int, str]],
) -> None:
    """Wall time, executor CPU and the jobs of one variant's merges."""
    cpu = [sum(c for t, c in tasks if lo <= t <= hi) for lo, hi in windows]
    counts = [sum(1 for j in jobs if lo <= j[0] <= hi) for lo, hi in windows]
    print(
        f"\n== {name}: wall median {statistics.median(seconds):.2f}s, executor CPU median "
        f"{statistics.median(cpu):.2f}s, Spark jobs per merge {counts}"
    )
    lo, hi = windows[-1]
    print("last merge's jobs (start offset s, seconds, call site):")
    for began, secs, where in jobs:
        if lo <= began <= hi:
            print(f"  {began - lo:6.2f} {secs:6.2f}  {where}")
    print("last merge's stages (start offset s, seconds, tasks, name):")
    for began, secs, n, where in stages:
        if lo <= began <= hi:
            print(f"  {began - lo:6.2f} {secs:6.2f} {n:4d}  {where[:70]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--change", type=float, default=0.01)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--history", type=int, default=5)
    parser.add_argument("--strategy", default="auto")
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args(argv)
    work = work_dir()
    logs = work / "events"
    logs.mkdir()
    config = bench_config(work)
    config = config.model_copy(
        update={
            "spark": config.spark.model_copy(
                update={"conf": {"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(logs)}}
            )
        }
    )
    spark = build_session(config)
    started = time.perf_counter()
    tables = build_tables(spark, config, args.rows, args.change, Mix(), history=args.history)
    print(f"seeded in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    new = spark.read.format("iceberg").option("start-snapshot-id", tables.before_batch["mor-v2"])
    print(f"batch events: {new.load(LEDGER.dotted).count():,}", file=sys.stderr)
    strategies = args.strategy.split(",")
    stages = {
        name: MergeStage(spark, pipeline(bench_config(work, strategy=name)))
        for name in strategies
        if name not in ("naive",)
    }
    batch = TableName(CATALOG, NAMESPACE, "accounts_batch")
    new.load(LEDGER.dotted).writeTo(batch.sql).using("iceberg").createOrReplace()
    naive = contract("mor-v2").naive_merge_sql(BASE, batch)
    instrument(args.explain)
    seconds: dict[str, list[float]] = defaultdict(list)
    windows: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for i in range(args.repeat):
        for name in strategies if i % 2 == 0 else reversed(strategies):
            tables.reset("mor-v2")
            began, epoch = time.perf_counter(), time.time()
            if name == "naive":
                spark.sql(naive)
            else:
                stages[name].merge_table("accounts")
            seconds[name].append(time.perf_counter() - began)
            windows[name].append((epoch, time.time()))
            print(f"  merge {i} {name}: {seconds[name][-1]:.2f}s", file=sys.stderr)
    spark.stop()
    jobs = job_times(logs)
    tasks = task_cpu(logs)
    stages_run = stage_times(logs)
    for name in strategies:
        report(name, seconds[name], windows[name], jobs, tasks, stages_run)
    print(f"\n{'driver call (wall, incl. planning/commit)':<60}{'calls':>6}{'s/merge':>9}")
    for where, values in sorted(WALL.items(), key=lambda kv: -sum(kv[1])):
        n = len(values) / args.repeat
        print(f"{where[:60]:<60}{n:>6.1f}{sum(values) / args.repeat:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
