"""A private single-node Kafka broker (KRaft) in a temporary folder, for tests and benches.

The broker runs from the ``org.apache.kafka:kafka_2.13`` jars that ``icetide jars fetch
--dev`` resolved into the jar folder (:data:`KAFKA_COORDINATE`), as
``java -cp <jars> kafka.Kafka server.properties`` after ``kafka.tools.StorageTool
format``, exactly what Kafka's own ``kafka-server-start.sh`` and ``kafka-storage.sh``
do. It is broker and controller in one process, listens on two free ports of 127.0.0.1
only, and keeps its log folder in ``base`` so a :meth:`KafkaServer.restart` (or a
``kill -9`` and :meth:`KafkaServer.start`) finds every acknowledged message again::

    with KafkaServer() as kafka:
        producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap_servers})
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

from icetide.devservers.errors import LocalServerError
from icetide.devservers.java import server_command
from icetide.devservers.lifecycle import LocalServer
from icetide.devservers.ports import free_port
from icetide.spark.jars import KAFKA_BROKER, Coordinate, default_jars_dir, fetched

KAFKA_COORDINATE = Coordinate.parse(KAFKA_BROKER, path="dev packages")
"""The broker's jars (with their runtime closure); a dev-only package, never on Spark's path."""

_FETCH_HINT = "run `icetide jars fetch --dev` (scripts/install.sh does) to resolve the broker"
_HEAP = "-Xmx384m"


def broker_jars(folder: Path | None = None) -> list[Path]:
    """The broker's classpath from the jar folder, or a :class:`LocalServerError` saying how."""
    jars = fetched(folder or default_jars_dir(), KAFKA_COORDINATE)
    if not jars:
        raise LocalServerError(
            f"the Kafka broker jars ({KAFKA_COORDINATE}) are not fetched", hint=_FETCH_HINT
        )
    return jars


def cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def server_properties(base: Path, port: int, controller_port: int) -> str:
    """``server.properties`` of a one-node broker+controller on loopback, sized for tests."""
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(base / "logs"),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "true",
        # Every acknowledged message survives a kill -9 of the broker.
        "log.flush.interval.messages": "1",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


class KafkaServer(LocalServer):
    """A private KRaft broker with its logs in ``base`` (a new temp folder by default)."""

    STOP_TIMEOUT = 60.0

    def __init__(
        self,
        base: Path | None = None,
        *,
        jars_dir: Path | None = None,
        startup_timeout: float = 120.0,
        keep: bool = False,
    ) -> None:
        super().__init__(base, "icetide-kafka-", keep)
        self._jars_dir = jars_dir
        self.controller_port = free_port()
        self._startup_timeout = startup_timeout

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:<port>``, for producers, consumers and Spark's Kafka source."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> KafkaServer:
        """Format the log folder (first start only), start the broker, wait until it serves."""
        if self.running:
            return self
        self.base.mkdir(parents=True, exist_ok=True)
        properties = self.base / "server.properties"
        properties.write_text(server_properties(self.base, self.port, self.controller_port))
        if not (self.base / "logs" / "meta.properties").is_file():
            self._java(
                "kafka.tools.StorageTool",
                "format",
                # "=" form: a URL-safe base64 id may start with "-", which argparse would
                # take for an option (a flaky start, one run in 64).
                f"--cluster-id={cluster_id()}",
                f"--config={properties}",
                wait=True,
            )
        self._process = self._java("kafka.Kafka", str(properties), wait=False)
        try:
            self._wait_ready()
        except BaseException:
            self.kill()
            raise
        return self

    def kill(self) -> None:
        """``kill -9`` the broker: what a crash does (the log folder stays)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(30)

    def restart(self) -> KafkaServer:
        """Kill the broker and start it again on the same ports and logs."""
        self.kill()
        return self.start()

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the broker's console output."""
        path = self.base / "kafka.out"
        text = path.read_text(errors="replace").splitlines() if path.exists() else []
        return "\n".join(text[-lines:])

    # --- internals ----------------------------------------------------------------------

    def _java(self, main: str, *args: str, wait: bool) -> subprocess.Popen[bytes]:
        classpath = os.pathsep.join(str(jar) for jar in broker_jars(self._jars_dir))
        command = server_command(_HEAP, classpath, main, *args)
        with (self.base / "kafka.out").open("ab") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        if wait and process.wait() != 0:
            raise LocalServerError(
                f"{main} failed:\n{self.log_tail()}", hint="see the broker output above"
            )
        return process

    def _wait_ready(self) -> None:
        """Until the port accepts connections, then until a metadata request names a broker."""
        deadline = time.monotonic() + self._startup_timeout
        while not self._port_open():
            self._check_alive(deadline)
        from confluent_kafka.admin import AdminClient

        # One quiet client, dropped once the broker answers (librdkafka logs every retry).
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": "0"})
        try:
            while True:
                self._check_alive(deadline)
                try:
                    if admin.list_topics(timeout=2).brokers:
                        return
                except Exception:  # the controller is still electing itself: ask again
                    continue
        finally:
            del admin

    def _port_open(self) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                return True
        # Nothing listens yet: wait on the process (returns at once if it exits) instead
        # of spinning.
        if self._process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(0.2)
        return False

    def _check_alive(self, deadline: float) -> None:
        if self._process is None or self._process.poll() is not None:
            raise LocalServerError(
                f"the Kafka broker exited:\n{self.log_tail()}", hint="see the broker output above"
            )
        if time.monotonic() > deadline:
            raise LocalServerError(
                f"the Kafka broker did not answer within {self._startup_timeout:.0f}s:\n"
                f"{self.log_tail()}",
                hint="the machine may be overloaded; see the broker output above",
            )
