"""kill -9 capture, ledger and merge at random moments under a live workload; nothing lost.

Each stage runs as its own ``icetide`` process (the ledger and the merge with their own
Spark) in its own process group, and a killer SIGKILLs whole groups — Python and JVM
together — at random moments, restarting each stage at once, at least 20 times in all.
Then the writes stop, the last events are captured, streamed and merged, and ``verify``
must find every base table equal to its MariaDB table: no row lost, none duplicated.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.bootstrap.run import Bootstrap
from icetide.capture.runner import run_capture
from icetide.demo.live import start_shop
from icetide.devservers.mariadb import MariaDBServer
from icetide.observe.verify import run_verify
from tests.integration.harness import REPO, Pipeline

KILLS = 20
MIN_KILLS = 3
"""Kills of each stage at the least: the loop runs until both counts are reached."""
RUN_SECONDS = 40.0
"""And for at least this long, so the slow stages start up, work and die several times."""


@dataclass
class Stage:
    """One restartable stage process and its kill schedule."""

    name: str
    args: list[str]
    lifetime: tuple[float, float]
    """How long it runs before the next kill, uniformly drawn (seconds)."""
    process: subprocess.Popen[bytes] | None = None
    kill_at: float = 0.0
    kills: int = 0
    logs: list[Path] = field(default_factory=list)

    def start(self, config: Path, folder: Path, rng: random.Random) -> None:
        log = folder / f"{self.name}-{len(self.logs)}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "icetide.cli", *self.args, "-c", str(config)],
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: the kill takes the JVM too
                env={k: v for k, v in os.environ.items() if k != "ICETIDE_FAULT"},
            )
        self.kill_at = time.monotonic() + rng.uniform(*self.lifetime)

    def kill(self) -> None:
        assert self.process is not None
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.kills += 1

    def died_by_itself(self) -> str | None:
        """The log of a run that ended without being killed (a real failure)."""
        if self.process is not None and self.process.poll() is not None:
            return self.logs[-1].read_text(errors="replace")[-3000:]
        return None


@pytest.fixture
def server() -> Iterator[MariaDBServer]:
    with MariaDBServer() as started:
        yield started


@pytest.mark.long
def test_twenty_kills_under_a_live_workload_lose_and_duplicate_nothing(
    tmp_path: Path, warehouse: Path, server: MariaDBServer, spark: SparkSession
) -> None:
    rng = random.Random(20)
    workload = start_shop(server, seed=20)
    workload.pause = 0.005
    pipe = Pipeline.live(
        tmp_path,
        warehouse,
        "crash",
        server,
        spark,
        schedule={"stream_interval": "1s", "merge_interval": "2s"},
    )
    source = pipe.config.sources[0]
    workload.start()
    Bootstrap(spark, pipe.pipeline, source, chunk_rows=5_000).run()
    stages = [
        Stage("capture", ["capture"], (0.5, 4.0)),
        Stage("stream", ["stream"], (4.0, 20.0)),
        Stage("merge", ["merge"], (4.0, 20.0)),
    ]
    logs = tmp_path / "logs"
    logs.mkdir()
    for stage in stages:
        stage.start(pipe.config_path, logs, rng)
    deadline = time.monotonic() + RUN_SECONDS
    try:
        while (
            time.monotonic() < deadline
            or sum(s.kills for s in stages) < KILLS
            or min(s.kills for s in stages) < MIN_KILLS
        ):
            for stage in stages:
                failure = stage.died_by_itself()
                assert failure is None, f"{stage.name} exited on its own:\n{failure}"
                if time.monotonic() >= stage.kill_at:
                    stage.kill()
                    stage.start(pipe.config_path, logs, rng)
            time.sleep(0.1)
    finally:
        for stage in stages:
            if stage.process is not None and stage.process.poll() is None:
                os.killpg(stage.process.pid, signal.SIGKILL)
                stage.process.wait()
        counts = workload.stop()

    kills = {s.name: s.kills for s in stages}
    assert sum(kills.values()) >= KILLS and min(kills.values()) >= MIN_KILLS, kills
    assert counts.big_transactions == 1 and counts.statements > 1_000

    # Writes stopped: capture to the end of the binlog, then the last stream and merge.
    run_capture(pipe.config, source, follow=False)
    pipe.stream()
    pipe.merge()
    verdicts = run_verify(pipe.pipeline, spark, None)
    assert all(v.matches for v in verdicts), [str(v) for v in verdicts]
