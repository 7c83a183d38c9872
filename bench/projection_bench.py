"""A ledger task's projection over many tables: block reads against the per-message read.

A task of the ledger's one pass holds a few thousand to 65,536 messages at a time
(``icetide.ledger.one_pass.task_rows``) and projects each table's share of them with
``project_batches``. In a pipeline of many tables most shares are small: a few dozen
messages. This benchmark takes one such batch of ``bench/tables_bench.py``'s generated
tables (every type; list, map and struct columns in about half of them; events
Zipf-distributed) and measures, in one process, one core, CPU time:

* ``as built``: ``project_batches`` as the stage runs it (a table's share read as a block
  when it holds at least ``BLOCK_SMALLEST`` messages, message by message otherwise);
* ``always block``: every share read as a block, however small;
* ``per message``: no block read at all.

It also splits the tables by the size of their share, so the cost of a block's fixed
work on small shares shows. Every way must give the same ledger rows (checked on each
table's output, every column as JSON); a difference fails the run. Prints µs of CPU an
event, medians of ``--repeat``, and the ratios. Never pass/fail on time.

    python bench/projection_bench.py --tables 100 --messages 24576 --repeat 5
    python bench/projection_bench.py --tables 1000 --messages 65536 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from tables_bench import message_pool, table_schema, zipf_weights

from icetide.ledger import decode
from icetide.ledger.one_pass import task_rows

WAYS = ("as built", "always block", "per message")
SIZES = ((0, 64), (64, 320), (320, 2000), (2000, 10**9))
"""Share sizes (messages of a table in the task's batch) the results are split by."""


def shares(
    tables: int, messages: int, seed: int
) -> tuple[dict[str, Any], dict[str, pa.RecordBatch]]:
    """Each table's schema and its share of one task's batch, as an Arrow batch."""
    rng = random.Random(seed)
    schemas = [table_schema(i, rng) for i in range(tables)]
    pool = message_pool(schemas, zipf_weights(tables, 1.1), messages, seed)
    raws: dict[str, list[bytes]] = defaultdict(list)
    for i, stamped in enumerate(pool):
        line = stamped.at(1_700_000_000_000 + i, 4 + i)
        raws[json.loads(line)["source"]["table"]].append(line.encode())
    batches = {
        name: pa.RecordBatch.from_pydict(
            {"message_id": [str(i) for i in range(len(lines))], "raw": lines}
        )
        for name, lines in raws.items()
    }
    return {s.table: s for s in schemas}, batches


def projectors(way: str, schemas: dict[str, Any], now: datetime) -> dict[str, Callable[..., Any]]:
    """Each table's ``project_batches``, built the way ``way`` names."""
    made = decode._block_reader
    try:
        if way == "per message":
            decode._block_reader = lambda *_: None
        return {n: _bound(decode.project_batches(s, now), way) for n, s in schemas.items()}
    finally:
        decode._block_reader = made


def _bound(project: Callable[..., Iterator[pa.RecordBatch]], way: str) -> Callable[..., Any]:
    """``project`` run with the block threshold of ``way`` (read when a batch is read)."""

    def run(batch: pa.RecordBatch) -> pa.Table:
        smallest = decode.BLOCK_SMALLEST
        decode.BLOCK_SMALLEST = 1 if way == "always block" else smallest
        try:
            return pa.Table.from_batches(list(project(iter([batch]))))
        finally:
            decode.BLOCK_SMALLEST = smallest

    return run


def cpu_per_event(
    run: dict[str, Callable[..., Any]],
    batches: dict[str, pa.RecordBatch],
    names: list[str],
    repeat: int,
) -> float:
    """Median µs of CPU an event to project the shares of ``names``."""
    events = sum(batches[n].num_rows for n in names)
    for name in names:  # warm: converters and readers built, first-call costs paid
        run[name](batches[name])
    times = []
    for _ in range(repeat):
        start = time.process_time()
        for name in names:
            run[name](batches[name])
        times.append(time.process_time() - start)
    return statistics.median(times) / events * 1e6


def rows_of(table: pa.Table) -> list[str]:
    table = table.drop_columns(["_ingested_at"])
    return [json.dumps(row, default=str, sort_keys=True) for row in table.to_pylist()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--messages", type=int, help="a task's batch (default: the stage's)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    messages = args.messages or task_rows(args.tables)
    schemas, batches = shares(args.tables, messages, args.seed)
    now = datetime.now(UTC)
    runs = {way: projectors(way, {n: schemas[n] for n in batches}, now) for way in WAYS}
    for name, batch in batches.items():
        outputs = {way: rows_of(runs[way][name](batch)) for way in WAYS}
        if len({json.dumps(o) for o in outputs.values()}) != 1:
            print(f"table {name}: the ways differ", file=sys.stderr)
            return 1
    print(
        f"{args.tables} tables, one task's batch of {messages:,} messages "
        f"({len(batches)} tables in it), µs of CPU an event, median of {args.repeat}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    print("| shares of | tables | events | " + " | ".join(WAYS) + " | per message ÷ as built |")
    print("|---|---:|---:|" + "---:|" * (len(WAYS) + 1))
    groups = [(f"{lo}–{hi - 1 if hi < 10**9 else '…'}", lo, hi) for lo, hi in SIZES]
    groups.append(("all", 0, 10**9))
    for label, lo, hi in groups:
        names = [n for n, b in batches.items() if lo <= b.num_rows < hi]
        if not names:
            continue
        cost = {way: cpu_per_event(runs[way], batches, names, args.repeat) for way in WAYS}
        events = sum(batches[n].num_rows for n in names)
        cells = " | ".join(f"{cost[w]:.1f}" for w in WAYS)
        ratio = cost["per message"] / cost["as built"]
        print(f"| {label} | {len(names)} | {events:,} | {cells} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main())
