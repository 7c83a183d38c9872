"""A table's metadata read from the JVM (``spark.tables.metadata_snapshots``): whole and
exact, with no py4j answer longer than one socket write.

Any py4j answer over 8 KiB waits ~44 ms for Python's delayed ACK (docs/merge-performance.md,
"Fixed costs"); a table's metadata passes 8 KiB after a few commits, and the merge reads it
three times per table."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from py4j import clientserver
from pyspark.sql import SparkSession

from icetide.lake.commit import append_with_properties
from icetide.lake.tables import (
    HeldTables,
    current_snapshot_id,
    iceberg_table,
    loaded_once,
    metadata_snapshots,
    spark_schema,
    table_exists,
)
from icetide.schema.contract.names import TableName
from tests.integration.harness import Pipeline

SOCKET_WRITE = 8192
"""Bytes py4j's JVM side sends in one write (its writer's buffer)."""


def test_metadata_of_many_commits_comes_over_whole_in_small_answers(
    pipeline: Pipeline, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    table = TableName("lake", pipeline.config.catalog.namespace, "many_commits")
    spark.sql(f"CREATE TABLE {table.sql} (id BIGINT, v STRING) USING iceberg")
    # Summaries with text that grows in py4j's answer: multi-byte characters (up to
    # three UTF-8 bytes) and backslashes and newlines (escaped by py4j).
    note = "größe ≤ 3 € — \\path\\to\\x \n" * 8
    for i in range(24):
        rows = spark.createDataFrame([(i, "v")], "id BIGINT, v STRING")
        append_with_properties(rows, table, {"note": f"{i}: {note}"})
    loaded = iceberg_table(spark, table)
    jvm = spark.sparkContext._jvm
    whole = str(jvm.org.apache.iceberg.TableMetadataParser.toJson(loaded.operations().current()))
    assert len(whole.encode()) > 4 * SOCKET_WRITE  # several pieces, not one

    answers: list[int] = []
    send = clientserver.ClientServerConnection.send_command

    def recorded(self: Any, command: str) -> Any:
        answer = send(self, command)
        answers.append(len((answer or "").encode()))
        return answer

    monkeypatch.setattr(clientserver.ClientServerConnection, "send_command", recorded)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    current, snapshots = metadata_snapshots(spark, loaded)
    monkeypatch.undo()

    expected = json.loads(whole)
    assert current == expected["current-snapshot-id"]
    assert [(s.snapshot_id, s.parent_id, dict(s.summary)) for s in snapshots] == [
        (s["snapshot-id"], s.get("parent-snapshot-id"), s["summary"]) for s in expected["snapshots"]
    ]
    assert snapshots[-1].summary["note"] == f"23: {note}"
    assert answers and max(answers) < SOCKET_WRITE, max(answers)
    assert not list(scratch.iterdir())  # the JVM's file is gone


def test_metadata_read_again_is_the_tables_own_after_a_commit_and_after_a_drop(
    pipeline: Pipeline, spark: SparkSession
) -> None:
    """Snapshots are kept by metadata file, never served for another file or table: a
    commit's new file is read, and a table dropped and created again (whose first files
    a Hadoop catalog names as the old table's were) is not read as the old one."""
    table = TableName("lake", pipeline.config.catalog.namespace, "created_again")

    def create_and_append(note: str) -> tuple[str, list[Any]]:
        spark.sql(f"CREATE TABLE {table.sql} (id BIGINT) USING iceberg")
        append_with_properties(spark.createDataFrame([(1,)], "id BIGINT"), table, {"n": note})
        loaded = iceberg_table(spark, table)
        current, snapshots = metadata_snapshots(spark, loaded)
        assert metadata_snapshots(spark, loaded) == (current, snapshots)  # kept, equal
        return str(loaded.operations().current().metadataFileLocation()), snapshots

    first_file, first = create_and_append("first")
    append_with_properties(spark.createDataFrame([(2,)], "id BIGINT"), table, {"n": "more"})
    _, more = metadata_snapshots(spark, iceberg_table(spark, table))
    assert [s.summary["n"] for s in more] == ["first", "more"]
    spark.sql(f"DROP TABLE {table.sql} PURGE")
    again_file, again = create_and_append("again")
    if pipeline.config.catalog.type == "hadoop":
        assert again_file == first_file  # the case a file's name alone would get wrong
    assert [s.summary["n"] for s in again] == ["again"]
    assert again[0].snapshot_id != first[0].snapshot_id


def test_a_held_table_is_refreshed_and_one_created_again_is_loaded_again(
    pipeline: Pipeline, spark: SparkSession
) -> None:
    """The ledger's tables, held from batch to batch: another writer's commit and schema
    change are seen through the same object; a table dropped and created again is not
    read as the old one, nor one forgotten after its own version number came round."""
    table = TableName("lake", pipeline.config.catalog.namespace, "held")

    def columns(loaded: Any) -> list[str]:
        return [str(f.name()) for f in loaded.schema().columns()]

    spark.sql(f"CREATE TABLE {table.sql} (id BIGINT) USING iceberg")
    held = HeldTables(spark)
    first = held.get(table)
    assert first.currentSnapshot() is None
    spark.sql(f"INSERT INTO {table.sql} VALUES (1)")
    spark.sql(f"ALTER TABLE {table.sql} ADD COLUMN v STRING")
    again = held.get(table)
    assert again is first and again.currentSnapshot() is not None
    assert columns(again) == ["id", "v"]
    spark.sql(f"DROP TABLE {table.sql} PURGE")
    spark.sql(f"CREATE TABLE {table.sql} (k STRING) USING iceberg")
    created = held.get(table)
    assert columns(created) == ["k"] and created.currentSnapshot() is None
    spark.sql(f"DROP TABLE {table.sql} PURGE")
    spark.sql(f"CREATE TABLE {table.sql} (n INT) USING iceberg")
    held.forget(table)
    assert columns(held.get(table)) == ["n"]


def test_inside_loaded_once_each_table_is_loaded_once(
    pipeline: Pipeline, spark: SparkSession
) -> None:
    """The observer's scope: every look at a table inside answers from one load (a
    commit made meanwhile is seen only after it), a missing table included."""
    namespace = pipeline.config.catalog.namespace
    table = TableName("lake", namespace, "loaded_once")
    missing = TableName("lake", namespace, "loaded_once_missing")
    spark.sql(f"CREATE TABLE {table.sql} (id BIGINT) USING iceberg")
    with loaded_once():
        assert current_snapshot_id(spark, table) is None
        assert not table_exists(spark, missing)
        spark.sql(f"INSERT INTO {table.sql} VALUES (1)")
        spark.sql(f"CREATE TABLE {missing.sql} (id BIGINT) USING iceberg")
        assert current_snapshot_id(spark, table) is None
        assert iceberg_table(spark, table) is iceberg_table(spark, table)
        assert not table_exists(spark, missing)
    assert current_snapshot_id(spark, table) is not None
    assert table_exists(spark, missing)


def test_spark_schema_is_the_one_spark_table_gives_after_alters(
    pipeline: Pipeline, spark: SparkSession
) -> None:
    """The ledger aligns each append to :func:`spark_schema`, read without a DataFrame:
    it must be the schema ``spark.table`` shows, required fields, nested ids and all,
    and the table's new one as soon as an ALTER lands."""
    table = TableName("lake", pipeline.config.catalog.namespace, "spark_schema")
    spark.sql(
        f"CREATE TABLE {table.sql} (id BIGINT NOT NULL, d DECIMAL(12, 2), at TIMESTAMP, "
        "tags ARRAY<STRING>, m MAP<STRING, BIGINT>, s STRUCT<city: STRING, zip: INT>, "
        "day DATE, b BINARY) USING iceberg"
    )
    assert spark_schema(spark, table) == spark.table(table.sql).schema
    spark.sql(f"ALTER TABLE {table.sql} ADD COLUMN s.country STRING")
    spark.sql(f"ALTER TABLE {table.sql} ALTER COLUMN s.zip TYPE BIGINT")
    spark.sql(f"ALTER TABLE {table.sql} DROP COLUMN b")
    after = spark_schema(spark, table)
    assert after == spark.table(table.sql).schema
    assert "b" not in after.fieldNames()
    assert [f.name for f in after["s"].dataType.fields] == ["city", "zip", "country"]
    assert not after["id"].nullable
