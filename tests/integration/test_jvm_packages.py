"""The JVM packages come from Maven, by coordinates, into the jar folder Spark reads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from icetide.spark import jars as maven


def test_the_session_loads_iceberg_kafka_and_avro_from_the_fetched_jars(
    spark: SparkSession,
) -> None:
    folder = maven.default_jars_dir()
    on_classpath = spark.conf.get("spark.jars").split(",")
    runtime = maven.fetched(folder, maven.Coordinate.parse(maven.ICEBERG_RUNTIME))
    assert runtime, "scripts/install.sh runs `icetide jars fetch`: the runtime must be there"
    assert str(runtime[0]) in on_classpath  # the Maven copy, not the wheel's
    assert not any("snowpark_connect_deps_iceberg" in jar for jar in on_classpath)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    for name in (
        "org.apache.iceberg.spark.SparkCatalog",
        "org.apache.spark.sql.kafka010.KafkaSourceProvider",
        "org.apache.spark.sql.avro.AvroFileFormat",
        "org.mariadb.jdbc.Driver",
        "org.postgresql.Driver",
    ):
        assert jvm.org.apache.spark.util.Utils.classForName(name, True, False) is not None


def test_fetch_resolves_a_coordinate_with_maven_once(tmp_path: Path) -> None:
    # commons-pool2 is in Maven's local repository since the session's packages were
    # fetched (it is spark-sql-kafka's dependency), so this runs Maven for real, offline.
    def fetch() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "icetide.cli", "jars", "fetch", "--dir", str(tmp_path)],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,
            env={"PATH": _path(), "HOME": str(Path.home()), "ICETIDE_CONFIG": _config(tmp_path)},
        )

    first = fetch()
    assert first.returncode == 0, first.stderr
    assert "org.apache.commons:commons-pool2:2.11.1: fetched" in first.stderr
    got = maven.fetched(tmp_path, maven.Coordinate.parse("org.apache.commons:commons-pool2:2.11.1"))
    assert [p.name for p in got or []] == ["commons-pool2-2.11.1.jar"]
    second = fetch()
    assert "commons-pool2:2.11.1: already there" in second.stderr


def _path() -> str:
    import os

    return os.environ["PATH"]


def _config(folder: Path) -> str:
    config = folder / "jars.yaml"
    config.write_text(
        "pipeline: jars\n"
        "spark: {packages: ['org.apache.commons:commons-pool2:2.11.1']}\n"
        "tables: [{name: t, schema: t.yaml}]\n"
    )
    return str(config)
