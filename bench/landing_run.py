"""What the benchmarks that feed a running ``icetide run`` share: messages stamped with
their source commit time as they land, delivering them at a rate (landing files, or a
Kafka broker), waiting for the run to start, and reading back from the tables' metadata
when each event became visible in its base table.

Used by bench/freshness_bench.py and bench/tables_bench.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from icetide.config import load_config
from icetide.spark import class_archive
from icetide.spark.session import spark_conf, uses_class_archive


def _payload(message: dict[str, Any]) -> dict[str, Any]:
    inner = message.get("payload")
    return inner if isinstance(inner, dict) else message


_MS = 7_777_777_777_771
"""A placeholder source commit time (ms). Its µs and ns forms are the same digits followed
by zeros, as the wall clock's are, so one replacement stamps all three."""

POSITION = 6_666_666_666_661
"""A placeholder binlog offset (``source.pos``) that :meth:`Stampable.at` can replace, so a
pool of messages landed again and again keeps moving forward in the source's order."""


class Stampable:
    """One message as an NDJSON line whose source commit time is set when it lands.

    Serialised once, before the run: serialising 2,000 Debezium messages a second took
    ~0.11 s of CPU a second on the two cores the pipeline under test runs on (2026-11-27);
    replacing the placeholder takes ~0.01 s.
    """

    def __init__(self, message: dict[str, Any]) -> None:
        payload = _payload(message)
        source = payload.get("source") or {}
        source["ts_ms"] = _MS
        for finer, scale in (("ts_us", 1000), ("ts_ns", 1_000_000)):
            if finer in source:
                source[finer] = _MS * scale
        if "ts_ms" in payload:
            payload["ts_ms"] = _MS
        self.line = json.dumps(message, separators=(",", ":"))

    def at(self, now_ms: int, position: int | None = None) -> str:
        """The line with ``now_ms`` as its source commit time (and ``position`` in place
        of :data:`POSITION`, when given)."""
        line = self.line.replace(str(_MS), str(now_ms))
        return line if position is None else line.replace(str(POSITION), str(position))


def land(landing: Path, index: int, lines: list[str]) -> None:
    """Write a file under a hidden name, then rename it in (the landing contract)."""
    name = f"events-{index:06d}.json"
    tmp = landing / f".{name}.tmp"
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, landing / name)


Deliver = Callable[[int, list[str]], None]
"""Hands one second's lines (the tick's number from 1, the lines) to the transport."""


def files_delivery(landing: Path) -> Deliver:
    """Each second's lines as one landing file."""
    return lambda index, lines: land(landing, index, lines)


def land_every_second(
    deliver: Deliver, seconds: int, lines_at: Callable[[int, int], list[str]]
) -> float:
    """Deliver one batch a second for ``seconds`` (:func:`files_delivery`: one landing
    file each), its lines ``lines_at(tick, now_ms)``; the share of ticks kept on time."""
    start = time.monotonic()
    late = 0
    for tick in range(seconds):
        due = start + tick
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        else:
            late += 1
        deliver(tick + 1, lines_at(tick, int(time.time() * 1000)))
    return 1 - late / max(seconds, 1)


def wait_until_running(log: Path, run: subprocess.Popen[bytes], timeout: float = 180) -> None:
    """Until ``icetide run`` says it runs its stages (its Spark session is up and the
    stream starting): events landed before that would time the start of a JVM."""
    deadline = time.monotonic() + timeout
    while "running: " not in log.read_text(errors="replace"):
        if run.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"icetide run did not start; its log: {log}")
        time.sleep(0.2)


def class_archive_state(config_path: Path) -> str:
    """Whether ``icetide run`` will start its JVM from a class archive (the cold start
    differs by seconds; icetide/spark/class_archive.py)."""
    config = load_config(config_path)
    if not uses_class_archive(config):
        return "off"
    found = class_archive.for_session(spark_conf(config), write=False)
    return "none" if found is None else f"used ({found.final.name})"


def event_visibility(spark: Any, refs: Any) -> tuple[Any, int]:
    """One table's events (``refs``: its :class:`~icetide.lake.tables.TableRefs`) with
    when each became visible in the base: the first base commit whose merge watermark
    covers the ledger snapshot that added it. A frame of ``us`` (visible − source commit
    time), ``ledger_us`` (ledger commit − source commit time), ``source_us``,
    ``ledger_at_us`` and ``visible_at_us`` (µs), and how many events were never visible.

    Each ledger row's file → the ledger snapshot that added it (``entries``); each base
    snapshot carries the watermark (the last ledger snapshot merged) and its commit time.
    """
    from pyspark.sql import functions as F

    from icetide.schema.contract import ledger as c
    from icetide.schema.contract.base import WATERMARK_PROPERTY

    added = spark.sql(
        f"SELECT data_file.file_path AS file, snapshot_id AS ledger_snapshot "
        f"FROM {refs.cdc.child('entries')} WHERE status != 2"
    )
    ledger_times = spark.sql(
        f"SELECT snapshot_id AS ledger_snapshot, committed_at AS ledger_at "
        f"FROM {refs.cdc.child('snapshots')}"
    )
    marks = (
        spark.sql(
            f"SELECT committed_at AS visible_at, "
            f"CAST(summary['{WATERMARK_PROPERTY}'] AS BIGINT) AS watermark "
            f"FROM {refs.base.child('snapshots')}"
        )
        .where(F.col("watermark").isNotNull())
        .join(
            ledger_times.withColumnRenamed("ledger_snapshot", "watermark").withColumnRenamed(
                "ledger_at", "watermark_at"
            ),
            "watermark",
        )
    )
    rows = (
        spark.table(refs.cdc.sql)
        .select(
            F.col(c.MESSAGE_ID).alias("message"),
            F.col("_file").alias("file"),
            F.col(c.SOURCE_TS).alias("source_ts"),
        )
        .join(added, "file")
        .join(ledger_times, "ledger_snapshot")
    )
    visible = rows.join(marks, marks.watermark_at >= rows.ledger_at, "left").groupBy(
        "message", "file", "source_ts", "ledger_at"
    )
    per_event = visible.agg(F.min("visible_at").alias("visible_at"))
    never = per_event.where(F.col("visible_at").isNull()).count()
    frame = per_event.where(F.col("visible_at").isNotNull()).select(
        (F.unix_micros("visible_at") - F.unix_micros("source_ts")).alias("us"),
        (F.unix_micros("ledger_at") - F.unix_micros("source_ts")).alias("ledger_us"),
        F.unix_micros("source_ts").alias("source_us"),
        F.unix_micros("ledger_at").alias("ledger_at_us"),
        F.unix_micros("visible_at").alias("visible_at_us"),
    )
    return frame, never
