"""A capture child whose ``icetide run`` was killed with SIGKILL stops by itself.

``icetide run`` starts each capture in a session of its own and stops it on its way out;
a supervisor killed outright cannot. The child then notices it was re-parented and stops
as it would on SIGTERM (its records durable, its offset saved, its landing lock free),
instead of capturing on unseen beside the next ``icetide run``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import yaml

from icetide.capture.transport.files import check_landing_free
from icetide.devservers.mariadb import MariaDBServer
from icetide.stopping import SUPERVISOR_ENV
from tests.integration.harness import REPO

LAUNCHER = textwrap.dedent(
    f"""
    import os, subprocess, sys, time
    log = open(sys.argv[1], "wb")
    child = subprocess.Popen(
        [sys.executable, "-m", "icetide.cli", *sys.argv[2:]],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={{**os.environ, {SUPERVISOR_ENV!r}: str(os.getpid())}},
    )
    print(child.pid, flush=True)
    time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _until(condition: object, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not callable(condition) or not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_capture_stops_cleanly_when_its_supervisor_is_killed(
    tmp_path: Path, mariadb: MariaDBServer
) -> None:
    db = f"orphan_{os.getpid()}"
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}`")
        cur.execute(f"CREATE TABLE `{db}`.`t` (id INT PRIMARY KEY)")
    (tmp_path / "schemas").mkdir()
    schema = {
        "table": "t",
        "primary_key": ["id"],
        "columns": [{"id": 1, "name": "id", "type": "int", "nullable": False}],
    }
    (tmp_path / "schemas" / "t.yaml").write_text(yaml.safe_dump(schema))
    source = mariadb.source_entry("shop", server_id=6100 + os.getpid() % 1000, heartbeat="1s")
    config = tmp_path / "icetide.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "pipeline": "orphan",
                "state_dir": "./state",
                "sources": [source],
                "transport": {"type": "files", "path": "./landing", "roll_interval": "1s"},
                "tables": [{"name": "t", "source": f"{db}.t", "schema": "schemas/t.yaml"}],
            }
        )
    )
    log = tmp_path / "capture.log"
    args = ["capture", "--source", "shop", "--from-now", "-c", str(config)]
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(log), *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert launcher.stdout is not None
        capture = int(launcher.stdout.readline())
        _until(lambda: b"reading the mysql log" in log.read_bytes(), "capture's start")
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        _until(lambda: not _alive(capture), "the orphaned capture to stop", timeout=30.0)
    finally:
        launcher.kill()
        if _alive(capture):
            os.kill(capture, signal.SIGKILL)
    said = log.read_text()
    assert "icetide capture stopped by SIGTERM: nothing lost" in said, said
    assert "Traceback" not in said, said
    check_landing_free(tmp_path / "landing", "shop")  # its lock went with it
