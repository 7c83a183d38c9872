"""A private S3-compatible object store on loopback, for tests and the demo.

The server is SeaweedFS's ``weed`` (Apache-2.0), built once per machine from the Go
module ``github.com/seaweedfs/seaweedfs`` by ``scripts/install.sh --tests`` (see
:data:`SEAWEEDFS_VERSION`), run as ``weed mini``: one process holding a master, a volume
server, a filer (its metadata in LevelDB), the S3 gateway and the admin server that
schedules its upkeep, every one on free ports of 127.0.0.1, all data in ``base``. Its
S3 API has what Iceberg's ``S3FileIO`` uses: path-style addressing, multipart upload,
ListObjectsV2, batch DeleteObjects and HEAD; requests are signed (SigV4) with the
per-server key this module makes up, which the gateway checks. docs/deploy.md says why
this store, and what building and starting it cost::

    with ObjectStoreServer() as store:
        store.endpoint.url, store.endpoint.iceberg_properties()

Buckets named in ``buckets`` (``warehouse`` by default) exist once :meth:`start`
returns, and the store has taken a first write: a start that returned is a store
ready for Iceberg.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from icetide.devservers.errors import LocalServerError
from icetide.devservers.lifecycle import LocalServer
from icetide.devservers.ports import free_port
from icetide.spark.jars import S3_FILE_IO

if TYPE_CHECKING:
    from pyarrow.fs import S3FileSystem

PROGRAM = "weed"
SEAWEEDFS_MODULE = "github.com/seaweedfs/seaweedfs"
SEAWEEDFS_VERSION = "v0.0.0-20261109003541-7506e5f91cd6"
"""The module version ``scripts/install.sh --tests`` builds (the Go module proxy's
pseudo-version of the 2026-11-09 commit; SeaweedFS tags releases as ``4.xx``, which are
not Go module versions)."""
_INSTALL_HINT = (
    "run `scripts/install.sh --tests` from icetide's repository (`make install-tests`), "
    "which builds it once with Go (up to half an hour); or by hand (`go install` refuses "
    'the module: its go.mod has a replace directive): cd "$(go mod download -json '
    f"{SEAWEEDFS_MODULE}@{SEAWEEDFS_VERSION} | python3 -c 'import json,sys; "
    'print(json.load(sys.stdin)["Dir"])\')" && go build -o "$(go env GOPATH)/bin/weed" '
    "./weed"
)
# What mini says when a port it was given is taken, before or while binding it.
_PORT_TAKEN = ("is not available on", "address already in use")
REGION = "us-east-1"
"""The region clients sign for; the store accepts any, the AWS SDK wants one."""
COMPONENTS = ("master", "volume", "filer", "s3", "admin")
"""The parts of ``weed mini`` that listen: each gets an HTTP and a gRPC port."""


@dataclass(frozen=True)
class S3Endpoint:
    """Where an S3 client reaches the store, and the key it signs with."""

    url: str
    access_key: str
    secret_key: str = ""
    region: str = REGION

    def __repr__(self) -> str:  # the secret never shows in a log or a test report
        return f"S3Endpoint(url={self.url!r}, access_key={self.access_key!r}, secret_key=***)"

    def iceberg_properties(self) -> dict[str, str]:
        """Catalog properties of Iceberg's ``S3FileIO`` (Java) on this store."""
        return {
            "io-impl": S3_FILE_IO,
            "s3.endpoint": self.url,
            "s3.path-style-access": "true",
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "client.region": self.region,
        }

    def pyiceberg_properties(self) -> dict[str, str]:
        """PyIceberg FileIO properties (its PyArrow S3 file system) on this store."""
        return {
            "s3.endpoint": self.url,
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.region": self.region,
            "s3.force-virtual-addressing": "false",
        }

    def filesystem(self, *, allow_bucket_creation: bool = False) -> S3FileSystem:
        """A PyArrow S3 file system on this store (path-style, no retries of its own)."""
        from pyarrow import fs

        scheme, _, address = self.url.partition("://")
        return fs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            region=self.region,
            scheme=scheme,
            endpoint_override=address,
            force_virtual_addressing=False,
            allow_bucket_creation=allow_bucket_creation,
            retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=1),
            connect_timeout=2,
            request_timeout=10,
        )


def weed_program() -> Path:
    """The installed ``weed`` binary (on PATH, or Go's bin folder)."""
    found = shutil.which(PROGRAM)
    if found:
        return Path(found)
    gopath = os.environ.get("GOPATH") or str(Path.home() / "go")
    built = Path(gopath.split(os.pathsep)[0]) / "bin" / PROGRAM
    if built.is_file():
        return built
    raise LocalServerError("the object store server `weed` is not installed", hint=_INSTALL_HINT)


def s3_identities(access_key: str, secret_key: str) -> dict[str, object]:
    """The gateway's ``-s3.config``: one identity allowed everything, no anonymous one."""
    return {
        "identities": [
            {
                "name": "icetide",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"],
            }
        ]
    }


def server_arguments(
    base: Path, ports: dict[str, int], grpc: dict[str, int], metrics_port: int | None = None
) -> list[str]:
    """``weed mini`` flags of a one-node store on loopback with everything in ``base``.

    Every port is given (mini moves a default port that is taken, but fails on a given
    one, which the lifecycle then retries on other ports).

    >>> ports = dict.fromkeys(COMPONENTS, 1)
    >>> args = server_arguments(Path("/b"), ports, dict.fromkeys(COMPONENTS, 2))
    >>> "-master.telemetry=false" in args, "-s3.port=1" in args, "-ip.bind=127.0.0.1" in args
    (True, True, True)
    """
    args = [
        "mini",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-dir={base / 'data'}",
        f"-s3.config={base / 's3.json'}",
        # No usage report leaves the machine.
        "-master.telemetry=false",
        # Only the S3 gateway: no WebDAV, no admin pages, and none of the listeners on
        # fixed ports (the built-in Iceberg and Lance catalogs, the admin's old port):
        # icetide's REST catalog is Iceberg's own server.
        "-webdav=false",
        "-admin.ui=false",
        "-admin.port.legacy=0",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-filer.localSocket={base / 'filer.sock'}",
        f"-s3.localSocket={base / 's3.sock'}",
    ]
    for component in COMPONENTS:
        args += [f"-{component}.port={ports[component]}"]
        args += [f"-{component}.port.grpc={grpc[component]}"]
    if metrics_port is not None:  # the S3 gateway's Prometheus counters (requests, seconds)
        args += [f"-metricsPort={metrics_port}"]
    return args


class ObjectStoreServer(LocalServer):
    """A private ``weed mini`` with its S3 gateway on ``self.port`` (see module doc)."""

    STOP_TIMEOUT = 20.0

    def __init__(
        self,
        base: Path | None = None,
        *,
        buckets: Sequence[str] = ("warehouse",),
        startup_timeout: float = 120.0,
        keep: bool = False,
        metrics: bool = False,
    ) -> None:
        super().__init__(base, "icetide-objectstore-", keep)
        self.buckets = tuple(buckets)
        self._metrics = metrics
        self._metrics_port: int | None = None
        self._startup_timeout = startup_timeout
        self._ports: dict[str, int] = {}
        self._grpc: dict[str, int] = {}
        self.endpoint = S3Endpoint(
            self.url, access_key="icetide" + secrets.token_hex(6), secret_key=secrets.token_hex(20)
        )
        """The S3 endpoint and key (its port is final once :meth:`start` returned)."""

    @property
    def url(self) -> str:
        """The S3 endpoint (path-style: ``<url>/<bucket>/<key>``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str | None:
        """The S3 gateway's Prometheus page (``metrics=True``): request counts and
        seconds per action, as the benchmarks read them; ``None`` without it."""
        if self._metrics_port is None:
            return None
        return f"http://127.0.0.1:{self._metrics_port}/metrics"

    def start(self) -> ObjectStoreServer:
        """Start the server, create the buckets, and wait until a write goes through."""
        if self.running:
            return self
        program = weed_program()
        self.base.mkdir(parents=True, exist_ok=True)
        (self.base / "data").mkdir(exist_ok=True)
        config = self.base / "s3.json"
        key = self.endpoint
        config.touch(mode=0o600)
        config.write_text(json.dumps(s3_identities(key.access_key, key.secret_key)))
        log_start = 0

        def attempt() -> None:
            nonlocal log_start
            log_start = self._log_size()
            self._pick_ports()
            self._launch(program)
            self._wait_ready()

        self._start_on_a_free_port(
            attempt, lambda: any(text in self._log_since(log_start) for text in _PORT_TAKEN)
        )
        return self

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server's output."""
        path = self.base / "weed.out"
        text = path.read_text(errors="replace").splitlines() if path.exists() else []
        return "\n".join(text[-lines:])

    # --- internals --------------------------------------------------------------------

    def _pick_ports(self) -> None:
        """A free port for each component's HTTP and gRPC listener; the S3 gateway's HTTP
        port is ``self.port`` (which the lifecycle renews after a lost race)."""
        taken = {self.port}

        def fresh() -> int:
            while (port := free_port()) in taken:
                pass
            taken.add(port)
            return port

        self._ports = {c: self.port if c == "s3" else fresh() for c in COMPONENTS}
        self._grpc = {c: fresh() for c in COMPONENTS}
        self._metrics_port = fresh() if self._metrics else None
        self.endpoint = S3Endpoint(self.url, self.endpoint.access_key, self.endpoint.secret_key)

    def _launch(self, program: Path) -> None:
        # HOME is the server's folder: weed reads master.toml / filer.toml from
        # ~/.seaweedfs too, and a user's must not change a private store.
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TMPDIR")}
        env["HOME"] = str(self.base)
        command = [
            str(program),
            *server_arguments(self.base, self._ports, self._grpc, self._metrics_port),
        ]
        self._spawn(command, env, "weed.out")

    def _wait_ready(self) -> None:
        """Until the gateway answers HTTP, then until each bucket exists and took a write
        (the volume server registers with the master a moment after the gateway is up)."""
        deadline = time.monotonic() + self._startup_timeout
        last_error: Exception | None = None
        while not self._answers():
            self._check(deadline, None)
        s3 = self.endpoint.filesystem(allow_bucket_creation=True)
        pending = list(self.buckets)
        while pending:
            self._check(deadline, last_error)
            bucket = pending[0]
            try:
                s3.create_dir(bucket)
                with s3.open_output_stream(f"{bucket}/.icetide-probe") as probe:
                    probe.write(b"ready")
                s3.delete_file(f"{bucket}/.icetide-probe")
            except OSError as exc:  # not ready yet: no writable volume so far
                last_error = exc
                time.sleep(0.2)
                continue
            pending.pop(0)

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True  # an S3 error document: the gateway is listening
        except OSError:
            if self._process is not None:
                try:
                    self._process.wait(0.2)
                except subprocess.TimeoutExpired:
                    pass
            return False

    def _check(self, deadline: float, last_error: Exception | None) -> None:
        if self._process is None or self._process.poll() is not None:
            raise LocalServerError(
                f"the object store (weed) exited:\n{self.log_tail()}",
                hint="see the server output above",
            )
        if time.monotonic() > deadline:
            raise LocalServerError(
                f"the object store did not take a write within {self._startup_timeout:.0f}s "
                f"(last error: {last_error}):\n{self.log_tail()}",
                hint="the machine may be overloaded; see the server output above",
            )

    def _log_size(self) -> int:
        path = self.base / "weed.out"
        return path.stat().st_size if path.exists() else 0

    def _log_since(self, offset: int) -> str:
        path = self.base / "weed.out"
        if not path.exists():
            return ""
        with path.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace").lower()

    def _terminate(self, timeout: float = STOP_TIMEOUT) -> None:
        super()._terminate(timeout)
        # Each gRPC listener also has a unix socket at a fixed place in /tmp, named by
        # its port; a server that was killed leaves them behind.
        for component, port in self._grpc.items():
            Path(f"/tmp/seaweedfs-{component}-grpc-{port}.sock").unlink(missing_ok=True)
