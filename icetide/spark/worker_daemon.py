"""The Python worker daemon of a local session: PySpark's own, started warm, and without
re-reading Spark's zip archives before every task.

PySpark's worker calls ``importlib.invalidate_caches()`` before each task, so that files
shipped with ``addPyFile`` become importable. On Python 3.10 and 3.11 that makes every
``zipimporter`` read its archive's whole directory again at that moment: ``pyspark.zip``
(793 entries) once for each of its packages a worker has imported: 24 ms for 11 such
importers timed alone, before every Python task, and about a fifth of the ledger's Python
CPU (docs/merge-performance.md, "The ledger's fixed costs"). CPython made the re-read lazy
in 3.12 (gh-103200, reported by a Spark developer for exactly this).

Spark's own archives (``$SPARK_HOME/python/lib``: ``pyspark.zip``, py4j's; and
``$SPARK_HOME/jars``, whose ``spark-core`` jar Spark also puts on the workers' path) never
change while a worker lives, so their importers skip the re-read; any other archive (a shipped
``--py-files`` zip) is still re-read as before. The daemon runs as
``spark.python.daemon.module`` (:func:`icetide.spark.session.spark_conf`), only on a local
master: there the workers run this same Python with icetide importable. An executor
elsewhere keeps PySpark's own daemon.

The daemon also imports what the ledger's workers run (:data:`PRELOAD`) before it forks
them, and freezes those objects out of the garbage collector (``gc.freeze``, made for
pre-fork servers). A worker forked cold no longer imports pyarrow and icetide's decoders
on its first task, and the full ``gc.collect()`` PySpark runs after every task of a reused
worker no longer walks every object of those modules (55 ms a collection, timed in a
process holding them). The ledger stage alone over 40,000 events: its workers' CPU about
30% lower, its first run in a new JVM 12–15% shorter (docs/merge-performance.md, session
29).
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import zipimport
from collections.abc import Callable, Iterable

MODULE = "icetide.spark.worker_daemon"
"""The value of ``spark.python.daemon.module`` that runs this daemon."""
PRELOAD = (
    "pyspark.worker",
    "pyarrow",
    "pyarrow.parquet",
    "icetide.ledger.source",
    "icetide.ledger.decode",
    "icetide.ledger.table_files",
    "pyiceberg.io.pyarrow",
    "pyiceberg.transforms",
)
"""Modules every ledger worker imports: split, classify, project and write run in them."""


def spark_archive_dirs() -> tuple[str, ...]:
    """Where Spark keeps the archives it puts on every worker's path: ``python/lib``
    (``pyspark.zip``, py4j's) and ``jars``, from which Spark adds its own core jar to the
    workers' ``PYTHONPATH`` (``PythonUtils.sparkPythonPath``). A jar is a zip archive, so
    Python gives it a zip importer too, and that one is the costliest to re-read: 5,221
    entries, 73 ms each time, timed alone (docs/merge-performance.md, "Spark's core jar
    re-read before every Python task")."""
    home = os.environ.get("SPARK_HOME")
    return (os.path.join(home, "python", "lib"), os.path.join(home, "jars")) if home else ()


def keep_archives(dirs: Iterable[str]) -> Callable[[], None]:
    """Let the zip importers of archives in ``dirs`` keep their directory when caches are
    invalidated; return the function that puts the old behaviour back."""
    fixed = {os.path.realpath(d) for d in dirs}
    original = zipimport.zipimporter.invalidate_caches

    def invalidate_caches(self: zipimport.zipimporter) -> None:
        if os.path.realpath(os.path.dirname(self.archive)) in fixed:
            return
        original(self)

    zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]

    def restore() -> None:
        zipimport.zipimporter.invalidate_caches = original  # type: ignore[method-assign]

    return restore


def preload(modules: Iterable[str] = PRELOAD) -> list[str]:
    """Import ``modules`` and freeze every object alive into the collector's permanent
    generation; the names that could not be imported (their workers import them on
    demand, as without this daemon, and fail there if they must)."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    gc.freeze()
    return missing


def main() -> None:
    """Start PySpark's daemon with Spark's archives kept (Python before 3.12 only) and the
    ledger's modules imported and frozen before any worker is forked."""
    if sys.version_info < (3, 12):
        keep_archives(spark_archive_dirs())
    preload()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
