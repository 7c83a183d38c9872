"""Spark's event log read back: the tasks' time by the stage that ran them, so a benchmark
can say how the JVM's work divides between the ledger and the merge.

A job belongs to the ledger when it carries the streaming query's id (Structured
Streaming sets ``sql.streaming.queryId`` on a micro-batch's jobs, and icetide's store
threads copy the batch's properties) or runs in the ledger's scheduler pool; every other
job (the merge's, maintenance's, the observer's) is counted as ``merge and the rest``.

Each finished task's run time (``Executor Run Time``: wall time in the task, which for
a Python UDF or ``mapInArrow`` includes waiting on its Python worker) and its JVM thread's
CPU (``Executor CPU Time``: the JVM's own work; the Python worker's is not in it) are
added up by the icetide stage of the job that ran them, for tasks launched (and jobs
submitted) inside a window of wall-clock time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class StageTime:
    jobs: int = 0
    tasks: int = 0
    run_s: float = 0.0
    cpu_s: float = 0.0


LEDGER = "ledger"
REST = "merge and the rest"


def stage_of(properties: dict[str, str]) -> str:
    """Which of icetide's stages ran a job, from the job's properties."""
    if properties.get("sql.streaming.queryId") or properties.get("spark.scheduler.pool") == LEDGER:
        return LEDGER
    return REST


def by_stage(lines: Iterable[str], since_ms: int, until_ms: int) -> dict[str, StageTime]:
    """Task time per stage (:func:`stage_of`) from an event log's lines, for tasks
    launched in ``[since_ms, until_ms)`` (epoch milliseconds).

    >>> log = [
    ...     {"Event": "SparkListenerJobStart", "Job ID": 0, "Stage IDs": [0],
    ...      "Submission Time": 4, "Properties": {"sql.streaming.queryId": "a1"}},
    ...     {"Event": "SparkListenerJobStart", "Job ID": 1, "Stage IDs": [1, 2],
    ...      "Submission Time": 6, "Properties": {}},
    ...     {"Event": "SparkListenerTaskEnd", "Stage ID": 0, "Task Info": {"Launch Time": 5},
    ...      "Task Metrics": {"Executor Run Time": 1500, "Executor CPU Time": 4e8}},
    ...     {"Event": "SparkListenerTaskEnd", "Stage ID": 2, "Task Info": {"Launch Time": 6},
    ...      "Task Metrics": {"Executor Run Time": 700, "Executor CPU Time": 6e8}},
    ...     {"Event": "SparkListenerTaskEnd", "Stage ID": 2, "Task Info": {"Launch Time": 99},
    ...      "Task Metrics": {"Executor Run Time": 700, "Executor CPU Time": 6e8}},
    ... ]
    >>> split = by_stage((json.dumps(e) for e in log), since_ms=0, until_ms=50)
    >>> {k: (v.jobs, v.tasks, v.run_s, v.cpu_s) for k, v in sorted(split.items())}
    {'ledger': (1, 1, 1.5, 0.4), 'merge and the rest': (1, 1, 0.7, 0.6)}
    """
    stage_of_id: dict[int, str] = {}
    split: dict[str, StageTime] = {}
    for line in lines:
        if '"SparkListenerJobStart"' not in line and '"SparkListenerTaskEnd"' not in line:
            continue  # the log's other events: not parsed, most of its bytes
        event = json.loads(line)
        if event["Event"] == "SparkListenerJobStart":
            owner = stage_of(event.get("Properties") or {})
            for stage in event["Stage IDs"]:
                stage_of_id[stage] = owner
            time = split.setdefault(owner, StageTime())
            time.jobs += since_ms <= event.get("Submission Time", since_ms) < until_ms
        elif event["Event"] == "SparkListenerTaskEnd":
            launched = event["Task Info"]["Launch Time"]
            metrics = event.get("Task Metrics")
            if metrics is None or not since_ms <= launched < until_ms:
                continue
            time = split.setdefault(stage_of_id.get(event["Stage ID"], REST), StageTime())
            time.tasks += 1
            time.run_s += metrics["Executor Run Time"] / 1000
            time.cpu_s += metrics["Executor CPU Time"] / 1e9
    return split


def read_folder(folder: Path, since_ms: int, until_ms: int) -> dict[str, StageTime]:
    """:func:`by_stage` over every event log file in ``folder`` (one per application)."""
    split: dict[str, StageTime] = {}
    for path in sorted(folder.iterdir()):
        with path.open(errors="replace") as lines:
            for owner, time in by_stage(lines, since_ms, until_ms).items():
                total = split.setdefault(owner, StageTime())
                total.jobs += time.jobs
                total.tasks += time.tasks
                total.run_s += time.run_s
                total.cpu_s += time.cpu_s
    return split


def render(split: dict[str, StageTime], wall_s: float) -> list[str]:
    """Markdown lines: each stage's tasks, their wall time and JVM CPU, as cores."""
    lines = [
        "",
        "| Spark jobs of | jobs | tasks | task time (cores) | JVM CPU in tasks (cores) |",
        "|---|---:|---:|---:|---:|",
    ]
    for owner, t in sorted(split.items()):
        lines.append(
            f"| {owner} | {t.jobs:,} | {t.tasks:,} | {t.run_s / wall_s:.2f} | "
            f"{t.cpu_s / wall_s:.2f} |"
        )
    return lines
