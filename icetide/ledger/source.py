"""The ledger's streaming input: raw messages (bytes) with a stable id, from files or Kafka.

Every message reaches the decoder as the exact bytes the producer wrote, so a line that
is not valid UTF-8 is dead-lettered with those bytes instead of being silently mended
(Spark's text reader would replace them with U+FFFD).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from icetide.config import Config

MESSAGES_SCHEMA = "message_id STRING, raw BINARY, receipt STRING"
"""The stream the ledger stage reads: one row per message, plus one receipt per file."""
BINARY_FILE_SCHEMA = "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"
_BOM = b"\xef\xbb\xbf"
_BLANK = b" \t\r\n\f\v"
_CHUNK = 4096


def split_lines(name: str, content: bytes) -> Iterator[tuple[str, bytes]]:
    """``(message_id, raw)`` of each line of landing file ``name``.

    Lines are numbered from 1 and keep their number whatever is skipped, so
    ``events-000001.json:17`` names the message for ever. Blank lines (whitespace only)
    carry no message and are skipped; a UTF-8 BOM opening the file is an encoding mark,
    not part of the first message (its bytes stay in ``raw``, which is the original line).

    >>> list(split_lines("f.json", b'\\xef\\xbb\\xbf{"a":1}\\r\\n \\t\\r\\n{"b":2}\\n'))
    [('f.json:1', b'\\xef\\xbb\\xbf{"a":1}\\r'), ('f.json:3', b'{"b":2}')]
    """
    for number, line in enumerate(content.split(b"\n"), 1):
        body = line[len(_BOM) :] if number == 1 and line.startswith(_BOM) else line
        if body.strip(_BLANK):
            yield f"{name}:{number}", line


def file_name(path: str) -> str:
    """The last segment of a file's path or URI: the name message ids start with."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def receipt_text(name: str, length: int, mtime_ms: int, read: int) -> str:
    """What was read of one landing file: listed length and time, and bytes read."""
    return json.dumps({"file": name, "length": length, "mtime_ms": mtime_ms, "read": read})


ArrowMap = Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]
"""A ``mapInArrow`` function."""


def split_files() -> ArrowMap:
    """The ``mapInArrow`` function: ``binaryFile`` rows → messages and one receipt per file."""

    def batch(
        ids: list[str], raws: list[bytes | None], receipts: list[str | None]
    ) -> pa.RecordBatch:
        columns = [
            pa.array(ids, pa.string()),
            pa.array(raws, pa.binary()),
            pa.array(receipts, pa.string()),
        ]
        return pa.RecordBatch.from_arrays(columns, names=["message_id", "raw", "receipt"])

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for files in batches:
            paths = files.column("path").to_pylist()
            # Microseconds since the epoch, whatever the session's time zone.
            times = files.column("modificationTime").cast(pa.int64()).to_pylist()
            lengths = files.column("length").to_pylist()
            contents = files.column("content")
            for i, path in enumerate(paths):
                name = file_name(path)
                content = contents[i].as_py() or b""
                mtime_ms = (times[i] or 0) // 1000
                ids: list[str] = [name]
                raws: list[bytes | None] = [None]
                receipts: list[str | None] = [
                    receipt_text(name, int(lengths[i] or 0), mtime_ms, len(content))
                ]
                for message_id, raw in split_lines(name, content):
                    ids.append(message_id)
                    raws.append(raw)
                    receipts.append(None)
                    if len(ids) >= _CHUNK:
                        yield batch(ids, raws, receipts)
                        ids, raws, receipts = [], [], []
                if ids:
                    yield batch(ids, raws, receipts)

    return run


def landing_files(spark: SparkSession, path: str, max_files: int) -> DataFrame:
    """The landing folder's new files as a stream of whole files (``binaryFile`` rows:
    path, modification time, length, content), ``max_files`` at most a micro-batch;
    :func:`split_files` makes them messages."""
    return (
        spark.readStream.format("binaryFile")
        .schema(BINARY_FILE_SCHEMA)
        .option("maxFilesPerTrigger", max_files)
        .load(path)
        .select("path", "modificationTime", "length", "content")
    )


def file_messages(spark: SparkSession, path: str, max_files: int) -> DataFrame:
    """Newline-delimited JSON files in a landing folder → (message_id, raw, receipt).

    Files are read whole, as bytes, so each line keeps its number and its exact bytes.
    Writers must publish a file complete and never change it (write elsewhere or under a
    name starting with ``.`` or ``_``, which Spark ignores, then rename it into the
    folder): a file is read once, and what is appended to it later is never read —
    :mod:`icetide.ledger.landing` warns when that happens.
    """
    return as_messages(landing_files(spark, path, max_files), split_files())


def as_messages(rows: DataFrame, split: ArrowMap | None) -> DataFrame:
    """A micro-batch of the stream :func:`source_rows` gives, as messages (message_id,
    raw, receipt)."""
    return rows if split is None else rows.mapInArrow(split, MESSAGES_SCHEMA)


def subscribed_partitions(config: Config, *, timeout: float = 10.0) -> dict[str, list[int]]:
    """The partitions of every topic the ledger subscribes to now (``transport.topics``
    that exist, or the topics ``transport.topic_pattern`` matches), asked of the brokers
    with the Kafka source's ``kafka.*`` options."""
    import re

    from confluent_kafka.admin import AdminClient

    transport = config.transport
    options = {
        key.removeprefix("kafka."): value
        for key, value in transport.options_plain().items()
        if key.startswith("kafka.")
    }
    admin = AdminClient({**options, "bootstrap.servers": str(transport.bootstrap_servers)})
    topics = admin.list_topics(timeout=timeout).topics
    pattern = re.compile(transport.topic_pattern) if transport.topic_pattern else None
    wanted = set(transport.topics)
    return {
        name: sorted(meta.partitions)
        for name, meta in topics.items()
        if (pattern.fullmatch(name) if pattern is not None else name in wanted)
    }


def kafka_messages(
    spark: SparkSession, config: Config, starting: Mapping[str, Mapping[str, int]] | None = None
) -> DataFrame:
    """Kafka topics → (message_id, raw, receipt), the id being ``topic/partition/offset``.

    ``starting`` (topic → partition → offset) replaces ``transport.starting_offsets``
    for a query with no checkpoint yet (:mod:`icetide.ledger.resume`). Needs Spark's
    ``spark-sql-kafka-0-10`` package on the cluster's classpath.
    """
    transport = config.transport
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", transport.bootstrap_servers)
        .option(
            "startingOffsets",
            json.dumps(starting) if starting is not None else transport.starting_offsets,
        )
        .option("failOnDataLoss", "true")
        .option("maxOffsetsPerTrigger", transport.max_messages_per_trigger)
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
        F.col("value").alias("raw"),
        F.lit(None).cast("string").alias("receipt"),
    )


def source_rows(
    spark: SparkSession, config: Config, starting: Mapping[str, Mapping[str, int]] | None = None
) -> tuple[DataFrame, ArrowMap | None]:
    """The configured transport as a stream, and the Python step that makes its rows
    messages (:func:`as_messages`). Kafka's rows are messages already (None); the
    landing folder's are whole files, split by :func:`split_files` in the task that
    reads them, so that the ledger's one pass can split and classify in one Python
    worker instead of sending every message back to the JVM between the two.
    ``starting`` as :func:`kafka_messages` takes it."""
    transport = config.transport
    if transport.type == "kafka":
        return kafka_messages(spark, config, starting), None
    landing = config.resolved_path(transport.path)
    landing.mkdir(parents=True, exist_ok=True)
    return landing_files(spark, str(landing), transport.max_files_per_trigger), split_files()
