"""What an ``icetide run``'s periodic looks at every table cost, at N tables.

Besides its ledger micro-batches and merge rounds, a run looks at every table again and
again: the status observer and the artifacts' version watch every ``--observe-interval``
(15 s), the ledger's tick after every merge round (5 s). At many tables these looks are
what an idle pipeline spends its CPU on (bench/results/tables.md).

In one process and one SparkSession, on ``--tables`` of ``bench/tables_bench.py``'s
generated tables (Zipf-weighted events, every supported type): ``--batches`` landing
files of ``--events`` events are each stored by the ledger and merged, then each step
is timed ``--repeat`` times (wall, and the CPU of the Spark JVM and of this process):

* ``tick``: the ledger's tick (schema phases 1 and 2 with no new event);
* ``observe``: one look of the observer over every table, nothing committed since the
  last look;
* ``watch``: one round of the artifacts' version watch;
* ``observe after merge``: one look right after a merge round that moved every
  table's watermark (one more landing file stored and merged before each).

Prints the median of each. Run another checkout's code with
``PYTHONPATH=/path/to/checkout python bench/periodic_bench.py`` to compare. Never
pass/fail on time; run it on an otherwise quiet machine.

    python bench/periodic_bench.py --tables 100
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from landing_run import land  # noqa: E402
from tables_bench import (  # noqa: E402
    _stat,
    message_pool,
    table_schema,
    write_pipeline,
    zipf_weights,
)

from icetide.artifacts.watch import VersionWatch  # noqa: E402
from icetide.config import load_config, load_table_schemas  # noqa: E402
from icetide.ledger.stage import LedgerStage  # noqa: E402
from icetide.merge.stage import MergeStage  # noqa: E402
from icetide.observe.freshness import observe_all  # noqa: E402
from icetide.pipeline import Pipeline  # noqa: E402
from icetide.progress import Reporter  # noqa: E402
from icetide.spark.session import build_session  # noqa: E402


def _jvm_seconds(pid: int) -> float:
    return _stat(pid)[0]


def _own_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--events", type=int, default=25_000, help="events per landing file")
    parser.add_argument("--batches", type=int, default=3, help="files stored and merged first")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="icetide-periodic-", dir="/tmp"))
    rng = random.Random(args.seed)
    schemas = [table_schema(i, rng) for i in range(args.tables)]
    settings = argparse.Namespace(
        spark_conf=[], stream_interval="2s", merge_interval="5s", parallel_tables=2, buckets=2
    )
    config_path = write_pipeline(work, schemas, settings)
    pool = message_pool(schemas, zipf_weights(args.tables, 1.1), args.events, args.seed)
    os.chdir(work)
    config = load_config(config_path)
    pipeline = Pipeline(config, load_table_schemas(config), Reporter(Reporter.lines([])))
    spark = build_session(config)
    spark.sparkContext.setLogLevel("ERROR")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
    ledger, merge = LedgerStage(spark, pipeline), MergeStage(spark, pipeline)
    watch = VersionWatch(spark, pipeline, lambda *_, **__: None)
    landing = config.resolved_path(config.transport.path)
    landing.mkdir(parents=True, exist_ok=True)
    landed = [0]

    def store_and_merge() -> None:
        now = int(time.time() * 1000)
        lines = [m.at(now, 1000 + (landed[0] * len(pool) + k) * 100) for k, m in enumerate(pool)]
        land(landing, landed[0], lines)
        landed[0] += 1
        ledger.start(once=True).awaitTermination()
        merge.run_once()

    for _ in range(args.batches):
        store_and_merge()
    timed: dict[str, list[tuple[float, float, float]]] = {}

    def time_it(name: str, step: Callable[[], object]) -> None:
        wall, jvm_cpu, own = time.perf_counter(), _jvm_seconds(jvm_pid), _own_seconds()
        step()
        timed.setdefault(name, []).append(
            (
                time.perf_counter() - wall,
                _jvm_seconds(jvm_pid) - jvm_cpu,
                _own_seconds() - own,
            )
        )

    observe = lambda: observe_all(spark, config)  # noqa: E731
    for step in (ledger.tick, observe, watch.step):  # warm each once
        step()
    for _ in range(args.repeat):
        time_it("tick", ledger.tick)
        time_it("observe", observe)
        time_it("watch", watch.step)
    for _ in range(args.repeat):
        store_and_merge()
        time_it("observe after merge", observe)

    print(
        f"periodic looks at {args.tables} tables ({args.batches} files of {args.events:,} "
        f"events stored and merged first), median of {args.repeat}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"  {'step':<20} {'wall s':>8} {'JVM CPU s':>10} {'Python CPU s':>13}")
    for name, runs in timed.items():
        wall, jvm_cpu, own = (statistics.median(r[i] for r in runs) for i in range(3))
        print(f"  {name:<20} {wall:8.2f} {jvm_cpu:10.2f} {own:13.2f}")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
