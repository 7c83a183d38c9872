"""The JVM packages come from Maven, by coordinates, into the jar folder Spark reads."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from py4j.java_gateway import JavaPackage, JVMView
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icetide.lake.commit import with_commit_properties
from icetide.lake.tables import column_upper_bound, iceberg_table, metadata_snapshots, snapshot_of
from icetide.schema.contract.names import TableName
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


def test_classes_are_named_to_the_jvm_in_full(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """icetide's own JVM calls and PySpark's most frequent ones reach the JVM without a
    look-up by name (icetide/spark/jvm.py): each look-up searches every jar on the
    classpath, and a merge made 216 of them before."""
    table = TableName("lake", "jvm_names", "t")
    spark.sql(f"CREATE TABLE {table.sql} (id BIGINT, name STRING) USING iceberg")
    asked: list[str] = []
    for proxy in (JVMView, JavaPackage):
        real = proxy.__getattr__

        def asking(self: object, name: str, real: Any = real) -> Any:
            asked.append(name)
            return real(self, name)

        monkeypatch.setattr(proxy, "__getattr__", asking)
    with_commit_properties(
        spark, {"k": "v"}, lambda: spark.sql(f"INSERT INTO {table.sql} VALUES (1, 'a')")
    )
    loaded = iceberg_table(spark, table)
    snapshot = snapshot_of(loaded)
    current, snapshots = metadata_snapshots(spark, loaded)
    bound = column_upper_bound(spark, table, "id", loaded)
    frame = spark.table(table.sql).select(F.col("id") + F.lit(1), F.upper(F.col("name")))
    assert asked == []  # checked: fails with PySpark's names left unpinned
    assert snapshot is not None and snapshot.summary["k"] == "v"
    assert current == snapshot.snapshot_id and [s.snapshot_id for s in snapshots] == [current]
    assert bound.known and bound.value == 1
    assert [tuple(r) for r in frame.collect()] == [(2, "A")]


def test_a_local_file_system_maven_cannot_resolve_is_reported_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``hadoop-bare-naked-local-fs`` is wanted, not needed (icetide/spark/local_fs.py):
    a machine whose Maven cannot resolve it still gets its packages, and is told."""
    from icetide.cli.jars import cmd_jars_fetch
    from icetide.spark import local_fs

    monkeypatch.setattr(local_fs, "PACKAGE", "dev.icetide.absent:no-such-artifact:0.0.1")
    config = tmp_path / "jars.yaml"
    config.write_text(
        "pipeline: jars\nspark: {packages: []}\ntables: [{name: t, schema: t.yaml}]\n"
    )
    args = argparse.Namespace(config=str(config), dir=str(tmp_path / "jars"), dev=False)
    assert cmd_jars_fetch(args) == 0
    said = capsys.readouterr().err
    assert (
        "dev.icetide.absent:no-such-artifact:0.0.1: not fetched, sessions use Hadoop's own" in said
    )
    assert "Maven could not resolve" in said
