"""The one place a SparkSession is built: Iceberg runtime, catalog, local or cluster.

Defaults give a local Spark with a Hadoop catalog on a folder; every catalog type and
every Spark setting passes through from the config, so the same pipeline runs on a
real cluster by changing ``spark.master`` (and ``iceberg_jar: provided`` where the
cluster already carries the Iceberg runtime).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from icetide.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.config import Config

ICEBERG_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
_DEBIAN_JDBC_JARS = (
    "/usr/share/java/mariadb-java-client.jar",
    "/usr/share/java/postgresql.jar",
)
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
_CATALOG_IMPLS = {
    "glue": "org.apache.iceberg.aws.glue.GlueCatalog",
}


def iceberg_runtime_jar(setting: str) -> Path | None:
    """The Iceberg runtime jar to put on ``spark.jars``; None when the cluster has it.

    ``auto`` takes the jar from the ``snowpark-connect-deps-iceberg`` wheel, ``provided``
    adds nothing, anything else is a path to a jar.
    """
    if setting == "provided":
        return None
    if setting == "auto":
        try:
            import snowpark_connect_deps_iceberg as wheel
        except ImportError:
            raise ConfigError(
                "the Iceberg runtime wheel is not installed",
                path="spark.iceberg_jar",
                hint="pip install snowpark-connect-deps-iceberg==1.0.2, or set "
                "spark.iceberg_jar to a jar path or 'provided'",
            ) from None
        return Path(wheel.get_jar_path(ICEBERG_JAR))
    jar = Path(setting).expanduser()
    if not jar.is_file():
        raise ConfigError(
            f"Iceberg runtime jar {jar} does not exist",
            path="spark.iceberg_jar",
            hint="use 'auto' (bundled 1.10.2), 'provided', or an existing jar path",
        )
    return jar


def jdbc_driver_jars() -> list[Path]:
    """Debian's MariaDB and PostgreSQL JDBC drivers, where installed, for ``bootstrap``.

    ``spark.extra_jars`` adds others (a MySQL Connector/J, say) on machines without them.
    """
    return [jar for jar in map(Path, _DEBIAN_JDBC_JARS) if jar.is_file()]


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
        # shuffling the base.
        "spark.sql.sources.v2.bucketing.enabled": "true",
        "spark.sql.sources.v2.bucketing.pushPartValues.enabled": "true",
        "spark.sql.requireAllClusterKeysForCoPartition": "false",
        "spark.sql.iceberg.planning.preserve-data-grouping": "true",
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    }
    jars = [str(j) for j in spark.extra_jars]
    runtime = iceberg_runtime_jar(spark.iceberg_jar)
    if runtime is not None:
        jars.insert(0, str(runtime))
    jars += [str(j) for j in jdbc_driver_jars() if str(j) not in jars]
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
    conf.update(spark.conf_plain())
    return conf


def build_session(config: Config) -> SparkSession:
    """Start (or reuse) the SparkSession for ``config``.

    On a non-local master the icetide package is shipped to the executors, because the
    ledger decodes events in Python workers there.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in spark_conf(config).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if not config.spark.master.startswith("local"):
        session.sparkContext.addPyFile(str(_package_zip()))
    return session


def _package_zip() -> Path:
    """Zip the installed icetide package so executors can import it."""
    import icetide

    package_dir = Path(icetide.__file__).parent
    target = Path(tempfile.mkdtemp(prefix="icetide-pyfiles-")) / "icetide.zip"
    with zipfile.ZipFile(target, "w") as archive:
        for file in package_dir.rglob("*.py"):
            archive.write(file, Path("icetide") / file.relative_to(package_dir))
    return target


def java_available() -> bool:
    """True when a Java runtime is on PATH (Spark needs one)."""
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))
