"""How long the ledger stage's start takes to create (or find) many tables: each
table's ledger and dead-letter tables, one after another against
:data:`icetide.ledger.stage.CREATE_THREADS` at once.

For ``--tables`` generated tables (bench/tables_bench.py's schemas: 5–30 columns of
every supported type), ``LedgerStage.ensure_tables`` runs in one process and one
Spark session, each trial in a fresh namespace of one Hadoop-catalog warehouse, the
thread counts alternating, each trial twice: once creating every table, once finding
them all (a restart), after one untimed warm-up of every table. Prints the median
milliseconds per table and the ratio against one thread. Never pass/fail.

    python bench/create_bench.py --tables 200 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

import yaml
from tables_bench import in_process_pipeline, table_schema

from icetide.config import load_config
from icetide.ledger import stage as ledger_stage
from icetide.ledger.stage import LedgerStage
from icetide.pipeline import Pipeline
from icetide.spark.session import build_session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", default="1,2,4", help="thread counts, comma-separated")
    args = parser.parse_args(argv)
    rng = random.Random(7)
    schemas = [table_schema(i, rng) for i in range(args.tables)]
    work = Path(tempfile.mkdtemp(prefix="icetide-create-", dir="/tmp"))
    config_path = in_process_pipeline(work, schemas)
    doc = yaml.safe_load(config_path.read_text())
    spark = build_session(load_config(config_path))
    threads = [int(t) for t in args.threads.split(",")]
    created: dict[int, list[float]] = {t: [] for t in threads}
    found: dict[int, list[float]] = {t: [] for t in threads}
    # Untimed: the first tables a JVM creates pay its class loading and JIT warm-up.
    doc["catalog"]["namespace"] = "bench_warm_up"
    config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    LedgerStage(spark, Pipeline(load_config(config_path))).ensure_tables()
    load = os.getloadavg()[0]
    for trial in range(args.repeat):
        for count in threads:
            doc["catalog"]["namespace"] = f"bench_{trial}_{count}"
            config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
            stage = LedgerStage(spark, Pipeline(load_config(config_path)))
            ledger_stage.CREATE_THREADS = count
            for into in (created, found):
                began = time.monotonic()
                stage.ensure_tables()
                into[count].append((time.monotonic() - began) / args.tables * 1000)
            print(
                f"trial {trial}, {count} thread(s): create {created[count][-1]:.0f} ms/table, "
                f"find {found[count][-1]:.0f} ms/table",
                flush=True,
            )
    print(
        f"\n{platform.machine()} {os.cpu_count()} cores, load {load:.1f} at the start and "
        f"{os.getloadavg()[0]:.1f} at the end; {args.tables} tables, median of {args.repeat}"
    )
    one = threads[0]
    for count in threads:
        c, f = statistics.median(created[count]), statistics.median(found[count])
        c1, f1 = statistics.median(created[one]), statistics.median(found[one])
        print(
            f"  {count} thread(s): create {c:6.0f} ms/table ({c1 / c:.2f}x), "
            f"find {f:6.0f} ms/table ({f1 / f:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
