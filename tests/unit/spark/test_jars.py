"""JVM packages by Maven coordinates: the jar folder, the classpath, the fallbacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from icetide.config.sections import SparkConfig
from icetide.errors import ConfigError
from icetide.spark import jars as maven
from icetide.spark.local_fs import CLASS_PATH_KEY, FILE_SYSTEM_CLASS, IMPL_KEY, local_fs_conf
from icetide.spark.local_fs import PACKAGE as LOCAL_FS_PACKAGE
from icetide.spark.session import ICEBERG_JAR, jvm_jars


def _fetched(folder: Path, coordinate: str, *names: str, complete: bool = True) -> None:
    where = folder / maven.Coordinate.parse(coordinate).folder
    where.mkdir(parents=True)
    for name in names:
        (where / name).write_bytes(b"PK")
    if complete:
        (where / ".complete").write_text(coordinate)


@pytest.mark.parametrize("text", ["org.x:y", "a:b:c:d", "a::1", "a b:c:1", ""])
def test_a_bad_coordinate_is_a_config_error_showing_the_form(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        maven.Coordinate.parse(text)
    assert caught.value.path == "spark.packages"
    assert "group:artifact:version" in (caught.value.hint or "")


def test_the_pom_names_only_the_coordinate_and_no_repository() -> None:
    pom = maven.pom_for(maven.Coordinate.parse("org.apache.spark:spark-avro_2.12:3.5.7"))
    assert "<artifactId>spark-avro_2.12</artifactId>" in pom
    assert "<version>3.5.7</version>" in pom
    assert "repositor" not in pom and "http" not in pom.replace("http://maven.apache.org/POM", "")


def test_a_half_fetched_coordinate_counts_as_missing(tmp_path: Path) -> None:
    _fetched(tmp_path, "g:a:1", "a-1.jar", complete=False)
    assert maven.fetched(tmp_path, maven.Coordinate("g", "a", "1")) is None
    _fetched(tmp_path, "g:b:1", "b-1.jar", "dep-2.0.jar")
    got = maven.fetched(tmp_path, maven.Coordinate("g", "b", "1"))
    assert [p.name for p in got or []] == ["b-1.jar", "dep-2.0.jar"]


def test_jars_spark_already_ships_are_left_out_whatever_their_version(tmp_path: Path) -> None:
    spark_has = maven.spark_home_jars()
    assert "slf4j-api" in spark_has and "kafka-clients" not in spark_has
    jars = [tmp_path / "slf4j-api-9.9.9.jar", tmp_path / "kafka-clients-3.4.1.jar"]
    assert maven.classpath(jars, spark_has) == [tmp_path / "kafka-clients-3.4.1.jar"]


def test_fetched_packages_go_on_the_classpath_instead_of_the_fallbacks(tmp_path: Path) -> None:
    _fetched(tmp_path, maven.ICEBERG_RUNTIME, "iceberg-spark-runtime-3.5_2.12-1.10.2.jar")
    _fetched(tmp_path, "org.postgresql:postgresql:42.7.8", "postgresql-42.7.8.jar")
    spark = SparkConfig(
        jars_dir=str(tmp_path),
        packages=(maven.ICEBERG_RUNTIME, "org.postgresql:postgresql:42.7.8"),
        extra_jars=(str(tmp_path / "mine.jar"),),
    )
    names = [p.name for p in jvm_jars(spark)]
    assert names[0] == "mine.jar"
    assert "iceberg-spark-runtime-3.5_2.12-1.10.2.jar" in names
    assert "postgresql-42.7.8.jar" in names
    assert "postgresql.jar" not in names  # Debian's copy is only the fallback
    assert ICEBERG_JAR not in [p.name for p in jvm_jars(spark) if "snowpark" in str(p)]


def test_with_nothing_fetched_the_defaults_fall_back_to_the_wheel(tmp_path: Path) -> None:
    jars = jvm_jars(SparkConfig(jars_dir=str(tmp_path)))
    assert jars[0].name == ICEBERG_JAR and jars[0].is_file()
    assert "snowpark_connect_deps_iceberg" in str(jars[0])


def test_packages_the_config_names_must_have_been_fetched(tmp_path: Path) -> None:
    spark = SparkConfig(
        jars_dir=str(tmp_path), packages=("org.apache.spark:spark-avro_2.12:3.5.7",)
    )
    with pytest.raises(ConfigError) as caught:
        jvm_jars(spark)
    assert "spark-avro_2.12:3.5.7" in caught.value.message
    assert "icetide jars fetch" in (caught.value.hint or "")


def test_a_catalog_on_s3_file_io_gets_the_aws_bundle_by_default_and_needs_it_fetched(
    tmp_path: Path,
) -> None:
    spark = SparkConfig(jars_dir=str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        jvm_jars(spark, maven.S3_FILE_IO)
    assert caught.value.path == "catalog.properties.io-impl"
    assert "icetide jars fetch" in (caught.value.hint or "")
    _fetched(tmp_path, maven.ICEBERG_AWS_BUNDLE, "iceberg-aws-bundle-1.10.1.jar")
    assert "iceberg-aws-bundle-1.10.1.jar" in [p.name for p in jvm_jars(spark, maven.S3_FILE_IO)]
    # Not without S3FileIO, and never added to a list the config names itself.
    assert "iceberg-aws-bundle-1.10.1.jar" not in [p.name for p in jvm_jars(spark)]
    named = SparkConfig(jars_dir=str(tmp_path), packages=(maven.ICEBERG_RUNTIME,))
    assert maven.pipeline_packages(named.packages, maven.S3_FILE_IO) == (maven.ICEBERG_RUNTIME,)


def test_a_provided_iceberg_runtime_is_not_added_even_when_fetched(tmp_path: Path) -> None:
    _fetched(tmp_path, maven.ICEBERG_RUNTIME, "iceberg-spark-runtime-3.5_2.12-1.10.2.jar")
    spark = SparkConfig(jars_dir=str(tmp_path), iceberg_jar="provided")
    assert not any("iceberg" in p.name for p in jvm_jars(spark))


def test_fetch_without_maven_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(maven.FetchError) as caught:
        maven.fetch([maven.Coordinate("g", "a", "1")], tmp_path, mvn="no-such-mvn-here")
    assert "Maven" in caught.value.message and "apt-get install maven" in (caught.value.hint or "")


def test_the_local_file_system_goes_on_the_drivers_class_path_of_a_local_master(
    tmp_path: Path,
) -> None:
    """Hadoop resolves ``fs.file.impl`` before ``spark.jars`` load: the jar must be on
    the driver's class path (after the user's own entries), and only where the
    executors are that JVM; the user's own ``fs.file.impl`` wins."""
    jar = "hadoop-bare-naked-local-fs-0.1.0.jar"
    assert local_fs_conf(tmp_path, True, {}) == {}  # not fetched: Hadoop's own
    _fetched(tmp_path, LOCAL_FS_PACKAGE, jar)
    where = tmp_path / maven.Coordinate.parse(LOCAL_FS_PACKAGE).folder / jar
    assert local_fs_conf(tmp_path, True, {}) == {
        IMPL_KEY: FILE_SYSTEM_CLASS,
        CLASS_PATH_KEY: str(where),
    }
    mine = {CLASS_PATH_KEY: "/opt/mine.jar"}
    assert local_fs_conf(tmp_path, True, mine)[CLASS_PATH_KEY] == f"/opt/mine.jar:{where}"
    assert local_fs_conf(tmp_path, False, {}) == {}
    assert local_fs_conf(tmp_path, True, {IMPL_KEY: "org.example.MyFileSystem"}) == {}
