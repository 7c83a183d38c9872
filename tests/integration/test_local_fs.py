"""Files written under ``file:`` paths start no ``chmod`` process (icetide/spark/local_fs.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pyspark.sql import SparkSession

from icetide.schema.contract.names import TableName
from icetide.spark.jvm import jvm_class
from icetide.spark.local_fs import FILE_SYSTEM_CLASS


def test_an_iceberg_write_and_commit_start_no_process(
    spark: SparkSession, warehouse: Path, tmp_path: Path
) -> None:
    """Hadoop without its native library sets each new file's permission by starting
    ``chmod``: six processes for a commit with no data files, ~85 for a merge. Java's
    own flight recorder counts the processes the JVM starts while a row is inserted (a
    data file, a manifest, a manifest list, table metadata, each with its ``.crc``)."""
    table = TableName("lake", "local_fs", "t")
    spark.sql(f"CREATE TABLE {table.sql} (id BIGINT, name STRING) USING iceberg")
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    uri = jvm_class("java.net.URI")("file:///")
    file_system = jvm_class("org.apache.hadoop.fs.FileSystem").get(uri, hadoop_conf)
    assert file_system.getClass().getName() == FILE_SYSTEM_CLASS

    recording = jvm_class("jdk.jfr.Recording")()
    recording.enable("jdk.ProcessStart")
    recording.start()
    try:
        spark.sql(f"INSERT INTO {table.sql} VALUES (1, 'a')")
    finally:
        recording.stop()
    dump = tmp_path / "processes.jfr"
    recording.dump(jvm_class("java.io.File")(str(dump)).toPath())
    recording.close()
    events = jvm_class("jdk.jfr.consumer.RecordingFile").readAllEvents(
        jvm_class("java.io.File")(str(dump)).toPath()
    )
    started = [str(event.getString("command")) for event in events]
    assert started == []

    # Permissions are still set: Hadoop's default for a new file (0666 less its 022 umask).
    [data_file] = [
        row.file_path.removeprefix("file:")
        for row in spark.sql(f"SELECT file_path FROM {table.sql}.files").collect()
    ]
    assert data_file.startswith(str(warehouse))
    assert stat.S_IMODE(os.stat(data_file).st_mode) == 0o644
