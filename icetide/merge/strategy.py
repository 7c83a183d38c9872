"""How the deduplicated batch meets the base table: the merge strategies, the plan of a
batch that chooses among them, and the strategies' execution.

The plan (:func:`plan_batch`, :class:`BatchPlan`) is pure: from the batch's figures and
the base's metadata it decides everything the merge does with a batch (the strategy and
why, the tombstone history or not, the truncate, the columns read from the base, the
commit's properties), and :meth:`icetide.merge.stage.MergeStage.merge_table` carries it
out. A new strategy is a name in :data:`~icetide.schema.contract.base.MergeStrategy`, a
rule in :func:`choose` (and a blocker in :func:`plan_batch` when some batches cannot
take it), and its execution in :func:`apply_batch`.

Every strategy runs the same MERGE from the table contract
(:meth:`~icetide.schema.contract.builder.TableContract.merge_sql`; version-guarded unless
the batch is in order, see :attr:`BatchPlan.in_order`); they differ only in how Spark
joins the batch with the base, so they produce the same base table:

``shuffle``
    The batch as a temporary view. Spark shuffles the *whole base* by key to join it:
    cheapest for a small base, where a staging table's commit costs more than the shuffle.
``bucket_join``
    The batch is written to a staging Iceberg table partitioned like the base
    (``bucket(N, first key)``), so the join is storage-partitioned: bucket meets bucket
    and the base is read in place, never shuffled.
``bucket_join_pruned``
    ``bucket_join`` whose base side reads only the buckets the batch touches (from the
    staging table's partition list, no data read): a small batch over many buckets reads
    a fraction of the base.

``delete_insert``
    For a batch the base cannot hold anything newer than (the merge's in-order path),
    with whole row images: the base rows of the batch's keys are deleted (the keys
    broadcast to the base's scan tasks: the base read in place, no staging table) and
    the batch's living rows appended (the append starting once the DELETE runs), both on
    a branch of the base that main is then fast-forwarded to, so readers see one change.
    Any other batch takes another strategy.

``naive`` (:meth:`~icetide.schema.contract.builder.TableContract.naive_merge_sql`) is
not here: it is the benchmarks' baseline, and it is wrong under redelivery.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Any, TypeVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.util import inheritable_thread_target

from icetide.faults import crash_point
from icetide.lake.alter import table_properties
from icetide.lake.branches import (
    BranchDiverged,
    branch_names,
    drop_branches,
    publish,
    stale_branches,
    start_branch,
    writer_branch,
)
from icetide.lake.commit import append_with_properties, with_commit_properties
from icetide.lake.ledger_figures import BatchFigures, bucket_of, key_changed
from icetide.lake.tables import iceberg_table, iceberg_table_if_exists
from icetide.schema.contract.base import (
    DELETE_ISOLATION,
    EVENTS_PROPERTY,
    STRATEGY_PROPERTY,
    WATERMARK_PROPERTY,
    MergeStrategy,
    StrategySetting,
)
from icetide.schema.contract.builder import TableContract
from icetide.schema.contract.ledger import BEFORE, OP
from icetide.schema.contract.names import TableName
from icetide.schema.quoting import qualified, quote

T = TypeVar("T")
SMALL_BASE_ROWS = 200_000
"""Below this many base rows a shuffle of the whole base is cheaper than a staging
table's write and commit (measured: docs/merge-performance.md)."""
LARGE_BATCH_SHARE = 0.5
"""A batch of at least this share of the base rewrites most of it: a staging table
buys nothing over shuffling both."""
BROADCAST_EVENTS = 2_000_000
"""Above this many events a batch's keys are not broadcast to every base scan task
(``delete_insert``): each task would hold a hash table of them."""
MERGE_BRANCH = "icetide_merge"
"""The prefix of the base's branches ``delete_insert`` writes on before main is
fast-forwarded to them: one per process (:data:`PROCESS_BRANCH`)."""
PROCESS_BRANCH = writer_branch(MERGE_BRANCH, uuid.uuid4().hex, time.time())
"""This process's merge branch on every base: a second merge process of the same table
(started by mistake) writes on a branch of its own, and neither moves the other's back.
It stays on main's head after each publish, so the next merge starts it without a
commit (only its first merge of a table creates it); a process that merges once removes
it before it ends (:func:`drop_process_branches`)."""
BRANCHED: set[TableName] = set()
"""The tables this process has started :data:`PROCESS_BRANCH` on (:func:`on_branch`)."""
STALE_BRANCH_SECONDS = 24 * 3600.0
"""Another process's merge branch named longer ago than this is taken as left by a
process that ended; a ``delete_insert`` removes it (its snapshots are kept until then)."""
PUBLISH_ATTEMPTS = 3
"""``delete_insert`` starts over from main's new head this many times when another
writer commits to main while it writes its branch (a compaction), then gives up."""
Diverged = Callable[[BranchDiverged, int], None]
"""Told when a branch's publish was refused and the write starts over (:func:`on_branch`):
the refusal, and the number of the attempt refused (1 = the first)."""
JOB_POLL_SECONDS = 0.005
"""How often :func:`once_started` asks Spark whether the first statement's job has
started (a look-up in the driver's status store, well under a millisecond)."""

SPJ_CONF = {
    "spark.sql.sources.v2.bucketing.partiallyClusteredDistribution.enabled": "true",
    # Per bucket, hash the (small) batch side instead of sorting the base side.
    "spark.sql.join.preferSortMergeJoin": "false",
}
"""What Spark 3.5 needs, on top of the session's own storage-partitioned-join settings
(:func:`icetide.spark.session.spark_conf`), to join two Iceberg tables bucketed alike
without a shuffle, in the way that suits a small batch and a large base.

Only join planning, and only while the MERGE runs: these are session settings,
seen by every thread of ``icetide run``, so nothing here may change how another
statement writes (for example Iceberg's ``spark.sql.iceberg.distribution-mode``, which
would send a concurrent bootstrap's or dead-letter write unclustered to its writers)."""


@dataclass(frozen=True)
class Choice:
    """The strategy a merge uses, and why (for the merge log line and ``status``)."""

    strategy: MergeStrategy
    reason: str


def choose(
    configured: StrategySetting,
    base_rows: int,
    batch_events: int,
    blocker: str | None = "order unknown",
) -> Choice:
    """The strategy for a batch of ``batch_events`` events into a base of ``base_rows``.

    ``configured`` is the table's ``merge.strategy``; anything but ``auto`` is taken as
    it is, except ``delete_insert`` for a batch it cannot apply: ``blocker`` says why
    (None when the batch is in order with whole row images, see :func:`plan_batch`),
    and ``auto`` chooses instead.

    >>> choose("auto", 5_000_000, 150_000).strategy
    'bucket_join_pruned'
    >>> choose("auto", 5_000_000, 150_000, None).strategy
    'delete_insert'
    >>> choose("auto", 1_000, 50).reason
    'auto: base of 1,000 rows is below 200,000, shuffling it is cheaper than a staging table'
    >>> choose("shuffle", 5_000_000, 10).reason
    'configured'
    >>> choose("delete_insert", 1_000, 50, "a late event").reason
    'delete_insert configured, but a late event; auto: base of 1,000 rows is below 200,000, \
shuffling it is cheaper than a staging table'
    """
    if configured != "auto":
        if configured != "delete_insert" or blocker is None:
            return Choice(configured, "configured")
        chosen = choose("auto", base_rows, batch_events, blocker)
        return Choice(chosen.strategy, f"delete_insert configured, but {blocker}; {chosen.reason}")
    if base_rows < SMALL_BASE_ROWS:
        return Choice(
            "shuffle",
            f"auto: base of {base_rows:,} rows is below {SMALL_BASE_ROWS:,}, "
            "shuffling it is cheaper than a staging table",
        )
    if batch_events >= base_rows * LARGE_BATCH_SHARE:
        return Choice(
            "shuffle",
            f"auto: batch of {batch_events:,} events is at least "
            f"{LARGE_BATCH_SHARE:.0%} of the {base_rows:,}-row base",
        )
    sizes = f"auto: base of {base_rows:,} rows, batch of {batch_events:,} events"
    if blocker is None and batch_events <= BROADCAST_EVENTS:
        return Choice(
            "delete_insert",
            f"{sizes} in order: its keys deleted through a broadcast join, base read in "
            "place, its rows appended, published on main at once",
        )
    return Choice("bucket_join_pruned", f"{sizes}: bucket join, base read in place")


IN_ORDER = "in order: no version guard or tombstone history needed"
"""What the merge log line and the commit's strategy property say of the in-order path."""


def prunes_buckets(configured: StrategySetting, base_rows: int) -> bool:
    """Whether a batch into a base of ``base_rows`` may take a strategy that reads only
    the base buckets the batch touches (``bucket_join_pruned``, ``delete_insert``): only
    then does the merge need those buckets. Asked before the figures, because figures
    computed from the rows find the buckets in their one job only when asked to.

    >>> prunes_buckets("auto", SMALL_BASE_ROWS), prunes_buckets("auto", SMALL_BASE_ROWS - 1)
    (True, False)
    >>> prunes_buckets("bucket_join", 10**9), prunes_buckets("delete_insert", 0)
    (False, True)
    """
    return configured in ("bucket_join_pruned", "delete_insert") or (
        configured == "auto" and base_rows >= SMALL_BASE_ROWS
    )


@dataclass(frozen=True)
class BaseState:
    """The base table as a batch finds it, from its current snapshot's metadata (no data
    read), before the merge writes anything."""

    rows: int
    """Its row count (the snapshot summary's ``total-records``; 0 without a snapshot)."""
    snapshot_id: int | None
    """Its current snapshot; None while nothing has been written to it."""


@dataclass(frozen=True)
class BatchPlan:
    """Everything the merge decides about one batch before Spark runs any of it
    (:func:`plan_batch`). :meth:`icetide.merge.stage.MergeStage.merge_table` carries it
    out in this order: the tombstone history read, the truncate's DELETE, the key
    changes' values filled in (:mod:`icetide.merge.inherit`), the batch prepared
    (:mod:`icetide.merge.steps`) and applied by :attr:`strategy`, its commit carrying
    :attr:`properties`."""

    choice: Choice
    """The strategy and why (:func:`choose`)."""
    events: int
    """The batch's event count."""
    in_order: bool
    """Every event is newer than every base row and every tombstone the merge would
    remember (:meth:`~icetide.lake.ledger_figures.BatchFigures.in_order`): the MERGE
    runs without its version guard, and nothing remembered can win over the batch."""
    history: bool
    """Whether the batch is prepared with the tombstone history (the deletes and
    truncates merged before it, within the retention window)."""
    truncate: Decimal | None
    """The batch's newest truncate: the base rows below it are deleted first, in a
    commit of their own (a replay after a crash deletes the same rows again)."""
    truncated_before: Decimal | None
    """Events up to this position are dropped from the batch: the newer of the batch's
    truncate and the history's."""
    keep: frozenset[str]
    """Columns some event left out (unchanged TOAST): only they can keep a stored value,
    so only they are read from the base."""
    moves: bool
    """Some key change has placeholders, filled in from its old key's values."""
    key_changes: bool
    """Some update changes its primary key (True when unknown): the batch is read with
    ``_before`` (:func:`~icetide.merge.steps.split_key_changes`)."""
    touched: tuple[int, ...] | None
    """The base buckets the batch touches, for a strategy that reads only those; None
    when no such strategy may be chosen (:func:`prunes_buckets`)."""
    blocker: str | None
    """Why ``delete_insert`` cannot apply the batch, None when it can (whichever
    strategy was chosen)."""
    properties: dict[str, str]
    """What the commit of the batch records: the watermark, the event count and the
    strategy (the in-order path named too)."""

    @property
    def strategy(self) -> MergeStrategy:
        """The strategy the batch is applied by."""
        return self.choice.strategy

    @property
    def guarded(self) -> bool:
        """Whether the MERGE keeps its version guard (every batch not known in order)."""
        return not self.in_order


def plan_batch(
    figures: BatchFigures,
    base: BaseState,
    configured: StrategySetting,
    in_order: bool,
    watermark: int,
) -> BatchPlan:
    """How the merge applies the batch ``figures`` describe to ``base``: ``configured``
    is the table's ``merge.strategy``, ``in_order`` what the base's newest position says
    of the figures (:meth:`~icetide.lake.ledger_figures.BatchFigures.in_order`), and
    ``watermark`` the ledger snapshot the batch ends at (recorded by its commit).

    Pure, so every decision is a case in a table of unit tests: the figures come from
    the ledger's metadata (or one job over the rows) and the base's state from its
    snapshot, both read before.

    >>> figures = BatchFigures(500, None, None, frozenset(), False, (2, 5), 3)
    >>> plan = plan_batch(figures, BaseState(5_000_000, 7), "auto", True, 42)
    >>> plan.strategy, plan.history, plan.guarded, plan.touched
    ('delete_insert', False, False, (2, 5))
    >>> plan = plan_batch(figures, BaseState(5_000_000, 7), "auto", False, 42)
    >>> plan.strategy, plan.history, plan.blocker
    ('bucket_join_pruned', True, 'the batch is not known to be newer than the base (in order)')
    """
    tombstones = figures.history_tombstones
    # The history is read when something remembered could win over the batch (uncounted:
    # it may), and for a key change's look-up of lost values (merge/inherit.py).
    history = figures.moves or (not in_order and (tombstones is None or tombstones > 0))
    marks = [m for m in (figures.truncate, figures.earlier) if m is not None]
    # A truncate's DELETE commits a snapshot even on a base without one (Iceberg 1.10,
    # pinned by test_merge_delete_insert.py): ``delete_insert`` then has a head to start
    # its branch from.
    has_snapshot = base.snapshot_id is not None or figures.truncate is not None
    blocker = _replace_blocker(in_order, figures.unavailable, figures.moves, has_snapshot)
    choice = choose(configured, base.rows, figures.count, blocker)
    strategy = f"{choice.strategy}: {choice.reason}" + (f"; {IN_ORDER}" if in_order else "")
    return BatchPlan(
        choice=choice,
        events=figures.count,
        in_order=in_order,
        history=history,
        truncate=figures.truncate,
        truncated_before=max(marks) if marks else None,
        keep=figures.unavailable,
        moves=figures.moves,
        key_changes=figures.key_changes,
        touched=figures.touched if prunes_buckets(configured, base.rows) else None,
        blocker=blocker,
        properties={
            WATERMARK_PROPERTY: str(watermark),
            EVENTS_PROPERTY: str(figures.count),
            STRATEGY_PROPERTY: strategy,
        },
    )


def _replace_blocker(
    in_order: bool, keep: Collection[str], moves: bool, has_snapshot: bool
) -> str | None:
    """Why the batch cannot be applied by ``delete_insert`` (which replaces each key's
    row whole, without reading it, on a branch started at the base's head), or None
    when it can."""
    if not in_order:
        return "the batch is not known to be newer than the base (in order)"
    if keep:
        columns = ", ".join(sorted(keep))
        return f"events leave {columns} unchanged (TOAST): the stored values are read"
    if moves:
        return "key changes take values from the old rows"
    if not has_snapshot:
        return "the base has no snapshot yet"
    return None


@dataclass(frozen=True)
class Applied:
    """What a strategy did: the buckets the batch touched (None: not known)."""

    strategy: MergeStrategy
    touched_buckets: int | None = None
    buckets: int | None = None


def staging_table(base: TableName) -> TableName:
    """The staging table of ``base``'s bucket join: one per base table, kept between
    merges and overwritten by each (:func:`stage_batch`)."""
    return base.suffixed("__icetide_batch")


STAGING_SHAPE = "icetide.staging.shape"
"""Staging-table property: the batch layout (columns and buckets) it was created for."""
STAGING_LAYOUT = 2
"""Bumped when :data:`STAGING_PROPERTIES` change, so older staging tables are replaced."""
STAGING_PROPERTIES = {
    "format-version": "2",
    # Written by the deduplicating aggregate's own tasks, each with a file per bucket it
    # holds (fanout): no shuffle into one writing task. The join groups a bucket's files.
    "write.distribution-mode": "none",
    "write.spark.fanout.enabled": "true",
    # Each merge replaces the whole batch: keep no old metadata files around.
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "1",
}


NO_RUNTIME_PRUNING = {"spark.sql.optimizer.dynamicPartitionPruning.enabled": "false"}
"""The session setting ``delete_insert``'s DELETE runs with. The base is bucketed by its
key, so Spark would prune its scan at run time by the batch's keys: it turns the
broadcast keys (tens of thousands at 1% of a 5M-row base) into an Iceberg ``IN``
expression and projects it through the bucket transform, file by file, before the scan
starts (0.12–0.14 s of a 2.3 s merge at 5M rows, measured). The ledger's figures
already name the buckets the batch touches, so the DELETE filters by them instead (a
static filter, planned once). A statement another thread plans meanwhile (another
table's merge) goes without run-time pruning too: it may read more, never differently."""

_conf_lock = threading.Lock()
_conf_users: dict[tuple[int, str], tuple[int, str | None]] = {}
"""Per SparkSession (``id``) and setting: the statements inside :func:`scoped_conf`
that need it, and its value from before the first of them."""


@contextmanager
def scoped_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """``settings`` while the statement runs, then as they were.

    Session settings are shared by every thread: when merges of two tables overlap
    (``merge.parallel_tables``), the first to enter sets a setting, and the last to leave
    puts back what was there before the first (a plain save-and-restore per statement
    would leave it set, or unset it under the other's statement). Callers only ever ask
    for the same value of a setting."""
    key = id(spark)
    with _conf_lock:
        for name, value in settings.items():
            users, before = _conf_users.get((key, name), (0, None))
            if users == 0:
                before = spark.conf.get(name, None)
                spark.conf.set(name, value)
            _conf_users[(key, name)] = (users + 1, before)
    try:
        yield
    finally:
        with _conf_lock:
            for name in settings:
                users, before = _conf_users.pop((key, name))
                if users > 1:
                    _conf_users[(key, name)] = (users - 1, before)
                elif before is None:
                    spark.conf.unset(name)
                else:
                    spark.conf.set(name, before)


def spj_conf(spark: SparkSession) -> AbstractContextManager[None]:
    """:data:`SPJ_CONF` while a bucket-join MERGE runs (:func:`scoped_conf`)."""
    return scoped_conf(spark, SPJ_CONF)


def stage_batch(source: DataFrame, contract: TableContract, staging: TableName) -> None:
    """Write the deduplicated batch to ``staging``, bucketed like the base.

    The table is kept between merges: when it has this batch's layout, the batch replaces
    its rows (one overwrite commit), and every :data:`STAGING_SNAPSHOTS` merges the earlier
    batches' snapshots and files are expired, instead of creating and dropping a table per
    merge (a catalog create, a replace transaction and a purge, measured in
    docs/merge-performance.md). A crash anywhere leaves a staging table the next merge
    overwrites whole. Any other layout (a schema change, another bucket count) replaces
    the table.
    """
    spark = source.sparkSession
    first = contract.target.primary_key[0]
    shape = hashlib.sha256(
        f"{STAGING_LAYOUT} {contract.settings.buckets} {first} {source.schema.json()}".encode()
    ).hexdigest()[:16]
    # One load says whether the table exists, its layout and how many snapshots it
    # holds: only the merge of this base writes it.
    kept = iceberg_table_if_exists(spark, staging)
    if kept is not None and table_properties(spark, staging, kept).get(STAGING_SHAPE) == shape:
        source.writeTo(staging.sql).overwrite(F.lit(True))
        # The overwrite added one snapshot to those the load saw.
        if kept.operations().current().snapshots().size() + 1 >= STAGING_SNAPSHOTS:
            _expire_earlier(spark, staging)
        return
    writer = (
        source.writeTo(staging.sql)
        .using("iceberg")
        .partitionedBy(F.bucket(contract.settings.buckets, F.col(quote(first))))
        .tableProperty(STAGING_SHAPE, shape)
    )
    for key, value in STAGING_PROPERTIES.items():
        writer = writer.tableProperty(key, value)
    writer.createOrReplace()


STAGING_SNAPSHOTS = 8
"""The staging table's earlier batches are expired once it holds this many snapshots: an
expiry reads the manifests and deletes the files on the driver (a third of a second
per merge at 5M rows when run every merge), so it runs once every this many merges."""


def _expire_earlier(spark: SparkSession, staging: TableName) -> None:
    """Once ``staging`` holds :data:`STAGING_SNAPSHOTS` snapshots, expire every one but
    the current, deleting the earlier batches' files (Iceberg's API on the driver: no
    Spark job). Loaded again here (the overwrite's snapshot is in no earlier load);
    :func:`stage_batch` calls it only when the count may be reached."""
    table = iceberg_table(spark, staging)
    current = table.currentSnapshot()
    if current is None or table.operations().current().snapshots().size() < STAGING_SNAPSHOTS:
        return
    table.expireSnapshots().expireOlderThan(current.timestampMillis()).retainLast(1).commit()


def touched_buckets(contract: TableContract, base: TableName) -> list[Column]:
    """Per ledger event, the base bucket its key falls in (``bucket``) and, for a key
    change, its old key's (``old_bucket``): the buckets a batch touches, computed in the
    merge's first aggregate rather than by another job (the ledger's figures use the same
    :func:`~icetide.lake.ledger_figures.bucket_of`)."""
    first = contract.target.primary_key[0]
    n = contract.settings.buckets
    return [
        bucket_of(base.catalog, n, quote(first)).alias("bucket"),
        F.when(
            key_changed(contract.target), bucket_of(base.catalog, n, qualified(BEFORE, first))
        ).alias("old_bucket"),
    ]


def apply_batch(
    spark: SparkSession,
    strategy: MergeStrategy,
    contract: TableContract,
    base: TableName,
    source: Callable[[], DataFrame],
    view: str,
    properties: dict[str, str],
    keep: Collection[str] | None = None,
    touched: Sequence[int] | None = None,
    guarded: bool = True,
    keys: DataFrame | None = None,
    on_diverged: Diverged | None = None,
) -> Applied:
    """MERGE the deduplicated batch ``source`` builds into ``base`` by ``strategy``, the
    commit carrying ``properties`` (the watermark); ``keep`` and ``guarded`` as in
    :meth:`~icetide.schema.contract.builder.TableContract.merge_sql`, ``touched`` the
    base buckets the batch touches (see :func:`touched_buckets`). ``keys``: the keys
    ``delete_insert`` deletes (:func:`~icetide.merge.steps.changed_keys`), needed by it
    alone, and ``on_diverged`` is told when it starts over (:func:`on_branch`).
    ``source`` is called once, when the strategy needs the batch: building it is
    ~0.1 s of driver calls, which ``delete_insert`` makes while its DELETE is planned."""
    n = contract.settings.buckets
    # Only a batch that misses some bucket restricts the base's scan.
    pruned = touched if touched is not None and len(touched) < n else None
    if strategy == "delete_insert":
        if keys is None:
            raise ValueError("delete_insert needs the batch's keys (merge.steps.changed_keys)")
        delete_insert(spark, contract, base, source, keys, view, properties, pruned, on_diverged)
        return Applied(strategy, None if touched is None else len(touched), n)
    batch = source()
    if strategy == "shuffle":
        batch.createOrReplaceTempView(view)

        def merge_view() -> None:
            crash_point("merge.before_commit")
            spark.sql(contract.merge_sql(base, view, keep, guarded))

        try:
            with_commit_properties(spark, properties, merge_view)
        finally:
            spark.catalog.dropTempView(view)
        return Applied(strategy)
    staging = staging_table(base)
    stage_batch(batch, contract, staging)
    sql = contract.bucket_merge_sql(
        base, staging, pruned if strategy == "bucket_join_pruned" else None, keep, guarded
    )

    def merge_staged() -> None:
        crash_point("merge.before_commit")
        with spj_conf(spark):
            spark.sql(sql)

    with_commit_properties(spark, properties, merge_staged)
    return Applied(strategy, None if touched is None else len(touched), n)


def once_started(
    spark: SparkSession,
    first: Callable[[], None],
    second: Callable[[T], None],
    meanwhile: Callable[[], T],
) -> None:
    """Run ``first`` (Spark statements) in a thread, and ``second`` here as soon as
    ``first``'s first Spark job has started; return when both are done.

    A statement's first job starts only once it is planned, so whatever ``first`` read
    (the tables' snapshots it scans) was fixed before ``second`` does anything. While
    ``first`` is planned, ``meanwhile`` runs here (driver work ``second`` needs, such as
    building its DataFrame, that would otherwise wait for the job), and ``second`` gets
    its result. When ``first`` ends without a job, ``second`` runs after it, and not at
    all when ``first`` fails. The thread inherits this one's Spark properties (job group,
    scheduler pool); ``first``'s jobs are found by a job tag of their own. An error here
    is raised before ``first``'s, once ``first`` is done.
    """
    sc = spark.sparkContext
    tag = f"icetide-{uuid.uuid4().hex}"

    def tagged() -> None:
        sc.addJobTag(tag)
        try:
            first()
        finally:
            sc.removeJobTag(tag)

    tracker = sc._jsc.sc().statusTracker()  # the JVM's: Python's cannot look up tags
    with ThreadPoolExecutor(1, thread_name_prefix="icetide-first") as pool:
        running = pool.submit(inheritable_thread_target(tagged))
        try:
            ready = meanwhile()
            while not running.done() and len(tracker.getJobIdsForTag(tag)) == 0:
                wait([running], timeout=JOB_POLL_SECONDS)
            if running.done():
                running.result()  # raises first's error: second never runs after a failure
            second(ready)
        finally:
            wait([running])  # never leave a statement running behind an error
    running.result()


def delete_insert(
    spark: SparkSession,
    contract: TableContract,
    base: TableName,
    source: Callable[[], DataFrame],
    keys: DataFrame,
    view: str,
    properties: dict[str, str],
    touched: Sequence[int] | None = None,
    on_diverged: Diverged | None = None,
) -> None:
    """Apply an in-order batch as a DELETE of its ``keys`` and an append of its living
    rows (from the deduplicated batch ``source`` builds), on this process's branch
    (:data:`PROCESS_BRANCH`), then fast-forward main to it (one change for readers). Its
    own branch: a second merge process of the table never writes on it or moves it
    back. ``keys`` are read without the row images
    (:func:`~icetide.merge.steps.changed_keys`); ``touched``: the only base buckets
    they fall in (None: any).

    Equal to the unguarded MERGE for a batch with whole row images: every key of the
    batch loses its base row and, unless its last event is a delete, gets the batch's.

    On a base whose DELETEs use ``snapshot`` isolation (every base created since session
    31, :meth:`~icetide.schema.contract.builder.TableContract.base_ddl`), the append
    starts as soon as the DELETE's first job has (:func:`once_started`): each statement
    ends in a write by one task and a commit by the driver, which one after the other
    leave a core idle (13% faster in a same-process A/B at 5M rows,
    docs/merge-performance.md). The DELETE has by then fixed the branch snapshot it
    scans, so it never sees the appended rows; either may commit first, and ``snapshot``
    isolation lets the DELETE commit after the append (Iceberg's default refuses a
    DELETE when data files its condition could match were added meanwhile). Both
    commits carry ``properties`` (the watermark), so main's new head does, whichever is
    last. The append's DataFrame is built while the DELETE is planned. On any other
    base, one after the other.

    A crash before the publish leaves main as it was (the next merge process starts a
    branch of its own; the dead one's is removed a day later); another writer's commit
    to main meanwhile starts it over from main's new head (``on_diverged`` told).
    """
    sql = contract.delete_keys_sql(base, view, PROCESS_BRANCH, touched)

    @cache  # once for every attempt
    def living_rows() -> DataFrame:
        return source().where(F.col(OP) != "d").selectExpr(*contract.row_select())

    def delete() -> None:
        keys.createOrReplaceTempView(view)
        try:
            with scoped_conf(spark, NO_RUNTIME_PRUNING):
                with_commit_properties(spark, properties, lambda: spark.sql(sql))
        finally:
            spark.catalog.dropTempView(view)

    def append(rows: DataFrame) -> None:
        append_with_properties(rows, base, properties, branch=PROCESS_BRANCH)

    def write(table: Any, branch: str) -> None:
        if table.properties().get(DELETE_ISOLATION) == "snapshot":
            # The rows are built while the DELETE is planned.
            once_started(spark, delete, append, living_rows)
        else:
            delete()
            append(living_rows())

    on_branch(spark, base, write, "merge.before_commit", on_diverged)


def republish_line(table: str, why: str, attempt: int) -> str:
    """The merge's line when its branch's publish was refused (``why``, attempt
    ``attempt``) and it writes the batch again from main's new head.

    >>> republish_line("items", "cannot publish branch b: main moved meanwhile", 1)
    "merge items: cannot publish branch b: main moved meanwhile; writing the batch again \
from main's new head (attempt 2 of 3)"
    """
    return (
        f"merge {table}: {why}; writing the batch again from main's new head "
        f"(attempt {attempt + 1} of {PUBLISH_ATTEMPTS})"
    )


def drop_process_branches(spark: SparkSession) -> list[TableName]:
    """Remove :data:`PROCESS_BRANCH` from every table this process started it on; the
    tables it was removed from. For a process that ends after its merges
    (``icetide merge --once`` from a scheduler): left in place, each run's branch would
    pin the snapshot it last published until another merge removed it a day later
    (:data:`STALE_BRANCH_SECONDS`), a thousand and more of them a day on a per-minute
    schedule. A table gone since is skipped; a failure is raised to the caller, whose
    branches then go the stale way."""
    dropped = []
    for target in sorted(BRANCHED, key=str):
        table = iceberg_table_if_exists(spark, target)
        if table is not None and PROCESS_BRANCH in branch_names(table):
            drop_branches(table, [PROCESS_BRANCH])
            dropped.append(target)
        BRANCHED.discard(target)
    return dropped


def on_branch(
    spark: SparkSession,
    target: TableName,
    write: Callable[[Any, str], None],
    before_publish: str,
    on_diverged: Diverged | None = None,
) -> None:
    """Run ``write`` (given the loaded table and the branch's name) on this process's
    branch of ``target`` (:data:`PROCESS_BRANCH`), started at main's head, then
    fast-forward main to it, so readers see the commits ``write`` made as one change.

    A crash before the publish (crash point ``before_publish``) leaves main as it was
    (the next call moves the branch back to main's head; a dead process's branch is
    removed a day later); another writer's commit to main meanwhile starts it over from
    main's new head, :data:`PUBLISH_ATTEMPTS` times; ``on_diverged`` is told before each
    new start (the refusal and the number of the attempt refused), so the caller can say
    why the step takes longer: otherwise a merge that lost to a compaction says nothing.
    """
    branch = PROCESS_BRANCH
    for attempt in range(1, PUBLISH_ATTEMPTS + 1):
        table = iceberg_table(spark, target)
        head = table.currentSnapshot()
        if head is None:
            raise ValueError(f"a branch needs a table with a snapshot; {target} has none")
        names = branch_names(table)
        stale = stale_branches(names, MERGE_BRANCH, time.time(), STALE_BRANCH_SECONDS, branch)
        if stale:
            drop_branches(table, stale)
        start_branch(table, branch, int(head.snapshotId()))
        BRANCHED.add(target)
        write(table, branch)
        crash_point(before_publish)
        try:
            publish(table, branch)
            return
        except BranchDiverged as exc:
            if attempt == PUBLISH_ATTEMPTS:
                raise
            if on_diverged is not None:
                on_diverged(exc, attempt)
