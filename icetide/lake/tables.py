"""Names of a pipeline's Iceberg tables and small catalog look-ups shared by stages."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icetide.schema.contract import ledger as c
from icetide.schema.contract.names import TableName
from icetide.schema.quoting import qualified
from icetide.spark.jvm import jvm_class

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from icetide.config import Config
    from icetide.schema.contract.builder import TableContract


@dataclass(frozen=True)
class TableRefs:
    """The names of the three tables of one source table."""

    catalog: str
    namespace: str
    name: str
    dlt_suffix: str = "_dlt"

    @classmethod
    def of(cls, config: Config, name: str) -> TableRefs:
        """The tables of ``name`` in ``config``'s catalog and namespace."""
        catalog = config.catalog
        return cls(catalog.name, catalog.namespace, name, config.dead_letter.suffix)

    @property
    def base(self) -> TableName:
        """The mirror: ``<ns>.<table>``."""
        return TableName(self.catalog, self.namespace, self.name)

    @property
    def cdc(self) -> TableName:
        """The append-only ledger: ``<ns>.<table>_cdc``."""
        return self.base.suffixed(c.SUFFIX)

    @property
    def history(self) -> TableName:
        """The SCD type 2 history, when configured: ``<ns>.<table>_history``."""
        return self.base.suffixed("_history")

    @property
    def dead_letters(self) -> TableName:
        """The dead letters: ``<ns>.<table><suffix>``."""
        return self.base.suffixed(self.dlt_suffix)


def table_exists(spark: SparkSession, table: TableName) -> bool:
    """True when ``table`` exists in its catalog (inside :func:`loaded_once`, by the
    one load of it that the scope keeps)."""
    kept = _kept()
    if kept is None:
        return bool(spark.catalog.tableExists(table.sql))
    if table.sql not in kept:
        kept[table.sql] = iceberg_table_if_exists(spark, table)
    return kept[table.sql] is not None


def current_snapshot_id(spark: SparkSession, table: TableName) -> int | None:
    """The table's current snapshot id, None for a table with no snapshot yet.

    From the table's metadata through Iceberg's API: no Spark job (stages ask before and
    after every batch).
    """
    snapshot = iceberg_table(spark, table).currentSnapshot()
    return None if snapshot is None else int(snapshot.snapshotId())


def latest_snapshot_property(
    spark: SparkSession, table: TableName, key: str
) -> dict[str, str] | None:
    """The summary of the newest snapshot (on the current lineage) that carries ``key``.

    Stages keep their progress in snapshot summaries, so this is how they find it again:
    from the table's metadata (:func:`lineage_snapshots`), not a Spark query joining its
    ``snapshots`` and ``history`` tables, which was a Spark job on every look-up (the
    observer and maintenance ask for every table, every few seconds under ``icetide run``).
    """
    for snapshot in lineage_snapshots(spark, table):
        if key in snapshot.summary:
            return dict(snapshot.summary)
    return None


def rename_table(spark: SparkSession, table: TableName, to: TableName) -> None:
    """Rename ``table`` to ``to`` within its catalog.

    Spark takes the new name of ``ALTER TABLE … RENAME TO`` as written, without
    resolving a catalog in it: ``lake.ns.t2`` would ask the catalog for a table ``t2``
    in a namespace ``lake.ns``, which a REST or JDBC catalog refuses. So the new name is
    given as ``namespace.name``. The Hadoop catalog renames nothing (it raises)."""
    if to.catalog != table.catalog:
        raise ValueError(f"cannot rename {table.dotted} into another catalog ({to.dotted})")
    spark.sql(f"ALTER TABLE {table} RENAME TO {qualified(to.namespace, to.name)}")


def ensure_namespace(spark: SparkSession, catalog: str, namespace: str) -> None:
    """Create the pipeline's namespace when missing."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {qualified(catalog, namespace)}")


def ensure_base_table(spark: SparkSession, base: TableName, contract: TableContract) -> Any:
    """Create the base table (and its namespace) at ``contract``'s version when missing,
    its key marked as identifier fields; return its Iceberg table as loaded now (the
    look-up that says it exists is the load). The merge and the bootstrap (a re-snapshot
    too) both create it here, so a base has one shape whoever made it."""
    loaded = iceberg_table_if_exists(spark, base)
    if loaded is not None:
        return loaded
    ensure_namespace(spark, base.catalog, base.namespace)
    spark.sql(contract.base_ddl(base))
    spark.sql(contract.identifier_fields_sql(base))
    return iceberg_table(spark, base)


@dataclass(frozen=True)
class Snapshot:
    """A table's current snapshot, as far as the stages ask about it."""

    snapshot_id: int
    parent_id: int | None
    summary: Mapping[str, str]
    timestamp_ms: int = 0
    """When it was committed."""


def _jvm_json(write: Callable[[Any], object]) -> Any:
    """The JSON that ``write`` writes into a ``java.io.OutputStream``, parsed.

    A long text is not returned through py4j: its JVM side sends an answer longer than
    its 8 KiB buffer in two socket writes, and the second waits for Python's delayed
    ACK (Nagle's algorithm), ~44 ms whatever the length (measured). A table's metadata
    passes 8 KiB after a few commits. The driver's JVM and this process share a machine
    (py4j is local), so the JVM writes the text into a private temporary file and it is
    read here: a handful of calls, whatever the size.
    """
    handle, name = tempfile.mkstemp(prefix="icetide-", suffix=".json")
    os.close(handle)
    try:
        stream = jvm_class("java.io.FileOutputStream")(name)
        try:
            write(stream)
        finally:
            stream.close()
        return json.loads(Path(name).read_bytes())
    finally:
        os.unlink(name)


def string_map(java_map: Any) -> dict[str, str]:
    """A Java ``Map<String, String>`` (a py4j proxy: a summary, table properties) as a
    dict, in one py4j call, as JSON by Iceberg's own mapper.

    Iterating the proxy costs a call per key and per value, and its iterator ends in a
    ``NoSuchElementException`` that PySpark converts at a dozen more calls: ~10 ms per
    map, several maps per merge and per ledger batch. (A map is a few hundred bytes to a
    few KiB: one answer, below the size :func:`_jvm_json` is for.)
    """
    text = jvm_class("org.apache.iceberg.util.JsonUtil").mapper().writeValueAsString(java_map)
    return {str(k): str(v) for k, v in json.loads(text).items()}


def current_snapshot(spark: SparkSession, table: TableName) -> Snapshot | None:
    """The current snapshot of ``table`` (None before the first commit), from its
    metadata: no Spark job."""
    return snapshot_of(iceberg_table(spark, table))


def snapshot_of(table: Any) -> Snapshot | None:
    """The current snapshot of a loaded Iceberg ``table`` (see :func:`iceberg_table`):
    a stage that asks several things of one table loads it once."""
    snapshot = table.currentSnapshot()
    if snapshot is None:
        return None
    parent = snapshot.parentId()
    summary = string_map(snapshot.summary())
    return Snapshot(int(snapshot.snapshotId()), None if parent is None else int(parent), summary)


def snapshots_since(table: Any, since: int | None) -> Iterator[Snapshot]:
    """The loaded ``table``'s current snapshot and its ancestors, newest first, down to
    (without) snapshot ``since`` (None: all of them). A few JVM calls per snapshot
    rather than the whole metadata (:func:`metadata_snapshots`): for the commits a step
    just made, usually one or two."""
    snapshot = table.currentSnapshot()
    while snapshot is not None and int(snapshot.snapshotId()) != since:
        parent = snapshot.parentId()
        parent_id = None if parent is None else int(parent)
        yield Snapshot(int(snapshot.snapshotId()), parent_id, string_map(snapshot.summary()))
        snapshot = None if parent_id is None else table.snapshot(parent_id)


def metadata_snapshots(spark: SparkSession, table: Any) -> tuple[int | None, list[Snapshot]]:
    """The current snapshot id and every snapshot of a loaded Iceberg ``table`` (see
    :func:`iceberg_table`), read from its current metadata as Iceberg's own JSON of it
    (:func:`_jvm_json`): no Spark job and no call per snapshot, however long the
    lineage.

    The newest answer of each table is kept (:data:`KEPT_TABLES` tables), by the table's
    UUID with its metadata file's location: a file once written never changes, and
    readers that ask every few seconds (the observer, a merge round's look at each
    table) mostly find a table as they left it. The UUID, because a table dropped and
    created again under a Hadoop catalog starts over at ``v1.metadata.json`` in the same
    folder; one answer a table, because a ledger's metadata holds hundreds of snapshots
    with their summaries. Metadata with no file or UUID (not committed) is read each
    time."""
    metadata = table.operations().current()
    file, uuid = metadata.metadataFileLocation(), metadata.uuid()
    if file is not None and uuid is not None:
        with _metadata_lock:
            found = _metadata_kept.get(str(uuid))
            if found is not None and found[0] == file:
                _metadata_kept.move_to_end(str(uuid))
                return found[1], list(found[2])

    def write(stream: Any) -> None:
        generator = jvm_class("org.apache.iceberg.util.JsonUtil").factory().createGenerator(stream)
        jvm_class("org.apache.iceberg.TableMetadataParser").toJson(metadata, generator)
        generator.flush()

    parsed = _jvm_json(write)
    current = parsed.get("current-snapshot-id")
    current_id = None if current in (None, -1) else int(current)
    snapshots = tuple(
        Snapshot(
            int(s["snapshot-id"]),
            None if s.get("parent-snapshot-id") is None else int(s["parent-snapshot-id"]),
            {str(k): str(v) for k, v in (s.get("summary") or {}).items()},
            int(s.get("timestamp-ms", 0)),
        )
        for s in parsed.get("snapshots", [])
    )
    if file is not None and uuid is not None:
        with _metadata_lock:
            _metadata_kept[str(uuid)] = (str(file), current_id, snapshots)
            _metadata_kept.move_to_end(str(uuid))
            while len(_metadata_kept) > KEPT_TABLES:
                _metadata_kept.popitem(last=False)
    return current_id, list(snapshots)


KEPT_TABLES = 4096
"""Tables whose newest snapshots :func:`metadata_snapshots` keeps, the most recently
asked first: a pipeline's tables times their kinds (base, ledger, dead letters,
history) at a thousand tables."""
_metadata_kept: OrderedDict[str, tuple[str, int | None, tuple[Snapshot, ...]]] = OrderedDict()
_metadata_lock = threading.Lock()


def lineage_snapshots(
    spark: SparkSession, table: TableName, loaded: Any = None
) -> Iterator[Snapshot]:
    """``table``'s current snapshot and its ancestors, newest first (of ``loaded``, its
    Iceberg table, when the caller has it), from :func:`metadata_snapshots`."""
    return lineage_of(*metadata_snapshots(spark, loaded or iceberg_table(spark, table)))


def lineage_of(current: int | None, listed: Iterable[Snapshot]) -> Iterator[Snapshot]:
    """The current lineage in ``listed`` (as :func:`metadata_snapshots` returns it), newest
    first: parent ids followed from ``current``, so a rolled-back branch is not on it.

    >>> listed = [Snapshot(1, None, {}), Snapshot(2, 1, {}), Snapshot(3, 1, {})]
    >>> [s.snapshot_id for s in lineage_of(3, listed)]
    [3, 1]
    """
    snapshots = {s.snapshot_id: s for s in listed}
    seen: set[int] = set()
    while current is not None and current in snapshots:
        if current in seen:  # a malformed lineage must not loop forever
            return
        seen.add(current)
        snapshot = snapshots[current]
        yield snapshot
        current = snapshot.parent_id


def newest_carrying(lineage: Iterable[Snapshot], key: str) -> Snapshot | None:
    """The newest snapshot of ``lineage`` (newest first) whose summary carries ``key``,
    or None.

    >>> newest_carrying([Snapshot(3, 2, {}), Snapshot(2, 1, {"w": "5"})], "w").snapshot_id
    2
    """
    return next((s for s in lineage if key in s.summary), None)


def lineage_summaries(
    spark: SparkSession, table: TableName, loaded: Any = None
) -> Iterator[Mapping[str, str]]:
    """The summaries of :func:`lineage_snapshots`, newest first."""
    for snapshot in lineage_snapshots(spark, table, loaded):
        yield snapshot.summary


def base_rows(spark: SparkSession, table: TableName) -> int:
    """Rows in ``table``'s current snapshot, from its summary (no data read)."""
    snapshot = iceberg_table(spark, table).currentSnapshot()
    if snapshot is None:
        return 0
    total = snapshot.summary().get("total-records")
    return int(total) if total is not None else 0


def iceberg_table(spark: SparkSession, table: TableName) -> Any:
    """The Iceberg ``Table`` object of ``table`` (a py4j proxy), loaded through Spark's
    catalog: its metadata as of now, read without a Spark job (inside
    :func:`loaded_once`, as of the scope's first load of it)."""
    kept = _kept()
    loaded = kept.get(table.sql) if kept is not None else None
    if loaded is None:
        held: HeldTables | None = getattr(_scope, "held", None)
        loaded = held.get(table) if held is not None else _load(spark, table)
        if kept is not None:
            kept[table.sql] = loaded
    return loaded


class HeldTables:
    """Tables a long-running stage loads once and refreshes after: :meth:`get` answers
    ``table``'s Iceberg ``Table`` as of now, the one held from an earlier call
    refreshed from its catalog, or loaded the first time.

    A load reads and parses the table's whole metadata file, which grows with every
    snapshot; a refresh reads it only when the table changed since (a Hadoop table
    checks which version files exist; a REST or JDBC catalog answers what it holds).
    The ledger asks for two tables of each table in every batch: at 1,000 tables,
    loading them was a sixth of the JVM's time committing a batch
    (bench/results/tables.md). A refresh that fails (the table dropped) loads it anew,
    which raises as a first load would.

    The observer and the artifacts watch hold the tables they look at (through
    :func:`loaded_once`): at 1,000 tables, their loads were most of their JVM time.

    A table this process drops and creates again must be :meth:`forget`-ten: a Hadoop
    table's refresh looks for its own version's file and the next ones, and a new table
    that has reached the same version number would read as the old one until its next
    commit. The ledger forgets each ledger it changes; a reader that only looks (the
    observer, the artifacts watch) may see another thread's table created again that
    way as the old one until its next commit."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._held: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, table: TableName) -> Any:
        """``table`` as of now (see the class)."""
        with self._lock:
            held = self._held.get(table.sql)
        if held is not None:
            try:
                held.refresh()
                return held
            except Exception:  # noqa: BLE001 - the load that follows raises what is wrong
                pass
        loaded = _load(self.spark, table)
        with self._lock:
            self._held[table.sql] = loaded
        return loaded

    def forget(self, table: TableName) -> None:
        """Load ``table`` anew at the next :meth:`get` (it may have been replaced)."""
        with self._lock:
            self._held.pop(table.sql, None)


def _load(spark: SparkSession, table: TableName) -> Any:
    # Spark3Util resolves the catalog in the conf of the calling JVM thread's active
    # session, which a thread of its own (a merge round's) has not got: the catalog
    # would read as undefined and its name as a namespace of the session catalog
    # ("spark_catalog requires a single-part namespace").
    jvm_class("org.apache.spark.sql.SparkSession").setActiveSession(spark._jsparkSession)
    spark3 = jvm_class("org.apache.iceberg.spark.Spark3Util")
    return spark3.loadIcebergTable(spark._jsparkSession, table.sql)


def spark_schema(spark: SparkSession, table: TableName) -> StructType:
    """The Spark schema of ``table``'s current Iceberg schema, as ``spark.table`` gives
    it (Iceberg's ``SparkSchemaUtil`` is the conversion behind both), without making a
    DataFrame: each one made is analysed and given a row encoder in the JVM, which the
    ledger paid once per table and batch only to read the columns its append aligns to."""
    from pyspark.sql.types import StructType

    converted = jvm_class("org.apache.iceberg.spark.SparkSchemaUtil").convert(
        iceberg_table(spark, table).schema()
    )
    return StructType.fromJson(json.loads(converted.json()))


def columns_present(table: Any, names: Iterable[str]) -> set[str]:
    """Which of ``names`` are columns of the Iceberg ``table`` (a py4j proxy): a look-up
    each in the schema the table holds, where ``spark.table(…).columns`` analyses a
    relation (a catalog load and Spark's analysis) for every table of a pipeline at
    its start."""
    schema = table.schema()
    return {name for name in names if schema.findField(name) is not None}


def iceberg_table_if_exists(spark: SparkSession, table: TableName) -> Any | None:
    """:func:`iceberg_table`, or None when ``table`` does not exist: one catalog load
    that answers both, where :func:`table_exists` and then :func:`iceberg_table` are two
    (on a REST catalog, two round trips)."""
    from pyspark.errors import AnalysisException

    kept = _kept()
    if kept is not None and table.sql in kept:
        return kept[table.sql]
    try:
        return iceberg_table(spark, table)
    except AnalysisException as exc:
        if exc.getErrorClass() == TABLE_NOT_FOUND:
            return None
        raise


_scope = threading.local()


def _kept() -> dict[str, Any] | None:
    """The tables :func:`loaded_once` keeps in this thread (None: no such scope)."""
    return getattr(_scope, "tables", None)


@contextmanager
def loaded_once(held: HeldTables | None = None) -> Iterator[None]:
    """Inside, in this thread, each table is loaded from its catalog once: every later
    :func:`iceberg_table` and :func:`table_exists` of it answers from that load. With
    ``held``, that load is its :meth:`HeldTables.get`: a table held from an earlier
    scope is refreshed, not loaded again.

    For readers that ask many things of a few tables and change none of them: the
    observer asks about a table's base, ledger and dead letters a dozen times a look
    (watermark, snapshot, lag, files, schema phase), each a load that reads and parses
    the table's metadata file again, for every table every few seconds. Other threads
    (the merge, the ledger) load as before. Scopes nest: the outermost one keeps."""
    if _kept() is not None:
        yield
        return
    _scope.tables, _scope.held = {}, held
    try:
        yield
    finally:
        _scope.tables = _scope.held = None


TABLE_NOT_FOUND = "TABLE_OR_VIEW_NOT_FOUND"
"""The error class of Spark's ``NoSuchTableException``, which a catalog raises for a
table it does not hold."""


@dataclass(frozen=True)
class UpperBound:
    """The largest value of a column in a table, as its file metrics tell it."""

    known: bool
    """False when a live data file has no upper bound for the column (its metrics are
    off), so nothing can be said."""
    value: Any = None
    """The bound; None when the table holds no data file."""


LISTED_FILES = 256
"""Up to this many live data files, :func:`column_upper_bound` reads each file's bound
through py4j (a few calls per file, ~1 ms); above, one Spark job over the ``files``
metadata table costs less."""


def column_upper_bound(
    spark: SparkSession, name: TableName, column: str, table: Any = None
) -> UpperBound:
    """The largest value of top-level ``column`` over the live data files of table
    ``name`` (``table``: its loaded Iceberg table, see :func:`iceberg_table`), from the
    bounds its manifests keep for every file: no data read.

    A bound covers every row a file holds, including rows a delete file has since
    removed, so it is never below the largest live value. Few files are read through
    py4j on the driver (no Spark job); many, by one job over the ``files`` metadata
    table, so a base that no compaction has visited does not make this slow.
    """
    table = table if table is not None else iceberg_table(spark, name)
    snapshot = table.currentSnapshot()
    if snapshot is None:
        return UpperBound(True)
    field = table.schema().findField(column)
    if field is None:
        return UpperBound(False)
    files = int(snapshot.summary().get("total-data-files") or LISTED_FILES + 1)
    if files > LISTED_FILES:
        bound = f"readable_metrics.{qualified(column, 'upper_bound')}"
        row = spark.sql(
            f"SELECT max({bound}) AS newest, count_if({bound} IS NULL) AS unbounded, "
            f"count(*) AS files FROM {name.child('files')} WHERE content = 0"
        ).first()
        assert row is not None
        if row["unbounded"]:
            return UpperBound(False)
        return UpperBound(True, row["newest"])
    read = _BoundReader(field)
    tasks = table.newScan().includeColumnStats().planFiles()
    try:
        files = tasks.iterator()
        while files.hasNext():  # not `for`: py4j's iterator ends in a converted exception
            if not read.file(files.next().file()):
                return UpperBound(False)
    finally:
        tasks.close()
    return UpperBound(True, read.newest)


ADDED_SNAPSHOTS = 64
"""Snapshots :func:`added_upper_bound` walks back at most before it gives up."""


def added_upper_bound(table: Any, column: str, newest: int, since: int) -> UpperBound:
    """The largest value of top-level ``column`` among the data files the snapshots after
    ``since`` up to ``newest`` added (of the loaded Iceberg ``table``), from the bounds
    their manifests keep: no data read, a few JVM calls per added file.

    For a reader that knew the answer at ``since`` and wants it at ``newest`` of an
    append-only table (the ledger): the larger of the two is the answer there. Not known
    when ``since`` is not among ``newest``'s nearest :data:`ADDED_SNAPSHOTS` ancestors
    (expired, rolled back, another table under the same name) or a file has no bound;
    ``value`` None when the snapshots added no file."""
    field = table.schema().findField(column)
    if field is None:
        return UpperBound(False)
    read = _BoundReader(field)
    io = table.io()
    snapshot = table.snapshot(newest)
    for _ in range(ADDED_SNAPSHOTS):
        if snapshot is None:
            return UpperBound(False)
        if int(snapshot.snapshotId()) == since:
            return UpperBound(True, read.newest)
        files = snapshot.addedDataFiles(io).iterator()
        while files.hasNext():
            if not read.file(files.next()):
                return UpperBound(False)
        parent = snapshot.parentId()
        snapshot = None if parent is None else table.snapshot(parent)
    return UpperBound(False)


class _BoundReader:
    """The largest upper bound of one field over the data files it is shown."""

    def __init__(self, field: Any) -> None:
        self.field_id, self.field_type = field.fieldId(), field.type()
        self.conversions = jvm_class("org.apache.iceberg.types.Conversions")
        self.newest: Any = None

    def file(self, data_file: Any) -> bool:
        """Take ``data_file``'s bound; False when it has none."""
        bounds = data_file.upperBounds()
        raw = None if bounds is None else bounds.get(self.field_id)
        if raw is None:
            return False
        value = self.conversions.fromByteBuffer(self.field_type, raw)
        self.newest = value if self.newest is None or value > self.newest else self.newest
        return True
