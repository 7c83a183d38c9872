"""The ledger's streaming input: raw messages with a stable id, from files or Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from icetide.config import Config


def file_messages(spark: SparkSession, path: str, max_files: int) -> DataFrame:
    """Newline-delimited JSON files in a landing folder → (message_id, raw).

    Files are read whole so each line keeps its number: ``events-000001.json:17`` names
    the message for ever. Writers must create files atomically (temp name starting with
    ``.`` or ``_``, which Spark ignores, then rename).
    """
    files = (
        spark.readStream.format("text")
        .option("wholetext", "true")
        .option("maxFilesPerTrigger", max_files)
        .load(path)
    )
    lines = files.select(
        F.regexp_extract(F.input_file_name(), r"([^/]*)$", 1).alias("file"),
        F.posexplode(F.split(F.col("value"), "\n")).alias("line", "raw"),
    )
    return lines.where(F.trim("raw") != "").select(
        F.concat_ws(":", "file", (F.col("line") + 1).cast("string")).alias("message_id"),
        "raw",
    )


def kafka_messages(spark: SparkSession, config: Config) -> DataFrame:
    """Kafka topics → (message_id, raw), the id being ``topic/partition/offset``.

    Needs Spark's ``spark-sql-kafka-0-10`` package on the cluster's classpath.
    """
    transport = config.transport
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", transport.bootstrap_servers)
        .option("startingOffsets", transport.starting_offsets)
        .option("failOnDataLoss", "true")
    )
    if transport.topic_pattern:
        reader = reader.option("subscribePattern", transport.topic_pattern)
    else:
        reader = reader.option("subscribe", ",".join(transport.topics))
    for key, value in transport.options_plain().items():
        reader = reader.option(key, value)
    return reader.load().select(
        F.concat_ws(
            "/", "topic", F.col("partition").cast("string"), F.col("offset").cast("string")
        ).alias("message_id"),
        F.col("value").cast("string").alias("raw"),
    )


def raw_messages(spark: SparkSession, config: Config) -> DataFrame:
    """The configured transport as a stream of (message_id, raw)."""
    transport = config.transport
    if transport.type == "kafka":
        return kafka_messages(spark, config)
    landing = config.resolved_path(transport.path)
    landing.mkdir(parents=True, exist_ok=True)
    return file_messages(spark, str(landing), transport.max_files_per_trigger)
