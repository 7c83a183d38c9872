"""A micro-batch's tables written by one Spark job: each task projects its part of each
table and writes it as that table's ledger (and dead-letter) Parquet files.

The ``mapInArrow`` function :func:`write_table_files` takes the batch's classified row
events and routed dead letters, projects each table's with the same
:func:`~icetide.ledger.decode.project_batches` the per-table path uses, an Arrow batch at
a time, and writes, per table and task, one ledger file (the rows, fitted
to the ledger's current columns and stamped with the schema version) and one dead-letter
file. It answers one row per table and task (:data:`FILES_DDL`): the files and the
:class:`~icetide.ledger.tally.Tally` of what it projected. The driver commits each
table's files (:func:`~icetide.lake.data_files.append_files`).

The files are written before any table is committed: a table found to hold the batch
already (a batch rerun after a crash) or a batch that fails before a table's commit
leaves that table's files of this attempt unreferenced, as an aborted Spark write
does; maintenance's orphan removal deletes them.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from icetide.events.raw import Wire
from icetide.lake.align import fit_array
from icetide.lake.data_files import FileTarget, FileWriter, WrittenFile
from icetide.lake.ledger_figures import Bucketing, arrow_bucket
from icetide.ledger.decode import DEAD, ERROR, RAW, REASON, ROW, STATUS, Projection, Refused
from icetide.ledger.decode import project_batches as projector
from icetide.ledger.tally import Tally, tally_of
from icetide.schema.contract import ledger as c

INPUT_COLUMNS = ("table", "status", "message_id", "reason", "error", "raw")
"""The columns of the classified batch the job reads
(:data:`~icetide.ledger.decode.CLASSIFIED_SCHEMA`)."""

FILES_DDL = (
    "table STRING, ledger_path STRING, ledger_size BIGINT, ledger_rows BIGINT, "
    "ledger_metrics STRING, dead_path STRING, dead_size BIGINT, dead_rows BIGINT, "
    "dead_metrics STRING, tally STRING, classes STRING"
)
"""What :func:`write_table_files` answers: one row per table and task; and
:func:`classify_and_write`, also a row per task with no table, its ``classes``."""
FILES_ARROW = pa.schema(
    [
        ("table", pa.string()),
        ("ledger_path", pa.string()),
        ("ledger_size", pa.int64()),
        ("ledger_rows", pa.int64()),
        ("ledger_metrics", pa.string()),
        ("dead_path", pa.string()),
        ("dead_size", pa.int64()),
        ("dead_rows", pa.int64()),
        ("dead_metrics", pa.string()),
        ("tally", pa.string()),
        ("classes", pa.string()),
    ]
)


@dataclass(frozen=True)
class TableJob:
    """One table's part of the job: how its messages are projected and where they go."""

    plan: Projection
    refused: Refused | None
    ledger: FileTarget
    dead: FileTarget
    buckets: int
    """The base's bucket count (its partition by the first key column)."""


@dataclass(frozen=True)
class TableFiles:
    """What the tasks wrote of one table: its files and their tally."""

    ledger: list[WrittenFile]
    dead: list[WrittenFile]
    tally: Tally


def collected(rows: Iterable[Any]) -> dict[str, TableFiles]:
    """The job's answer (rows of :data:`FILES_DDL`) by table, each task's part added up."""
    out: dict[str, TableFiles] = {}
    for row in rows:
        files = out.setdefault(row.table, TableFiles([], [], Tally()))
        if row.ledger_path is not None:
            files.ledger.append(
                WrittenFile(row.ledger_path, row.ledger_size, row.ledger_rows, row.ledger_metrics)
            )
        if row.dead_path is not None:
            files.dead.append(
                WrittenFile(row.dead_path, row.dead_size, row.dead_rows, row.dead_metrics)
            )
        files.tally.add(Tally.from_json(row.tally))
    return out


def write_table_files(
    jobs: Mapping[str, TableJob], now: datetime, wire: Wire | None
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function writing each table's part of a task (see the module)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tables = TaskTables(jobs, now, wire)
        for batch in batches:
            tables.add(batch)
        yield from tables.close()

    return run


@dataclass(frozen=True)
class UnroutedJob:
    """Where a task writes the dead letters routed to no table: the unrouted dead-letter
    table (``dead_letter.unrouted_table``, answered under that name)."""

    name: str
    dead: FileTarget


class TaskTables:
    """The tables of one task: each table's part (:class:`_TablePart`) begun at its first
    messages, projected and written as they come; and, given ``unrouted``, the dead
    letters routed to no table."""

    def __init__(
        self,
        jobs: Mapping[str, TableJob],
        now: datetime,
        wire: Wire | None,
        unrouted: UnroutedJob | None = None,
    ) -> None:
        self.jobs, self.now, self.wire, self.unrouted = jobs, now, wire, unrouted
        self.parts: dict[str, _TablePart] = {}
        self.stray: FileWriter | None = None
        """The unrouted dead letters' file, once there is one."""

    def add_unrouted(self, messages: pa.RecordBatch) -> None:
        """Write ``messages``, dead letters routed to no table, to :attr:`unrouted`'s file."""
        assert self.unrouted is not None
        if self.stray is None:
            self.stray = self.unrouted.dead.open()
        self.stray.write(_dead_rows(self.unrouted.dead, None, None, messages, self.now))

    def add(self, batch: pa.RecordBatch) -> None:
        """Project and write ``batch``'s messages (of :data:`INPUT_COLUMNS` at least, each
        of a table of the jobs)."""
        for name, rows in _by_table(batch):
            part = self.parts.get(name)
            if part is None:
                part = self.parts[name] = _TablePart(name, self.jobs[name], self.now, self.wire)
            part.add(rows)

    def close(self) -> Iterator[pa.RecordBatch]:
        """End every table's files; the task's answer, a row per table."""
        for part in self.parts.values():
            yield part.close()
        if self.stray is not None and self.unrouted is not None:
            yield _answer(self.unrouted.name, None, self.stray.close(), None)

    def discard(self) -> None:
        """End and delete every file begun: the batch is stored another way."""
        for part in self.parts.values():
            part.discard()
        if self.stray is not None:
            self.stray.discard()
            self.stray = None


def _by_table(batch: pa.RecordBatch) -> Iterator[tuple[str, pa.RecordBatch]]:
    """``batch``'s rows by table, each table's in their order: one stable sort and a
    slice per table, not a filter of the whole batch per table (a task may hold a
    thousand tables).

    >>> b = pa.RecordBatch.from_pydict({"table": ["b", "a", "b"], "n": [1, 2, 3]})
    >>> [(name, part.column("n").to_pylist()) for name, part in _by_table(b)]
    [('a', [2]), ('b', [1, 3])]
    """
    names = batch.column("table")
    ordered = batch.take(pc.sort_indices(names))
    counts = pc.value_counts(names).to_pylist()
    start = 0
    for entry in sorted(counts, key=lambda e: e["values"]):
        yield entry["values"], ordered.slice(start, entry["counts"])
        start += entry["counts"]


ROW_GROUP_ROWS = 100_000
"""Ledger rows a task buffers for a table before writing them as a row group: the
projection goes a batch of messages at a time (Spark's Arrow batches, 10,000 rows), so
a task holds about one batch of messages per table, and a busy table's file is not a
row group per batch."""


class _TablePart:
    """One table's messages in one task: projected an Arrow batch at a time as they
    come, their rows and dead letters written to a file each, their tally added up."""

    def __init__(self, name: str, job: TableJob, now: datetime, wire: Wire | None) -> None:
        self.name, self.job, self.now = name, job, now
        self.project = projector(job.plan, now, wire, job.refused)
        self.bucket = _bucketing(job)
        self.tally = Tally()
        self.pending: list[pa.Table] = []
        self.ledger: FileWriter | None = None
        self.dead: FileWriter | None = None

    def add(self, messages: pa.RecordBatch) -> None:
        """Project ``messages`` (this table's, of :data:`INPUT_COLUMNS`) and write them."""
        status = messages.column("status")
        rows = messages.filter(pc.equal(status, ROW)).select(["message_id", "raw"])
        dead_projected = None
        if rows.num_rows:
            projected = pa.Table.from_batches(list(self.project(iter([rows]))))
            key = self.job.plan.layout.primary_key
            self.tally.add(tally_of(projected, key, self.bucket))
            stored = projected.filter(pc.equal(projected.column(STATUS), ROW))
            if stored.num_rows:
                self.pending.append(_ledger_rows(stored, self.job))
                if sum(t.num_rows for t in self.pending) >= ROW_GROUP_ROWS:
                    self._flush()
            dead_projected = projected.filter(pc.equal(projected.column(STATUS), DEAD))
        routed = messages.filter(pc.equal(status, DEAD))
        dead = _dead_rows(self.job.dead, self.name, dead_projected, routed, self.now)
        if dead.num_rows:
            if self.dead is None:
                self.dead = self.job.dead.open()
            self.dead.write(dead)

    def _flush(self) -> None:
        if self.pending:
            if self.ledger is None:
                self.ledger = self.job.ledger.open()
            self.ledger.write(pa.concat_tables(self.pending))
            self.pending = []

    def discard(self) -> None:
        """End and delete the files begun, and forget the rows not written yet."""
        self.pending = []
        for writer in (self.ledger, self.dead):
            if writer is not None:
                writer.discard()
        self.ledger = self.dead = None

    def close(self) -> pa.RecordBatch:
        """End the files; the task's answer for this table (a row of :data:`FILES_DDL`)."""
        self._flush()
        ledger = self.ledger.close() if self.ledger is not None else None
        dead = self.dead.close() if self.dead is not None else None
        return _answer(self.name, ledger, dead, self.tally)


def _answer(
    name: str, ledger: WrittenFile | None, dead: WrittenFile | None, tally: Tally | None
) -> pa.RecordBatch:
    """A task's answer for one table (a row of :data:`FILES_DDL`)."""
    return pa.RecordBatch.from_pylist(
        [
            {
                "table": name,
                "ledger_path": ledger and ledger.path,
                "ledger_size": ledger and ledger.size,
                "ledger_rows": ledger and ledger.rows,
                "ledger_metrics": ledger and ledger.metrics,
                "dead_path": dead and dead.path,
                "dead_size": dead and dead.size,
                "dead_rows": dead and dead.rows,
                "dead_metrics": dead and dead.metrics,
                "tally": (tally or Tally()).to_json(),
                "classes": None,
            }
        ],
        schema=FILES_ARROW,
    )


def _bucketing(job: TableJob) -> Bucketing | None:
    """The base's bucketing of the first key column, as the ledger types it; None when
    PyIceberg cannot bucket that type (the merge computes the figures from the rows)."""
    try:
        kind = job.ledger.column_type(job.plan.layout.primary_key[0])
        return arrow_bucket(job.buckets, kind)
    except (ValueError, TypeError):
        return None


def _ledger_rows(stored: pa.Table, job: TableJob) -> pa.Table:
    """The stored rows in the ledger's current columns (those the schema dropped NULL,
    widened ones cast), stamped with the schema version they were projected by: what
    :func:`~icetide.ledger.stage.ledger_rows` and the append's alignment make in Spark."""
    target = job.ledger.arrow_schema()
    version = job.plan.value_schema.version
    count = stored.num_rows
    columns = []
    for field in target:
        if field.name == c.SCHEMA_VERSION:
            columns.append(pa.array([version] * count, field.type))
        elif field.name in stored.column_names and field.name not in _NOT_LEDGER:
            columns.append(fit_array(stored.column(field.name).combine_chunks(), field.type))
        else:
            columns.append(pa.nulls(count, field.type))
    return pa.Table.from_arrays(columns, schema=target)


_NOT_LEDGER = frozenset({STATUS, REASON, ERROR, RAW})
"""Projection columns that are never a ledger column of the same name."""


def _dead_rows(
    target: FileTarget,
    name: str | None,
    projected: pa.Table | None,
    routed: pa.Table | pa.RecordBatch,
    now: datetime,
) -> pa.Table:
    """The dead-letter rows of one table's part (``name``; None: routed to no table):
    the projection's and the routed ones (the exact delivered bytes as unbroken base64,
    :mod:`icetide.lake.payload`)."""
    parts = [routed.select(["message_id", "reason", "error", "raw"])]
    if projected is not None:
        parts.insert(0, projected.select([c.MESSAGE_ID, REASON, ERROR, RAW]))
    ids: list[Any] = [i for p in parts for i in p.column(0).to_pylist()]
    reasons = [r for p in parts for r in p.column(1).to_pylist()]
    errors = [e for p in parts for e in p.column(2).to_pylist()]
    raws: Sequence[bytes | None] = [r for p in parts for r in p.column(3).to_pylist()]
    schema = target.arrow_schema()
    values = {
        "message_id": ids,
        "source_table": [name] * len(ids),
        "reason": reasons,
        "error": errors,
        "payload_b64": [None if r is None else base64.b64encode(r).decode() for r in raws],
        "ingested_at": [now] * len(ids),
    }
    columns = [
        pa.array(values[f.name]).cast(f.type) if ids else pa.nulls(0, f.type) for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)
