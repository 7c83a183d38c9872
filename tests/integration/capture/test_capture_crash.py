"""kill -9 capture, ledger and merge at random moments under a live workload; nothing lost.

Each stage runs as its own ``icetide`` process (the ledger and the merge with their own
Spark) in its own process group, and a killer SIGKILLs whole groups — Python and JVM
together: capture at random moments after it started, restarted at once, three times;
the ledger and the merge each once, at a random moment 4–20 s after their start. Then
the writes stop, the last events are captured, streamed and merged — from where the
killed processes left off — and ``verify`` must find every base table equal to its
MariaDB table: no row lost, none duplicated. ``bench/crash_soak.py`` is the soak: many
kills of every stage, while starting and mid-work (after a stored batch).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.devservers.mariadb import MariaDBServer
from tests.integration.capture.kill_loop import Stage, crash_run, crash_stages

CAPTURE_KILLS = 3
"""Capture dies this often, at random moments, then runs until the loop ends."""


def killed_at_each_kind(stages: list[Stage]) -> bool:
    """Every stage killed as often as it may be."""
    return all(s.done for s in stages)


@pytest.fixture
def server() -> Iterator[MariaDBServer]:
    with MariaDBServer() as started:
        yield started


@pytest.mark.long
def test_kills_at_every_stage_under_a_live_workload_lose_and_duplicate_nothing(
    tmp_path: Path, warehouse: Path, server: MariaDBServer, spark: SparkSession
) -> None:
    stages = crash_stages(warehouse, CAPTURE_KILLS)
    counts, verdicts = crash_run(
        tmp_path, warehouse, server, spark, stages, enough=killed_at_each_kind
    )
    kills = {s.name: s.kills for s in stages}
    assert kills == {"capture": CAPTURE_KILLS, "stream": 1, "merge": 1}, kills
    assert counts.big_transactions == 1 and counts.statements > 1_000
    assert all(v.matches for v in verdicts), [str(v) for v in verdicts]
