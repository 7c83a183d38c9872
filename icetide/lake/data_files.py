"""Parquet files written by Python tasks and committed to an Iceberg table from the driver.

Spark's Iceberg writer appends one table per Spark job, each with a plan analysed and
compiled in the JVM: at hundreds of tables a micro-batch, that fixed cost was most of
the ledger's time (bench/results/tables.md). So the ledger writes a batch's tables in
one job: its Python tasks write each table's rows as a Parquet file carrying the
table's field ids (:meth:`FileTarget.write`, through PyIceberg's file IO, so object
stores are written as Spark would: with the table's own file IO properties), and the
driver commits each table's files through Iceberg's Java API (:func:`append_files`),
with each file's metrics (counts and bounds) as Iceberg's own writer records them: those
the task computed, or else read from the footer (:mod:`icetide.lake.file_metrics`).

Only a table partitioned the way icetide creates its ledger and dead-letter tables
(by the day of one ingestion-time column, or not at all) is written this way
(:func:`file_target`): every row of a batch then falls in one partition, known before
the job. Any other table is appended by Spark's writer.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from icetide.lake.file_metrics import (
    FooterMetrics,
    content_file_json,
    file_metrics,
    iceberg_schema_of,
    task_metrics_config,
)
from icetide.spark.jvm import jvm_class

CODECS = {"uncompressed": "none"}
"""Iceberg's Parquet codec names that pyarrow spells otherwise (the rest are the same)."""
DEFAULT_CODEC = "zstd"
"""``write.parquet.compression-codec``'s default since Iceberg 1.4."""
WRITE_BUFFER = 64 * 1024
"""Bytes a task's output stream buffers before writing to the file. PyIceberg's default
is a mebibyte, allocated afresh for every file: Arrow's allocator gets it from the
system as a new huge page each time, which the kernel zeroes, and a task of a thousand
tables opens a thousand files. With a mebibyte, zeroing those pages was a quarter of
such a task's CPU (``perf``), and the task took 1.36 times as long
(``bench/task_files_bench.py``).
The Parquet writer hands the stream whole pages, so a smaller buffer costs no more
writes than pages; an object store's stream buffers its upload parts itself."""


@dataclass(frozen=True)
class WrittenFile:
    """A Parquet file a task wrote: where, its size in bytes and its rows."""

    path: str
    size: int
    rows: int
    metrics: str | None = None
    """Its metrics as Iceberg's JSON of a data file's metrics (:func:`file_metrics`);
    None: the driver reads them from the file's footer."""


@dataclass(frozen=True)
class FileTarget:
    """Where and how a task writes one table's files of a batch (sent to the tasks)."""

    schema_json: str
    """The table's current Iceberg schema (JSON): the files' columns and field ids."""
    folder: str
    """The data location of the batch's files (the table's location provider's, in the
    batch's partition)."""
    partition: str | None
    """The batch's partition path (``_ingested_at_day=2026-12-06``); None: unpartitioned."""
    io: Mapping[str, str] = field(repr=False)
    """The table's file IO properties (credentials included: never printed)."""
    codec: str = DEFAULT_CODEC
    level: int | None = None
    metrics: Mapping[str, str] | None = None
    """The table's metrics properties (``write.metadata.metrics.*``) when the task
    computes each file's metrics (:func:`task_metrics_config`); None: the driver reads
    them from the footer."""

    def arrow_schema(self) -> pa.Schema:
        """The table's schema in Arrow, each field with its Iceberg field id."""
        return arrow_schema_of(self.schema_json)

    def column_type(self, name: str) -> Any:
        """PyIceberg's type of the table's top-level column ``name``."""
        return iceberg_schema_of(self.schema_json).find_field(name).field_type

    def open(self) -> FileWriter:
        """A new Parquet file of this target, written a row group at a time."""
        return FileWriter(self)

    def delete(self, path: str) -> None:
        """Delete ``path``, a file written for this target and never committed."""
        from pyiceberg.io import load_file_io

        load_file_io(python_io_properties(self.io), path).delete(path)


class FileWriter:
    """One Parquet file a task writes for a :class:`FileTarget`: opened through
    PyIceberg's file IO (local, HDFS or an object store, as the table's location says),
    each :meth:`write` a row group, :meth:`close` the footer."""

    def __init__(self, target: FileTarget) -> None:
        from pyiceberg.io import load_file_io
        from pyiceberg.io.pyarrow import BUFFER_SIZE

        self._target = target
        self.path = f"{target.folder}/{uuid.uuid4()}.parquet"
        properties = python_io_properties(target.io)
        properties.setdefault(BUFFER_SIZE, str(WRITE_BUFFER))
        self._io = load_file_io(properties, self.path)
        self._stream = self._io.new_output(self.path).create(overwrite=False)
        self._writer = pq.ParquetWriter(
            self._stream,
            target.arrow_schema(),
            compression=CODECS.get(target.codec, target.codec),
            compression_level=target.level,
        )
        self.rows = 0

    def write(self, rows: pa.Table) -> None:
        """Write ``rows`` (of the target's :meth:`~FileTarget.arrow_schema`)."""
        self._writer.write_table(rows)
        self.rows += rows.num_rows

    def discard(self) -> None:
        """End the file and delete it (a write that will not be committed)."""
        self._writer.close()
        self._stream.close()
        self._io.delete(self.path)

    def close(self) -> WrittenFile:
        """End the file; what was written, with its metrics when the target asks."""
        self._writer.close()
        size = int(self._stream.tell())
        self._stream.close()
        metrics = None
        if self._target.metrics is not None:
            footer = self._writer.writer.metadata
            try:
                metrics = file_metrics(footer, self._target.schema_json, self._target.metrics)
            except Exception:  # noqa: BLE001 - the driver reads the footer, as it always can
                metrics = None
        return WrittenFile(self.path, size, self.rows, metrics)


@functools.lru_cache(maxsize=4096)
def arrow_schema_of(schema_json: str) -> pa.Schema:
    """The Arrow schema, with field ids, of an Iceberg schema's JSON text (cached)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return schema_to_pyarrow(iceberg_schema_of(schema_json))


def python_io_properties(java: Mapping[str, str]) -> dict[str, str]:
    """PyIceberg's file IO properties for a table whose Java file IO has ``java``: the
    S3 keys are the same but for the region and the addressing style.

    >>> python_io_properties({"client.region": "eu-west-1", "s3.path-style-access": "true"})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'client.region': 'eu-west-1', 's3.path-style-access': 'true', 's3.region': 'eu-west-1',
     's3.force-virtual-addressing': 'false'}
    """
    props = dict(java)
    if "client.region" in props:
        props.setdefault("s3.region", props["client.region"])
    if props.get("s3.path-style-access", "").lower() == "true":
        props.setdefault("s3.force-virtual-addressing", "false")
    return props


def partition_of(spec_fields: list[tuple[str, str, str]], column: str, day: date) -> str | None:
    """The partition path of a batch ingested on ``day`` in a table whose partition spec
    has ``spec_fields`` (name, transform, source column), or ``""`` for an unpartitioned
    table; None when its rows may fall in several partitions (written by Spark then).

    >>> partition_of([("_ingested_at_day", "day", "_ingested_at")], "_ingested_at",
    ...              date(2026, 12, 6))
    '_ingested_at_day=2026-12-06'
    >>> partition_of([], "_ingested_at", date(2026, 12, 6))
    ''
    >>> partition_of([("k_bucket", "bucket[4]", "k")], "_ingested_at", date(2026, 12, 6))
    """
    if not spec_fields:
        return ""
    if len(spec_fields) == 1 and spec_fields[0][1:] == ("day", column):
        return f"{spec_fields[0][0]}={day.isoformat()}"
    return None


def file_target(table: Any, column: str, day: date) -> FileTarget | None:
    """How a batch ingested on ``day`` is written to ``table`` (an Iceberg ``Table``,
    py4j) whose ingestion time is ``column``; None: not in files of its own (its
    partitioning is not icetide's, or its file IO does not say its properties).

    Each py4j call is a round trip to the JVM, and this runs for two tables of each
    table in every batch: the schema, the spec and both property maps come over as one
    JSON text each (a Java map walked from Python is a call per entry and per value)."""
    json_of = jvm_class("com.fasterxml.jackson.databind.ObjectMapper")().writeValueAsString
    schema, spec = table.schema(), table.spec()
    schema_json = str(jvm_class("org.apache.iceberg.SchemaParser").toJson(schema))
    names = {f["id"]: f["name"] for f in json.loads(schema_json)["fields"]}
    spec_fields = json.loads(str(jvm_class("org.apache.iceberg.PartitionSpecParser").toJson(spec)))
    fields = [
        (f["name"], f["transform"], names.get(f["source-id"], "")) for f in spec_fields["fields"]
    ]
    partition = partition_of(fields, column, day)
    if partition is None:
        return None
    try:
        io = json.loads(str(json_of(table.io().properties())))
    except Exception:  # a file IO that does not expose its properties
        return None
    locations = table.locationProvider()
    if partition:
        data = jvm_class("org.apache.iceberg.DataFiles").data(spec, partition)
        sample = str(locations.newDataLocation(spec, data, "f"))
    else:
        sample = str(locations.newDataLocation("f"))
    properties = json.loads(str(json_of(table.properties())))
    level = properties.get("write.parquet.compression-level")
    sorted_table = not table.sortOrder().isUnsorted()
    return FileTarget(
        schema_json=schema_json,
        folder=sample.removesuffix("/f"),
        partition=partition or None,
        io={str(k): str(v) for k, v in io.items()},
        codec=properties.get("write.parquet.compression-codec", DEFAULT_CODEC).lower(),
        level=int(level) if level else None,
        metrics=task_metrics_config(properties, schema_json, sorted_table),
    )


def append_files(
    table: Any,
    files: list[WrittenFile],
    partition: str | None,
    properties: Mapping[str, str],
) -> None:
    """Commit ``files`` (of one partition) to ``table`` in one snapshot carrying
    ``properties`` in its summary. Each file's metrics (counts, bounds) are those its
    task computed (:func:`~icetide.lake.file_metrics.file_metrics`), or else read from
    its footer as the table's metrics config says: either way as Iceberg's own writer
    records them."""
    footers: FooterMetrics | None = None
    spec = table.spec()
    append = table.newAppend()
    if any(written.metrics is not None for written in files):
        read_tree = jvm_class("org.apache.iceberg.util.JsonUtil").mapper().readTree
        parse = jvm_class("org.apache.iceberg.ContentFileParser").fromJson
        spec_id = int(spec.specId())
        # partition_of's only partition: one field, the day, written as in its path
        values = (
            {int(spec.fields().get(0).fieldId()): partition.split("=", 1)[1]} if partition else {}
        )
    for written in files:
        if written.metrics is not None:
            text = content_file_json(written.path, written.size, written.metrics, spec_id, values)
            append = append.appendFile(parse(read_tree(text), spec))
            continue
        footers = footers or FooterMetrics(table)
        data_file = (
            jvm_class("org.apache.iceberg.DataFiles")
            .builder(spec)
            .withPath(written.path)
            .withFormat(jvm_class("org.apache.iceberg.FileFormat").PARQUET)
            .withFileSizeInBytes(written.size)
            .withMetrics(footers.read(written.path))
        )
        if partition:
            data_file = data_file.withPartitionPath(partition)
        append = append.appendFile(data_file.build())
    for key, value in properties.items():
        append = append.set(key, value)
    append.commit()
