"""The same pipeline on a real Spark standalone cluster (a master and a worker started from
the pyspark installation on loopback): bootstrap, capture, stream and merge with
``spark.master`` pointing at it, in a child process; ``verify`` must match.

Nothing is shared through a local folder: the tables live on the run's object store
behind its REST catalog, the worker has a working folder of its own, and no
``PYTHONPATH`` is set anywhere. The executors run the icetide code the driver ships them
(``build_session`` adds the package as a zip): the child asks an executor where it
imported icetide from."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pyspark
import pytest
import yaml

from icetide.demo.lakehouse import ACCESS_KEY_ENV, SECRET_KEY_ENV, Lakehouse
from icetide.demo.live import start_shop, write_live_pipeline
from icetide.devservers.mariadb import MariaDBServer
from icetide.devservers.objectstore import ObjectStoreServer
from icetide.devservers.rest_catalog import RestCatalogServer
from tests.integration.harness import REPO
from tests.integration.test_cli_process import free_port, wait_until

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"


@contextmanager
def daemon(
    args: list[str], log: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A Spark daemon in the foreground, in its own process group, ended afterwards."""
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_NO_DAEMONIZE": "1",
        **(env or {}),
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(SPARK_CLASS), *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        try:
            os.killpg(proc.pid, 15)
            proc.wait(60)
        except ProcessLookupError:  # it had exited, with all of its group
            proc.wait()
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


def master_state(ui_port: int) -> dict[str, Any]:
    """The master UI's ``/json/``; empty while the UI is not up yet (refused, or an empty
    answer while it is still starting: seen once in a full-suite run)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
            state = json.loads(r.read())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def alive_workers(ui_port: int) -> int:
    """Workers the master's UI lists as alive."""
    workers = master_state(ui_port).get("workers", [])
    return sum(1 for w in workers if w.get("state") == "ALIVE")


def exited_or_up(proc: subprocess.Popen[bytes], ui_port: int, url: str) -> bool:
    """Whether the master has exited, or its UI reports ``url``."""
    return proc.poll() is not None or master_state(ui_port).get("url") == url


@contextmanager
def standalone_master(log: Path, attempts: int = 3) -> Iterator[tuple[str, int]]:
    """A master that is up, as (its URL, its UI port), before any worker is given the URL.

    The ports come from ``free_port()``, so another process can take one before the master
    binds it. Spark would then move to the next port, and a worker given the first one
    reaches whatever holds it (a full-suite run once met an HTTP server there). So the
    master may not move (``spark.port.maxRetries=0``): it exits instead, and is started
    again on new ports. It counts as up once its UI reports the URL asked for."""
    no_moving = {"SPARK_MASTER_OPTS": "-Dspark.port.maxRetries=0"}
    for _ in range(attempts):
        port, ui = free_port(), free_port()
        url = f"spark://127.0.0.1:{port}"
        args = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        args += ["--port", str(port), "--webui-port", str(ui)]
        with daemon(args, log, env=no_moving) as proc:
            wait_until(partial(exited_or_up, proc, ui, url), "the master to start or exit")
            if proc.poll() is None:
                yield url, ui
                return
    raise AssertionError(f"the master did not start in {attempts} attempts: {log.read_text()}")


def worker_args(master: str, work_dir: Path) -> list[str]:
    """One worker of one core for ``master``. Its applications' folders (each with a copy
    of the jars) go to ``work_dir``, not under the pyspark install, where they would pile
    up run after run."""
    args = ["org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1"]
    args += ["--cores", "1", "--memory", "1g", "--webui-port", str(free_port())]
    return [*args, "--work-dir", str(work_dir)]


@pytest.mark.long
def test_bootstrap_stream_merge_on_a_standalone_cluster_verify_matches(
    tmp_path: Path, object_store: ObjectStoreServer, rest_catalog: RestCatalogServer
) -> None:
    lakehouse = Lakehouse(rest_catalog.url, object_store.endpoint, rest_catalog.warehouse)
    store = object_store.endpoint
    keys = {ACCESS_KEY_ENV: store.access_key, SECRET_KEY_ENV: store.secret_key}
    namespace = f"cluster_{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    # The master is up before the worker is given its URL; the worker's JVM starts while
    # MariaDB starts and the shop is seeded.
    with (
        standalone_master(tmp_path / "master.log") as (master, ui),
        daemon(worker_args(master, tmp_path / "worker"), tmp_path / "worker.log"),
        MariaDBServer() as server,
    ):
        start_shop(server, seed=17)
        path = write_live_pipeline(
            tmp_path,
            server,
            lakehouse=lakehouse,
            namespace=namespace,
            master=master,
            extra={"state_dir": "./state"},
        )
        doc = yaml.safe_load(path.read_text())
        doc["spark"]["conf"] = {
            "spark.executor.memory": "768m",
            "spark.executor.cores": "1",
            "spark.cores.max": "1",
        }
        path.write_text(yaml.safe_dump(doc))
        wait_until(lambda: alive_workers(ui) == 1, "a worker registered with the master")
        cluster_up = time.monotonic() - started
        result = subprocess.run(
            [sys.executable, "-m", "tests.integration.cluster_child", str(path)],
            cwd=REPO,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | keys,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["master"] == master and report["executors"] >= 2, report  # driver + 1
    assert report["matches"] and all(report["matches"].values()), report
    assert report["merged"]["customers"] > 0 and report["merged"]["orders"] > 0, report
    # The executor ran the code the driver shipped, not an icetide of its own Python.
    assert re.search(r"/icetide-[0-9a-f]+\.zip/icetide/__init__\.py$", report["code"]), report
    print(
        json.dumps(
            {
                "cluster_start_seconds": round(cluster_up, 1),
                "total_seconds": round(time.monotonic() - started, 1),
            }
        )
    )
