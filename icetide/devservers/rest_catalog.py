"""A private Iceberg REST catalog on a free port, its tables on the private object store.

The server is Iceberg's own ``org.apache.iceberg.rest.RESTCatalogServer``, the program
behind the project's reference REST-fixture image, run from Maven Central's jars: the
``test-fixtures`` jar of ``org.apache.iceberg:iceberg-open-api`` (the server class), the
``tests`` jar of ``iceberg-core`` (the servlet and the adapter it wraps), ``iceberg-core``,
``iceberg-aws`` (``S3FileIO``), Jetty 11, the SQLite JDBC driver and Hadoop's client
jars — each at the version Iceberg's own build pins. The POMs carry no test-fixture
dependencies, so :func:`fetch_server_jars` names them; ``icetide jars fetch --dev``
resolves them once per machine into the jar folder, beside the AWS SDK bundle
(:data:`~icetide.spark.jars.ICEBERG_AWS_BUNDLE`) that the server and Spark share.

It is configured as the image configures it, through ``CATALOG_*`` environment
variables (``CATALOG_IO__IMPL`` becomes the catalog property ``io-impl``): a JDBC
catalog whose own store is a SQLite file in the server's folder (a file, not
``:memory:``, so a restarted server finds its tables again, and no database server is
needed for it), the warehouse ``s3://<bucket>/<prefix>`` on the object store through
``S3FileIO`` with path-style access::

    with ObjectStoreServer() as store, RestCatalogServer(store.endpoint) as catalog:
        spark_conf = catalog.spark_catalog_conf("lake")

The server has no bind-address setting: it listens on every interface of the machine
(the port is a free one, the catalog lives as long as the process); clients use
``127.0.0.1``.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from icetide.devservers.errors import LocalServerError
from icetide.devservers.java import server_command
from icetide.devservers.lifecycle import LocalServer
from icetide.spark.jars import (
    ICEBERG_AWS_BUNDLE,
    Coordinate,
    copy_dependencies,
    default_jars_dir,
    fetched,
)

if TYPE_CHECKING:
    from icetide.devservers.objectstore import S3Endpoint

SERVER_MAIN = "org.apache.iceberg.rest.RESTCatalogServer"
ICEBERG_SERVER_VERSION = "1.10.1"
"""The Iceberg release the server runs. Spark's runtime is 1.10.2, but of 1.10.2 only
``iceberg-core`` and the Spark runtime resolved from the machine's Maven repository on
2026-12-02 (``iceberg-api``, ``-common``, ``-aws`` and the AWS bundle did not); a
catalog server speaks the REST protocol, which a patch release does not change."""
SERVER_JARS = Coordinate("org.apache.iceberg", "iceberg-open-api", ICEBERG_SERVER_VERSION)
"""The folder (in the jar folder's layout) holding the server's whole classpath."""

_V = ICEBERG_SERVER_VERSION
_SERVER_DEPENDENCIES: tuple[tuple[str, str, str, str], ...] = (
    ("org.apache.iceberg", "iceberg-open-api", _V, "test-fixtures"),
    ("org.apache.iceberg", "iceberg-core", _V, "tests"),
    ("org.apache.iceberg", "iceberg-core", _V, ""),
    ("org.apache.iceberg", "iceberg-aws", _V, ""),
    # The versions Iceberg 1.10's build pins (gradle/libs.versions.toml).
    ("org.eclipse.jetty", "jetty-servlet", "11.0.26", ""),
    ("org.xerial", "sqlite-jdbc", "3.50.3.0", ""),
    ("org.slf4j", "slf4j-simple", "2.0.17", ""),
    ("org.apache.hadoop", "hadoop-client-api", "3.4.1", ""),
    ("org.apache.hadoop", "hadoop-client-runtime", "3.4.1", ""),
)
"""What the fixture's Gradle build puts on its runtime classpath, as Maven dependencies
(group, artifact, version, classifier); Maven adds their own dependencies."""

_COMPLETE = ".complete"
_FETCH_HINT = "run `icetide jars fetch --dev` (scripts/install.sh does) to resolve them"
_HEAP = "-Xmx256m"
DEFAULT_WAREHOUSE = "s3://warehouse/rest"
"""The warehouse of a server started without one: bucket ``warehouse`` (which
:class:`~icetide.devservers.objectstore.ObjectStoreServer` creates), prefix ``rest``."""


def server_pom() -> str:
    """A throwaway POM whose dependencies are the server's classpath (see module doc)."""
    entries = []
    for group, artifact, version, classifier in _SERVER_DEPENDENCIES:
        extra = f"<classifier>{escape(classifier)}</classifier>" if classifier else ""
        entries.append(
            f"<dependency><groupId>{escape(group)}</groupId>"
            f"<artifactId>{escape(artifact)}</artifactId>"
            f"<version>{escape(version)}</version>{extra}</dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>dev.icetide.jars</groupId><artifactId>rest-catalog</artifactId>"
        "<version>1</version><packaging>pom</packaging>\n"
        "  <dependencies>\n    " + "\n    ".join(entries) + "\n  </dependencies>\n"
        "</project>\n"
    )


def fetch_server_jars(folder: Path, *, mvn: str = "mvn") -> bool:
    """Resolve the server's classpath into ``folder`` with Maven, unless already there.

    Returns whether anything was fetched. Like ``icetide jars fetch``: Maven as the
    machine is configured (no repository named here), a ``.complete`` marker written
    last so an interrupted fetch is redone.
    """
    if fetched(folder, SERVER_JARS) is not None:
        return False
    executable = shutil.which(mvn)
    if executable is None:
        raise LocalServerError(
            "Maven (mvn) is not installed, so the REST catalog's jars cannot be resolved",
            hint="apt-get install maven",
        )
    target = folder / SERVER_JARS.folder
    tail = copy_dependencies(executable, server_pom(), target)
    if tail is not None:
        raise LocalServerError(
            f"Maven could not resolve the Iceberg REST catalog server's jars:\n{tail}",
            hint="check that Maven reaches its repository (~/.m2/settings.xml)",
        )
    (target / _COMPLETE).write_text(f"{SERVER_JARS} (REST catalog server)\n")
    return True


def server_classpath(folder: Path | None = None) -> list[Path]:
    """The server's jars and the AWS SDK bundle, or a :class:`LocalServerError` saying how
    to fetch them."""
    folder = folder or default_jars_dir()
    bundle = Coordinate.parse(ICEBERG_AWS_BUNDLE, path="dev packages")
    server, sdk = fetched(folder, SERVER_JARS), fetched(folder, bundle)
    if not server or not sdk:
        missing = [str(c) for c, got in ((SERVER_JARS, server), (bundle, sdk)) if not got]
        raise LocalServerError(
            f"the Iceberg REST catalog's jars are not fetched ({', '.join(missing)})",
            hint=_FETCH_HINT,
        )
    return server + sdk


def server_environment(
    store: S3Endpoint, warehouse: str, catalog_db: Path, port: int
) -> dict[str, str]:
    """The ``CATALOG_*`` variables of the reference image, pointed at ``store``.

    ``RCKUtils.environmentCatalogConfig`` turns ``CATALOG_A__B_C`` into ``a-b.c``.

    >>> from icetide.devservers.objectstore import S3Endpoint
    >>> env = server_environment(
    ...     S3Endpoint("http://127.0.0.1:9000", "k", "s"), "s3://w/r", Path("/c.db"), 8181)
    >>> env["CATALOG_IO__IMPL"], env["CATALOG_S3_PATH__STYLE__ACCESS"], env["CATALOG_URI"]
    ('org.apache.iceberg.aws.s3.S3FileIO', 'true', 'jdbc:sqlite:/c.db')
    """
    settings = {
        "catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        "uri": f"jdbc:sqlite:{catalog_db}",
        # As the image sets them: SQLite ignores the credentials.
        "jdbc.user": "user",
        "jdbc.password": "password",
        "jdbc.strict-mode": "true",
        "jdbc.schema-version": "V1",  # V1 keeps views as well as tables
        "warehouse": warehouse,
        "rest.port": str(port),
        **store.iceberg_properties(),
    }
    return {
        "CATALOG_" + key.replace("-", "__").replace(".", "_").upper(): value
        for key, value in settings.items()
    }


class RestCatalogServer(LocalServer):
    """One ``RESTCatalogServer`` JVM whose warehouse is on ``store`` (see module doc)."""

    STOP_TIMEOUT = 20.0

    def __init__(
        self,
        store: S3Endpoint,
        warehouse: str = DEFAULT_WAREHOUSE,
        base: Path | None = None,
        *,
        jars_dir: Path | None = None,
        startup_timeout: float = 120.0,
        keep: bool = False,
    ) -> None:
        super().__init__(base, "icetide-rest-catalog-", keep)
        self.store = store
        self.warehouse = warehouse
        self._jars_dir = jars_dir
        self._startup_timeout = startup_timeout

    @property
    def url(self) -> str:
        """The catalog's base URL (a client's ``uri``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def catalog_db(self) -> Path:
        """The SQLite file holding the catalog itself (namespaces, table pointers)."""
        return self.base / "catalog.db"

    def client_properties(self) -> dict[str, str]:
        """Iceberg catalog properties of a Java client (Spark): the REST catalog, and
        ``S3FileIO`` reaching the object store itself for data and metadata files."""
        return {"type": "rest", "uri": self.url, **self.store.iceberg_properties()}

    def spark_catalog_conf(self, name: str) -> dict[str, str]:
        """``spark.sql.catalog.<name>.*`` settings of an Iceberg ``SparkCatalog`` on this
        server (set at runtime, they add a catalog to a running session)."""
        prefix = f"spark.sql.catalog.{name}"
        conf = {prefix: "org.apache.iceberg.spark.SparkCatalog"}
        conf.update({f"{prefix}.{k}": v for k, v in self.client_properties().items()})
        # As icetide's own catalogs: every read sees the latest commit, whoever made it
        # (PyIceberg, another process, the server's purge).
        conf[f"{prefix}.cache-enabled"] = "false"
        return conf

    def pyiceberg_properties(self) -> dict[str, str]:
        """``pyiceberg.catalog.load_catalog`` properties for this server."""
        return {"type": "rest", "uri": self.url, **self.store.pyiceberg_properties()}

    def start(self) -> RestCatalogServer:
        """Start the server and wait until ``GET /v1/config`` answers."""
        if self.running:
            return self
        classpath = os.pathsep.join(str(jar) for jar in server_classpath(self._jars_dir))
        command = server_command(
            _HEAP,
            classpath,
            SERVER_MAIN,
            flags=(
                f"-Djava.io.tmpdir={self.base}",  # SQLite unpacks its native library there
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            ),
        )
        self.base.mkdir(parents=True, exist_ok=True)
        log_start = 0

        def attempt() -> None:
            nonlocal log_start
            log_start = self._log_size()
            self._launch(command)
            self._wait_until_it_connects(
                "the Iceberg REST catalog",
                lambda: urllib.request.urlopen(f"{self.url}/v1/config", timeout=2),
                OSError,  # refused, reset, or an HTTP error while it starts
                self.log_tail,
                self._alive,
            )

        self._start_on_a_free_port(
            attempt, lambda: "Address already in use" in self._log_since(log_start)
        )
        return self

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server's output."""
        path = self.base / "rest-catalog.out"
        text = path.read_text(errors="replace").splitlines() if path.exists() else []
        return "\n".join(text[-lines:])

    def config(self) -> dict[str, object]:
        """The server's answer to ``GET /v1/config`` (its defaults and overrides)."""
        with urllib.request.urlopen(f"{self.url}/v1/config", timeout=10) as answer:
            result: dict[str, object] = json.load(answer)
        return result

    # --- internals --------------------------------------------------------------------

    def _launch(self, command: list[str]) -> None:
        # Only the variables a JVM needs, then the catalog's: an inherited CATALOG_* or
        # AWS_* setting must not change the server.
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
        env.update(server_environment(self.store, self.warehouse, self.catalog_db, self.port))
        self._spawn(command, env, "rest-catalog.out")

    def _log_size(self) -> int:
        path = self.base / "rest-catalog.out"
        return path.stat().st_size if path.exists() else 0

    def _log_since(self, offset: int) -> str:
        path = self.base / "rest-catalog.out"
        if not path.exists():
            return ""
        with path.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def _alive(self) -> None:
        if self._process is None or self._process.poll() is not None:
            raise LocalServerError(
                f"the Iceberg REST catalog exited:\n{self.log_tail()}",
                hint="see the server output above",
            )
