"""Hadoop's local file system without a ``chmod`` process per file written.

Every file Spark and Iceberg write through Hadoop's ``file:`` file system (data and
delete files, manifests, manifest lists, table metadata, version hints, and the ``.crc``
file beside each) has its permission set after it is created. Without Hadoop's native
library, which the ``pyspark`` wheel does not carry, Hadoop does that by starting a
``chmod`` process, ~5 ms each: an Iceberg commit with no new data files starts 6
(61–74 ms a commit; 9–13 ms without them), and a merge at 5M rows writes ~40 files, each
with its ``.crc``. Measured in
docs/merge-performance.md, "A process per file written, and a commit's retry".

``BareLocalFileSystem`` (``com.globalmentor:hadoop-bare-naked-local-fs``, Apache-2.0)
is Hadoop's checksummed local file system over one that sets permissions and reads file
status through ``java.nio`` instead. Hadoop resolves ``fs.file.impl`` while
``spark-submit`` starts, before ``spark.jars`` are loaded, so the jar goes on the
driver's class path; on a local master the executors are that JVM. On a cluster the
executors' class path is the cluster's, so it is left alone there (and such clusters
write to object stores or HDFS, which start no processes anyway).
"""

from __future__ import annotations

import os
from pathlib import Path

from icetide.spark.jars import Coordinate, fetched

PACKAGE = "com.globalmentor:hadoop-bare-naked-local-fs:0.1.0"
"""Fetched by every ``icetide jars fetch``, where a failure is only reported (its only
dependency, ``hadoop-common``, is ``provided``: Spark's own Hadoop 3.3.4)."""
FILE_SYSTEM_CLASS = "com.globalmentor.apache.hadoop.fs.BareLocalFileSystem"
IMPL_KEY = "spark.hadoop.fs.file.impl"
CLASS_PATH_KEY = "spark.driver.extraClassPath"


def local_fs_conf(folder: Path, local_master: bool, user: dict[str, str]) -> dict[str, str]:
    """The settings that put ``BareLocalFileSystem`` under ``file:`` paths, merged with
    the user's ``user`` Spark settings (which already won): none on a cluster, when the
    user chose a ``fs.file.impl`` of their own, or when the jar was not fetched into
    ``folder`` (the session then starts with Hadoop's own, only slower).

    >>> local_fs_conf(Path("/nowhere"), True, {})
    {}
    """
    if not local_master or IMPL_KEY in user:
        return {}
    jars = fetched(folder, Coordinate.parse(PACKAGE))
    if not jars:
        return {}
    class_path = [user[CLASS_PATH_KEY]] if user.get(CLASS_PATH_KEY) else []
    return {
        IMPL_KEY: FILE_SYSTEM_CLASS,
        CLASS_PATH_KEY: os.pathsep.join([*class_path, *(str(jar) for jar in jars)]),
    }
