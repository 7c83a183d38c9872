"""Iceberg on the production shape: the REST catalog server, tables on an S3 object store.

The run's Spark session gets the AWS SDK and a second Iceberg catalog at runtime (no new
JVM) pointing at the private ``RESTCatalogServer``; table data and metadata go through ``S3FileIO``
to the private SeaweedFS store. PyIceberg reads the same table through the same server,
and the store's own listing shows the files the table's snapshot names.
"""

from __future__ import annotations

import uuid

from pyarrow import fs
from pyiceberg.catalog import load_catalog
from pyspark.sql import SparkSession

from icetide.devservers.objectstore import ObjectStoreServer
from icetide.devservers.rest_catalog import RestCatalogServer
from icetide.schema.quoting import qualified

CATALOG = "rest_s3"


def _objects(store: ObjectStoreServer, prefix: str) -> set[str]:
    """Every object key under ``prefix`` in the store, as ``s3://`` paths."""
    s3 = store.endpoint.filesystem()
    infos = s3.get_file_info(fs.FileSelector(prefix, recursive=True, allow_not_found=True))
    return {f"s3://{info.path}" for info in infos if info.type == fs.FileType.File}


def test_table_through_rest_catalog_lives_in_the_object_store(
    s3_spark: SparkSession, rest_catalog: RestCatalogServer, object_store: ObjectStoreServer
) -> None:
    spark = s3_spark
    for key, value in rest_catalog.spark_catalog_conf(CATALOG).items():
        spark.conf.set(key, value)
    namespace = f"smoke_{uuid.uuid4().hex[:8]}"
    table = qualified(CATALOG, namespace, "orders")
    spark.sql(f"CREATE NAMESPACE {qualified(CATALOG, namespace)}")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, item STRING) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'tea'), (2, 'jam')")
    spark.sql(f"INSERT INTO {table} VALUES (3, 'oats')")

    rows = [tuple(r) for r in spark.sql(f"SELECT id, item FROM {table} ORDER BY id").collect()]
    assert rows == [(1, "tea"), (2, "jam"), (3, "oats")]

    catalog = load_catalog("rest_s3", **rest_catalog.pyiceberg_properties())
    loaded = catalog.load_table((namespace, "orders"))
    arrow = loaded.scan().to_arrow().sort_by("id")
    assert list(zip(arrow["id"].to_pylist(), arrow["item"].to_pylist(), strict=True)) == rows

    # The store holds what the catalog points at: the current metadata file and every
    # data file of the snapshot (two inserts, so two or more files), under the warehouse.
    location = loaded.metadata.location
    assert location.startswith(f"{rest_catalog.warehouse}/{namespace}/orders")
    stored = _objects(object_store, location.removeprefix("s3://"))
    data_files = {task.file.file_path for task in loaded.scan().plan_files()}
    assert len(data_files) >= 2
    assert loaded.metadata_location in stored
    assert data_files <= stored

    # A purge asked of the server deletes every file of the table with S3FileIO's batch
    # delete (DeleteObjects); Spark's own DROP ... PURGE would run a Spark job for it.
    catalog.purge_table((namespace, "orders"))
    assert _objects(object_store, location.removeprefix("s3://")) == set()
    spark.sql(f"DROP NAMESPACE {qualified(CATALOG, namespace)}")
