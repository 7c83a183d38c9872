"""Spark's file source reads what the files transport writes, and nothing else.

The unit tests mimic Spark's listing (names starting with ``.`` or ``_`` are hidden);
this checks the assumption against Spark itself, with the ledger's own ``file_messages``:
the open temp file and the transport's lock file are not read, and message ids are
``<file>:<line>`` of the published files.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from icetide.capture.transport.files import FilesTransport
from icetide.ledger.source import file_messages
from tests.unit.capture.test_capture_transport_files import change, messages


def _read_all(spark: SparkSession, landing: Path, tmp_path: Path) -> list[tuple[str, str]]:
    stream = file_messages(spark, str(landing), 100)
    query = (
        stream.writeStream.format("memory")
        .queryName(f"landing_{abs(hash(str(tmp_path)))}")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    rows = spark.table(query.name).collect()
    # Messages only (not the one receipt per file), their bytes as the text they encode.
    return sorted(
        (row["message_id"], bytes(row["raw"]).decode()) for row in rows if row["receipt"] is None
    )


def test_spark_sees_published_files_only(spark: SparkSession, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    with FilesTransport(landing, "shop", roll_bytes=300) as transport:
        for key in range(1, 12):
            transport.send(change(key, key, f"row {key}"))
            if transport.should_flush():
                transport.flush()
        transport.flush()
        transport.send(change(99))  # still in the hidden temp file while Spark reads
        assert any(p.name.startswith(".shop-") for p in landing.iterdir())
        assert (landing / ".shop.lock").exists()
        got = _read_all(spark, landing, tmp_path)
    assert transport.files_written > 1
    assert got == sorted(messages(landing))
    expected = [change(key, key, f"row {key}").to_json() for key in range(1, 12)]
    assert sorted(raw for _, raw in got) == sorted(expected)
