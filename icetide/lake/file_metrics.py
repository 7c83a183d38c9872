"""Each Parquet file's Iceberg metrics (sizes, value and null counts, bounds) as
Iceberg's own Java writer records them, for the files the ledger's tasks write
(:mod:`icetide.lake.data_files`).

Two ways. A task computes its file's metrics from the footer it has just written
(PyIceberg's statistics of a Parquet file's metadata, with the plan adjusted where
Java keeps other metrics, :func:`file_metrics`) and sends them as Iceberg's JSON of a
data file, which the driver parses whole (``ContentFileParser``, :func:`content_file_json`):
reading each footer back in the driver was a fifth of the JVM's time committing a
batch of 1,000 tables (bench/results/tables.md). Where PyIceberg's metrics would not
be Java's (:func:`task_metrics_config`), the driver reads each footer
(:class:`FooterMetrics`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import pyarrow.parquet as pq

from icetide.spark.jvm import jvm_class


@functools.lru_cache(maxsize=4096)
def iceberg_schema_of(schema_json: str) -> Any:
    """PyIceberg's :class:`~pyiceberg.schema.Schema` of an Iceberg schema's JSON text,
    parsed once per process (a few milliseconds each, and a batch asks for every table's;
    a schema changes seldom)."""
    from pyiceberg.schema import Schema

    return Schema.model_validate_json(schema_json)


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


def content_file_json(
    path: str, size: int, metrics: str, spec_id: int, partition: Mapping[int, str]
) -> str:
    """Iceberg's JSON of the Parquet data file at ``path`` of ``size`` bytes whose
    metrics a task computed (``metrics``, :func:`file_metrics`), of the spec
    ``spec_id``, in the partition whose values (as Iceberg's JSON writes them) are
    ``partition`` by field id (empty: unpartitioned): what ``ContentFileParser`` reads
    into a ``DataFile``.

    >>> content_file_json("s3://b/t/f.parquet", 10, '{"record-count": 2}', 0,
    ...                   {1000: "2026-12-07"})  # doctest: +NORMALIZE_WHITESPACE
    '{"spec-id": 0, "content": "DATA", "file-path": "s3://b/t/f.parquet",
      "file-format": "PARQUET", "file-size-in-bytes": 10, "partition": {"1000": "2026-12-07"},
      "record-count": 2}'
    """
    head: dict[str, Any] = {
        "spec-id": spec_id,
        "content": "DATA",
        "file-path": path,
        "file-format": "PARQUET",
        "file-size-in-bytes": size,
    }
    if partition:
        head["partition"] = {str(k): v for k, v in partition.items()}
    return json.dumps(head | json.loads(metrics))


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
