"""Removing the files under a table's location that no snapshot references, on any storage.

Iceberg finds such orphans by listing the table's location and taking away every file
its metadata reaches. How it lists is what depends on the storage. By default it lists
through Spark's Hadoop file systems, which know ``file:`` and ``hdfs:`` out of the box
but not ``s3://`` (that needs ``hadoop-aws``, its ``s3a`` scheme and a second set of
credentials). A table on object storage is listed through its own ``FileIO`` instead
(Iceberg's ``S3FileIO``, ``GCSFileIO``, ``ADLSFileIO`` list by prefix): the same client
and credentials the table's reads and writes use, as the catalog configured them.
Iceberg lists ``<location>/`` there, never the bare prefix, which on an object store
would also hold the ledger and dead letters beside every base table (``shop/items_cdc/…``
under ``shop/items``), every file of theirs an orphan of the base; the lakehouse tests
check that nothing those tables reach is removed.

Through Iceberg's action (``SparkActions.deleteOrphanFiles``) rather than the
``remove_orphan_files`` procedure: the procedure refuses a cut-off younger than 24 hours
whatever the caller knows, while the config's ``maintenance.orphan_age`` already keeps
that floor for scheduled runs (a younger file may belong to a commit in flight), and a
caller that knows nothing writes the table (an operator's one-off run, a test) may pass
a later moment.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from icetide.lake.tables import iceberg_table
from icetide.schema.contract.names import TableName
from icetide.spark.jvm import jvm_class

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HADOOP_LISTED = frozenset({"", "file", "hdfs", "viewfs"})
"""Location schemes Spark's Hadoop configuration lists without extra jars or settings."""


def lists_by_prefix(location: str) -> bool:
    """True when orphans under ``location`` are listed through the table's ``FileIO``
    rather than a Hadoop file system: every scheme but the local and HDFS ones.

    >>> lists_by_prefix("s3://warehouse/rest/shop/items"), lists_by_prefix("gs://b/t")
    (True, True)
    >>> lists_by_prefix("file:/tmp/warehouse/shop/items"), lists_by_prefix("/tmp/w/t")
    (False, False)
    >>> lists_by_prefix("hdfs://nn:8020/w/t")
    False
    """
    return urlsplit(location).scheme.lower() not in HADOOP_LISTED


def remove_orphan_files(spark: SparkSession, table: TableName, older_than: datetime) -> list[str]:
    """Delete the files under ``table``'s location that no snapshot (nor metadata file)
    references and that were last modified before ``older_than``; return their
    locations.

    ``older_than`` is the caller's promise that no commit in flight wrote a file
    before it (see the module doc).
    """
    loaded = iceberg_table(spark, table)
    actions = jvm_class("org.apache.iceberg.spark.actions.SparkActions").get(spark._jsparkSession)
    action = actions.deleteOrphanFiles(loaded).olderThan(int(older_than.timestamp() * 1000))
    if lists_by_prefix(str(loaded.location())):
        action = action.usePrefixListing(True)
    result = action.execute()
    # py4j reads a java.util.List as a Python sequence; an Iterable it does not convert.
    listed = jvm_class("org.apache.iceberg.relocated.com.google.common.collect.Lists")
    return [str(location) for location in listed.newArrayList(result.orphanFileLocations())]
