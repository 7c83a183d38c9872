"""Ingest benchmark: the ledger stage against the Spark-native floor, on the same files.

In one process and one SparkSession (``local[2]``), ``--sizes`` Debezium events of the
8-column MySQL table of ``bench/decode_bench.py`` are written as NDJSON landing files
(``--lines-per-file`` lines each), then read two ways, ``--repeat`` times each, every run
into a fresh namespace:

* ``floor``: Spark alone, what any team would write first: ``from_json`` with the
  explicit envelope schema, the row's columns, the source position and the raw line,
  appended to an Iceberg table;
* ``ledger``: icetide's ledger stage on the same landing files, exactly as
  ``icetide stream --once`` runs it (``LedgerStage.start(once=True)``: classify, project,
  the batch's figures, the appends with their snapshot properties).

Prints the median seconds per size and the marginal rate (the slope between the smallest
and the largest size, so that fixed costs — the query start, table creation — cancel),
and the ledger's rate as a share of the floor's. Never pass/fail on time: machines here
are small and shared; the load average is printed beside the figures.

    python bench/ingest_bench.py --sizes 20000,200000 --repeat 3
    python bench/ingest_bench.py --form inline   # with JsonConverter's schema blocks
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decode_bench import SCHEMA, compact, event, inline  # noqa: E402

from icetide.config.model import Config  # noqa: E402
from icetide.ledger.stage import LedgerStage  # noqa: E402
from icetide.pipeline import Pipeline  # noqa: E402
from icetide.progress import Reporter  # noqa: E402
from icetide.schema.file import dump_schema_file  # noqa: E402
from icetide.spark.session import build_session  # noqa: E402

CATALOG = "lake"
ENVELOPE_SCHEMA = (
    "before STRUCT<id BIGINT, name STRING, email STRING, qty BIGINT, price DOUBLE, "
    "active BOOLEAN, city STRING, note STRING>, "
    "after STRUCT<id BIGINT, name STRING, email STRING, qty BIGINT, price DOUBLE, "
    "active BOOLEAN, city STRING, note STRING>, "
    "source STRUCT<name STRING, db STRING, table STRING, file STRING, pos BIGINT, "
    "ts_ms BIGINT>, op STRING, ts_ms BIGINT"
)


def config(work: Path, run: str, landing: Path, catalog: dict[str, object] | None = None) -> Config:
    """A pipeline reading ``landing`` into namespace ``run`` (state of its own); its
    ``catalog:`` is ``catalog`` with ``run`` as the namespace when given, else a Hadoop
    catalog in ``work``."""
    schema_file = work / "schemas" / "items.yaml"
    if not schema_file.exists():
        dump_schema_file(SCHEMA, schema_file)
    doc = {
        "pipeline": "ingest",
        "state_dir": str(work / "state" / run),
        "catalog": {**catalog, "namespace": run}
        if catalog
        else {"name": CATALOG, "warehouse": str(work / "warehouse"), "namespace": run},
        "spark": {"master": "local[2]", "shuffle_partitions": 2},
        "transport": {"type": "files", "path": str(landing)},
        "tables": [
            {"name": "items", "source": "inv.items", "schema": str(schema_file), "buckets": 2}
        ],
    }
    return Config.model_validate(doc)


def land(folder: Path, events: int, per_file: int, form: str = "bare") -> None:
    """``events`` NDJSON Debezium events in files of ``per_file`` lines (``form``:
    bare envelopes, or with JsonConverter's inline schema block, compact as it writes
    them)."""
    folder.mkdir(parents=True)
    for start in range(0, events, per_file):
        stop = min(events, start + per_file)
        lines = (
            compact(inline(event(i))).decode() if form == "inline" else json.dumps(event(i))
            for i in range(start, stop)
        )
        (folder / f"events-{start:09d}.json").write_text("\n".join(lines) + "\n")


def floor(spark: SparkSession, landing: Path, run: str, form: str = "bare") -> Callable[[], None]:
    """Spark alone: parse with the explicit schema, keep the columns, position and line
    (an inline-schema message: its payload parsed, its schema block skipped)."""
    envelope = ENVELOPE_SCHEMA if form == "bare" else f"payload STRUCT<{ENVELOPE_SCHEMA}>"
    table = f"{CATALOG}.{run}.items_floor"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{run}")
    spark.sql(
        f"CREATE TABLE {table} (id BIGINT, name STRING, email STRING, qty BIGINT, "
        "price DOUBLE, active BOOLEAN, city STRING, note STRING, op STRING, "
        "pos_file STRING, pos BIGINT, raw STRING) USING iceberg"
    )

    def go() -> None:
        parsed = spark.read.text(str(landing)).select(
            F.from_json("value", envelope).alias("e"), F.col("value").alias("raw")
        )
        if form == "inline":
            parsed = parsed.select(F.col("e.payload").alias("e"), "raw")
        parsed.select(
            "e.after.*",
            F.col("e.op").alias("op"),
            F.col("e.source.file").alias("pos_file"),
            F.col("e.source.pos").alias("pos"),
            "raw",
        ).writeTo(table).append()

    return go


def ledger(
    spark: SparkSession,
    work: Path,
    landing: Path,
    run: str,
    catalog: dict[str, object] | None = None,
) -> Callable[[], None]:
    """icetide's ledger stage, as ``icetide stream --once`` runs it."""
    cfg = config(work, run, landing, catalog)
    stage = LedgerStage(spark, Pipeline(cfg, {"items": SCHEMA}, Reporter(lambda _r: None)))

    def go() -> None:
        stage.start(once=True).awaitTermination()
        rows = spark.table(f"{CATALOG}.{run}.items_cdc").count()
        assert rows == count_lines(landing), (rows, run)

    return go


def cpu_seconds() -> float:
    """CPU time of this process and every process under it (the JVM, the Python
    workers, and those already ended), from /proc: a figure less swayed than wall time
    by what else runs on a shared machine."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = (Path("/proc") / entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(f) for f in fields[11:15]) / tick
    mine = {os.getpid()}
    grew = True
    while grew:
        found = {pid for pid, parent in parents.items() if parent in mine} - mine
        grew = bool(found)
        mine |= found
    return sum(times.get(pid, 0.0) for pid in mine)


def count_lines(folder: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in folder.glob("*.json"))


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20000,200000", help="events per run, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lines-per-file", type=int, default=10_000)
    parser.add_argument("--label", default="", help="what code ran (printed with the figures)")
    parser.add_argument(
        "--form",
        choices=("bare", "inline"),
        default="bare",
        help="bare envelopes (default), or each with JsonConverter's inline schema block",
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="icetide-ingest-", dir="/tmp"))
    landings = {}
    for size in sizes:
        landings[size] = work / f"landing-{size}"
        land(landings[size], size, args.lines_per_file, args.form)
    spark = build_session(config(work, "warm", landings[sizes[0]]))
    spark.sparkContext.setLogLevel("ERROR")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    started = load()
    runs = 0

    cpu: dict[tuple[str, int], list[float]] = {}

    def timed(kind: str, size: int) -> float:
        nonlocal runs
        runs += 1
        name = f"r{runs}"
        go = (
            floor(spark, landings[size], name, args.form)
            if kind == "floor"
            else ledger(spark, work, landings[size], name)
        )
        begin, used = time.perf_counter(), cpu_seconds()
        go()
        cpu.setdefault((kind, size), []).append(cpu_seconds() - used)
        return time.perf_counter() - begin

    for kind in ("floor", "ledger"):  # warm the JVM's and the workers' code once
        timed(kind, sizes[0])
    seconds: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.repeat):
        for size in sizes:
            for kind in ("floor", "ledger"):
                seconds.setdefault((kind, size), []).append(timed(kind, size))
    ended = load()
    median = {key: statistics.median(values) for key, values in seconds.items()}
    lo, hi = sizes[0], sizes[-1]
    slope = {k: (hi - lo) / (median[(k, hi)] - median[(k, lo)]) for k in ("floor", "ledger")}
    cpu_median = {key: statistics.median(values) for key, values in cpu.items()}
    # Marginal CPU per event: µs of CPU (all cores) each further event costs.
    cpu_us = {
        k: (cpu_median[(k, hi)] - cpu_median[(k, lo)]) / (hi - lo) * 1e6
        for k in ("floor", "ledger")
    }
    print(
        f"ingest {args.label or commit}, {args.form} JSON (commit {commit}, "
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, local[2]), "
        f"median of {args.repeat}"
    )
    print(f"  load at start: {started}")
    print(f"  load at end:   {ended}")
    for kind in ("floor", "ledger"):
        cells = "  ".join(
            f"{size:>7,}: {median[(kind, size)]:6.2f} s ({size / median[(kind, size)]:>7,.0f}/s)"
            for size in sizes
        )
        runs_text = " ".join(f"{s:.2f}" for size in sizes for s in seconds[(kind, size)])
        print(
            f"  {kind:<6} {cells}  marginal {slope[kind]:>8,.0f} events/s, "
            f"{cpu_us[kind]:5.1f} µs CPU/event  [{runs_text}]"
        )
    print(
        f"  ledger / floor, marginal rate: {slope['ledger'] / slope['floor']:.2f}; "
        f"by CPU per event: {cpu_us['floor'] / cpu_us['ledger']:.2f}"
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
