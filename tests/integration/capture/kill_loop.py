"""SIGKILL icetide stage processes at random moments under a live workload, restart them
at once, then catch up and verify.

Shared by ``test_capture_crash.py`` (a few kills) and ``bench/crash_soak.py`` (many).
Each stage runs as its own ``icetide`` process in its own process group, so a kill
takes its JVM too. A stage is killed either a random time after it started, or a random
time after it first stored work (a new snapshot of a table it writes): on a loaded
machine a Spark stage can take longer to start than any lifetime drawn from its start,
and would then only ever die before it wrote anything.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from icetide.artifacts.runtime import table_metadata
from icetide.bootstrap.run import Bootstrap
from icetide.capture.runner import run_capture
from icetide.demo.live import start_shop
from icetide.demo.shop import ShopCounts
from icetide.devservers.mariadb import MariaDBServer
from icetide.observe.verify import TableVerdict, run_verify
from tests.integration.harness import REPO, Pipeline

NAMESPACE = "crash"
MID_WORK = (0.0, 3.0)
"""Seconds after a Spark stage's first stored batch it is killed: during a later one."""


@dataclass(frozen=True)
class Kill:
    """When one incarnation of a stage dies."""

    within: tuple[float, float]
    """Seconds until the kill, uniformly drawn."""
    after: Callable[[], int] | None = None
    """Counted from the moment this count of stored work (a table's snapshots) first
    grows past its value at the stage's start, or, if None, from its start."""


@dataclass
class Stage:
    """One restartable stage process and its kill schedule."""

    name: str
    args: list[str]
    schedule: Sequence[Kill]
    """The kill of each incarnation, in turn (cycled)."""
    most: int | None = None
    """Kills at the most (None: no limit)."""
    restart_last: bool = True
    """Restart it after its last kill, to run until the loop ends; if False, the
    catch-up after the loop is its restart."""
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    kill_at: float | None = None
    kills: int = 0
    kills_after_work: int = 0
    logs: list[Path] = field(default_factory=list)
    _lifetime: float = 0.0
    _stored_at_start: int = 0

    @property
    def next_kill(self) -> Kill:
        """This incarnation's kill."""
        return self.schedule[(len(self.logs) - 1) % len(self.schedule)]

    @property
    def waits_for(self) -> Callable[[], int] | None:
        """The count of stored work this incarnation's lifetime is counted from."""
        return self.next_kill.after

    @property
    def done(self) -> bool:
        """Killed as often as it may be."""
        return self.most is not None and self.kills >= self.most

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
        self.started = time.monotonic()
        self._stored_at_start = self.waits_for() if self.waits_for is not None else 0
        self._lifetime = rng.uniform(*self.next_kill.within)
        self.kill_at = self.started + self._lifetime if self.waits_for is None else None

    def worked(self) -> bool:
        """This incarnation has stored work (cheap to ask: no Spark)."""
        stored = self.waits_for
        return stored is not None and stored() > self._stored_at_start

    def due(self, now: float) -> bool:
        """Time to kill it (fixing the moment once the work it waits for shows)."""
        if self.done or self.process is None:
            return False
        if self.kill_at is None and self.worked():
            self.kill_at = now + self._lifetime
        return self.kill_at is not None and now >= self.kill_at

    def kill(self) -> None:
        assert self.process is not None
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.kills += 1
        self.kills_after_work += self.waits_for is not None
        if self.done and not self.restart_last:
            self.process = None

    def stop(self) -> None:
        """Kill it for good (the end of the loop, or a failure)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def died_by_itself(self) -> str | None:
        """The log of a run that ended without being killed (a real failure)."""
        if self.process is not None and self.process.poll() is not None:
            return self.logs[-1].read_text(errors="replace")[-3000:]
        return None


def kill_and_restart(
    stages: list[Stage],
    config: Path,
    logs: Path,
    rng: random.Random,
    *,
    enough: Callable[[list[Stage]], bool],
    timeout: float,
) -> None:
    """Start every stage, then kill and restart each when due until ``enough(stages)``;
    every stage is killed for good at the end. A stage that exits by itself fails."""
    for stage in stages:
        stage.start(config, logs, rng)
    deadline = time.monotonic() + timeout
    try:
        while not enough(stages):
            assert time.monotonic() < deadline, {s.name: s.kills for s in stages}
            for stage in stages:
                failure = stage.died_by_itself()
                assert failure is None, f"{stage.name} exited on its own:\n{failure}"
                if stage.due(time.monotonic()):
                    stage.kill()
                    if stage.process is not None:
                        stage.start(config, logs, rng)
            time.sleep(0.1)
    finally:
        for stage in stages:
            stage.stop()


def table_snapshots(warehouse: Path, namespace: str, table: str) -> Callable[[], int]:
    """The count of ``table``'s snapshots, from its newest metadata file (a Hadoop
    catalog's folder: one small file read, no Spark). Creating a table or setting a
    property makes no snapshot; storing rows does."""
    location = str(warehouse / namespace / table)

    def count() -> int:
        try:
            newest = Path(table_metadata(location))
            return len(json.loads(newest.read_text()).get("snapshots", []))
        except (OSError, ValueError):  # not made yet, replaced, or half-visible: 0 for now
            return 0

    return count


def crash_stages(
    warehouse: Path, capture_kills: int | None, *, spark_kills: int | None = 1
) -> list[Stage]:
    """Capture killed 0.5–4 s after each start (``capture_kills`` times at the most, its
    restarts start no JVM); the ledger and the merge ``spark_kills`` times at the most.
    With 1: 4–20 s after their start (Spark starting, tables being created), and not
    restarted (the catch-up resumes after the kill). With more or None: restarted, and
    every other kill :data:`MID_WORK` after they first stored work instead (a new
    snapshot of the customers ledger or base table, written before the orders')."""

    def schedule(table: str) -> list[Kill]:
        starting = Kill((4.0, 20.0))
        mid_work = Kill(MID_WORK, after=table_snapshots(warehouse, NAMESPACE, table))
        return [starting] if spark_kills == 1 else [starting, mid_work]

    restart = spark_kills != 1
    return [
        Stage("capture", ["capture"], [Kill((0.5, 4.0))], most=capture_kills),
        Stage("stream", ["stream"], schedule("customers_cdc"), spark_kills, restart),
        Stage("merge", ["merge"], schedule("customers"), spark_kills, restart),
    ]


def crash_run(
    root: Path,
    warehouse: Path,
    server: MariaDBServer,
    spark: SparkSession,
    stages: list[Stage],
    *,
    enough: Callable[[list[Stage]], bool],
    seed: int = 20,
    timeout: float = 240,
) -> tuple[ShopCounts, list[TableVerdict]]:
    """The live shop on ``server`` (writing all along), bootstrapped, then ``stages``
    killed and restarted until ``enough``; then the writes stop, capture reads to the end
    of the binlog, the last events are streamed and merged, and every table verified."""
    rng = random.Random(seed)
    workload = start_shop(server, seed=seed)
    workload.pause = 0.005
    pipe = Pipeline.live(
        root,
        warehouse,
        NAMESPACE,
        server,
        spark,
        schedule={"stream_interval": "1s", "merge_interval": "2s"},
    )
    source = pipe.config.sources[0]
    workload.start()
    try:
        Bootstrap(spark, pipe.pipeline, source, chunk_rows=5_000).run()
        logs = root / "logs"
        logs.mkdir()
        kill_and_restart(stages, pipe.config_path, logs, rng, enough=enough, timeout=timeout)
    finally:
        counts = workload.stop()
    run_capture(pipe.config, source, follow=False)
    pipe.stream()
    pipe.merge()
    return counts, run_verify(pipe.pipeline, spark, None)
