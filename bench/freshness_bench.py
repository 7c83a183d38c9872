"""Freshness benchmark: a steady event rate through the files transport or a Kafka broker
into ``icetide run``, and how long each change takes from its source commit to being
visible in the base table.

The demo workload's events (three tables, realistic Debezium messages) are delivered at
``--rate`` events per second, once a second, for ``--seconds``: one landing file a
second, or (``--transport kafka``) produced to a private single-node broker started for
the run, one topic per table as Debezium names them (``<server>.<db or schema>.<table>``),
and read by the ledger's Kafka source. Each message's ``source.ts_ms`` is stamped with
the wall clock when it is delivered (its "source commit time"; the messages are
serialised before the run, so delivering them costs the machine little: until 875274c
each was serialised as it landed, ~6% of the two cores). A run longer than ``--pool``
events delivers the pool again, each round's source positions moved past the last
(:func:`moved_on`): generating the demo's events costs ~0.4 ms each, so 10 minutes at
20,000 events/s could not be generated up front.
``icetide run --no-capture`` runs the stream and merge stages on the schedule given; the
landing starts when it says it is running (its Spark session is up; until
a45cffc it started 5 s after the command). After the run (and a drain of up to
``--drain`` seconds), one Spark session reads back when each change became visible, from
the tables' own metadata:

* each ledger row's file → the ledger snapshot that added it (``entries``);
* each base snapshot carries the merge watermark (the last ledger snapshot merged) and
  its commit time: a ledger snapshot's rows are visible from the first base snapshot
  whose watermark is that snapshot or a later one.

Latency = that commit time − the event's ``source.ts_ms``; p50/p99 over every event, and
again over the events landed after the first ``--settle`` seconds (the cold start: a new
JVM's first micro-batch took 17–18 s in the runs of 2026-11-27, and the backlog it left
took one to four minutes to drain), when the first events reached the ledger and a base table
(the cold start's own length), and the merge durations from the run's progress records
(what bounds it), and where the CPU went while events were delivered: ``icetide run``'s
Python driver, its JVM, its Python workers, the benchmark's own delivery and broker
(``cpu_split.py``, read from ``/proc``). Never pass/fail.

    python bench/freshness_bench.py --rate 2000 --seconds 600
    python bench/freshness_bench.py --rate 2000 --seconds 120   # a quick look
    python bench/freshness_bench.py --rate 10000 --transport kafka
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from cpu_split import CpuSplit
from cpu_split import render as render_cpu
from landing_run import (
    Deliver,
    Stampable,
    class_archive_state,
    event_visibility,
    files_delivery,
    land_every_second,
    wait_until_running,
)
from spark_events import read_folder
from spark_events import render as render_pools

from icetide.capture.transport.kafka import topic_name
from icetide.config import load_config
from icetide.demo.run import write_pipeline
from icetide.demo.workload import generate
from icetide.spark.session import build_session


def latencies(config_path: Path, settle: int = 120) -> dict[str, Any]:
    """Per event: first base commit whose watermark covers its ledger snapshot − its
    source commit time (seconds). Percentiles over all tables, over every event and over
    the events landed ``settle`` seconds or more after the first (the pipeline's cold
    start, its first micro-batch and merges, left behind)."""
    from pyspark.sql import functions as F

    from icetide.lake.tables import TableRefs

    config = load_config(config_path)
    spark = build_session(config)
    frames = []
    never = 0
    for table in config.tables:
        refs = TableRefs.of(config, table.name)
        if not spark.catalog.tableExists(refs.base.sql):
            continue
        frame, missing = event_visibility(spark, refs)
        never += missing
        frames.append(frame)
    gaps = merge_gaps(spark, config)
    if not frames:
        return {"events": 0, "never_visible": never} | gaps
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    union = union.persist()  # read twice: over every event, then after the cold start
    q = union.agg(
        F.count("us").alias("n"),
        F.percentile_approx("us", [0.5, 0.99], 10000).alias("p"),
        F.max("us").alias("max"),
        F.percentile_approx("ledger_us", [0.5, 0.99], 10000).alias("ledger"),
        F.min("source_us").alias("first_us"),
        F.min("ledger_at_us").alias("first_ledger_us"),
        F.min("visible_at_us").alias("first_visible_us"),
    ).first()
    assert q is not None
    settled = (
        union.where(F.col("source_us") >= (q["first_us"] or 0) + settle * 1_000_000)
        .agg(
            F.percentile_approx("us", [0.5, 0.99], 10000).alias("p"),
            F.max("us").alias("max"),
        )
        .first()
    )
    spark.stop()
    if not q["n"]:
        return {"events": 0, "never_visible": never} | gaps
    return {
        "events": int(q["n"]),
        "p50_s": q["p"][0] / 1e6,
        "p99_s": q["p"][1] / 1e6,
        "max_s": q["max"] / 1e6,
        "ledger_p50_s": q["ledger"][0] / 1e6,
        "ledger_p99_s": q["ledger"][1] / 1e6,
        "settle_s": settle,
        "settled_p50_s": settled["p"][0] / 1e6 if settled and settled["p"] else None,
        "settled_p99_s": settled["p"][1] / 1e6 if settled and settled["p"] else None,
        "settled_max_s": settled["max"] / 1e6 if settled and settled["max"] else None,
        "never_visible": never,
        # The cold start: when the first events reached the ledger, then a base table,
        # counted from the first file landed (the earliest source commit time).
        "first_ledger_s": (q["first_ledger_us"] - q["first_us"]) / 1e6,
        "first_visible_s": (q["first_visible_us"] - q["first_us"]) / 1e6,
    } | gaps


def merge_gaps(spark: Any, config: Any) -> dict[str, float]:
    """How often each base table got a merge commit carrying the watermark (what bounds
    the freshness: an event waits for the next ledger trigger, then the next merge)."""
    from icetide.lake.tables import TableRefs
    from icetide.schema.contract.base import EVENTS_PROPERTY

    gaps: list[float] = []
    events: list[int] = []
    for table in config.tables:
        base = TableRefs.of(config, table.name).base
        if not spark.catalog.tableExists(base.sql):
            continue
        rows = spark.sql(
            f"SELECT committed_at, summary['{EVENTS_PROPERTY}'] AS events "
            f"FROM {base.child('snapshots')} WHERE summary['{EVENTS_PROPERTY}'] IS NOT NULL "
            "ORDER BY committed_at"
        ).collect()
        times = [r["committed_at"].timestamp() for r in rows]
        gaps += [b - a for a, b in zip(times, times[1:], strict=False)]
        events += [int(r["events"]) for r in rows]
    if not gaps:
        return {"merges": len(events)}
    return {
        "merges": len(events),
        "merge_gap_median_s": statistics.median(gaps),
        "merge_gap_max_s": max(gaps),
        "events_per_merge": statistics.median(events),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=2000, help="events per second")
    parser.add_argument("--seconds", type=int, default=600, help="how long to land events")
    parser.add_argument("--stream-interval", default="2s")
    parser.add_argument("--merge-interval", default="5s")
    parser.add_argument("--parallel-tables", type=int, default=2, help="merge.parallel_tables")
    parser.add_argument("--drain", type=int, default=180, help="seconds to wait after landing")
    parser.add_argument(
        "--compact-every",
        type=int,
        default=None,
        help="every table's merge.compact_every (default: unset, the merge's own default)",
    )
    parser.add_argument(
        "--settle",
        type=int,
        default=120,
        help="also report the events landed this many seconds after the first (default 120)",
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the run (spark.conf), repeatable; e.g. "
        "--spark-conf spark.driver.memory=4g",
    )
    parser.add_argument(
        "--transport",
        choices=("files", "kafka"),
        default="files",
        help="landing files (default), or a private Kafka broker started for the run",
    )
    parser.add_argument(
        "--pool",
        type=int,
        default=1_200_000,
        help="distinct events generated before the run (~0.4 ms and ~2.5 KB each); a run "
        "longer than the pool delivers it again with its source positions moved on "
        "(default 1,200,000: 10 minutes at 2,000 events/s)",
    )
    parser.add_argument("--results", type=Path, help="write the result as Markdown here")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the run's folder (its log, landing files or broker, tables) for a look "
        "afterwards; by default it is deleted at the end",
    )
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="icetide-freshness-", dir="/tmp"))
    pool = min(args.rate * args.seconds, args.pool)
    print(f"freshness: generating {pool:,} events", file=sys.stderr, flush=True)
    messages = [Stampable(e.message) for e in generate(11, pool, key_space=5000).events]
    with contextlib.ExitStack() as stack:
        if not args.keep:  # a run leaves gigabytes (landing files or the broker's log, tables)
            stack.callback(shutil.rmtree, work, True)
        else:
            print(f"freshness: the run's folder is kept: {work}", file=sys.stderr, flush=True)
        deliver, transport = _transport(args.transport, work, stack, messages, args.rate)
        return _run(args, work, messages, deliver, transport)


BROKER_WAIT = 60.0
"""How long delivery waits for a broker that takes nothing before the run ends."""


def _transport(
    kind: str, work: Path, stack: contextlib.ExitStack, messages: list[Stampable], rate: int
) -> tuple[Deliver, Any]:
    """How the run's events reach ``icetide run``: a landing folder's files, or a broker
    (started here, stopped by ``stack``) with the ``transport:`` section that reads the
    topics ``messages`` go to (``rate`` a second, delivered as :func:`cycled` orders them)."""
    landing = work / "landing"
    landing.mkdir(exist_ok=True)
    if kind == "files":
        return files_delivery(landing), None
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' servers
    from confluent_kafka import Producer

    from tests.devservers.kafka import KafkaServer

    kafka = stack.enter_context(KafkaServer(work / "kafka"))
    # Each pool message's topic, read once: not a parse per delivered line, which at
    # 20,000 events/s would take the cores the pipeline under test runs on.
    topic_at = [topic_of(m.line) for m in messages]
    topics = sorted(set(topic_at))
    producers = [
        Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 20, "acks": "all"})
    ]
    stack.callback(producers.clear)  # gone before the broker stops: no reconnect noise

    def deliver(index: int, lines: list[str]) -> None:
        producer, first = producers[0], (index - 1) * rate  # the tick's first pool index
        for offset, line in enumerate(lines):
            topic, value = topic_at[(first + offset) % len(topic_at)], line.encode("utf-8")
            waited = 0.0
            while True:
                try:
                    producer.produce(topic, value)
                    break
                except BufferError:  # the broker is behind: wait for room (the tick is late,
                    if waited >= BROKER_WAIT:  # and the run says how many were)
                        raise SystemExit(
                            f"freshness: the broker took no message for {BROKER_WAIT:.0f} s "
                            "(stopped, or its disk full): run ended"
                        ) from None
                    producer.poll(0.5)
                    waited += 0.5
            producer.poll(0)
        producer.flush(30)

    section = {
        "type": "kafka",
        "bootstrap_servers": kafka.bootstrap_servers,
        "topics": topics,
        "starting_offsets": "earliest",
    }
    return deliver, section


_BINLOG_FILE = re.compile(r'"file":"mysql-bin\.(\d+)"')
_LSN = re.compile(r'"lsn":(\d+)')


def moved_on(line: str, cycle: int) -> str:
    """``line`` as delivered in the pool's ``cycle``-th round: its source position moved
    past every earlier round's (the binlog file number up by 1,000 a round, the LSN by
    2^40), so the merge's version guard takes each round as newer changes, as a longer
    workload's would be, instead of skipping them as stale.

    >>> moved_on('{"file":"mysql-bin.000008","pos":4}', 2)
    '{"file":"mysql-bin.002008","pos":4}'
    >>> moved_on('{"sequence":"[null,\\\\"16\\\\"]","lsn":16,"txId":16}', 1)
    '{"sequence":"[null,\\\\"1099511627792\\\\"]","lsn":1099511627792,"txId":16}'
    """
    if not cycle:
        return line
    found = _BINLOG_FILE.search(line)
    if found:
        number = int(found.group(1)) + 1000 * cycle
        return line.replace(found.group(0), f'"file":"mysql-bin.{number:06d}"', 1)
    found = _LSN.search(line)
    if found:
        lsn = found.group(1)
        moved = str(int(lsn) + (cycle << 40))
        # The LSN is also in Debezium's ``sequence``, as a string in a JSON string.
        return line.replace(found.group(0), f'"lsn":{moved}', 1).replace(
            f'\\"{lsn}\\"', f'\\"{moved}\\"'
        )
    return line


def cycled(messages: list[Stampable], rate: int) -> Callable[[int, int], list[str]]:
    """Each second's ``rate`` lines, the pool of ``messages`` delivered round after round
    (:func:`moved_on`)."""

    def lines_at(tick: int, now_ms: int) -> list[str]:
        first = tick * rate
        return [
            moved_on(messages[i % len(messages)].at(now_ms), i // len(messages))
            for i in range(first, first + rate)
        ]

    return lines_at


def topic_of(line: str) -> str:
    """The Debezium topic of one NDJSON line: ``<server>.<db or schema>.<table>`` for a
    change; a transaction marker or anything else on a topic of its own."""
    message = json.loads(line)
    payload = message.get("payload", message) if isinstance(message, dict) else None
    source = payload.get("source") if isinstance(payload, dict) else None
    if isinstance(source, dict) and source.get("table"):
        # PostgreSQL's connector names its topics by schema, MySQL's by database.
        scope = source.get("schema") if source.get("connector") == "postgresql" else None
        return topic_name(str(source.get("name")), str(scope or source.get("db")), source["table"])
    if isinstance(payload, dict) and payload.get("status") in ("BEGIN", "END"):
        return "freshness.transaction"
    return "freshness.other"


def _run(
    args: argparse.Namespace,
    work: Path,
    messages: list[Stampable],
    deliver: Deliver,
    transport: Any,
) -> int:
    config_path = write_pipeline(
        work,
        buckets=4,
        extra={
            "schedule": {
                "stream_interval": args.stream_interval,
                "merge_interval": args.merge_interval,
            },
            "merge": {"parallel_tables": args.parallel_tables},
        },
    )
    events = work / "spark-events"  # tells the ledger's tasks from the merge's
    events.mkdir()
    doc = yaml.safe_load(config_path.read_text())
    if transport is not None:
        doc["transport"] = transport
    if args.compact_every is not None:
        for table in doc["tables"]:
            table.setdefault("merge", {})["compact_every"] = args.compact_every
    conf = doc.setdefault("spark", {}).setdefault("conf", {})
    conf.update({"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri()})
    for setting in args.spark_conf:
        key, _, value = setting.partition("=")
        conf[key.strip()] = value.strip()
    config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    archive = class_archive_state(config_path)
    load_at_start = os.getloadavg()[0]
    log = work / "run.log"
    with log.open("w") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "icetide.cli", "run", "--no-capture", "--progress", "json"]
            + ["-c", str(config_path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=work,
        )
        try:
            wait_until_running(log, run)
            cpu = CpuSplit(run.pid)
            cpu.start()
            landing_ms = int(time.time() * 1000)
            on_time = land_every_second(deliver, args.seconds, cycled(messages, args.rate))
            split = cpu.stop()
            landed_ms = int(time.time() * 1000)
            time.sleep(args.drain)
        finally:
            run.send_signal(signal.SIGTERM)
            try:
                run.wait(timeout=120)
            except subprocess.TimeoutExpired:
                run.kill()
    if archive == "none" and "saved the JVM's classes" in log.read_text(errors="replace"):
        archive = "none at the start; this run saved one"
    result = latencies(config_path, args.settle)
    result["class_archive"] = archive
    result["cpu"] = split
    result["pools"] = read_folder(events, landing_ms, landed_ms)
    text = render(args, result, on_time, load_at_start, os.getloadavg()[0])
    print(text)
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(text)
    return 0


def render(
    args: argparse.Namespace, r: dict[str, Any], on_time: float, load0: float, load1: float
) -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    lines = [
        f"# Freshness: {args.rate:,} events/s for {args.seconds} s through "
        + ("the files transport" if args.transport == "files" else "a Kafka broker"),
        "",
        f"Machine: {platform.machine()} {os.cpu_count()} cores, commit {commit}, load average "
        f"{load0:.1f} at start, {load1:.1f} at the end (shared machine). Schedule: stream "
        f"every {args.stream_interval}, merge every {args.merge_interval} "
        f"({args.parallel_tables} table(s) at a time"
        + ("" if args.compact_every is None else f", merge.compact_every {args.compact_every}")
        + "".join(f", {setting}" for setting in args.spark_conf)
        + f"); {on_time:.0%} of "
        f"the one-second landing ticks were on time. Class archive: {r.get('class_archive')}.",
        "",
    ]
    if not r.get("events"):
        lines.append(f"No event became visible ({r.get('never_visible', 0):,} not visible).")
    else:
        lines += [
            f"- events delivered: {args.rate * args.seconds:,}; visible: {r['events']:,} (in "
            f"the ledger but not visible by the end: {r['never_visible']:,})",
            f"- p50 {r['p50_s']:.1f} s, p99 {r['p99_s']:.1f} s, max {r['max_s']:.1f} s "
            "(visible in the base table − source commit time)",
            f"- of which in the ledger: p50 {r['ledger_p50_s']:.1f} s, p99 "
            f"{r['ledger_p99_s']:.1f} s (ledger commit − source commit time)",
        ]
        if r.get("settled_p99_s") is not None:
            lines.append(
                f"- events landed after the first {r['settle_s']} s (cold start left behind): "
                f"p50 {r['settled_p50_s']:.1f} s, p99 {r['settled_p99_s']:.1f} s, "
                f"max {r['settled_max_s']:.1f} s"
            )
    if r.get("first_ledger_s") is not None:
        lines.append(
            f"- cold start: the first ledger commit {r['first_ledger_s']:.1f} s and the first "
            f"merge commit {r['first_visible_s']:.1f} s after the first file landed"
        )
    if r.get("merge_gap_median_s") is not None:
        lines.append(
            f"- merge commits: {r['merges']} over the tables, one every "
            f"{r['merge_gap_median_s']:.1f} s per table (median; longest gap "
            f"{r['merge_gap_max_s']:.1f} s), median {r['events_per_merge']:,.0f} events each"
        )
    if r.get("cpu"):
        lines += render_cpu(r["cpu"])
    if r.get("pools"):
        lines += render_pools(r["pools"], r["cpu"]["wall_s"])
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
