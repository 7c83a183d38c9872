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
from icetide.lake.tables import iceberg_table, metadata_snapshots
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
