"""A private Confluent-compatible schema registry on loopback, for tests and benches.

The server is ``rivven-schema`` (a Rust crate, Apache-2.0; ``scripts/install.sh --tests``
installs it with ``cargo install``): a small Rust program serving the Confluent REST API (subjects,
versions, ``/schemas/ids/{id}``) from memory. It is the registry the integration tests
talk HTTP to through confluent-kafka's ``SchemaRegistryClient``, so producer, ledger and
a killed child process share one registry, as they would in production. Apicurio
Registry could not be built from Maven Central (docs/registry.md says why).

Its global compatibility level is set to ``NONE`` once it answers (``PUT /config``; the
``--compatibility`` flag of 0.0.22 is only logged): icetide checks each version against
the subject's history itself before applying it (``registry.compatibility``), and the
tests register incompatible versions on purpose to see them refused there::

    with RegistryServer() as registry:
        client = SchemaRegistryClient({"url": registry.url})

Protobuf: the server wants ``.proto`` text and does not answer ``format=serialized``
(it returns the text). Capture registers ``.proto`` text printed from its descriptor and
the reader compiles the text back with protoc
(:mod:`icetide.schema.convert.proto_text`), so Protobuf subjects run through it too.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from icetide.devservers.errors import LocalServerError
from icetide.devservers.lifecycle import LocalServer, terminate

PROGRAM = "rivven-schema"
VERSION = "0.0.22"
"""The version ``scripts/install.sh`` installs (0.0.x: the pin keeps its API still)."""
_INSTALL_HINT = (
    "run `make install-tests` (scripts/install.sh --tests runs "
    f"`cargo install --locked {PROGRAM} --version {VERSION}`)"
)


def registry_program() -> Path:
    """The installed server binary (on PATH, or cargo's bin folder)."""
    found = shutil.which(PROGRAM)
    if found:
        return Path(found)
    cargo = Path.home() / ".cargo" / "bin" / PROGRAM
    if cargo.is_file():
        return cargo
    raise LocalServerError(
        f"the schema registry server {PROGRAM} is not installed", hint=_INSTALL_HINT
    )


class RegistryServer(LocalServer):
    """One registry process on a free port of 127.0.0.1 (see module doc)."""

    STOP_TIMEOUT = 10.0

    def __init__(
        self, base: Path | None = None, *, startup_timeout: float = 30.0, keep: bool = False
    ) -> None:
        super().__init__(base, "icetide-registry-", keep)
        self._startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The base URL confluent-kafka's client and ``transport.registry.url`` take."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RegistryServer:
        """Start the server and wait until it answers ``GET /subjects``."""
        if self._process is not None and self._process.poll() is None:
            return self
        program = registry_program()
        self.base.mkdir(parents=True, exist_ok=True)

        def attempt() -> None:
            command = [str(program), "serve", "--host", "127.0.0.1", "--port", str(self.port)]
            command += ["--log-level", "warn"]
            with (self.base / "registry.out").open("ab") as log:
                self._process = subprocess.Popen(
                    command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
            self._wait_until_it_connects(
                PROGRAM,
                lambda: urllib.request.urlopen(f"{self.url}/subjects", timeout=2),
                urllib.error.URLError,
                self.log_tail,
                self._alive,
            )

        self._start_on_a_free_port(attempt, lambda: "Address already in use" in self.log_tail())
        request = urllib.request.Request(
            f"{self.url}/config",
            data=json.dumps({"compatibility": "NONE"}).encode(),
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
            method="PUT",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            if json.load(answer).get("compatibilityLevel") != "NONE":
                raise LocalServerError(f"{PROGRAM} kept its compatibility level", hint="")
        return self

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server's output."""
        path = self.base / "registry.out"
        text = path.read_text(errors="replace").splitlines() if path.exists() else []
        return "\n".join(text[-lines:])

    def _alive(self) -> None:
        if self._process is None or self._process.poll() is not None:
            raise LocalServerError(
                f"{PROGRAM} exited:\n{self.log_tail()}", hint="see the server output above"
            )

    def _terminate(self, timeout: float = STOP_TIMEOUT) -> None:
        process, self._process = self._process, None
        terminate(process, timeout)
