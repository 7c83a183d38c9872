"""Storage benchmark: the merge and the ledger on a REST catalog with its warehouse on an
S3 object store, beside a Hadoop catalog in a local folder, in one run.

The run starts a private object store (SeaweedFS, with its Prometheus counters on) and
Iceberg's REST catalog server on it, as the tests and ``icetide demo --lakehouse`` do,
then measures each deployment in a child process of its own (one SparkSession holds
one catalog named ``lake``; the children run one after the other, ``--rounds`` times,
alternating which goes first):

* the merge: a base of ``--rows`` rows and a batch changing ``--change`` of its keys
  (``bench/merge_data.py``), merged by icetide (``auto``) and by the naive MERGE, each
  ``--repeat`` times from the seeded snapshot (rolled back, no copy), after one untimed
  warm-up each;
* the ledger: ``--events`` Debezium events in landing files through the ledger stage, as
  ``icetide stream --once`` runs it (``bench/ingest_bench.py``); the marginal rate is
  the slope between the smallest and the largest size.

Where the extra time goes is counted, not guessed: the catalog's round trips by a
counting relay between Spark and the REST server (``icetide/devservers/relay.py``: requests
by kind and the seconds the client waited), the object store's requests by the
store's own counters (``SeaweedFS_s3_request_seconds``: count and the seconds the
store spent per request type, summed over requests that may overlap). Prints medians,
the REST ÷ local ratios and the request table; ``--results`` writes it as Markdown.
Never pass/fail on time: machines here are small and shared; the load is printed.

    python bench/storage_bench.py --rows 5000000 --change 0.01 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingest_bench import count_lines, land, ledger
from merge_bench import machine
from merge_data import (
    CATALOG,
    NAMESPACE,
    Mix,
    Tables,
    bench_config,
    build_tables,
    contract,
    work_dir,
)
from merge_data import pipeline as bench_pipeline
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from icetide.devservers.relay import CountingRelay, difference
from icetide.merge.stage import MergeStage
from icetide.schema.contract.names import TableName
from icetide.spark.jars import S3_FILE_IO
from icetide.spark.session import build_session

LAKEHOUSE_ENV = "ICETIDE_BENCH_LAKEHOUSE"
"""Where the parent tells a child the REST catalog and the store are (with the key: the
environment, never the command line, which ``ps`` shows)."""
RESULT = "storage-bench-result "
DEPLOYMENTS = {"local": "Hadoop catalog, local folder", "rest": "REST catalog, S3 object store"}
LAYOUT = "mor-v2"

Counts = dict[str, tuple[int, float]]


@dataclass
class Probe:
    """Snapshots of the catalog's and the store's request counters."""

    relay: CountingRelay | None = None
    metrics_url: str | None = None

    def snapshot(self) -> tuple[Counts, Counts]:
        rest = self.relay.snapshot() if self.relay else {}
        return rest, s3_requests(self.metrics_url) if self.metrics_url else {}


def s3_requests(url: str) -> Counts:
    """The store's requests so far by type (GET, PUT, LIST, DELETE, …): count, seconds."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "SeaweedFS_s3_request_seconds":
            continue
        for sample in family.samples:
            kind = sample.labels.get("type", "?")
            cell = out.setdefault(kind, [0, 0.0])
            if sample.name.endswith("_count"):
                cell[0] += sample.value
            elif sample.name.endswith("_sum"):
                cell[1] += sample.value
    return {kind: (int(n), s) for kind, (n, s) in out.items()}


@dataclass
class Phase:
    """One timed thing's runs: seconds and the requests each run made."""

    seconds: list[float] = field(default_factory=list)
    rest: list[Counts] = field(default_factory=list)
    s3: list[Counts] = field(default_factory=list)

    def run(self, probe: Probe, fn: Any) -> None:
        rest0, s30 = probe.snapshot()
        begin = time.perf_counter()
        fn()
        self.seconds.append(time.perf_counter() - begin)
        rest1, s31 = probe.snapshot()
        self.rest.append(difference(rest1, rest0))
        self.s3.append(difference(s31, s30))

    def as_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "rest": self.rest, "s3": self.s3}


def rest_catalog(info: dict[str, str], uri: str) -> dict[str, object]:
    """The ``catalog:`` section of a pipeline on the REST catalog and the store."""
    return {
        "name": CATALOG,
        "type": "rest",
        "uri": uri,
        "warehouse": info["warehouse"],
        "namespace": NAMESPACE,
        "properties": {
            "io-impl": S3_FILE_IO,
            "s3.endpoint": info["s3"],
            "s3.path-style-access": "true",
            "s3.access-key-id": info["key"],
            "s3.secret-access-key": info["secret"],
            "client.region": info["region"],
        },
    }


def child(deployment: str, args: argparse.Namespace) -> dict[str, Any]:
    """Measure one deployment in this process (see the module doc)."""
    work = work_dir()
    probe = Probe()
    catalog: dict[str, object] | None = None
    if deployment == "rest":
        info = json.loads(os.environ[LAKEHOUSE_ENV])
        probe = Probe(CountingRelay(info["catalog"]).__enter__(), info["metrics"])
        assert probe.relay is not None
        catalog = rest_catalog(info, probe.relay.url)
    config = bench_config(work, catalog=catalog)
    spark = build_session(config)
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, Any] = {"deployment": deployment}
    seeding = Phase()
    tables: list[Tables] = []
    seeding.run(
        probe,
        lambda: tables.append(build_tables(spark, config, args.rows, args.change, Mix())),
    )
    out["seed"] = seeding.as_dict()
    out["merge"] = merges(spark, work, tables[0], config, probe, args.repeat)
    out["ledger"] = ledgers(spark, work, catalog, probe, args)
    spark.stop()
    if probe.relay is not None:
        probe.relay.__exit__(None, None, None)
    return out


def merges(
    spark: SparkSession,
    work: Path,
    tables: Tables,
    config: Any,
    probe: Probe,
    repeat: int,
) -> dict[str, Any]:
    """icetide's merge and the naive MERGE, alternated, each from the seeded base."""
    stage = MergeStage(spark, bench_pipeline(config))
    ledger_table = Tables.ledger(LAYOUT)
    batch = TableName(ledger_table.catalog, ledger_table.namespace, "accounts_batch")
    spark.read.format("iceberg").option("start-snapshot-id", tables.before_batch[LAYOUT]).load(
        ledger_table.dotted
    ).writeTo(batch.sql).using("iceberg").createOrReplace()
    naive = contract(LAYOUT).naive_merge_sql(Tables.base(LAYOUT), batch)
    variants = {
        "icetide (auto)": lambda: stage.merge_table(Tables.table(LAYOUT)),
        "naive MERGE": lambda: spark.sql(naive),
    }
    for name, fn in variants.items():  # warm-up: code generation, class loading
        tables.reset(LAYOUT)
        fn()
        print(f"  warm-up {name}", file=sys.stderr, flush=True)
    phases = {name: Phase() for name in variants}
    names = list(variants)
    for i in range(repeat):
        for name in names if i % 2 == 0 else reversed(names):
            tables.reset(LAYOUT)
            phases[name].run(probe, variants[name])
            print(f"  run {i + 1} {name:<16} {phases[name].seconds[-1]:7.2f}s", file=sys.stderr)
    return {name: phase.as_dict() for name, phase in phases.items()}


def ledgers(
    spark: SparkSession,
    work: Path,
    catalog: dict[str, object] | None,
    probe: Probe,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The ledger stage on each size of landing files, each run into a new namespace."""
    sizes = [int(s) for s in args.events.split(",")]
    landings = {size: work / f"landing-{size}" for size in sizes}
    for size, folder in landings.items():
        land(folder, size, 10_000)
    runs = 0
    phases = {size: Phase() for size in sizes}
    for i in range(args.repeat + 1):  # the first round warms up
        for size in sizes:
            runs += 1
            # A namespace no earlier child used: the REST catalog outlives each child.
            go = ledger(spark, work, landings[size], f"r{os.getpid()}_{runs}", catalog)
            if i == 0:
                go()
                continue
            phases[size].run(probe, go)
            print(f"  ledger {size:>8,} {phases[size].seconds[-1]:7.2f}s", file=sys.stderr)
            assert count_lines(landings[size]) == size
    return {str(size): phase.as_dict() for size, phase in phases.items()}


def run_child(deployment: str, argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    print(f"storage bench: {DEPLOYMENTS[deployment]} …", file=sys.stderr, flush=True)
    done = subprocess.run(
        [sys.executable, __file__, "--child", deployment, *argv],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    for line in done.stdout.splitlines():
        if line.startswith(RESULT):
            result: dict[str, Any] = json.loads(line[len(RESULT) :])
            return result
    raise RuntimeError(f"the {deployment} run printed no result")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summed(counts: list[Counts]) -> Counts:
    """Per kind, the median count and seconds over runs."""
    kinds = sorted({k for c in counts for k in c})
    return {
        k: (
            int(median([c.get(k, (0, 0.0))[0] for c in counts])),
            median([c.get(k, (0, 0.0))[1] for c in counts]),
        )
        for k in kinds
    }


def render(results: list[dict[str, Any]], args: argparse.Namespace, load: str, end: str) -> str:
    by: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by.setdefault(r["deployment"], []).append(r)

    def merge_seconds(dep: str, variant: str) -> float:
        return median([s for r in by[dep] for s in r["merge"][variant]["seconds"]])

    sizes = [int(s) for s in args.events.split(",")]

    def ledger_seconds(dep: str, size: int) -> float:
        return median([s for r in by[dep] for s in r["ledger"][str(size)]["seconds"]])

    def rate(dep: str) -> float:
        lo, hi = sizes[0], sizes[-1]
        return (hi - lo) / (ledger_seconds(dep, hi) - ledger_seconds(dep, lo))

    lines = [
        f"Storage: {args.rows:,} rows, {args.change:.2%} changed; ledger {args.events} events; "
        f"median of {args.repeat} per round, {args.rounds} round(s) per deployment",
        "",
        f"Machine: {load}; at the end {end}.",
        "",
        "| what | Hadoop, local folder | REST + S3 | REST+S3 ÷ local |",
        "|---|---:|---:|---:|",
    ]
    for variant in ("icetide (auto)", "naive MERGE"):
        a, b = merge_seconds("local", variant), merge_seconds("rest", variant)
        lines.append(f"| merge, {variant} | {a:.2f} s | {b:.2f} s | {b / a:.2f} |")
    seed_a = median([s for r in by["local"] for s in r["seed"]["seconds"]])
    seed_b = median([s for r in by["rest"] for s in r["seed"]["seconds"]])
    lines.append(
        f"| seeding the tables (not timed work) | {seed_a:.0f} s | {seed_b:.0f} s | "
        f"{seed_b / seed_a:.2f} |"
    )
    for size in sizes:
        a, b = ledger_seconds("local", size), ledger_seconds("rest", size)
        lines.append(f"| ledger, {size:,} events | {a:.2f} s | {b:.2f} s | {b / a:.2f} |")
    ra, rb = rate("local"), rate("rest")
    lines.append(
        f"| ledger, marginal rate | {ra:,.0f} events/s | {rb:,.0f} events/s | {rb / ra:.2f} |"
    )
    lines += ["", "Requests per run on REST + S3 (median over runs): count, seconds waited", ""]
    lines += ["| run | catalog (REST) | object store (S3, store-side seconds) |", "|---|---|---|"]
    phases: list[tuple[str, list[Counts], list[Counts]]] = []
    for variant in ("icetide (auto)", "naive MERGE"):
        phases.append(
            (
                f"merge, {variant}",
                [c for r in by["rest"] for c in r["merge"][variant]["rest"]],
                [c for r in by["rest"] for c in r["merge"][variant]["s3"]],
            )
        )
    for size in sizes:
        phases.append(
            (
                f"ledger, {size:,} events",
                [c for r in by["rest"] for c in r["ledger"][str(size)]["rest"]],
                [c for r in by["rest"] for c in r["ledger"][str(size)]["s3"]],
            )
        )
    for label, rest, s3 in phases:
        lines.append(f"| {label} | {cells(summed(rest))} | {cells(summed(s3))} |")
    lines += ["", "Every run, seconds:", ""]
    for r in results:
        merge = "; ".join(
            f"{v} " + " ".join(f"{s:.2f}" for s in r["merge"][v]["seconds"]) for v in r["merge"]
        )
        led = "; ".join(
            f"{k} " + " ".join(f"{s:.2f}" for s in r["ledger"][k]["seconds"]) for k in r["ledger"]
        )
        lines.append(f"- {DEPLOYMENTS[r['deployment']]}: merge {merge}; ledger {led}")
    return "\n".join(lines) + "\n"


def cells(counts: Counts) -> str:
    total_n = sum(n for n, _ in counts.values())
    total_s = sum(s for _, s in counts.values())
    parts = ", ".join(f"{k} {n} ({s:.2f} s)" for k, (n, s) in counts.items())
    return f"**{total_n}** ({total_s:.2f} s): {parts}" if counts else "none"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000, help="base table rows")
    parser.add_argument("--change", type=float, default=0.01, help="share of keys changed")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per variant")
    parser.add_argument("--events", default="20000,200000", help="ledger sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=1, help="children per deployment")
    parser.add_argument("--results", type=Path, help="write the table as Markdown here")
    parser.add_argument("--child", choices=sorted(DEPLOYMENTS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(RESULT + json.dumps(child(args.child, args)), flush=True)
        return 0
    from icetide.devservers.objectstore import ObjectStoreServer
    from icetide.devservers.rest_catalog import RestCatalogServer

    passed = [
        f"--rows={args.rows}",
        f"--change={args.change}",
        f"--repeat={args.repeat}",
        f"--events={args.events}",
    ]
    load = machine()
    results = []
    with ObjectStoreServer(metrics=True) as store, RestCatalogServer(store.endpoint) as rest:
        assert store.metrics_url is not None
        info = {
            "catalog": rest.url,
            "warehouse": rest.warehouse,
            "s3": store.endpoint.url,
            "key": store.endpoint.access_key,
            "secret": store.endpoint.secret_key,
            "region": store.endpoint.region,
            "metrics": store.metrics_url,
        }
        env = {**os.environ, LAKEHOUSE_ENV: json.dumps(info)}
        for i in range(args.rounds):
            order = ("local", "rest") if i % 2 == 0 else ("rest", "local")
            results += [run_child(d, passed, env) for d in order]
    end = f"load average {os.getloadavg()[0]:.1f}"
    text = render(results, args, load, end)
    print(text)
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
