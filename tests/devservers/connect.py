"""A private Kafka Connect worker (standalone mode) with the real Debezium connectors.

The worker runs from the ``org.apache.kafka:connect-runtime`` jars that ``icetide jars
fetch --dev`` resolved (the broker's version, with JsonConverter), as
``java -cp <jars> org.apache.kafka.connect.cli.ConnectStandalone worker.properties`` —
what Kafka's ``connect-standalone.sh`` does. The Debezium MariaDB and PostgreSQL
connectors, resolved the same way from Maven Central, are its plugins: each one's jar
folder is linked under ``<base>/plugins`` (Connect loads every plugin folder in its own
class loader, as a Debezium distribution archive unpacked there would be). The worker
listens for its REST API on a free port of 127.0.0.1 and keeps its source offsets in a
file under ``base``; connectors are added and removed over REST while it runs, so one
worker serves a whole test run::

    with KafkaServer() as kafka, ConnectWorker(kafka.bootstrap_servers) as connect:
        connect.add("shop", {"connector.class": MARIADB_CONNECTOR, ...})
        connect.wait_running("shop")

The worker's converters default to JsonConverter with schemas on (Kafka's defaults); a
connector's own ``key.converter`` / ``value.converter`` settings override them.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from icetide.devservers.errors import LocalServerError
from icetide.devservers.java import server_command
from icetide.devservers.lifecycle import LocalServer
from icetide.spark.jars import (
    CONNECT_LOGGING,
    CONNECT_RUNTIME,
    DEBEZIUM_MARIADB,
    DEBEZIUM_POSTGRES,
    Coordinate,
    default_jars_dir,
    fetched,
)

MARIADB_CONNECTOR = "io.debezium.connector.mariadb.MariaDbConnector"
POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
_PLUGINS = (DEBEZIUM_MARIADB, DEBEZIUM_POSTGRES)
_FETCH_HINT = "run `icetide jars fetch --dev` (scripts/install.sh does) to resolve them"
_HEAP = "-Xmx512m"


def _jars(folder: Path, coordinate: str) -> list[Path]:
    found = fetched(folder, Coordinate.parse(coordinate, path="dev packages"))
    if not found:
        raise LocalServerError(f"the jars of {coordinate} are not fetched", hint=_FETCH_HINT)
    return found


def worker_properties(base: Path, bootstrap: str, port: int) -> str:
    """``worker.properties`` of a standalone worker on loopback, sized for tests."""
    settings = {
        "bootstrap.servers": bootstrap,
        "key.converter": JSON_CONVERTER,
        "value.converter": JSON_CONVERTER,
        "offset.storage.file.filename": str(base / "offsets.dat"),
        "offset.flush.interval.ms": "1000",
        "plugin.path": str(base / "plugins"),
        # Every plugin jar declares itself for Java's ServiceLoader: no class scan.
        "plugin.discovery": "service_load",
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


class ConnectWorker(LocalServer):
    """A private standalone Kafka Connect worker writing into the broker at ``bootstrap``."""

    STOP_TIMEOUT = 30.0

    def __init__(
        self,
        bootstrap: str,
        base: Path | None = None,
        *,
        jars_dir: Path | None = None,
        startup_timeout: float = 120.0,
        keep: bool = False,
    ) -> None:
        super().__init__(base, "icetide-connect-", keep)
        self.bootstrap = bootstrap
        self._jars_dir = jars_dir or default_jars_dir()
        self._startup_timeout = startup_timeout

    @property
    def url(self) -> str:
        """The REST API's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ConnectWorker:
        """Link the plugins, write the worker's properties, start it, wait for its API."""
        if self.running:
            return self
        self.base.mkdir(parents=True, exist_ok=True)
        plugins = self.base / "plugins"
        plugins.mkdir(exist_ok=True)
        for coordinate in _PLUGINS:
            link = plugins / Coordinate.parse(coordinate).artifact
            target = _jars(self._jars_dir, coordinate)[0].parent
            if not link.exists():
                link.symlink_to(target, target_is_directory=True)
        properties = self.base / "worker.properties"
        properties.write_text(worker_properties(self.base, self.bootstrap, self.port))
        classpath = [
            *_jars(self._jars_dir, CONNECT_RUNTIME),
            *_jars(self._jars_dir, CONNECT_LOGGING),
        ]
        command = server_command(
            _HEAP,
            os.pathsep.join(str(jar) for jar in classpath),
            "org.apache.kafka.connect.cli.ConnectStandalone",
            str(properties),
            flags=(
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-Dorg.slf4j.simpleLogger.log.io.debezium=info",
            ),
        )
        with (self.base / "connect.out").open("ab") as log:
            self._process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        try:
            self._wait_ready()
        except BaseException:
            self._terminate(5)
            raise
        return self

    # --- connectors -------------------------------------------------------------------

    def add(self, name: str, config: Mapping[str, str]) -> None:
        """Create (or reconfigure) connector ``name`` with ``config``."""
        self._call("PUT", f"/connectors/{name}/config", {"name": name, **config})

    def remove(self, name: str) -> None:
        """Delete connector ``name`` (its offsets stay in the worker's file)."""
        with contextlib.suppress(LocalServerError):
            self._call("DELETE", f"/connectors/{name}")

    def status(self, name: str) -> dict[str, Any]:
        """The connector's status as the REST API reports it."""
        answer = self._call("GET", f"/connectors/{name}/status")
        return answer if isinstance(answer, dict) else {}

    def wait_running(self, name: str, timeout: float = 120.0) -> None:
        """Until the connector and its task run; a failed one raises with its trace."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            try:
                status = self.status(name)
            except LocalServerError:
                status = {}
            tasks = status.get("tasks") or []
            states = [status.get("connector", {}).get("state")] + [t.get("state") for t in tasks]
            if "FAILED" in states:
                traces = [t.get("trace", "") for t in tasks] + [
                    status.get("connector", {}).get("trace", "")
                ]
                raise LocalServerError(
                    f"connector {name} failed:\n" + "\n".join(t for t in traces if t)[:4000],
                    hint="see the worker output in " + str(self.base / "connect.out"),
                )
            if tasks and all(s == "RUNNING" for s in states):
                return
            if time.monotonic() > deadline:
                raise LocalServerError(
                    f"connector {name} is not running after {timeout:.0f}s: {status}",
                    hint="see the worker output in " + str(self.base / "connect.out"),
                )
            time.sleep(0.2)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the worker's console output."""
        path = self.base / "connect.out"
        text = path.read_text(errors="replace").splitlines() if path.exists() else []
        return "\n".join(text[-lines:])

    # --- internals --------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise LocalServerError(
                f"Kafka Connect {method} {path}: HTTP {exc.code}: {detail}",
                hint="see the worker output in " + str(self.base / "connect.out"),
            ) from None
        return json.loads(text) if text.strip() else None

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self._startup_timeout
        while True:
            self._check_alive()
            try:
                with urllib.request.urlopen(self.url + "/connector-plugins", timeout=2) as r:
                    plugins = json.loads(r.read().decode())
                if any(p.get("class") == MARIADB_CONNECTOR for p in plugins):
                    return
            except (OSError, ValueError):
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise LocalServerError(
                    f"Kafka Connect did not answer within {self._startup_timeout:.0f}s:\n"
                    f"{self.log_tail()}",
                    hint="the machine may be overloaded; see the worker output above",
                )
            if self._process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._process.wait(0.3)

    def _check_alive(self) -> None:
        if self._process is None or self._process.poll() is not None:
            raise LocalServerError(
                f"the Kafka Connect worker exited:\n{self.log_tail()}",
                hint="see the worker output above",
            )
