"""The one place a SparkSession is built: Iceberg runtime, catalog, local or cluster.

Defaults give a local Spark with a Hadoop catalog on a folder; every catalog type and
every Spark setting passes through from the config, so the same pipeline runs on a
real cluster by changing ``spark.master`` (and ``iceberg_jar: provided`` where the
cluster already carries the Iceberg runtime).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icetide.errors import ConfigError
from icetide.spark import class_archive, worker_daemon
from icetide.spark import jars as maven
from icetide.spark.jit_priority import FIXED_COMPILER_THREADS, lower_compiler_priority
from icetide.spark.jvm import jvm_class, pin_pyspark_names
from icetide.spark.local_fs import local_fs_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.config import Config
    from icetide.config.sections import SparkConfig
    from icetide.spark.jars import Coordinate

ICEBERG_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
_DEBIAN_JDBC_JARS = (
    "/usr/share/java/mariadb-java-client.jar",
    "/usr/share/java/postgresql.jar",
)
# Which Maven artifact each Debian driver jar stands in for.
_DEBIAN_JDBC_ARTIFACTS = {
    "mariadb-java-client.jar": "mariadb-java-client",
    "postgresql.jar": "postgresql",
}
SCHEDULER_POOLS = Path(__file__).with_name("scheduler_pools.xml")
"""Spark's fair scheduler pools: the ledger's, beside Spark's default one."""
LEDGER_POOL = "ledger"
"""The pool of a ledger micro-batch's concurrent chunks (named in :data:`SCHEDULER_POOLS`)."""
CODEGEN_CACHE_ENTRIES = 1000
"""Spark's cache of compiled query code, in classes (see :func:`spark_conf`)."""
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
_CATALOG_IMPLS = {
    "glue": "org.apache.iceberg.aws.glue.GlueCatalog",
}


def iceberg_runtime_jar(setting: str) -> Path | None:
    """The Iceberg runtime jar given by ``spark.iceberg_jar`` when it is not ``auto``.

    ``provided`` (the cluster has it) gives None; anything else is a path to a jar. For
    ``auto`` see :func:`jvm_jars`: the Maven-fetched runtime, else the bundled wheel.
    """
    if setting == "provided":
        return None
    if setting == "auto":
        return bundled_iceberg_jar()
    jar = Path(setting).expanduser()
    if not jar.is_file():
        raise ConfigError(
            f"Iceberg runtime jar {jar} does not exist",
            path="spark.iceberg_jar",
            hint="use 'auto' (fetched by Maven, or the bundled 1.10.2), 'provided', or an "
            "existing jar path",
        )
    return jar


def bundled_iceberg_jar() -> Path:
    """The offline fallback: the Iceberg runtime carried by a PyPI wheel."""
    try:
        import snowpark_connect_deps_iceberg as wheel
    except ImportError:
        raise ConfigError(
            "the Iceberg runtime was not fetched and its fallback wheel is not installed",
            path="spark.iceberg_jar",
            hint="run `icetide jars fetch`, or pip install snowpark-connect-deps-iceberg==1.0.2, "
            "or set spark.iceberg_jar to a jar path or 'provided'",
        ) from None
    return Path(wheel.get_jar_path(ICEBERG_JAR))


def jdbc_driver_jars() -> list[Path]:
    """Debian's MariaDB and PostgreSQL JDBC drivers, where installed: the fallback when
    Maven did not fetch them. ``spark.extra_jars`` adds others (a MySQL Connector/J)."""
    return [jar for jar in map(Path, _DEBIAN_JDBC_JARS) if jar.is_file()]


def jvm_jars(spark: SparkConfig, io_impl: str | None = None) -> list[Path]:
    """Everything for ``spark.jars``: extra jars, then the configured Maven packages as
    fetched into the jar folder, with the offline fallbacks for what is missing.

    Packages left at their defaults may be missing (the fallbacks cover Iceberg and the
    JDBC drivers; Kafka and Avro are then unavailable); packages the config names must
    have been fetched.
    """
    explicit = spark.packages is not None
    coordinates = [
        maven.Coordinate.parse(text) for text in maven.pipeline_packages(spark.packages, io_impl)
    ]
    if spark.iceberg_jar != "auto":  # the cluster's, or an explicit path, wins
        coordinates = [c for c in coordinates if not _is_iceberg_runtime(c)]
    folder = maven.jars_folder(spark.jars_dir)
    found: list[Path] = []
    missing = []
    for coordinate in coordinates:
        got = maven.fetched(folder, coordinate)
        if got is None:
            missing.append(coordinate)
        else:
            found += got
    bundle = maven.Coordinate.parse(maven.ICEBERG_AWS_BUNDLE)
    if (
        not explicit
        and bundle in missing
        and not any(Path(j).name.startswith("iceberg-aws-bundle") for j in spark.extra_jars)
    ):
        raise ConfigError(
            f"the catalog's io-impl {maven.S3_FILE_IO} needs the AWS SDK bundle "
            f"{bundle}, which is not fetched into {folder}",
            path="catalog.properties.io-impl",
            hint="run `icetide jars fetch -c <config>` once on this machine",
        )
    if explicit and missing:
        raise ConfigError(
            f"JVM packages not fetched into {folder}: {', '.join(map(str, missing))}",
            path="spark.packages",
            hint="run `icetide jars fetch -c <config>` once on this machine",
        )
    provided = maven.spark_home_jars()
    result = [Path(j) for j in spark.extra_jars]
    names = {j.name for j in result}
    for jar in maven.classpath(found, provided):
        if jar.name not in names:
            names.add(jar.name)
            result.append(jar)
    have = [c for c in coordinates if c not in missing]
    if spark.iceberg_jar != "auto":
        runtime = iceberg_runtime_jar(spark.iceberg_jar)
        if runtime is not None:
            result.insert(0, runtime)
    elif not any(_is_iceberg_runtime(c) for c in have):
        result.insert(0, bundled_iceberg_jar())
    # Debian's driver only where Maven did not fetch that database's driver.
    fetched_drivers = {c.artifact for c in have}
    for jar in jdbc_driver_jars():
        artifact = _DEBIAN_JDBC_ARTIFACTS[jar.name]
        if artifact not in fetched_drivers and jar.name not in names:
            result.append(jar)
    return result


def _is_iceberg_runtime(coordinate: Coordinate) -> bool:
    return coordinate.artifact.startswith("iceberg-spark-runtime")


LOCAL_DRIVER_MEMORY_MAX = 4 * 2**30
"""The most :func:`local_driver_memory` gives (bytes)."""


def local_driver_memory(machine_bytes: int) -> str:
    """The driver heap of a local master the config does not size: a quarter of the
    machine's memory, at least Spark's own 1g, at most 4g.

    On a local master the driver JVM is the executors too: the ledger's micro-batches
    (held while stored), the merges and their caches share its heap. At Spark's 1g a
    pipeline taking 8,000 events a second through Kafka on two cores spent a third of
    that JVM's CPU collecting garbage, and its freshness p99 was 136.6 s; with 4g, 24.5 s
    (bench/results/freshness.md).

    >>> local_driver_memory(24 * 2**30), local_driver_memory(8 * 2**30)
    ('4096m', '2048m')
    >>> local_driver_memory(2 * 2**30)
    '1024m'
    """
    quarter = min(LOCAL_DRIVER_MEMORY_MAX, max(2**30, machine_bytes // 4))
    return f"{quarter // 2**20}m"


def machine_memory() -> int:
    """This machine's physical memory in bytes (0 where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def workers_are_local(config: Config) -> bool:
    """True when Spark's Python workers run on this machine, with this Python and icetide
    importable (a local master): then they can run icetide's worker daemon, and the
    package needs no shipping."""
    return config.spark.master.startswith("local")


def lowers_compiler_priority(config: Config) -> bool:
    """True when the session's JIT compiler threads run below its tasks: a local master,
    whose executors are the driver JVM, and a ``spark.compiler_nice`` above 0
    (icetide/spark/jit_priority.py)."""
    return workers_are_local(config) and config.spark.compiler_nice > 0


JAVA_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
"""Settings whose value is a list of JVM flags: icetide's and the user's are joined."""


def with_java_options(ours: dict[str, str], user: dict[str, str]) -> dict[str, str]:
    """The user's JVM flags after icetide's own, for each of :data:`JAVA_OPTIONS` the
    user set (a blank value adds nothing): a user's ``-Xlog:gc`` would otherwise take
    away ``-Duser.timezone=UTC`` and the fixed compiler threads. The JVM takes the last
    of two conflicting flags, so the user's still win where they differ
    (``-Duser.timezone=Europe/Paris``).

    >>> with_java_options({JAVA_OPTIONS[0]: "-Da=1"}, {JAVA_OPTIONS[0]: "-Xss4m", "x": "y"})
    {'spark.driver.extraJavaOptions': '-Da=1 -Xss4m'}
    """
    return {
        key: " ".join(part for part in (ours.get(key, ""), user[key].strip()) if part)
        for key in JAVA_OPTIONS
        if key in user
    }


def spark_conf(config: Config) -> dict[str, str]:
    """Every Spark setting the pipeline needs, user passthrough applied last."""
    spark, catalog = config.spark, config.catalog
    conf: dict[str, str] = {
        "spark.app.name": spark.app_name or f"icetide-{config.pipeline}",
        "spark.master": spark.master,
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        "spark.sql.shuffle.partitions": str(spark.shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Storage-partitioned join: lets a bucketed batch meet the bucketed base without
        # shuffling the base (the merge adds merge.strategy.SPJ_CONF around its MERGE).
        "spark.sql.sources.v2.bucketing.enabled": "true",
        "spark.sql.sources.v2.bucketing.pushPartValues.enabled": "true",
        "spark.sql.requireAllClusterKeysForCoPartition": "false",
        "spark.sql.iceberg.planning.preserve-data-grouping": "true",
        "spark.sql.adaptive.enabled": "true",
        # Compiled query code is cached by its text, 100 classes by default: one ledger
        # micro-batch and one merge round of the demo's three tables generate ~140, so
        # the cache was cycled through and every batch and merge compiled all its code
        # again (~1.2 s of compiling per round; docs/merge-performance.md).
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
        # A stream's stop interrupts its micro-batch and waits at most this long: a batch
        # blocked on a transport that stopped answering must not hold a Ctrl-C.
        "spark.sql.streaming.stopTimeout": "10s",
        # The ledger's concurrent jobs in a pool of their own (scheduler_pools.xml): it
        # stores a large micro-batch's tables in chunks, several at once, and first come,
        # first served would queue the merge's jobs behind all of them.
        "spark.scheduler.mode": "FAIR",
        "spark.scheduler.allocation.file": str(SCHEDULER_POOLS),
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    }
    if lowers_compiler_priority(config):
        # Every compiler thread from the start, so build_session lowers them all.
        conf["spark.driver.extraJavaOptions"] += f" {FIXED_COMPILER_THREADS}"
    if workers_are_local(config):
        # Unless spark.conf sizes it (applied below, as every passthrough setting).
        conf["spark.driver.memory"] = local_driver_memory(machine_memory())
        # The workers are this Python: run the daemon that forks them with the ledger's
        # modules imported and skips re-reading Spark's zip archives before each task
        # (icetide/spark/worker_daemon.py).
        conf["spark.python.daemon.module"] = worker_daemon.MODULE
    jars = [str(j) for j in jvm_jars(spark, catalog.properties_plain().get("io-impl"))]
    if jars:
        conf["spark.jars"] = ",".join(jars)
    prefix = f"spark.sql.catalog.{catalog.name}"
    conf[prefix] = "org.apache.iceberg.spark.SparkCatalog"
    if catalog.type in _CATALOG_IMPLS:
        conf[f"{prefix}.catalog-impl"] = _CATALOG_IMPLS[catalog.type]
    elif catalog.type != "custom":
        conf[f"{prefix}.type"] = catalog.type
    # Stages in one process see each other's commits (the stream runs in a cloned
    # session with its own catalog instance) and other processes' commits at once.
    conf[f"{prefix}.cache-enabled"] = "false"
    if catalog.warehouse:
        conf[f"{prefix}.warehouse"] = str(catalog.warehouse)
    if catalog.uri:
        conf[f"{prefix}.uri"] = catalog.uri
    for key, value in catalog.properties_plain().items():
        conf[f"{prefix}.{key}"] = value
    user = spark.conf_plain()
    conf.update(user | with_java_options(conf, user))
    # Every file written under file: paths starts no chmod process (icetide/spark/local_fs.py).
    conf.update(local_fs_conf(maven.jars_folder(spark.jars_dir), workers_are_local(config), user))
    return conf


_ARCHIVE_WRITERS: dict[int, class_archive.Plan] = {}
"""The class-archive plan of each session whose JVM writes the archive as it stops,
by ``id`` of its SparkContext (see :func:`stop_session`)."""


def build_session(config: Config, *, writes_class_archive: bool = False) -> SparkSession:
    """Start (or reuse) the SparkSession for ``config``.

    The JVM it launches dies with this process (see :func:`_jvm_dies_with_parent`), and
    PySpark's own Ctrl-C handler is not installed (see :func:`_without_pyspark_sigint`):
    the CLI decides what a signal does. On a non-local master the icetide package is
    shipped to the executors, because the ledger decodes events in Python workers there.
    On a local master a new JVM maps the classes a former run saved
    (icetide/spark/class_archive.py); with ``writes_class_archive`` (``icetide run``)
    and no archive yet, this session saves them when :func:`stop_session` stops it.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    conf = spark_conf(config)
    archive = None
    if SparkContext._active_spark_context is None and uses_class_archive(config):
        archive = class_archive.for_session(conf, write=writes_class_archive)
    if archive is not None:
        conf[JAVA_OPTIONS[0]] = f"{conf[JAVA_OPTIONS[0]]} {archive.option}"
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    with _jvm_dies_with_parent(), _without_pyspark_sigint():
        session = builder.getOrCreate()
    if archive is not None and archive.writing is not None:
        _ARCHIVE_WRITERS[id(session.sparkContext)] = archive
    session.sparkContext.setLogLevel("ERROR")
    # Every ``pyspark.sql.functions`` call asks the JVM for ``functions`` (and many for
    # ``PythonUtils``) by its short name, each ask searching every jar; pinned, they are
    # answered in Python (icetide/spark/jvm.py).
    jvm = session.sparkContext._jvm
    assert jvm is not None
    pin_pyspark_names(jvm)
    if lowers_compiler_priority(config):
        # The JIT compiles in the cores the query leaves idle.
        pid = int(jvm_class("java.lang.ProcessHandle").current().pid())
        lower_compiler_priority(pid, config.spark.compiler_nice)
    if not workers_are_local(config):
        session.sparkContext.addPyFile(str(_package_zip()))
    return session


def uses_class_archive(config: Config) -> bool:
    """True when the session's JVM uses (or writes) a class archive: a local master, whose
    executors are that JVM, and ``spark.class_archive`` on."""
    return workers_are_local(config) and config.spark.class_archive


def stop_session(session: SparkSession, timeout: float = 60) -> Path | None:
    """Stop ``session`` and wait until its JVM has exited, so nothing outlives the command.

    A session that writes the class archive saves it first (a few seconds); its path is
    returned when it did. Closing the gateway's stdin is how PySpark tells its JVM to
    exit; a JVM that does not within ``timeout`` seconds is terminated.
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    archive = _ARCHIVE_WRITERS.pop(id(session.sparkContext), None)
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.poll() is not None:
        # The JVM exited already (killed, out of memory): nothing to stop or save, and
        # every py4j call would only fail.
        if archive is not None:
            class_archive.release(archive)
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkContext._active_spark_context = None
        return None
    written = None
    if archive is not None:
        pid = int(jvm_class("java.lang.ProcessHandle").current().pid())

        def dump(path: Path) -> None:
            with _jvm_stdout_muted():
                class_archive.dump_classes(pid, path)

        if class_archive.write(archive, dump):
            written = archive.final
    session.stop()
    if gateway is None or proc is None:
        return written
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - the JVM may be gone already; we only wait for it
        pass
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(timeout)
    SparkContext._gateway = None
    SparkContext._jvm = None
    return written


@contextmanager
def _jvm_stdout_muted() -> Iterator[None]:
    """The JVM's ``System.out`` discarded meanwhile: the JDK announces a class dump there,
    and the JVM's stdout is the command's (results, ``--output json``)."""
    system = jvm_class("java.lang.System")
    out = system.out
    system.setOut(
        jvm_class("java.io.PrintStream")(jvm_class("java.io.OutputStream").nullOutputStream())
    )
    try:
        yield
    finally:
        system.setOut(out)


_PR_SET_PDEATHSIG = 1


def _parent_death_signal() -> Callable[[], None] | None:
    """A function for a forked child that asks Linux to SIGTERM it when we die, or None.

    Resolved before the fork: a child of a threaded process must not load libraries.
    Only on the main thread, because the kernel ties the signal to the forking thread.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm


@contextmanager
def _jvm_dies_with_parent() -> Iterator[None]:
    """Make the JVM PySpark launches get SIGTERM when this process dies, however it dies.

    PySpark's JVM exits when its stdin closes, but one still starting up when Python
    exits (Ctrl-C during start-up, ``kill -9``) never looks and lives on, orphaned.
    ``pyspark.java_gateway.launch_gateway`` sets its own ``preexec_fn`` on ``Popen``, so
    we hand it a ``Popen`` that adds ours. SIGTERM, not SIGKILL, so the JVM's shutdown
    hooks still remove its temporary folders.
    """
    from pyspark import java_gateway

    arm = _parent_death_signal()
    original = java_gateway.Popen  # type: ignore[attr-defined]  # patched below, on purpose
    if arm is None or original is not subprocess.Popen:
        yield
        return
    armed: Callable[[], None] = arm

    def popen(*args: Any, **kw: Any) -> subprocess.Popen[Any]:
        given: Callable[[], None] | None = kw.pop("preexec_fn", None)

        def preexec() -> None:
            if given is not None:
                given()
            armed()

        return subprocess.Popen(*args, preexec_fn=preexec, **kw)  # type: ignore[call-overload]

    setattr(java_gateway, "Popen", popen)  # noqa: B010 - mypy: a function for a class
    try:
        yield
    finally:
        setattr(java_gateway, "Popen", original)  # noqa: B010


@contextmanager
def _without_pyspark_sigint() -> Iterator[None]:
    """Keep PySpark from installing its SIGINT handler while the context starts.

    That handler calls ``cancelAllJobs`` on the JVM and raises ``KeyboardInterrupt``
    from inside whatever py4j call the main thread is in, which breaks that call's
    connection and ends the command in py4j tracebacks. The CLI's own handler only asks
    the command to stop between steps (:mod:`icetide.stopping`).
    """
    from pyspark import context

    real = context.signal  # type: ignore[attr-defined]  # patched below, on purpose
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    class SignalWithoutSigint:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        @staticmethod
        def signal(signum: int, handler: Any) -> Any:
            if signum == real.SIGINT:
                return real.getsignal(signum)
            return real.signal(signum, handler)

    context.signal = SignalWithoutSigint()  # type: ignore[attr-defined,assignment]
    try:
        yield
    finally:
        context.signal = real  # type: ignore[attr-defined]


def _package_zip() -> Path:
    """The icetide package the driver runs, as a zip for ``addPyFile``: executors on other
    machines import exactly this code, whatever their own Python holds.

    The name carries a hash of the contents, so one zip serves every session of the same
    code (it is written once, into the temp folder) and a session after an upgrade never
    meets an executor's copy of an older zip under the same name."""
    import icetide

    package_dir = Path(icetide.__file__).parent
    files = sorted(
        f for f in package_dir.rglob("*") if f.is_file() and "__pycache__" not in f.parts
    )
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(package_dir)).encode() + b"\0")
        digest.update(file.read_bytes())
    folder = Path(tempfile.gettempdir()) / "icetide-pyfiles"
    target = folder / f"icetide-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        folder.mkdir(exist_ok=True)
        partial = Path(tempfile.mkstemp(dir=folder, suffix=".part")[1])
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for file in files:
                archive.write(file, Path("icetide") / file.relative_to(package_dir))
        partial.replace(target)
    return target
