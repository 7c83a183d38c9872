"""Parquet files written by Python tasks and committed to an Iceberg table from the driver.

Spark's Iceberg writer appends one table per Spark job, each with a plan analysed and
compiled in the JVM: at hundreds of tables a micro-batch, that fixed cost was most of
the ledger's time (bench/results/tables.md). So the ledger writes a batch's tables in
one job: its Python tasks write each table's rows as a Parquet file carrying the
table's field ids (:meth:`FileTarget.write`, through PyIceberg's file IO, so object
stores are written as Spark would: with the table's own file IO properties), and the
driver commits each table's files through Iceberg's Java API (:func:`append_files`),
with each file's metrics (counts and bounds) as Iceberg's own writer records them.

Those metrics are computed by the task that wrote the file, from the footer it has just
written (PyIceberg's statistics of a Parquet file's metadata, :func:`file_metrics`), and
reach the driver as Iceberg's JSON of a data file (``ContentFileParser``): one parse in
the JVM a file. Reading each footer back in the driver was a fifth of the JVM's time
committing a batch of 1,000 tables (bench/results/tables.md). Where PyIceberg's metrics
would differ from the Java writer's (:func:`task_metrics_config`), the driver still
reads the footer (:class:`FooterMetrics`).

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

from icetide.spark.jvm import jvm_class

CODECS = {"uncompressed": "none"}
"""Iceberg's Parquet codec names that pyarrow spells otherwise (the rest are the same)."""
DEFAULT_CODEC = "zstd"
"""``write.parquet.compression-codec``'s default since Iceberg 1.4."""


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

        self._target = target
        self.path = f"{target.folder}/{uuid.uuid4()}.parquet"
        self._io = load_file_io(python_io_properties(target.io), self.path)
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
def iceberg_schema_of(schema_json: str) -> Any:
    """PyIceberg's :class:`~pyiceberg.schema.Schema` of an Iceberg schema's JSON text,
    parsed once per process (a few milliseconds each, and a batch asks for every table's;
    a schema changes seldom)."""
    from pyiceberg.schema import Schema

    return Schema.model_validate_json(schema_json)


@functools.lru_cache(maxsize=4096)
def arrow_schema_of(schema_json: str) -> pa.Schema:
    """The Arrow schema, with field ids, of an Iceberg schema's JSON text (cached)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return schema_to_pyarrow(iceberg_schema_of(schema_json))


METRICS_PREFIX = "write.metadata.metrics."
"""Where an Iceberg table's properties say which metrics its files carry."""
DEFAULT_METRICS_MODE = "write.metadata.metrics.default"
MAX_INFERRED_COLUMNS = "write.metadata.metrics.max-inferred-column-defaults"
MAX_INFERRED_DEFAULT = 100
"""Iceberg's default for :data:`MAX_INFERRED_COLUMNS`."""


def task_metrics_config(
    properties: Mapping[str, str], schema_json: str, sorted_table: bool
) -> dict[str, str] | None:
    """The metrics properties a task computes its files' metrics with
    (:func:`file_metrics`), for a table with ``properties``, the schema ``schema_json``
    and a sort order (``sorted_table``); None where those would not be the metrics
    Iceberg's Java writer records, so that the driver reads them from the footer:

    - a sorted table: Java keeps at least ``truncate(16)`` for its sort columns;
    - no default mode and more top-level columns than ``max-inferred-column-defaults``:
      Java keeps the metrics of the first ones only;
    - a mode PyIceberg refuses (Java ignores it with a warning).

    >>> schema = '{"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "a",'
    >>> schema += ' "required": false, "type": "string"}]}'
    >>> task_metrics_config({"write.metadata.metrics.column.a": "full", "x": "1"}, schema, False)
    {'write.metadata.metrics.column.a': 'full'}
    >>> task_metrics_config({}, schema, True) is None
    True
    >>> task_metrics_config({MAX_INFERRED_COLUMNS: "0"}, schema, False) is None
    True
    >>> task_metrics_config({DEFAULT_METRICS_MODE: "truncate(0)"}, schema, False) is None
    True
    """
    if sorted_table:
        return None
    config = {k: v for k, v in properties.items() if k.startswith(METRICS_PREFIX)}
    schema = iceberg_schema_of(schema_json)
    if DEFAULT_METRICS_MODE not in config:
        try:
            limit = int(config.get(MAX_INFERRED_COLUMNS, MAX_INFERRED_DEFAULT))
        except ValueError:
            return None
        if len(schema.fields) > (limit if limit >= 0 else MAX_INFERRED_DEFAULT):
            return None
    try:
        _statistics_plan(schema_json, tuple(sorted(config.items())))
    except ValueError:
        return None
    return config


@functools.lru_cache(maxsize=4096)
def _statistics_plan(
    schema_json: str, config: tuple[tuple[str, str], ...]
) -> tuple[Any, Any, frozenset[int]]:
    """The statistics plan (by field id), the Parquet columns' field ids, and the fields
    whose size is not kept either, of a schema, as Iceberg's Java writer keeps metrics
    (cached: a task closes a file of each of its tables, and schemas seldom change).

    Where Java differs from PyIceberg's plan:

    - PyIceberg keeps only the counts of any column whose name has a dot, taking it for
      a field in a list or a map. Java keeps the bounds of every field reached through
      structs alone (a ledger's ``_after`` and ``_before`` fields, a top-level column
      named with a dot): those get the mode their own name's configuration gives, as
      PyIceberg gives a top-level column's.
    - Of a field in a list or a map, Java keeps only the size, whatever the mode: those
      get ``none``, which keeps the size.
    - Of a field whose mode is ``none``, Java keeps nothing, its size included."""
    from dataclasses import replace

    from pyiceberg.io.pyarrow import (
        MetricModeTypes,
        MetricsMode,
        compute_statistics_plan,
        match_metrics_mode,
        parquet_path_to_id_mapping,
    )
    from pyiceberg.types import BinaryType, ListType, MapType, StringType, StructType

    none = MetricsMode(MetricModeTypes.NONE)
    properties = dict(config)
    schema = iceberg_schema_of(schema_json)
    plan = compute_statistics_plan(schema, properties)
    unsized = {field_id for field_id, collector in plan.items() if collector.mode == none}
    default = properties.get(DEFAULT_METRICS_MODE, "truncate(16)")
    fields = list(schema.fields)
    while fields:
        field = fields.pop()
        kind = field.field_type
        if isinstance(kind, StructType):
            fields.extend(kind.fields)
        elif isinstance(kind, ListType | MapType):
            for field_id in _leaf_ids(kind):
                plan[field_id] = replace(plan[field_id], mode=none)
        elif field.field_id in plan:  # a primitive reached through structs alone
            collector = plan[field.field_id]
            name = f"{METRICS_PREFIX}column.{collector.column_name}"
            mode = match_metrics_mode(properties.get(name, default))
            if mode.type == MetricModeTypes.TRUNCATE and not isinstance(
                kind, StringType | BinaryType
            ):
                mode = MetricsMode(MetricModeTypes.FULL)
            plan[field.field_id] = replace(collector, mode=mode)
            if mode == none:
                unsized.add(field.field_id)
            else:
                unsized.discard(field.field_id)
    return plan, parquet_path_to_id_mapping(schema), frozenset(unsized)


def _leaf_ids(kind: Any) -> list[int]:
    """The field ids of the primitive fields within a PyIceberg nested type."""
    from pyiceberg.types import ListType, MapType, StructType

    if isinstance(kind, ListType):
        return _leaf_ids(kind.element_type) or [kind.element_id]
    if isinstance(kind, MapType):
        keys = _leaf_ids(kind.key_type) or [kind.key_id]
        return keys + (_leaf_ids(kind.value_type) or [kind.value_id])
    if isinstance(kind, StructType):
        return [i for f in kind.fields for i in (_leaf_ids(f.field_type) or [f.field_id])]
    return []


def file_metrics(footer: pq.FileMetaData, schema_json: str, config: Mapping[str, str]) -> str:
    """The metrics of a Parquet file with ``footer``, written with the Iceberg schema
    ``schema_json`` to a table whose metrics properties are ``config``
    (:func:`task_metrics_config`), as the metrics part of Iceberg's JSON of a data file
    (``ContentFileParser``): counts by field id, bounds in Iceberg's single-value binary
    form, written in hexadecimal."""
    from pyiceberg.io.pyarrow import data_file_statistics_from_parquet_metadata

    plan, ids, unsized = _statistics_plan(schema_json, tuple(sorted(config.items())))
    stats = data_file_statistics_from_parquet_metadata(footer, plan, ids).to_serialized_dict()
    for field_id in unsized:
        stats["column_sizes"].pop(field_id, None)

    def counts(of: Mapping[int, int]) -> dict[str, list[int]]:
        return {"keys": list(of), "values": list(of.values())}

    def bounds(of: Mapping[int, bytes]) -> dict[str, list[Any]]:
        return {"keys": list(of), "values": [value.hex().upper() for value in of.values()]}

    return json.dumps(
        {
            "record-count": stats["record_count"],
            "column-sizes": counts(stats["column_sizes"]),
            "value-counts": counts(stats["value_counts"]),
            "null-value-counts": counts(stats["null_value_counts"]),
            "nan-value-counts": counts(stats["nan_value_counts"]),
            "lower-bounds": bounds(stats["lower_bounds"]),
            "upper-bounds": bounds(stats["upper_bounds"]),
        }
    )


def content_file_json(written: WrittenFile, spec_id: int, partition: Mapping[int, str]) -> str:
    """Iceberg's JSON of the data file ``written`` (whose :attr:`~WrittenFile.metrics`
    the task computed), of the spec ``spec_id``, in the partition whose values (as
    Iceberg's JSON writes them) are ``partition`` by field id (empty: unpartitioned):
    what ``ContentFileParser`` reads into a ``DataFile``.

    >>> written = WrittenFile("s3://b/t/f.parquet", 10, 2, '{"record-count": 2}')
    >>> content_file_json(written, 0, {1000: "2026-12-07"})  # doctest: +NORMALIZE_WHITESPACE
    '{"spec-id": 0, "content": "DATA", "file-path": "s3://b/t/f.parquet",
      "file-format": "PARQUET", "file-size-in-bytes": 10, "partition": {"1000": "2026-12-07"},
      "record-count": 2}'
    """
    assert written.metrics is not None
    head: dict[str, Any] = {
        "spec-id": spec_id,
        "content": "DATA",
        "file-path": written.path,
        "file-format": "PARQUET",
        "file-size-in-bytes": written.size,
    }
    if partition:
        head["partition"] = {str(k): v for k, v in partition.items()}
    return json.dumps(head | json.loads(written.metrics))


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


SHADED_PARQUET = "org.apache.iceberg.shaded.org.apache.parquet"
"""Where Iceberg's Spark runtime jar carries Parquet's classes (relocated there)."""
HADOOP_INPUT_FILE = "org.apache.iceberg.hadoop.HadoopInputFile"


@functools.cache
def class_loadable(name: str) -> bool:
    """Whether the JVM's Spark class loader (the one that sees ``spark.jars``) finds
    class ``name``; asked once a process."""
    from py4j.protocol import Py4JJavaError

    try:
        jvm_class("org.apache.spark.util.Utils").classForName(name, False, False)
    except Py4JJavaError:  # ClassNotFoundException
        return False
    return True


class FooterMetrics:
    """Each file's Iceberg metrics (counts, bounds) read from its Parquet footer, as the
    table's metrics config says: what ``ParquetUtil.fileMetrics`` gives, without its cost.

    ``fileMetrics`` opens each file with Parquet's default read options, and those come
    with a new Hadoop ``Configuration``, which parses Hadoop's XML defaults again on its
    first read: in a ledger batch of 100 tables, most of the driver's time committing
    the files went there (a JFR profile: docs/merge-performance.md). A file of a Hadoop
    file IO (the local and HDFS warehouses) is opened here with read options built once
    from the file IO's own configuration, already loaded; the footer's metrics are
    Iceberg's own ``ParquetUtil.footerMetrics``. Other file IOs (S3FileIO), and an
    Iceberg runtime that carries Parquet elsewhere than :data:`SHADED_PARQUET`, take
    ``fileMetrics``.
    """

    def __init__(self, table: Any) -> None:
        self.io = table.io()
        self.config = jvm_class("org.apache.iceberg.MetricsConfig").forTable(table)
        self.util = jvm_class("org.apache.iceberg.parquet.ParquetUtil")
        self.relocated = class_loadable(f"{SHADED_PARQUET}.hadoop.ParquetFileReader")
        self._options: Any = None

    def read(self, path: str) -> Any:
        """The metrics of the Parquet file at ``path``."""
        source = self.io.newInputFile(path)
        if not self.relocated or source.getClass().getName() != HADOOP_INPUT_FILE:
            return self.util.fileMetrics(source, self.config)
        conf = source.getConf()
        if self._options is None:
            self._options = jvm_class(f"{SHADED_PARQUET}.HadoopReadOptions").builder(conf).build()
        parquet_file = jvm_class(f"{SHADED_PARQUET}.hadoop.util.HadoopInputFile").fromStatus(
            source.getStat(), conf
        )
        reader = jvm_class(f"{SHADED_PARQUET}.hadoop.ParquetFileReader").open(
            parquet_file, self._options
        )
        try:
            no_writer_metrics = jvm_class("java.util.stream.Stream").empty()
            return self.util.footerMetrics(reader.getFooter(), no_writer_metrics, self.config)
        finally:
            reader.close()


def append_files(
    table: Any,
    files: list[WrittenFile],
    partition: str | None,
    properties: Mapping[str, str],
) -> None:
    """Commit ``files`` (of one partition) to ``table`` in one snapshot carrying
    ``properties`` in its summary. Each file's metrics (counts, bounds) are those its
    task computed (:func:`file_metrics`), or else read from its footer as the table's
    metrics config says: either way as Iceberg's own writer records them."""
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
            text = content_file_json(written, spec_id, values)
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
