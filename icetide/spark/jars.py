"""JVM dependencies by Maven coordinates, resolved once into a local jar folder.

Spark users name JVM dependencies by coordinates (``spark.jars.packages``); icetide does
the same (``spark.packages`` in the config, defaults below) but resolves them **once, as
the machine is set up** (``icetide jars fetch``, which ``scripts/install.sh`` runs), with
Maven as the machine is configured — no registry host is named here, so a mirror in
``~/.m2/settings.xml`` is honoured. Sessions then only read the folder: starting Spark
never reaches the network, and a machine without Maven Central still starts from what
was fetched (or from the offline fallbacks: the Iceberg runtime carried by the
``snowpark-connect-deps-iceberg`` wheel, Debian's JDBC drivers).

Layout: ``<folder>/<group>/<artifact>/<version>/`` holds that coordinate's runtime
closure and a ``.complete`` marker written last, so an interrupted fetch is redone and
never half-used.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from icetide.errors import ConfigError

ICEBERG_RUNTIME = "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"
DEFAULT_PACKAGES: tuple[str, ...] = (
    ICEBERG_RUNTIME,
    "org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.7",
    "org.apache.spark:spark-avro_2.12:3.5.7",
    "org.mariadb.jdbc:mariadb-java-client:3.5.7",
    "org.postgresql:postgresql:42.7.8",
)
"""What a pipeline may need: Iceberg, Spark's Kafka source and Avro, the JDBC drivers."""

KAFKA_BROKER = "org.apache.kafka:kafka_2.13:4.1.1"
CONNECT_RUNTIME = "org.apache.kafka:connect-runtime:4.1.1"
CONNECT_LOGGING = "org.slf4j:slf4j-simple:1.7.36"
DEBEZIUM_MARIADB = "io.debezium:debezium-connector-mariadb:3.4.0.Final"
DEBEZIUM_POSTGRES = "io.debezium:debezium-connector-postgres:3.4.0.Final"
ICEBERG_AWS_BUNDLE = "org.apache.iceberg:iceberg-aws-bundle:1.10.1"
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
"""Iceberg's S3 ``FileIO``: its AWS SDK is :data:`ICEBERG_AWS_BUNDLE`."""
DEV_PACKAGES: tuple[str, ...] = (
    KAFKA_BROKER,
    CONNECT_RUNTIME,
    CONNECT_LOGGING,
    DEBEZIUM_MARIADB,
    DEBEZIUM_POSTGRES,
    ICEBERG_AWS_BUNDLE,
)
"""Servers that tests and benchmarks start: a KRaft Kafka broker, and a Kafka Connect
worker (the broker's version, JsonConverter included) with the real Debezium MariaDB and
PostgreSQL connectors as its plugins. Fetched by ``icetide jars fetch --dev``, never put
on Spark's classpath by a pipeline's config; the AWS SDK bundle that Iceberg's
``S3FileIO`` needs serves the test REST catalog and, added at runtime by the lakehouse
tests, the tests' session (1.10.1: 1.10.2's was not served; both carry the same SDK)."""


def pipeline_packages(packages: tuple[str, ...] | None, io_impl: str | None) -> tuple[str, ...]:
    """The Maven packages of a pipeline: ``spark.packages`` when the config names them
    (the list is the user's, whole), else :data:`DEFAULT_PACKAGES`, with the AWS SDK
    bundle added when the catalog's ``io-impl`` is :data:`S3_FILE_IO`, which cannot load
    without it.

    >>> pipeline_packages(None, S3_FILE_IO)[-1] == ICEBERG_AWS_BUNDLE
    True
    >>> pipeline_packages(None, None) == DEFAULT_PACKAGES
    True
    """
    if packages is not None:
        return packages
    return DEFAULT_PACKAGES + ((ICEBERG_AWS_BUNDLE,) if io_impl == S3_FILE_IO else ())


JARS_DIR_ENV = "ICETIDE_JARS_DIR"
_COMPLETE = ".complete"
_PART = re.compile(r"^[A-Za-z0-9_.\-]+$")
# A jar file name: artifact, then "-" and a version starting with a digit.
_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^/]*)\.jar$")


@dataclass(frozen=True, order=True)
class Coordinate:
    """A Maven coordinate ``group:artifact:version``.

    >>> Coordinate.parse("org.postgresql:postgresql:42.7.8").folder
    'org.postgresql/postgresql/42.7.8'
    """

    group: str
    artifact: str
    version: str

    @classmethod
    def parse(cls, text: str, *, path: str = "spark.packages") -> Coordinate:
        """Read ``group:artifact:version``; anything else is a config error saying so."""
        parts = text.strip().split(":")
        if len(parts) != 3 or not all(_PART.match(p) for p in parts):
            raise ConfigError(
                f"{text!r} is not a Maven coordinate",
                path=path,
                hint="write group:artifact:version, e.g. org.apache.spark:spark-avro_2.12:3.5.7",
            )
        return cls(*parts)

    @property
    def folder(self) -> str:
        """Where this coordinate's jars live inside the jar folder."""
        return f"{self.group}/{self.artifact}/{self.version}"

    def __str__(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


def default_jars_dir() -> Path:
    """``$ICETIDE_JARS_DIR``, else ``~/.cache/icetide/jars``."""
    configured = os.environ.get(JARS_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "icetide" / "jars"


def jars_folder(jars_dir: str | Path | None) -> Path:
    """The jar folder: ``spark.jars_dir`` when the config names one, else the default."""
    return Path(jars_dir).expanduser() if jars_dir else default_jars_dir()


def fetched(folder: Path, coordinate: Coordinate) -> list[Path] | None:
    """The jars of a completely fetched coordinate (closure included), or None."""
    where = folder / coordinate.folder
    if not (where / _COMPLETE).is_file():
        return None
    return sorted(where.glob("*.jar"))


def spark_home_jars() -> set[str]:
    """Artifact names of the jars pyspark already ships (left to Spark, never doubled)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return {_artifact_of(jar.name) for jar in jars.glob("*.jar")}


def _artifact_of(name: str) -> str:
    match = _JAR_NAME.match(name)
    return match.group("artifact") if match else name


def classpath(jars: list[Path], provided: set[str]) -> list[Path]:
    """``jars`` minus libraries whose artifact Spark already has (in any version).

    A second copy of, say, ``slf4j-api`` or ``hadoop-client-api`` on the classpath is at
    best dead weight and at worst a version clash, so Spark's own copy wins.

    >>> [p.name for p in classpath([Path("kafka-clients-3.4.1.jar"),
    ...     Path("slf4j-api-1.7.36.jar")], {"slf4j-api"})]
    ['kafka-clients-3.4.1.jar']
    """
    return [jar for jar in jars if _artifact_of(jar.name) not in provided]


def pom_for(coordinate: Coordinate) -> str:
    """A throwaway POM whose only dependency is ``coordinate`` (Maven resolves the rest)."""
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>dev.icetide.jars</groupId><artifactId>fetch</artifactId>"
        "<version>1</version><packaging>pom</packaging>\n"
        "  <dependencies><dependency>"
        f"<groupId>{escape(coordinate.group)}</groupId>"
        f"<artifactId>{escape(coordinate.artifact)}</artifactId>"
        f"<version>{escape(coordinate.version)}</version>"
        "</dependency></dependencies>\n"
        "</project>\n"
    )


def copy_dependencies(mvn: str, pom: str, target: Path) -> str | None:
    """Resolve the dependencies ``pom`` declares into ``target`` (emptied first, so an
    interrupted fetch starts again) with Maven as the machine is configured (no
    repository named here); None when it worked, else the tail of Maven's output. The
    caller writes the ``.complete`` marker, last."""
    if target.exists():
        shutil.rmtree(target)
    with tempfile.TemporaryDirectory(prefix="icetide-jars-") as work:
        path = Path(work) / "pom.xml"
        path.write_text(pom)
        result = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(path),
                "dependency:copy-dependencies",
                "-DincludeScope=runtime",
                f"-DoutputDirectory={target}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    if result.returncode == 0:
        return None
    return "\n".join((result.stdout + result.stderr).strip().splitlines()[-8:])


class FetchError(ConfigError):
    """Maven could not resolve a coordinate (offline, unknown version, no Maven)."""


def fetch(coordinates: list[Coordinate], folder: Path, *, mvn: str = "mvn") -> list[Coordinate]:
    """Resolve each coordinate missing from ``folder`` with Maven; return those fetched.

    Idempotent: a coordinate already complete is skipped, so rerunning costs nothing.
    """
    executable = shutil.which(mvn)
    if executable is None:
        raise FetchError(
            "Maven (mvn) is not installed, so JVM packages cannot be resolved",
            path="spark.packages",
            hint="install Maven (apt-get install maven), or put the jars on spark.extra_jars",
        )
    done = []
    for coordinate in coordinates:
        if fetched(folder, coordinate) is not None:
            continue
        target = folder / coordinate.folder
        tail = copy_dependencies(executable, pom_for(coordinate), target)
        if tail is not None:
            raise FetchError(
                f"Maven could not resolve {coordinate}:\n{tail}",
                path="spark.packages",
                hint="check the coordinate and that Maven reaches its repository "
                "(~/.m2/settings.xml)",
            )
        (target / _COMPLETE).write_text(str(coordinate) + "\n")
        done.append(coordinate)
    return done
