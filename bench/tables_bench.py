"""Many tables in one ``icetide run``: what a pipeline of 10, 100 or 1,000 tables costs.

For each ``--tables`` count, a pipeline of that many tables with generated schemas (5–30
columns each; every type of :data:`icetide.schema.types.TYPE_NAMES` in the first, the
hottest, table and spread over the others) on a Hadoop catalog in a temporary folder.
Events go to the tables by a Zipf law (``--zipf``; the table of rank r gets events in
proportion to 1/r^s) at ``--rate`` events per second in total, landed one file a second
through the files transport for ``--seconds`` (a pool of schemaless MySQL-connector
messages, serialised before the run, landed again and again with the source commit time
and binlog offset stamped as they land). ``icetide run --no-capture`` starts when the
benchmark does; the landing starts when it says it runs (bench/landing_run.py).

Measured, per table count:

* Spark jobs per ledger micro-batch, against the tables it stored events for, and the
  median job's length, from Spark's event log (counts do not depend on the machine's load);
* start-up: ``icetide run`` started → "running" (its Spark session up), → the first ledger
  micro-batch stored (creating every ledger and dead-letter table first), → the first
  merge round ended (creating every base table);
* the ledger micro-batches' and the merge rounds' durations (the run's progress records)
  while events land;
* driver memory: peak resident size of the Python driver and of its JVM, and the JVM's
  peak heap in use (``jstat``), sampled every 2 s;
* freshness (visible in the base table − source commit time), p50 / p99, over the
  ``--hot`` hottest tables and over ``--cold`` tables drawn from the colder half, read
  back from the tables' metadata after the run;
* where the CPU went while events landed: each process of the run (``bench/cpu_split.py``:
  the Spark JVM, its Python workers, icetide's Python driver, the bench's delivery) and
  the Spark tasks' time split between the ledger's jobs and the rest, from Spark's event
  log (``bench/spark_events.py``);
* CPU per idle table: after the landing and a drain, ``--idle`` seconds with no event,
  the CPU the whole machine spent busy over that window (``/proc/stat``, less this
  bench's own) per table and minute, and the merge rounds run meanwhile. Run it on an
  otherwise quiet machine: any other work is counted too. (A sum over the run's process
  tree came out negative in several runs, most likely from processes that ended in the
  window with no process of the tree reaping them.)

The load average goes with every figure (the machine is shared). Never pass/fail.

    python bench/tables_bench.py --tables 10 100 1000 --seconds 600 \
        --results bench/results/tables.md --plot bench/results/tables.png
    python bench/tables_bench.py --tables 10 --seconds 60     # a quick look
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from cpu_split import CpuSplit, machine_busy_s, read_procs, tree
from cpu_split import render as render_cpu
from landing_run import (
    POSITION,
    Stampable,
    class_archive_state,
    event_visibility,
    files_delivery,
    land_every_second,
    wait_until_running,
)
from spark_events import StageTime, read_folder
from spark_events import render as render_stages

from icetide.config import load_config
from icetide.ledger.summary import STORED_ROWS
from icetide.schema.file import dump_schema_file
from icetide.schema.model import TableSchema
from icetide.schema.types import (
    PRIMITIVES,
    TYPE_NAMES,
    Column,
    EnumType,
    IcetideType,
    ListType,
    MapType,
    StructType,
    parse_type,
)
from icetide.spark.session import build_session

DB = "bench"
LEAVES = (*PRIMITIVES, "decimal(12,2)", "enum")
NESTED = ("struct", "list", "map")


# -- schemas --------------------------------------------------------------------------------


class _Ids:
    def __init__(self) -> None:
        self.last = 0

    def next(self) -> int:
        self.last += 1
        return self.last


def _type(kind: str, ids: _Ids) -> IcetideType:
    if kind == "enum":
        return EnumType(("new", "paid", "shipped", "returned"))
    if kind == "struct":
        fields = (
            Column(ids.next(), "city", parse_type("string")),
            Column(ids.next(), "zip", parse_type("int")),
        )
        return StructType(fields)
    if kind == "list":
        return ListType(ids.next(), parse_type("string"))
    if kind == "map":
        return MapType(ids.next(), parse_type("string"), ids.next(), parse_type("long"))
    return parse_type(kind)


def table_schema(index: int, rng: random.Random) -> TableSchema:
    """Table ``index``'s schema: a ``long`` key and 4–29 more columns; the first table
    holds every type, the others a random draw of them (nested ones less often)."""
    ids = _Ids()
    columns = [Column(ids.next(), "id", parse_type("long"), nullable=False)]
    if index == 0:
        kinds = list(LEAVES + NESTED)
        kinds += rng.choices(LEAVES, k=rng.randint(0, 29 - len(kinds)))
    else:
        kinds = rng.choices(LEAVES + NESTED, weights=[4] * len(LEAVES) + [1] * len(NESTED),
                            k=rng.randint(4, 29))  # fmt: skip
    for n, kind in enumerate(kinds, start=1):
        cid = ids.next()
        name = f"c{n:02d}_{kind.split('(')[0]}"
        columns.append(Column(cid, name, _type(kind, ids)))
    return TableSchema(f"t{index:04d}", tuple(columns), ("id",))


def covered_types(schemas: Sequence[TableSchema]) -> set[str]:
    """Every type name some column of ``schemas`` has (nested fields included)."""
    seen: set[str] = set()

    def walk(ctype: IcetideType) -> None:
        seen.add(ctype.name)
        if isinstance(ctype, StructType):
            for f in ctype.fields:
                walk(f.type)
        elif isinstance(ctype, ListType):
            walk(ctype.element)
        elif isinstance(ctype, MapType):
            walk(ctype.key)
            walk(ctype.value)

    for schema in schemas:
        for column in schema.columns:
            walk(column.type)
    return seen


# -- events ---------------------------------------------------------------------------------

_DAY = datetime(2024, 3, 1)


def _value(ctype: IcetideType, rng: random.Random) -> Any:
    """A value of ``ctype`` as a schemaless Debezium message carries it."""
    name = ctype.name
    moment = _DAY + timedelta(
        seconds=rng.randrange(86_400 * 365), microseconds=rng.randrange(10**6)
    )
    simple: dict[str, Any] = {
        "boolean": lambda: rng.random() < 0.5,
        "int": lambda: rng.randrange(-(2**31), 2**31),
        "long": lambda: rng.randrange(-(2**63), 2**63),
        "float": lambda: round(rng.uniform(-1e3, 1e3), 2),
        "double": lambda: rng.uniform(-1e9, 1e9),
        "string": lambda: "".join(rng.choices("abcdefghijklmnopqrstuvwxyz ", k=rng.randint(3, 40))),
        "binary": lambda: base64.b64encode(rng.randbytes(rng.randint(1, 24))).decode(),
        "date": lambda: moment.date().isoformat(),
        "time": lambda: moment.time().isoformat(),
        "timestamp": lambda: moment.isoformat(),
        "timestamptz": lambda: moment.isoformat() + "Z",
        "uuid": lambda: str(uuid.UUID(int=rng.getrandbits(128))),
        "json": lambda: json.dumps({"k": rng.randrange(100), "v": [1, 2]}),
        "decimal": lambda: round(rng.uniform(-1e6, 1e6), 2),
    }
    if name in simple:
        return simple[name]()
    if isinstance(ctype, EnumType):
        return rng.choice(ctype.symbols)
    if isinstance(ctype, StructType):
        return {f.name: _value(f.type, rng) for f in ctype.fields}
    if isinstance(ctype, ListType):
        return [_value(ctype.element, rng) for _ in range(rng.randint(0, 3))]
    if isinstance(ctype, MapType):
        return {f"k{i}": _value(ctype.value, rng) for i in range(rng.randint(0, 3))}
    raise ValueError(f"no generator for {name}")


def _row(schema: TableSchema, key: int, rng: random.Random) -> dict[str, Any]:
    row: dict[str, Any] = {"id": key}
    for column in schema.columns[1:]:
        row[column.name] = None if rng.random() < 0.05 else _value(column.type, rng)
    return row


def zipf_weights(tables: int, s: float) -> list[float]:
    """The share of the events of the table of each rank (1/r^s, normalised)."""
    raw = [1 / (rank**s) for rank in range(1, tables + 1)]
    total = sum(raw)
    return [w / total for w in raw]


def message_pool(
    schemas: Sequence[TableSchema], weights: Sequence[float], size: int, seed: int
) -> list[Stampable]:
    """``size`` messages, each for a table drawn by ``weights``: an insert of a new key,
    an update (with its before image) or, one in twenty, a delete of a key seen before.
    Landed again and again, each lands with a new source time and binlog offset."""
    rng = random.Random(seed)
    keys: dict[str, dict[int, dict[str, Any]]] = {s.table: {} for s in schemas}
    picks = rng.choices(range(len(schemas)), weights=weights, k=size)
    pool = []
    for index in picks:
        schema = schemas[index]
        rows = keys[schema.table]
        key = rng.randrange(1, 5000)
        before = rows.get(key)
        if before is not None and rng.random() < 0.05:
            op, after = "d", None
            del rows[key]
        else:
            after = _row(schema, key, rng)
            op = "u" if before is not None else "c"
            rows[key] = after
        message = {
            "before": before if op != "c" else None,
            "after": after,
            "source": {
                "version": "2.7.3.Final",
                "connector": "mysql",
                "name": "bench",
                "ts_ms": 0,
                "snapshot": "false",
                "db": DB,
                "table": schema.table,
                "server_id": 1,
                "file": "mysql-bin.000001",
                "pos": POSITION,
                "row": 0,
            },
            "op": op,
            "ts_ms": 0,
        }
        pool.append(Stampable(message))
    return pool


def check_decodes(schemas: Sequence[TableSchema], pool: Sequence[Stampable]) -> None:
    """Every table's first message reaches its ledger in the Python decode path (a
    generator that wrote a value the decoder refuses would measure dead letters)."""
    from icetide.ledger.decode import ROW, Routes, classify_one, project_one

    routes = Routes({f"{DB}.{s.table}": [(None, s.table)] for s in schemas})
    by_name = {s.table: s for s in schemas}
    for stamped in pool[:2000]:
        raw = stamped.at(1_700_000_000_000, 4).encode()
        table, status, reason, _ = classify_one(raw, routes)
        if status != ROW or table is None:
            raise SystemExit(f"generated message not a row ({status} {reason}): {raw[:300]!r}")
        project_one(raw, by_name[str(table)])


def write_pipeline(work: Path, schemas: Sequence[TableSchema], args: argparse.Namespace) -> Path:
    """``icetide.yaml`` and the schema files of a pipeline of ``schemas``."""
    for schema in schemas:
        dump_schema_file(schema, work / "schemas" / f"{schema.table}.yaml")
    events = work / "spark-events"
    events.mkdir(parents=True, exist_ok=True)
    conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(events)}
    conf |= dict(s.split("=", 1) for s in args.spark_conf)
    doc: dict[str, Any] = {
        "pipeline": "tables",
        "state_dir": "./state",
        "catalog": {"name": "lake", "warehouse": str(work / "warehouse"), "namespace": "bench"},
        "spark": {
            "master": args.master,
            "shuffle_partitions": 4,
            "conf": conf,
        },
        "transport": {"type": "files", "path": "./landing"},
        "schedule": {
            "stream_interval": args.stream_interval,
            "merge_interval": args.merge_interval,
        },
        "merge": {"parallel_tables": args.parallel_tables, "round_tables": args.round_tables},
        "tables": [
            {
                "name": s.table,
                "source": f"{DB}.{s.table}",
                "schema": f"schemas/{s.table}.yaml",
                "buckets": args.buckets,
            }
            for s in schemas
        ],
    }
    path = work / "icetide.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


# -- the run --------------------------------------------------------------------------------


@dataclass
class Samples:
    """What a sampler thread saw of the run's process tree."""

    driver_rss: int = 0
    jvm_rss: int = 0
    heap_used: float = 0.0
    """Peak JVM heap in use (bytes), from jstat."""
    heap_max: float = 0.0
    load: list[tuple[float, float]] = field(default_factory=list)


def sample(
    pid: int, into: Samples, stop: threading.Event, every: float = 2.0, heap_every: float = 20.0
) -> None:
    """Every ``every`` seconds: the peaks of resident memory and the load average, every
    ``heap_every`` seconds the JVM's heap (a thread). Where the CPU goes is
    :class:`cpu_split.CpuSplit`'s."""
    jvm: int | None = None
    last_heap = 0.0
    while not stop.wait(every):
        now = time.time()
        procs = read_procs()
        for p in tree(pid, procs):
            proc = procs[p]
            if p == pid:
                into.driver_rss = max(into.driver_rss, proc.rss_bytes)
            elif proc.comm == "java":
                jvm = p
                into.jvm_rss = max(into.jvm_rss, proc.rss_bytes)
        into.load.append((now, os.getloadavg()[0]))
        if jvm is not None and now - last_heap >= heap_every:
            # jstat starts a JVM of its own (~0.3 s of CPU): not every sample.
            last_heap = now
            heap = _heap(jvm)
            if heap is not None:
                into.heap_used = max(into.heap_used, heap[0])
                into.heap_max = max(into.heap_max, heap[1])


def _heap(pid: int) -> tuple[float, float] | None:
    """(heap in use, heap capacity) in bytes from ``jstat -gc`` (G1: eden, survivors, old)."""
    try:
        out = subprocess.run(
            ["jstat", "-gc", str(pid)], capture_output=True, text=True, timeout=10
        ).stdout.split("\n")
        names, values = out[0].split(), [float(v) for v in out[1].split()]
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return None
    g = dict(zip(names, values, strict=False))
    used = g.get("S0U", 0) + g.get("S1U", 0) + g.get("EU", 0) + g.get("OU", 0)
    capacity = g.get("S0C", 0) + g.get("S1C", 0) + g.get("EC", 0) + g.get("OC", 0)
    return used * 1024, capacity * 1024


def follow(stream: Any, log: Path, records: list[tuple[float, dict[str, Any]]]) -> None:
    """Copy the run's output to ``log`` with the wall time of each line; keep its JSON
    progress records (a thread)."""
    with log.open("w") as out:
        for raw in iter(stream.readline, b""):
            now = time.time()
            line = raw.decode(errors="replace").rstrip("\n")
            out.write(f"{now:.3f} {line}\n")
            out.flush()
            if line.startswith("{"):
                try:
                    records.append((now, json.loads(line)))
                except ValueError:
                    pass


def busy_cpu() -> float:
    """CPU seconds the machine has spent busy since it started (``/proc/stat``: user,
    nice, system, irq, softirq and steal over every core), less this process's own."""
    return machine_busy_s()[0] - time.process_time()


def drain_until_stored(
    records: list[tuple[float, dict[str, Any]]], landed: int, deadline: float
) -> None:
    """Until the ledger has stored ``landed`` events and a merge round ended after the
    batch that stored the last of them, or ``deadline`` (a many-table run's start-up
    can outlast a fixed drain)."""
    while time.time() < deadline:
        stored, last = 0, None
        for t, r in list(records):
            if r.get("stage") == "ledger" and "batch" in r:
                stored += sum((r.get("events") or {}).values())
                last = t
        if stored >= landed and last is not None:
            if any(t > last and "round_seconds" in r for t, r in list(records)):
                return
        time.sleep(1)


def run_one(tables: int, args: argparse.Namespace) -> dict[str, Any]:
    """One pipeline of ``tables`` tables, run and measured."""
    rng = random.Random(args.seed)
    schemas = [table_schema(i, rng) for i in range(tables)]
    missing = set(TYPE_NAMES) - covered_types(schemas)
    assert not missing, missing
    weights = zipf_weights(tables, args.zipf)
    work = Path(tempfile.mkdtemp(prefix=f"icetide-tables-{tables}-", dir="/tmp"))
    config_path = write_pipeline(work, schemas, args)
    landing = work / "landing"
    landing.mkdir()
    print(f"tables {tables}: generating a pool of messages in {work}", file=sys.stderr)
    pool = message_pool(schemas, weights, args.rate * args.pool_seconds, args.seed)
    check_decodes(schemas, pool)
    archive = class_archive_state(config_path)
    log = work / "run.log"
    records: list[tuple[float, dict[str, Any]]] = []
    samples = Samples()
    stop = threading.Event()
    load0 = os.getloadavg()[0]
    began = time.time()
    run = subprocess.Popen(
        [sys.executable, "-m", "icetide.cli", "run", "--no-capture", "--progress", "json"]
        + ["-c", str(config_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=work,
        # The icetide of --code (default: this checkout's), not the installed one.
        env={**os.environ, "PYTHONPATH": str(args.code.resolve())},
    )
    reader = threading.Thread(target=follow, args=(run.stdout, log, records), daemon=True)
    reader.start()
    sampler = threading.Thread(target=sample, args=(run.pid, samples, stop), daemon=True)
    sampler.start()
    cursor = [0]

    def lines_at(tick: int, now_ms: int) -> list[str]:
        out = []
        for _ in range(args.rate):
            stamped = pool[cursor[0] % len(pool)]
            cursor[0] += 1
            out.append(stamped.at(now_ms, 1000 + cursor[0] * 100))
        return out

    idle: dict[str, float] = {}
    try:
        wait_until_running(log, run, timeout=600)
        running = time.time()
        split = CpuSplit(run.pid)
        split.start()
        on_time = land_every_second(files_delivery(landing), args.seconds, lines_at)
        landed = time.time()
        cpu = split.stop()
        drain_until_stored(records, args.rate * args.seconds, landed + args.drain)
        # The idle window: no event lands; what does keeping the tables cost?
        cpu0, t0 = busy_cpu(), time.time()
        time.sleep(args.idle)
        cpu1, t1 = busy_cpu(), time.time()
        idle = {"cpu_s": cpu1 - cpu0, "seconds": t1 - t0, "from": t0, "to": t1}
    finally:
        run.send_signal(signal.SIGTERM)
        try:
            run.wait(timeout=180)
        except subprocess.TimeoutExpired:
            run.kill()
        stop.set()
        reader.join(timeout=10)
    load1 = os.getloadavg()[0]
    if archive == "none" and "saved the JVM's classes" in log.read_text(errors="replace"):
        archive = "none at the start; this run saved one"
    result: dict[str, Any] = {
        "tables": tables,
        "work": str(work),
        "class_archive": archive,
        "on_time": on_time,
        "load_start": load0,
        "load_end": load1,
        "load_median": statistics.median(v for _, v in samples.load) if samples.load else None,
        "running_s": running - began,
        "driver_rss": samples.driver_rss,
        "jvm_rss": samples.jvm_rss,
        "heap_used": samples.heap_used,
        "heap_max": samples.heap_max,
        "events": args.rate * args.seconds,
    }
    result["code"] = code_of(args.code)
    # Where the CPU went while events landed: by process, and the Spark tasks' time by
    # stage (the ledger's jobs and the rest), as the freshness bench reports it.
    result["cpu"] = cpu
    stages = read_folder(work / "spark-events", int(running * 1000), int(landed * 1000))
    result["stages"] = {owner: vars(t) for owner, t in stages.items()}
    result["params"] = {
        k: getattr(args, k)
        for k in ("rate", "seconds", "zipf", "drain", "idle", "settle", "stream_interval")
        + ("merge_interval", "parallel_tables", "round_tables", "buckets", "hot", "cold", "master")
    }
    result["stored"] = sum(
        sum((r.get("events") or {}).values())
        for _, r in records
        if r.get("stage") == "ledger" and "batch" in r
    )
    result |= timings(records, began, running, landed, idle, tables)
    result |= spark_jobs(work / "spark-events")
    batch_tables = {
        str(r["batch"]): sum(1 for n in (r.get("events") or {}).values() if n)
        for _, r in records
        if r.get("stage") == "ledger" and "batch" in r
    }
    result["batch_jobs_tables"] = [
        (result["jobs_per_batch"].get(b, 0), n) for b, n in batch_tables.items()
    ]
    if idle:
        result["idle_busy_ms_per_table_minute"] = (
            idle["cpu_s"] * 1000 / tables / (idle["seconds"] / 60)
        )
        result["idle_cpu_share"] = idle["cpu_s"] / idle["seconds"]
        result["idle_load"] = statistics.median(
            v for t, v in samples.load if idle["from"] <= t <= idle["to"]
        ) if samples.load else None  # fmt: skip
    order = sorted(range(tables), key=lambda i: -weights[i])
    hot = [schemas[i].table for i in order[: args.hot]]
    colder = [schemas[i].table for i in order[max(args.hot, tables // 2) :]]
    cold = random.Random(args.seed).sample(colder, min(args.cold, len(colder)))
    result["hot_tables"], result["cold_tables"] = hot, cold
    result["hot_share"] = sum(weights[i] for i in order[: args.hot])
    result["cold_events_per_s"] = [
        args.rate * weights[int(name[1:])] for name in cold
    ]  # the table's index is its name's number
    result |= merge_waits(records, {"hot": hot, "cold": cold})
    result |= freshness(config_path, {"hot": hot, "cold": cold}, args.settle)
    return result


def merge_waits(
    records: list[tuple[float, dict[str, Any]]], groups: dict[str, list[str]]
) -> dict[str, Any]:
    """The merge's share of freshness: for each table of each group, the seconds from
    the ledger storing rows for it (a long batch's progress line naming it, or the
    batch's own line) to the end of its next merge that merged events; median and max
    per group (``<group>_merge_wait_s``).

    >>> merge_waits([(0, {"stage": "ledger", "stored": {"a": 5}}),
    ...              (3, {"stage": "ledger", "events": {"a": 1, "b": 2}}),
    ...              (9, {"stage": "merge", "table": "a", "events": 6}),
    ...              (12, {"stage": "merge", "table": "b", "events": 2})], {"hot": ["a", "b"]})
    {'hot_merge_wait_s': [9.0, 9]}
    """
    of = {table: group for group, tables in groups.items() for table in tables}
    first_stored: dict[str, float] = {}
    waits: dict[str, list[float]] = {group: [] for group in groups}
    for t, r in records:
        if r.get("stage") == "ledger":
            for key in STORED_ROWS:
                for table, n in (r.get(key) or {}).items():
                    if n and table in of:
                        first_stored.setdefault(table, t)
        elif r.get("stage") == "merge" and r.get("events") and r.get("table") in first_stored:
            waits[of[r["table"]]].append(t - first_stored.pop(r["table"]))
    return {
        f"{group}_merge_wait_s": [statistics.median(w), max(w)] for group, w in waits.items() if w
    }


def timings(
    records: list[tuple[float, dict[str, Any]]],
    began: float,
    running: float,
    landed: float,
    idle: dict[str, float],
    tables: int,
) -> dict[str, Any]:
    """Start-up, ledger batch and merge round figures from the timestamped records."""
    batches = [(t, r) for t, r in records if r.get("stage") == "ledger" and "batch" in r]
    rounds = [(t, r) for t, r in records if "round_seconds" in r]
    out: dict[str, Any] = {"batches": len(batches), "rounds": len(rounds)}
    if batches:
        out["first_batch_s"] = batches[0][0] - began
    if rounds:
        out["first_round_s"] = rounds[0][0] - began
    busy_batches = [
        r["seconds"] for t, r in batches[1:] if running <= t <= landed and "seconds" in r
    ]
    busy_rounds = [
        r["round_seconds"] for t, r in rounds[1:] if running <= t <= landed + 5 and r.get("merged")
    ]
    if busy_batches:
        out["batch_median_s"] = statistics.median(busy_batches)
        out["batch_max_s"] = max(busy_batches)
        events = [
            sum((r.get("events") or {}).values()) for t, r in batches[1:] if running <= t <= landed
        ]
        tables = [
            sum(1 for n in (r.get("events") or {}).values() if n)
            for t, r in batches[1:]
            if running <= t <= landed
        ]
        out["batch_events"] = statistics.median(events)
        out["batch_tables"] = statistics.median(tables)
    if busy_rounds:
        out["round_median_s"] = statistics.median(busy_rounds)
        out["round_max_s"] = max(busy_rounds)
        out["round_merged"] = statistics.median(
            r["merged"] for t, r in rounds[1:] if running <= t <= landed + 5 and r.get("merged")
        )
    # Rounds after the first that visited every table and merged none: what visiting
    # idle tables costs the merge thread (whatever else the run was doing meanwhile).
    full = [
        r["round_seconds"]
        for _, r in rounds[1:]
        if not r.get("merged") and r.get("visited") == tables
    ]
    out["full_idle_rounds_s"] = full
    if idle:
        quiet = [r for t, r in rounds if idle["from"] <= t <= idle["to"]]
        out["idle_rounds"] = len(quiet)
        if quiet:
            out["idle_round_median_s"] = statistics.median(r["round_seconds"] for r in quiet)
            out["idle_round_visited"] = statistics.median(r.get("visited", 0) for r in quiet)
    return out


def spark_jobs(folder: Path) -> dict[str, Any]:
    """Spark jobs from the run's event log (load-independent, unlike their seconds): per
    ledger micro-batch (jobs carrying its ``streaming.sql.batchId``), and the others (the
    merge, the observer); with the median job's length."""
    per_batch: dict[str, int] = {}
    others = 0
    started: dict[int, float] = {}
    lengths: list[float] = []
    for log in folder.iterdir():
        with log.open() as f:
            for line in f:
                if '"SparkListenerJob' not in line[:60]:
                    continue
                event = json.loads(line)
                if event["Event"] == "SparkListenerJobStart":
                    started[event["Job ID"]] = event["Submission Time"]
                    batch = (event.get("Properties") or {}).get("streaming.sql.batchId")
                    if batch is None:
                        others += 1
                    else:
                        per_batch[batch] = per_batch.get(batch, 0) + 1
                elif event["Event"] == "SparkListenerJobEnd" and event["Job ID"] in started:
                    lengths.append((event["Completion Time"] - started[event["Job ID"]]) / 1000)
    out: dict[str, Any] = {"jobs_other": others, "jobs_per_batch": per_batch}
    if lengths:
        out["job_median_s"] = statistics.median(lengths)
    return out


def freshness(config_path: Path, groups: dict[str, list[str]], settle: int) -> dict[str, Any]:
    """p50/p99 of visible − source commit time per group of tables, over every event and
    over the events landed ``settle`` s or more after the first."""
    from pyspark.sql import functions as F

    from icetide.lake.tables import TableRefs

    config = load_config(config_path)
    spark = build_session(config)
    out: dict[str, Any] = {}
    try:
        for group, names in groups.items():
            frames, never = [], 0
            for name in names:
                refs = TableRefs.of(config, name)
                if not spark.catalog.tableExists(refs.base.sql):
                    continue
                frame, missing = event_visibility(spark, refs)
                frames.append(frame)
                never += missing
            if not frames:
                continue
            union = frames[0]
            for frame in frames[1:]:
                union = union.unionByName(frame)
            union = union.persist()
            q = union.agg(
                F.count("us").alias("n"),
                F.percentile_approx("us", [0.5, 0.99], 10000).alias("p"),
                F.min("source_us").alias("first"),
            ).first()
            if q is None or not q["n"]:
                out[f"{group}_never"] = never
                continue
            settled = (
                union.where(F.col("source_us") >= q["first"] + settle * 1_000_000)
                .agg(F.percentile_approx("us", [0.5, 0.99], 10000).alias("p"))
                .first()
            )
            union.unpersist()
            out[f"{group}_events"] = int(q["n"])
            out[f"{group}_never"] = never
            out[f"{group}_p50_s"] = q["p"][0] / 1e6
            out[f"{group}_p99_s"] = q["p"][1] / 1e6
            if settled is not None and settled["p"]:
                out[f"{group}_settled_p50_s"] = settled["p"][0] / 1e6
                out[f"{group}_settled_p99_s"] = settled["p"][1] / 1e6
    finally:
        spark.stop()
    return out


# -- the report -----------------------------------------------------------------------------


def _s(value: Any, fmt: str = "{:.1f}") -> str:
    return "–" if value is None else fmt.format(value)


def _gb(value: float) -> str:
    return f"{value / 2**30:.2f}"


def code_of(path: Path) -> str:
    """The short commit of the checkout at ``path``."""
    return subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


def render(args: argparse.Namespace, results: list[dict[str, Any]]) -> str:
    commit = code_of(Path(__file__).resolve().parent)
    lines = [
        f"# {', '.join(str(r['tables']) for r in results)} tables in one `icetide run`",
        "",
        f"Machine: {platform.machine()} {os.cpu_count()} cores (shared), commit {commit}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC. Events Zipf(s={args.zipf}) over the "
        f"tables (rates and lengths below); stream every {args.stream_interval}, merge every "
        f"{args.merge_interval}, {args.parallel_tables} table(s) merged at a time, at most "
        f"{args.round_tables} a round, "
        f"{args.buckets} bucket(s) a table"
        + "".join(f", {c}" for c in args.spark_conf)
        + ". Freshness = visible in the base − source commit time; "
        f"hot: the {args.hot} hottest tables, cold: {args.cold} drawn from the colder half; "
        "'settled': events landed a while after the first (below).",
        "",
        "| tables | load avg start / median / end | running | first ledger batch | "
        "first merge round | ledger batch median (max), events, tables | "
        "merge round median (max), tables merged | hot p50 / p99 (settled) | "
        "cold p50 / p99 (settled) | driver RSS / JVM RSS / heap peak (of) GB | "
        "idle: CPU ms per table-minute, rounds, round median, load |",
        "|---:|---|---:|---:|---:|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['tables']:,} | {r['load_start']:.1f} / {_s(r.get('load_median'))} / "
            f"{r['load_end']:.1f} | {r['running_s']:.0f} s | "
            f"{_s(r.get('first_batch_s'), '{:.0f} s')} | "
            f"{_s(r.get('first_round_s'), '{:.0f} s')} | "
            f"{_s(r.get('batch_median_s'))} s ({_s(r.get('batch_max_s'))}), "
            f"{_s(r.get('batch_events'), '{:,.0f}')}, {_s(r.get('batch_tables'), '{:.0f}')} | "
            f"{_s(r.get('round_median_s'))} s ({_s(r.get('round_max_s'))}), "
            f"{_s(r.get('round_merged'), '{:.0f}')} | "
            f"{_s(r.get('hot_p50_s'))} / {_s(r.get('hot_p99_s'))} s "
            f"({_s(r.get('hot_settled_p50_s'))} / {_s(r.get('hot_settled_p99_s'))}) | "
            f"{_s(r.get('cold_p50_s'))} / {_s(r.get('cold_p99_s'))} s "
            f"({_s(r.get('cold_settled_p50_s'))} / {_s(r.get('cold_settled_p99_s'))}) | "
            f"{_gb(r['driver_rss'])} / {_gb(r['jvm_rss'])} / {_gb(r['heap_used'])} "
            f"({_gb(r['heap_max'])}) | "
            + (
                # Runs before 2026-12-05 summed the process tree (not comparable, and
                # negative in several): their figure is not shown.
                f"{_s(r.get('idle_busy_ms_per_table_minute'), '{:.0f}')}, "
                f"{r.get('idle_rounds', '–')}, {_s(r.get('idle_round_median_s'))} s, "
                f"{_s(r.get('idle_load'))} |"
                if r.get("stored", 0) >= r["events"]
                else "not idle: a backlog was left |"
            )
        )
    lines.append("")
    for r in results:
        q = r.get("params") or {}
        lines.append(
            f"- {r['tables']:,} tables (code {r.get('code', '?')}): {q.get('rate', 0):,} "
            f"events/s for {q.get('seconds')} s "
            f"({r['events']:,} events), drain up to {q.get('drain')} s, idle window "
            f"{q.get('idle')} s, settled = landed {q.get('settle')} s after the first; the "
            f"ledger stored {r.get('stored', 0):,} of them by the end"
            + (
                " (the idle window still had a backlog to store: not idle)"
                if r.get("stored", 0) < r["events"]
                else ""
            )
            + f"; {r['on_time']:.0%} of landing ticks on time; "
            f"{r['batches']} ledger batches, {r['rounds']} merge rounds reported; hot tables "
            f"take {r['hot_share']:.0%} of the events ({r.get('hot_events', 0):,} visible, "
            f"{r.get('hot_never', 0):,} not by the end); cold tables "
            f"{statistics.median(r['cold_events_per_s']) if r['cold_events_per_s'] else 0:.2f} "
            f"events/s each (median; {r.get('cold_events', 0):,} visible, "
            f"{r.get('cold_never', 0):,} not); class archive {r['class_archive']}; "
            f"work folder {r['work']}"
        )
        full = r.get("full_idle_rounds_s") or []
        if full:
            lines.append(
                f"  - {len(full)} rounds after the first visited every table and merged none: "
                f"median {statistics.median(full):.1f} s ({min(full):.1f}–{max(full):.1f}), "
                f"{statistics.median(full) / r['tables'] * 1000:.0f} ms a table"
            )
        waits = [
            f"{group} median {w[0]:.1f} s, max {w[1]:.1f} s"
            for group in ("hot", "cold")
            if (w := r.get(f"{group}_merge_wait_s"))
        ]
        if waits:
            lines.append(
                "  - from the ledger storing a table's rows to the end of its next merge: "
                + "; ".join(waits)
            )
        pairs = r.get("batch_jobs_tables") or []
        if pairs:
            lines.append(
                "  - Spark jobs per ledger micro-batch against its tables with events: "
                + ", ".join(f"{jobs} / {n}" for jobs, n in pairs[:12])
                + (" …" if len(pairs) > 12 else "")
                + f"; other jobs (merge, observer) {r.get('jobs_other', 0):,}, median job "
                f"{_s(r.get('job_median_s'), '{:.2f}')} s"
            )
        if r.get("cpu"):  # runs recorded before the CPU split have none
            lines += [f"  {line}" if line else "" for line in render_cpu(r["cpu"])]
            stages = {owner: StageTime(**t) for owner, t in r.get("stages", {}).items()}
            by_stage = render_stages(stages, r["cpu"]["wall_s"])
            lines += [f"  {line}" if line else "" for line in by_stage]
    return "\n".join(lines) + "\n"


def stored_all(result: dict[str, Any]) -> bool:
    """Whether the run's ledger reported every landed event stored."""
    return bool(result.get("stored", 0) >= result["events"])


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Cost against table count (log x): start-up, ledger batch, merge round, idle rounds,
    memory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r["tables"] for r in results]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for key, label in (
        ("running_s", "start: running"),
        ("first_batch_s", "start: first ledger batch"),
        ("first_round_s", "start: first merge round"),
        ("batch_median_s", "ledger batch (median)"),
        ("round_median_s", "merge round (median)"),
        ("hot_p99_s", "hot-table p99 freshness"),
    ):
        values = [
            # Freshness counts only events made visible: a run that left a backlog has none.
            r.get(key) if key != "hot_p99_s" or stored_all(r) else None
            for r in results
        ]
        axes[0].plot(xs, [v or float("nan") for v in values], marker="o", label=label)
    axes[0].set_ylabel("seconds")
    axes[0].set_title("time")
    full = [r.get("full_idle_rounds_s") or [] for r in results]
    axes[1].plot(
        xs,
        [statistics.median(f) if f else float("nan") for f in full],
        marker="o",
        label="a round visiting every table, none merged (median)",
    )
    busy = [r.get("idle_busy_ms_per_table_minute") if stored_all(r) else None for r in results]
    axes[1].plot(
        xs,
        [v if v is not None else float("nan") for v in busy],
        marker="s",
        label="CPU ms per idle table-minute (idle window)",
    )
    if any(full) or any(v for v in busy if v):
        axes[1].set_yscale("log")
    else:
        axes[1].text(0.5, 0.5, "no idle figures\nin these runs",
                     ha="center", va="center", transform=axes[1].transAxes)  # fmt: skip
    axes[1].set_ylabel("seconds / ms")
    axes[1].set_title("idle tables")
    axes[1].legend(fontsize=7)
    for key, label in (
        ("driver_rss", "Python driver RSS"),
        ("jvm_rss", "JVM RSS"),
        ("heap_used", "JVM heap in use (peak)"),
    ):
        axes[2].plot(xs, [r[key] / 2**30 for r in results], marker="o", label=label)
    axes[2].set_ylabel("GB")
    axes[2].set_title("driver memory")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("tables")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def arguments() -> argparse.ArgumentParser:
    """The command line, its defaults the settings of every run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, nargs="+", default=[10, 100, 1000])

    parser.add_argument("--rate", type=int, default=5000, help="events per second, all tables")
    parser.add_argument("--seconds", type=int, default=600, help="how long to land events")
    parser.add_argument("--zipf", type=float, default=1.1, help="the Zipf exponent s")
    parser.add_argument(
        "--drain",
        type=int,
        default=300,
        help="at most this many seconds after the landing, until every event is stored "
        "and a merge round followed",
    )
    parser.add_argument("--idle", type=int, default=60, help="the idle window's seconds")
    parser.add_argument("--settle", type=int, default=120)
    parser.add_argument("--hot", type=int, default=5, help="how many hottest tables")
    parser.add_argument("--cold", type=int, default=10, help="how many cold tables sampled")
    parser.add_argument("--pool-seconds", type=int, default=20, help="message pool, in seconds")
    parser.add_argument("--stream-interval", default="2s")
    parser.add_argument("--merge-interval", default="5s")
    parser.add_argument("--parallel-tables", type=int, default=2)
    parser.add_argument(
        "--master",
        default="local[2]",
        help="spark.master: local[N] gives N task slots, which the ledger's and the merge's "
        "tasks share",
    )
    parser.add_argument(
        "--round-tables", type=int, default=32, help="merge.round_tables: most tables a round"
    )
    parser.add_argument("--buckets", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--code",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="the checkout whose icetide runs (default: this one; another for a baseline)",
    )
    parser.add_argument("--results", type=Path, help="write the results as Markdown here")
    parser.add_argument("--plot", type=Path, help="write the plot (PNG) here")
    parser.add_argument("--json", type=Path, help="append each result as a JSON line here")
    parser.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        help="render and plot the results saved by earlier runs' --json instead of running",
    )
    return parser


def in_process_pipeline(work: Path, schemas: Sequence[TableSchema]) -> Path:
    """``icetide.yaml`` of ``schemas`` for a benchmark that runs a stage's code in its own
    process (bench/create_bench.py, bench/task_files_bench.py): this benchmark's default
    settings, and no event log (such a benchmark runs no Spark job worth logging)."""
    path = write_pipeline(work, schemas, arguments().parse_args([]))
    doc = yaml.safe_load(path.read_text())
    doc["spark"]["conf"] = {}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def main(argv: list[str] | None = None) -> int:
    args = arguments().parse_args(argv)
    results: list[dict[str, Any]] = []
    if args.from_json:
        for path in args.from_json:
            results += [json.loads(line) for line in path.read_text().splitlines() if line]
        results.sort(key=lambda r: r["tables"])
        args.tables = []
    for tables in args.tables:
        result = run_one(tables, args)
        results.append(result)
        print(json.dumps(result, default=str), file=sys.stderr, flush=True)
        if args.json:
            with args.json.open("a") as out:
                out.write(json.dumps(result, default=str) + "\n")
    text = render(args, results)
    print(text)
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(text)
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
