"""A micro-batch classified, projected and written in one Spark job.

The general micro-batch takes two passes over its messages: a job classifies them (the
classified batch cached in the JVM, its classes counted), then a job projects and writes
each table's part (:mod:`icetide.ledger.table_files`). The driver needs the counts first
only when the batch holds something it must act on before any row is projected
(:func:`driver_first`): a schema-change message (the rows after it need the new
layout), a message-carried schema not walked yet (its version is walked before its
rows are read), or messages of a table the batch did not prepare (in a pipeline of many
tables only those earlier batches held are: :func:`tables_to_prepare`). A batch
holding none, which is every batch of a steady stream, is one pass: each task
classifies an Arrow batch, writes its rows at once and counts its classes
(:func:`classify_and_write`). The raw messages then cross from the JVM to Python once,
not three times, and are never cached.

A task that meets such a message deletes the files it began and answers why; the
driver deletes every other task's files and stores the batch in two passes (a
micro-batch's input is fixed, so it is read again as it was).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from icetide.events.raw import Wire
from icetide.ledger.decode import (
    DEAD,
    ROW,
    SCHEMA_CHANGE,
    SKIP,
    Routes,
    classified_batch,
)
from icetide.ledger.envelope_block import route_reader
from icetide.ledger.source import ArrowMap
from icetide.ledger.table_files import FILES_ARROW, TableJob, TaskTables, UnroutedJob

SAMPLES = 10
"""Dead-letter message ids a class keeps as samples (the batch summary's)."""

_KEYS = ("table", "status", "reason", "schema_key")


class ClassCount(NamedTuple):
    """How many of a batch's messages fell in one class (table, status, reason, schema
    key), with up to :data:`SAMPLES` ids of its dead letters."""

    table: str | None
    status: str
    reason: str | None
    schema_key: str | None
    n: int
    samples: list[str]


Classes = dict[tuple[Any, ...], ClassCount]


def classes_of(classified: pa.RecordBatch) -> Classes:
    """The classes of a classified Arrow batch (:data:`~icetide.ledger.decode.CLASSIFIED_SCHEMA`).

    >>> b = pa.RecordBatch.from_pydict({"message_id": ["1", "2", "3"],
    ...     "table": ["t", "t", None], "status": ["row", "row", "dead"],
    ...     "reason": [None, None, "malformed_json"], "schema_key": [None] * 3})
    >>> sorted(classes_of(b).values(), key=lambda c: c.status)
    ... # doctest: +NORMALIZE_WHITESPACE
    [ClassCount(table=None, status='dead', reason='malformed_json', schema_key=None, n=1,
                samples=['3']), ClassCount(table='t', status='row', reason=None,
                schema_key=None, n=2, samples=[])]
    """
    keyed = pa.Table.from_batches([classified.select(list(_KEYS))])
    counted = keyed.group_by(list(_KEYS), use_threads=False).aggregate([([], "count_all")])
    out: Classes = {}
    for row in counted.to_pylist():
        table, status, reason, schema_key = key = tuple(row[k] for k in _KEYS)
        out[key] = ClassCount(table, status, reason, schema_key, int(row["count_all"]), [])
    dead = classified.filter(pc.equal(classified.column("status"), DEAD))
    for row in dead.select(["message_id", *_KEYS]).to_pylist():
        kept = out[tuple(row[k] for k in _KEYS)].samples
        if len(kept) < SAMPLES:
            kept.append(row["message_id"])
    return out


def combined(parts: Iterable[Classes]) -> Classes:
    """The classes of several batches or tasks, counts added, samples kept in order."""
    out: Classes = {}
    for part in parts:
        for key, count in part.items():
            seen = out.get(key)
            if seen is None:
                out[key] = count._replace(samples=list(count.samples))
            else:
                samples = (seen.samples + count.samples)[:SAMPLES]
                out[key] = seen._replace(n=seen.n + count.n, samples=samples)
    return out


def driver_first(
    classes: Iterable[ClassCount],
    taken: Mapping[str, Collection[str]] | None,
    unrouted: bool,
    prepared: Collection[str] | None = None,
) -> str | None:
    """Why a batch of these classes cannot be written before the driver has counted
    them, or None. ``taken``: each table's message-carried schemas already walked (None:
    none is walked, there is no evolution layer); ``unrouted``: whether the tasks write
    the dead letters routed to no table; ``prepared``: the tables the tasks can write
    (None: every table of the pipeline; :func:`tables_to_prepare`).

    >>> one = ClassCount("t", "row", None, "k1", 5, [])
    >>> driver_first([one], {"t": {"k1"}}, True) is None
    True
    >>> driver_first([one], {"t": set()}, True)
    'a message-carried schema of t not seen before'
    >>> driver_first([one._replace(status="skip", reason="schema_change")], None, True)
    'a schema change of t'
    >>> stray = ClassCount(None, "dead", "unknown_table", None, 1, ["f:1"])
    >>> driver_first([stray], None, True) is None, driver_first([stray], None, False)
    (True, 'a message routed to no table')
    >>> driver_first([one], {"t": {"k1"}}, True, prepared=["u"])
    'messages of t, a table not prepared for this batch'
    """
    for count in classes:
        if count.table is None:
            if count.status == DEAD and not unrouted:
                return "a message routed to no table"
        elif count.status in (ROW, DEAD) and prepared is not None and count.table not in prepared:
            return f"messages of {count.table}, a table not prepared for this batch"
        elif count.status == SKIP and count.reason == SCHEMA_CHANGE:
            return f"a schema change of {count.table}"
        elif (
            count.status == ROW
            and count.schema_key is not None
            and taken is not None
            and count.schema_key not in taken.get(count.table, ())
        ):
            return f"a message-carried schema of {count.table} not seen before"
    return None


def tables_to_prepare(
    configured: Sequence[str], active: Collection[str], every_up_to: int
) -> list[str]:
    """The tables a one-pass batch prepares (each one's projection and file targets,
    catalog reads) before it reads a message: every configured table in a pipeline of
    at most ``every_up_to``; in a larger one, the ``active`` tables (those whose messages
    earlier batches of the process held), so that a pipeline of a thousand tables does
    not read the catalog for its idle ones every batch. A batch that holds messages of a
    table not prepared is stored in two passes (:func:`driver_first`), and the table is
    active from then on.

    >>> tables_to_prepare(["a", "b", "c"], {"b"}, every_up_to=3)
    ['a', 'b', 'c']
    >>> tables_to_prepare(["a", "b", "c"], {"c", "a"}, every_up_to=2)
    ['a', 'c']
    """
    if len(configured) <= every_up_to:
        return list(configured)
    return [name for name in configured if name in active]


TASK_ROWS = 4096
"""Messages a task classifies at a time when it writes a few tables (an Arrow batch as
the landing files' split makes them)."""


def task_rows(tables: int) -> int:
    """How many messages a task classifies, projects and writes at a time when it may
    write ``tables`` tables: each table's share of them is projected as one block, and
    a block's cost is partly fixed (reading it, typing its columns), so a task of many
    tables joins its input into larger batches (up to 16 × :data:`TASK_ROWS`) that each
    table gets a slice worth projecting.

    >>> task_rows(3), task_rows(16), task_rows(100), task_rows(1000)
    (4096, 4096, 24576, 65536)
    """
    return min(16 * TASK_ROWS, TASK_ROWS * max(1, tables // 16))


def rebatched(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """``batches`` joined, in order, into batches of at least ``rows`` rows (the last
    one fewer); a batch of ``rows`` or more passes as it is.

    >>> parts = [pa.record_batch({"n": list(range(k))}) for k in (3, 2, 5, 1)]
    >>> [b.num_rows for b in rebatched(parts, 4)], [b.num_rows for b in rebatched(parts, 1)]
    ([5, 5, 1], [3, 2, 5, 1])
    >>> [b.column("n").to_pylist() for b in rebatched(parts[:2], 9)]
    [[0, 1, 2, 0, 1]]
    """
    held: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        if not held and batch.num_rows >= rows:
            yield batch
            continue
        held.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield pa.Table.from_batches(held).combine_chunks().to_batches()[0]
            held, count = [], 0
    if held:
        yield pa.Table.from_batches(held).combine_chunks().to_batches()[0]


def classify_and_write(
    jobs: Mapping[str, TableJob],
    now: datetime,
    wire: Wire | None,
    routes: Routes,
    taken: Mapping[str, Collection[str]] | None,
    unrouted: UnroutedJob | None,
    split: ArrowMap | None = None,
) -> ArrowMap:
    """The ``mapInArrow`` function of the one pass (see the module): ``jobs`` holds
    the tables prepared for the batch (:func:`tables_to_prepare`). Input: the raw
    micro-batch (:func:`~icetide.ledger.decode.classify_batches`'), or the stream's rows
    that ``split`` makes such messages in the same worker (landing files read whole).
    Answer: each table's files as
    :func:`~icetide.ledger.table_files.write_table_files` answers them (the unrouted
    dead letters' under ``unrouted.name``), then one row with no table whose ``classes``
    are the task's (:func:`task_answer`)."""

    route_block = route_reader()

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tables = TaskTables(jobs, now, wire, unrouted)
        seen: list[Classes] = []
        messages = batches if split is None else split(batches)
        for batch in rebatched(messages, task_rows(len(jobs))):
            classified = classified_batch(batch, routes, wire, route_block)
            classes = classes_of(classified)
            why = driver_first(classes.values(), taken, unrouted is not None, jobs)
            if why is not None:
                tables.discard()
                yield _task_row([], why)
                return
            seen.append(classes)
            status, table = classified.column("status"), classified.column("table")
            stored = pc.and_(pc.is_in(status, pa.array([ROW, DEAD])), pc.is_valid(table))
            if pc.any(stored).as_py():
                tables.add(classified.filter(stored))
            stray = pc.and_(pc.equal(status, DEAD), pc.is_null(table))
            if pc.any(stray).as_py():
                tables.add_unrouted(classified.filter(stray))
        yield from tables.close()
        yield _task_row(list(combined(seen).values()), None)

    return run


def _task_row(classes: Sequence[ClassCount], why: str | None) -> pa.RecordBatch:
    text = json.dumps({"classes": [list(c) for c in classes], "why": why})
    row = dict.fromkeys(FILES_ARROW.names) | {"classes": text}
    return pa.RecordBatch.from_pylist([row], schema=FILES_ARROW)


def task_answer(rows: Iterable[Any]) -> tuple[list[Any], list[ClassCount], str | None]:
    """The one pass's answer split: the rows of tables' files, the batch's classes, and
    why the batch must be stored in two passes (None when it is stored).

    >>> a = {"table": None, "classes": json.dumps({"classes": [["t", "row", None, None,
    ...     2, []]], "why": None})}
    >>> b = {"table": "t", "classes": None}
    >>> files, classes, why = task_answer([a, b, a])
    >>> files == [b], [(c.table, c.n) for c in classes], why
    (True, [('t', 4)], None)
    """
    files: list[Any] = []
    parts: list[Classes] = []
    why: str | None = None
    for row in rows:
        if row["table"] is not None:
            files.append(row)
            continue
        answer = json.loads(row["classes"])
        why = why or answer["why"]
        counts = (ClassCount(*one) for one in answer["classes"])
        parts.append({tuple(c[:4]): c for c in counts})
    return files, list(combined(parts).values()), why
