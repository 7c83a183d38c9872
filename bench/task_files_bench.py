"""One ledger task of a pipeline of many tables, in process: classify, project and write
every table's files, as the one pass's ``mapInArrow`` function does in a Python worker.

In a pipeline of a thousand tables a task of the ledger's one pass holds a few messages
of most tables, and writes a ledger file (and perhaps a dead-letter file) for each: what
a table costs a task whatever its share matters more than what a message costs. This
benchmark prepares the jobs of ``--tables`` generated tables (bench/tables_bench.py's
schemas: 5–30 columns of every type) through the ledger stage itself, against a real
Hadoop-catalog warehouse in a temporary folder, then runs one task's function
(``icetide.ledger.one_pass.classify_and_write``) over ``--messages`` Zipf-distributed
messages, in this process, two ways alternating:

* ``as built``: the task as the stage runs it;
* ``1 MiB buffer``: each file's output stream buffering PyIceberg's default mebibyte
  (``icetide.lake.data_files.WRITE_BUFFER`` set to it), the way before.

Each trial runs on fresh jobs (unpickled, as a task receives them) after one untimed
trial of each way. Prints CPU seconds of the task, ms a table and µs a message, medians
of ``--repeat``, and the ratio. Every trial's tables must answer the same rows and
files; a difference fails the run. Never pass/fail on time.

    python bench/task_files_bench.py --tables 1000 --messages 40000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import pickle
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from tables_bench import in_process_pipeline, message_pool, table_schema, zipf_weights

from icetide.config import load_config
from icetide.lake import data_files
from icetide.lake.data_files import file_target
from icetide.ledger.one_pass import classify_and_write
from icetide.ledger.stage import LedgerStage, routes_of
from icetide.ledger.table_files import UnroutedJob
from icetide.pipeline import Pipeline
from icetide.schema.contract import ledger as c
from icetide.spark.session import build_session

ONE_MEBIBYTE = 1024 * 1024
"""PyIceberg's default output buffer (``buffer-size``)."""


def generated(tables: int) -> list[Any]:
    """bench/tables_bench.py's generated schemas of ``tables`` tables (its seed)."""
    rng = random.Random(7)
    return [table_schema(i, rng) for i in range(tables)]


def prepared_jobs(tables: int, work: Path) -> bytes:
    """The one pass's jobs of ``tables`` generated tables, pickled as Spark sends them:
    their ledger and dead-letter tables created in a warehouse under ``work``, each
    table's projection and file targets prepared by the ledger stage."""
    import cloudpickle

    config_path = in_process_pipeline(work, generated(tables))
    config = load_config(config_path)
    spark = build_session(config)
    stage = LedgerStage(spark, Pipeline(config))
    stage.ensure_tables()
    now = datetime.now(UTC)
    _, jobs = stage._prepared([t.name for t in config.tables], 0, {}, now)
    stray = file_target(stage._held.get(stage.unrouted_dlt), c.DLT_INGESTED_AT, now.date())
    assert stray is not None
    unrouted = UnroutedJob(config.dead_letter.unrouted_table, stray)
    return bytes(cloudpickle.dumps((jobs, now, routes_of(config), unrouted)))


def task_input(tables: int, messages: int) -> list[pa.RecordBatch]:
    """A task's raw messages, Zipf-distributed over the tables, in Arrow batches of
    10,000 (Spark's)."""
    schemas = generated(tables)
    pool = message_pool(schemas, zipf_weights(tables, 1.1), messages, 11)
    lines = [s.at(1_700_000_000_000 + i, 4 + i).encode() for i, s in enumerate(pool)]
    return [
        pa.RecordBatch.from_pydict(
            {
                "message_id": [f"f:{i}" for i in range(k, min(k + 10_000, messages))],
                "raw": lines[k : k + 10_000],
            }
        )
        for k in range(0, messages, 10_000)
    ]


def trial(jobs: bytes, batches: list[pa.RecordBatch]) -> tuple[float, list[tuple[Any, ...]]]:
    """CPU seconds of one task over ``batches``, and what it answered (table, rows)."""
    table_jobs, now, routes, unrouted = pickle.loads(jobs)
    run = classify_and_write(table_jobs, now, None, routes, None, unrouted)
    began = time.process_time()
    answer = list(run(iter(batches)))
    spent = time.process_time() - began
    answered = [r for batch in answer for r in batch.to_pylist() if r["table"] is not None]
    for r in answered:  # the files are not committed: leave the warehouse as it was
        for path in (r["ledger_path"], r["dead_path"]):
            if path is not None:
                os.unlink(path)
    rows = [(r["table"], r["ledger_rows"], r["dead_rows"]) for r in answered]
    return spent, sorted(rows, key=str)


def with_buffer(size: int) -> Callable[[], None]:
    def setting() -> None:
        data_files.WRITE_BUFFER = size

    return setting


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="icetide-task-files-", dir="/tmp"))
    jobs = prepared_jobs(args.tables, work)
    batches = task_input(args.tables, args.messages)
    ways = {
        "as built": with_buffer(data_files.WRITE_BUFFER),
        "1 MiB buffer": with_buffer(ONE_MEBIBYTE),
    }
    spent: dict[str, list[float]] = {way: [] for way in ways}
    first: list[tuple[Any, ...]] | None = None
    tables = 0
    load = os.getloadavg()[0]
    for round_ in range(args.repeat + 1):
        for way, setting in ways.items():
            setting()
            seconds, rows = trial(jobs, batches)
            tables = len({r[0] for r in rows})
            first = rows if first is None else first
            if rows != first:
                raise SystemExit(f"{way}: the task answered other rows than the first trial")
            if round_:  # the first round warms each way up
                spent[way].append(seconds)
                print(f"trial {round_}, {way}: {seconds:.2f} s CPU", flush=True)
    print(
        f"\n{platform.machine()} {os.cpu_count()} cores, load {load:.1f} at the start and "
        f"{os.getloadavg()[0]:.1f} at the end; {args.tables} tables configured, {tables} in "
        f"the task, {args.messages} messages, median of {args.repeat}"
    )
    base = statistics.median(spent["1 MiB buffer"])
    for way, seconds in spent.items():
        median = statistics.median(seconds)
        print(
            f"  {way:>13}: {median:6.2f} s CPU, {median / tables * 1000:5.1f} ms a table, "
            f"{median / args.messages * 1e6:5.0f} µs a message ({base / median:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
