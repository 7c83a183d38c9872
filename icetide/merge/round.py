"""A merge round, and what it does for a table besides merging its batch.

A round merges every configured table once, ``merge.parallel_tables`` at a time, with
one turn to bin-pack small files (:mod:`icetide.merge.compact`). For one table
(:meth:`icetide.merge.stage.MergeStage.merge_table`) the work besides its batch comes in
this order:

1. while a re-snapshot of the table is under way, one chunk of it instead of a batch
   (:meth:`MergeRounds.resnapshot_chunk`): the copy is spread over rounds, so the other
   tables' merges go on;
2. after the batch, or when the ledger holds none, phase 3 of a schema change once the
   ledger projects its version (:meth:`MergeRounds.converge`);
3. last, the small-file packing when due and the round's turn is free
   (:meth:`MergeRounds.compact`): it packs the small files the merges wrote, in a
   commit of its own that changes no row.

Phase 3 and the packing commit on their own after the batch's commit (the one with the
watermark), so a crash between them loses nothing: the next round finds them still due.

Which tables a round visits: every configured table, unless the ledger runs in the same
process (``icetide run``) and says which tables it stored events for
(:class:`TablesDue`): then a round visits those, at most ``merge.round_tables`` of
them (the busiest, then those waiting longest: :func:`capped_round`), each table's
first visit once the ledger's first trigger has ended, within the same cap, and sweeps
a share of the others, so that each is visited about once a minute (what nothing
reports: a small-file packing deferred, a ledger written by another process). A
table with no new events costs no Spark job either way
(tests/integration/test_merge_parallel.py); what a visit costs is the driver's reads
of its tables' metadata, which adds up over many idle tables (bench/tables_bench.py,
bench/results/tables.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from icetide.bootstrap.resnapshot import resnapshot_round
from icetide.errors import CommitConflictError
from icetide.faults import crash_point
from icetide.lake.alter import set_properties, table_properties
from icetide.lake.defaults import initial_default_columns
from icetide.lake.tables import iceberg_table, lineage_summaries, snapshot_of
from icetide.merge.compact import (
    Compaction,
    PackingTurn,
    PackingTurns,
    compact_small_files,
    merges_since_rewrite,
    removes_dangling,
)
from icetide.merge.converge import column_defaults, fill_defaults, fill_rescued
from icetide.merge.phases import MergeVersion, version_of
from icetide.schema.contract import phases as ph
from icetide.schema.contract.builder import TableContract
from icetide.spark.errors import jvm_boundary
from icetide.spark.threads import run_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.pipeline import Pipeline

T = TypeVar("T")


SWEEP_AFTER = 60.0
"""Seconds after which :class:`TablesDue` visits a table nothing marked."""
SWEEP_SHARE = 12
"""A round visits at most one in this many of the tables nothing marked (at least one)."""
BUSIEST_SHARE = 4
"""Of a capped round's marked tables, one in this many are its busiest (the rest the
longest waiting): see :func:`capped_round`."""


@dataclass(frozen=True)
class Waiting:
    """A table marked for a merge round and not yet taken by one: since when (the first
    mark since its last visit, on :class:`TablesDue`'s clock) and how many row events the
    ledger has stored for it since."""

    since: float
    events: int = 0

    def joined(self, other: Waiting) -> Waiting:
        """Both marks as one: the earlier start, the events of both."""
        return Waiting(min(self.since, other.since), self.events + other.events)


def capped_round(waiting: Mapping[str, Waiting], limit: int | None) -> set[str]:
    """Which of the ``waiting`` tables a round of at most ``limit`` takes.

    All of them when they fit (``limit`` None: no cap). Otherwise a quarter of the round
    (:data:`BUSIEST_SHARE`, at least one) goes to the tables with the most row events
    waiting (ties: waiting longest, then by name), and the rest to the tables waiting
    longest. A round's cost is about the same for every table it merges (planning a
    MERGE, a commit), so the busiest tables merged in every round keep the freshness of
    most events low; the longest-waiting share bounds every other table's wait to a few
    rounds' worth of them, so none starves behind busy ones. The order they are merged
    in is :meth:`TablesDue.take`'s.

    >>> w = {"a": Waiting(0, 5), "b": Waiting(1, 900), "c": Waiting(2, 1), "d": Waiting(3, 70)}
    >>> sorted(capped_round(w, None)) == sorted(capped_round(w, 4)) == ["a", "b", "c", "d"]
    True
    >>> sorted(capped_round(w, 2))  # the busiest, then the one waiting longest
    ['a', 'b']
    """
    if limit is None or len(waiting) <= limit:
        return set(waiting)
    busy = max(1, limit // BUSIEST_SHARE)
    busiest = sorted(waiting, key=lambda n: (-waiting[n].events, waiting[n].since, n))[:busy]
    rest = sorted((n for n in waiting if n not in busiest), key=lambda n: (waiting[n].since, n))
    return {*busiest, *rest[: limit - busy]}


class TablesDue:
    """The tables the next merge round visits: each table once from the start (its first
    visit, which creates its base), then those marked since a round last took them (the
    ledger stored events for them, or said something of them), at most ``limit`` of
    them a round (:func:`capped_round`: the busiest, then those waiting longest; the
    others stay marked for the next rounds), and a sweep of the tables no round visited
    for ``sweep_after`` seconds, longest unvisited first, at most one in ``share`` of the
    tables a round (and with a ``limit``, only as many as the round has room for, but at
    least one). So every table is visited within about ``sweep_after`` seconds and
    ``share`` rounds (more rounds while a backlog fills them), and a round of 1,000
    tables adds at most 84 idle visits, where a round of every table would add 1,000.
    The sweep counts within the cap because a swept table is not always idle: one the
    ledger stores while the round runs is merged at its visit, at the cost of a marked
    one.

    Why a cap: a round merges its tables a few at a time, and each costs about the same
    (planning a MERGE, a commit) whatever its events. Uncapped, a round of the 1,000
    tables a long ledger batch stored ran for many minutes, and a busy table waited for
    all of it before its next merge. The first visits are capped too: at 1,000 tables
    they are a thousand base tables created, and a busy table waits for none of them.

    ``ready`` says whether a round may visit tables with no row events waiting (first
    visits and the sweep); until it does, a round takes only tables the ledger stored
    events for. ``icetide run`` holds them until the ledger's first trigger has ended,
    so that the first visits leave the cores to the ledger's start, which creates every
    ledger table and stores the first batch (bench/results/tables.md).

    >>> now = [0.0]
    >>> due = TablesDue(["a", "b", "c"], sweep_after=60, clock=lambda: now[0])
    >>> due.take()  # uncapped: every table's first visit in the first round
    ['a', 'b', 'c']
    >>> now[0] = 10.0; due.mark(["c", "a"]); due.take(), due.take()
    (['a', 'c'], [])
    >>> now[0] = 70.0; due.take(), due.take()  # b first: unvisited longest
    (['b'], ['a'])
    >>> due.limit = 1; due.mark({"a": 2, "c": 50}); due.take(), due.waiting, due.take()
    (['c'], 1, ['a'])
    >>> started = [False]
    >>> later = TablesDue(["a", "b", "c"], limit=2, ready=lambda: started[0])
    >>> later.take(), later.mark({"c": 5}), later.take(), later.waiting
    ([], None, ['c'], 0)
    >>> started[0] = True; later.waiting, later.take(), later.take()
    (2, ['a', 'b'], [])
    """

    def __init__(
        self,
        names: Sequence[str],
        sweep_after: float = SWEEP_AFTER,
        share: int = SWEEP_SHARE,
        limit: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self.names = list(names)
        self._order = {name: i for i, name in enumerate(self.names)}
        self.sweep_after = sweep_after
        self.per_round = max(1, -(-len(self.names) // share))
        self.limit = limit
        """The most marked tables a round takes (None: all of them)."""
        self.clock = clock
        self.ready = ready
        now = clock()
        self._marked: dict[str, Waiting] = {name: Waiting(now) for name in self.names}
        """Each table is due from the start: its first visit."""
        self._taken: dict[str, Waiting] = {}
        self._visited: dict[str, float] = dict.fromkeys(self.names, now)
        self._lock = threading.Lock()

    def mark(self, tables: Mapping[str, int] | Iterable[str]) -> None:
        """A coming round visits ``tables`` (called from the ledger's thread): names, or
        each name with the row events stored for it."""
        counts = tables if isinstance(tables, Mapping) else dict.fromkeys(tables, 0)
        with self._lock:
            now = self.clock()
            for name, events in counts.items():
                self._add(name, Waiting(now, events))

    def _add(self, name: str, waiting: Waiting) -> None:
        known = self._marked.get(name)
        self._marked[name] = waiting if known is None else known.joined(waiting)

    @property
    def waiting(self) -> int:
        """How many marked tables a round starting now would take or leave for a later
        one (those with events only, until :attr:`ready`)."""
        ready = self.ready()
        with self._lock:
            return len(self._takeable(ready))

    def _takeable(self, ready: bool) -> dict[str, Waiting]:
        if ready:
            return self._marked
        return {name: waiting for name, waiting in self._marked.items() if waiting.events}

    def take(self) -> list[str]:
        """The tables of a round starting now, in the order to merge them: the most row
        events waiting first, then config order. Their marks are cleared before the
        round reads any table, so events stored during the round mark them again."""
        ready = self.ready()
        with self._lock:
            now = self.clock()
            visited = self._visited
            taken = capped_round(self._takeable(ready), self.limit)
            sweep = self.per_round if ready else 0
            if self.limit is not None and ready:  # within the cap, but never none
                sweep = min(sweep, max(1, self.limit - len(taken)))
            stale = sorted(
                (
                    n
                    for n in self.names
                    if n not in self._marked and now - visited[n] >= self.sweep_after
                ),
                key=visited.__getitem__,
            )[:sweep]
            self._taken = {n: self._marked.pop(n) for n in taken}
            chosen = sorted(
                taken | set(stale),
                key=lambda n: (-self._events_of(n), self._order[n]),
            )
            visited.update(dict.fromkeys(chosen, now))
            return chosen

    def _events_of(self, name: str) -> int:
        taken = self._taken.get(name)
        return 0 if taken is None else taken.events

    def give_back(self, tables: Iterable[str]) -> None:
        """A round that failed: its tables are due again, as they were before it."""
        with self._lock:
            now = self.clock()
            for name in tables:
                self._add(name, self._taken.get(name, Waiting(now)))


class MergeRounds:
    """The merge rounds of one process: the tables of each round, its packing turn, and
    each table's re-snapshot chunks, phase-3 fills and small-file packing."""

    def __init__(self, spark: SparkSession, pipeline: Pipeline) -> None:
        self.spark = spark
        self.pipeline = pipeline
        self.config = pipeline.config
        self.turns = PackingTurns()
        """Which table packs its small files in each round (:mod:`icetide.merge.compact`)."""
        self.due: TablesDue | None = None
        """Which tables each round visits; None: every configured table."""

    def run(self, merge: Callable[[str, PackingTurn], T]) -> list[T]:
        """One round: ``merge`` of each table due (:attr:`due`; every configured table
        by default) with the round's packing turn, ``merge.parallel_tables`` at a time;
        the results in the round's order (config order by default).

        Tables are merged in threads of this one SparkSession: one merge's planning,
        commits and Python work on the driver overlap another's tasks (the demo's three
        small tables merged two at a time: docs/merge-performance.md). The first failure
        is raised once every merge under way has ended.
        """
        names = [t.name for t in self.config.tables] if self.due is None else self.due.take()
        turn = self.turns.open_round()
        try:
            return run_all(
                lambda name: merge(name, turn),
                names,
                self.config.merge.parallel_tables,
                "icetide-merge",
            )
        except BaseException:
            if self.due is not None:
                self.due.give_back(names)
            raise
        finally:
            self.turns.close_round(turn)

    def resnapshot_chunk(self, name: str, run: MergeVersion) -> None:
        """One round of ``name``'s re-snapshot (:mod:`icetide.bootstrap.resnapshot`):
        the next chunk of the copy into its rebuilt base; the table's merge waits
        until the last one, the other tables' merges go on."""
        version = run.contract.schema.version
        done = resnapshot_round(
            self.spark,
            self.pipeline,
            name,
            chunk_rows=self.config.table(name).merge.resnapshot_chunk_rows,
        )
        if done:
            set_properties(
                self.spark,
                self.pipeline.refs(name).base,
                dict.fromkeys((ph.BASE_ALTERED, ph.DATA_FILLED), str(int(time.time() * 1000))),
            )
        state = "rebuilt; merging its ledger from the next round" if done else "under way"
        self.pipeline.report(
            "merge",
            f"re-snapshot {name} (schema version {version}): {state}",
            table=name,
            version=version,
            resnapshot="done" if done else "running",
        )

    def after_batch(
        self,
        name: str,
        run: MergeVersion,
        end: int,
        turn: PackingTurn | None,
        loaded: Any = None,
    ) -> Compaction | None:
        """What follows ``name``'s merged batch (up to ledger snapshot ``end``): phase 3,
        then the small-file packing, each in commits of its own after the batch's.
        ``loaded``: the base's Iceberg table as of the batch's commit, when the caller
        has it."""
        self.converge(name, run, end, loaded)
        return self.compact(name, run.contract, turn, loaded)

    def converge(self, name: str, run: MergeVersion, end: int | None, loaded: Any = None) -> None:
        """Phase 3 once the ledger projects this version: every ledger row still holding
        a new column's value in ``_rescued`` is in snapshot ``end``, and merged.
        ``loaded``: the base's Iceberg table, when the caller has it as of now."""
        version = run.contract.schema.version
        base = self.pipeline.refs(name).base
        props = table_properties(self.spark, base, loaded)
        # The ledger's projection as this merge read it, with the batch's end snapshot.
        state = replace(ph.ChangeState.read({}, props), projected=run.projected)
        if not state.fill_due(version) or state.data is None:
            return
        done = state.data
        since = version_of(self.pipeline, name, done)
        rescued = (
            fill_rescued(self.spark, self.pipeline, name, run.contract, since, end) if end else 0
        )
        constants = column_defaults(run.contract.schema)
        if run.contract.settings.format_version >= 3:  # read as initial-default: no fill
            initial = initial_default_columns(self.spark, base)
            target = run.contract.target
            constants = {i: v for i, v in constants.items() if target.find(i).name not in initial}
        defaults = fill_defaults(
            self.spark,
            self.pipeline,
            name,
            run.contract,
            since,
            run.change_position,
            constants,
        )
        crash_point("merge.after_fill")
        set_properties(
            self.spark,
            base,
            {ph.DATA_VERSION: str(version), ph.DATA_FILLED: str(int(time.time() * 1000))},
        )
        self.pipeline.report(
            "merge",
            f"schema {name}: data converged at version {version} (phase 3: {rescued:,} "
            f"rescued events, {defaults} default columns)",
            table=name,
            version=version,
            phase=3,
            rescued=rescued,
        )

    def compact(
        self,
        name: str,
        contract: TableContract,
        turn: PackingTurn | None,
        loaded: Any = None,
    ) -> Compaction | None:
        """Bin-pack the base's small files when ``merge.compact_every`` merges have added
        files since its last rewrite (:mod:`icetide.merge.compact`) and ``turn`` is this
        table's (None: a table merged alone packs whenever due). ``loaded``: the base's
        Iceberg table as of the merge's commit, when the caller has it."""
        every = self.config.table(name).merge.compact_every
        if every == 0:
            return None
        base = self.pipeline.refs(name).base
        loaded = loaded or iceberg_table(self.spark, base)
        snapshot = snapshot_of(loaded)
        if snapshot is None:
            return None
        summaries = list(lineage_summaries(self.spark, base, loaded))
        if not self.turns.due(name, merges_since_rewrite(summaries), every):
            return None
        if not self.turns.take(turn, name):
            return Compaction(0, 0, deferred=True)
        try:
            with jvm_boundary(f"bin-packing the small files of {base}"):
                return compact_small_files(
                    self.spark,
                    base,
                    snapshot.summary,
                    contract.settings.buckets,
                    self.config.maintenance.target_file_size,
                    remove_dangling=removes_dangling(summaries),
                )
        except CommitConflictError as exc:
            # Rows are unchanged either way; the next merge tries again.
            self.pipeline.report(
                "merge",
                f"merge {name}: small-file rewrite left to the next merge ({exc})",
                table=name,
            )
            return None
