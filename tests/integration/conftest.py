"""Integration fixtures: one real SparkSession with Iceberg for the whole run.

Every test gets its own pipeline folder and Iceberg namespace in one shared Hadoop
warehouse, so tests never see each other's tables and Spark starts only once.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.devservers.java import QUICK_COMPILER
from icetide.devservers.mariadb import MariaDBServer
from icetide.devservers.objectstore import ObjectStoreServer
from icetide.devservers.rest_catalog import RestCatalogServer
from icetide.spark.class_archive import ARCHIVE_DIR_ENV
from icetide.spark.jars import ICEBERG_AWS_BUNDLE, S3_FILE_IO, Coordinate, default_jars_dir, fetched
from tests.devservers.connect import ConnectWorker
from tests.devservers.kafka import KafkaServer
from tests.devservers.postgres import PostgresServer
from tests.devservers.registry import RegistryServer
from tests.integration.harness import Pipeline

_namespaces = itertools.count(1)


SHARED_SERVERS = {
    "kafka": frozenset({"kafka", "connect", "registry"}),
    "lakehouse": frozenset({"object_store", "rest_catalog", "s3_spark", "lake"}),
}
"""Tests that need one of these servers run in one worker when the run is spread over
several (``pytest -n 2 --dist loadgroup``, as ``make test`` runs): each server then
starts once per run, not once per worker (Kafka Connect alone is a JVM of its own).
``lake`` is tests/integration/lakehouse/test_catalogs.py's fixture, which asks for the
object store and the catalog servers at run time."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/integration needs the JVM: mark it so; group the tests of
    each shared server (:data:`SHARED_SERVERS`); and run the tests marked ``long`` first
    (each takes minutes): spread over workers, a long test started last would leave the
    other worker idle at the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
            needs = set(getattr(item, "fixturenames", ()))
            for group, servers in SHARED_SERVERS.items():
                if needs & servers:
                    item.add_marker(pytest.mark.xdist_group(group))
                    break


@pytest.fixture(scope="session", autouse=True)
def class_archives(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The run's own class-archive folder, for this process and the commands it starts:
    every run begins without one, whatever earlier runs left in ~/.cache."""
    folder = tmp_path_factory.mktemp("class-archives")
    with pytest.MonkeyPatch.context() as env:
        env.setenv(ARCHIVE_DIR_ENV, str(folder))
        yield folder


JAVA_OPTIONS_ENV = "JDK_JAVA_OPTIONS"
JVM_OPTIONS = QUICK_COMPILER
"""JVM flags for every JVM the tests start: the run's own session (:func:`spark`), and
each JVM started as a process of its own (``icetide run`` and the other commands, the
servers, a standalone cluster's daemons and executors): the quick compiler only.

A child JVM lives a minute or two on a few thousand rows, so the optimizing compiler's
threads cost it more CPU than they save: measured on ``test_run_supervised``'s restart
test alone, 200 CPU-seconds became 142 and the wall time 141 s became 117 s (2026-12-03).
The session lives the whole run, but each test plans new queries whose generated classes
the optimizing compiler then compiles anew, at ``compiler_nice`` behind the tests' own
threads on cores the run keeps busy: seven merge, history and model-workload files on
three workers (``-n 3``), one run each, 2026-12-07, went from 407 s and 807 CPU-seconds
to 347 s and 668 with the session on the quick compiler too, while the compiler threads
at normal priority instead changed nothing (405 s, 790). A pipeline's own ``icetide run``
keeps the JVM's default: it runs for days on the same queries."""


@pytest.fixture(scope="session", autouse=True)
def jvm_options() -> Iterator[str]:
    """:data:`JVM_OPTIONS` for the JVMs started from here on, through
    ``JDK_JAVA_OPTIONS`` (read by the ``java`` launcher; it notes so on stderr)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(JAVA_OPTIONS_ENV, JVM_OPTIONS, prepend=" ")
        yield os.environ[JAVA_OPTIONS_ENV]


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Hadoop warehouse folder every test's catalog points at."""
    return tmp_path_factory.mktemp("warehouse")


INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
"""Spark settings of the run's own session (:func:`spark`): queries run interpreted,
without generating and compiling Java code for each new plan.

Each test plans new queries on a few hundred rows, so compiling their code (Janino, then
the JIT on the generated classes) costs the session far more than running it: seven merge,
history and model-workload files on three workers (``-n 3``), 2026-12-07, took 340 s with
Spark's code generation and 270 s without (334 s with only whole-stage code generation
off: most of the code compiled is each expression's). Spark computes the same results
either way (its own suites run both). Every ``icetide run`` and other command the tests
start as a process of its own keeps Spark's default, so the end-to-end tests run the
generated code a pipeline runs; a test of the session that needs it asks for
:func:`compiled`.

One thing Spark 3.5 cannot do interpreted: build the rows of ``spark.catalog.listTables()``
once there is a table to list ("argument type mismatch ... catalog.Table"); the tests ask
``spark.catalog.tableExists`` instead, and icetide does not call it."""

COMPILED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
"""Spark's defaults for the settings :data:`INTERPRETED` changes."""


@pytest.fixture(scope="session")
def spark(
    warehouse: Path, tmp_path_factory: pytest.TempPathFactory, jvm_options: str
) -> Iterator[SparkSession]:
    """The one SparkSession of the run, built the way the CLI builds it, its JVM with
    :data:`JVM_OPTIONS` and its queries :data:`INTERPRETED`."""
    from icetide.spark.session import build_session

    seed = Pipeline.create(tmp_path_factory.mktemp("session"), warehouse, "session")
    settings = seed.config.spark.model_copy(update={"conf": seed.config.spark.conf | INTERPRETED})
    session = build_session(seed.config.model_copy(update={"spark": settings}))
    yield session
    session.stop()


@pytest.fixture
def compiled(spark: SparkSession) -> Iterator[SparkSession]:
    """The session with Spark's code generation on (:data:`COMPILED`) for one test, as a
    pipeline's own session runs; the queries a test starts from it inherit the settings."""
    for key, value in COMPILED.items():
        spark.conf.set(key, value)
    try:
        yield spark
    finally:
        for key, value in INTERPRETED.items():
            spark.conf.set(key, value)


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDBServer]:
    """The run's one private MariaDB (ROW binlog, full metadata).

    Shared by every test that does not need a server of its own: such a test creates
    its own database (and, for capture, reads only its own tables).
    """
    with MariaDBServer() as started:
        yield started


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """The run's one private PostgreSQL (wal_level=logical).

    Shared like :func:`mariadb`: a test creates its own database, and names its own
    replication slot and publication (slots are server-wide).
    """
    with PostgresServer() as started:
        yield started


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaServer]:
    """The run's one private Kafka broker (KRaft, loopback, from the Maven jars).

    Shared like :func:`mariadb`: a test uses topics named after its own namespace.
    """
    with KafkaServer() as started:
        yield started


@pytest.fixture(scope="session")
def connect(kafka: KafkaServer) -> Iterator[ConnectWorker]:
    """The run's one Kafka Connect worker (standalone, loopback) with the real Debezium
    MariaDB and PostgreSQL connectors, writing into :func:`kafka`.

    Shared like :func:`kafka`: a test adds connectors whose ``topic.prefix`` (and slot,
    server id) are its own, and removes them when done.
    """
    with ConnectWorker(kafka.bootstrap_servers) as started:
        yield started


@pytest.fixture(scope="session")
def registry() -> Iterator[RegistryServer]:
    """The run's one private schema registry (Confluent REST API over HTTP, loopback).

    Shared like :func:`kafka`: a test uses subjects named after its own topics. The
    registry forms' unit tests keep confluent-kafka's in-process ``mock://`` registry.
    """
    with RegistryServer() as started:
        yield started


@pytest.fixture(scope="session")
def object_store() -> Iterator[ObjectStoreServer]:
    """The run's one private S3-compatible object store (SeaweedFS, loopback), with the
    bucket ``warehouse``.

    Shared like :func:`kafka`: a test keeps its objects under a prefix (or a namespace of
    the :func:`rest_catalog`) of its own.
    """
    with ObjectStoreServer() as started:
        yield started


@pytest.fixture(scope="session")
def s3_spark(spark: SparkSession) -> SparkSession:
    """The run's session, able to reach S3: Iceberg's ``S3FileIO`` (in the Iceberg
    runtime) needs the AWS SDK, which only the lakehouse tests use.

    The SDK bundle is added to the class loader of the running session, the one that
    holds the Iceberg runtime (in local mode the executors' loaders delegate to it), and
    not to every run's ``spark.jars``: there its 60 MB made the session's start about 9 s
    slower and its first Iceberg write and read 8 to 19 s slower (two runs each on a busy
    machine, 2026-12-02), in every run, whether a lakehouse test runs or not.
    """
    jars = fetched(default_jars_dir(), Coordinate.parse(ICEBERG_AWS_BUNDLE))
    if not jars:
        pytest.fail(f"{ICEBERG_AWS_BUNDLE} is not fetched: run `icetide jars fetch --dev`")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    context = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    loader = jvm.java.lang.Class.forName(S3_FILE_IO, False, context).getClassLoader()
    for jar in jars:
        loader.addURL(jvm.java.io.File(str(jar)).toURI().toURL())
    return spark


@pytest.fixture(scope="session")
def rest_catalog(object_store: ObjectStoreServer) -> Iterator[RestCatalogServer]:
    """The run's one Iceberg REST catalog (Iceberg's own ``RESTCatalogServer``), its
    warehouse ``s3://warehouse/rest`` on :func:`object_store` through ``S3FileIO``.

    Shared like :func:`kafka`: a test creates a namespace of its own. :func:`s3_spark`
    reaches it through ``rest_catalog.spark_catalog_conf(name)``, set at runtime.
    """
    with RestCatalogServer(object_store.endpoint) as started:
        yield started


@pytest.fixture
def pipeline(
    tmp_path: Path, warehouse: Path, spark: SparkSession, request: pytest.FixtureRequest
) -> Pipeline:
    """A fresh demo-table pipeline in ``tmp_path`` with its own namespace."""
    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40]
    return Pipeline.create(tmp_path, warehouse, f"t{next(_namespaces)}_{name}", spark=spark)
