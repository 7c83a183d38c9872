"""Merge benchmark suite: icetide's strategies against the naive MERGE, PyIceberg's
``Table.upsert`` and the pyarrow floor, in one process, on the same data.

For each base size and change rate (and mix), a base of ``--rows`` rows
(``bucket(16, id)``) and a ledger (earlier batches, then the one under test) are seeded
once; every timed merge starts from the seeded snapshot again (rollback, no copy). Variants:

* ``naive``: ``ROW_NUMBER()`` dedupe + unguarded MERGE (the design's baseline);
* icetide's merge stage with each strategy (``shuffle``, ``bucket_join``,
  ``bucket_join_pruned``, ``delete_insert``), on merge-on-read v2 (position deletes), and
  ``auto`` on v3 (deletion vectors) and copy-on-write;
* ``pyiceberg``: the deduplicated batch upserted into a SqlCatalog (sqlite) copy of the
  base with ``Table.upsert``, and its deletes with ``Table.delete``;
* ``floor``: pyarrow reads the base's key column and writes the changed rows as Parquet.

Prints one table of medians and ratios, files written per merge, and (``--accumulate``)
the base read time after 20 merges against a freshly compacted base; ``--results``
writes it as Markdown. Never pass/fail on time: machines here are small and shared.

    python bench/merge_bench.py --rows 1000000 --change 0.01 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from merge_data import (
    BUCKETS,
    Mix,
    Tables,
    append_ledger,
    bench_config,
    build_tables,
    contract,
    ledger_batch,
    pipeline,
    work_dir,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icetide.lake.tables import current_snapshot_id, iceberg_table
from icetide.merge.history import HistoryKeeper
from icetide.merge.phases import merge_version
from icetide.merge.stage import MergeStage
from icetide.schema.contract import history as h
from icetide.schema.contract import ledger as c
from icetide.schema.contract.base import MERGE_STRATEGIES
from icetide.schema.contract.names import TableName
from icetide.spark.session import build_session

GENERAL = "auto + history (general recompute)"
"""The history variant with every batch recomputed (``HistoryKeeper(appends=False)``)."""
OPEN_READ = "floor: the open versions read"
"""One read of the history's open versions, every column: what ending them costs at
least, in any history that ends a version by writing its row again (an Iceberg row
cannot change in place, so the ended row's values are read to be written)."""

MIXES = {
    "default": Mix(),
    "updates": Mix(1.0, 0.0, 0.0, 1),
    "inserts": Mix(0.0, 0.0, 1.0, 1),
    "deletes": Mix(0.0, 1.0, 0.0, 1),
    "hot": Mix(0.8, 0.1, 0.1, 20),
}


@dataclass
class Outcome:
    """One variant's runs."""

    seconds: list[float] = field(default_factory=list)
    data_files: list[int] = field(default_factory=list)
    delete_files: list[int] = field(default_factory=list)
    touched: list[int] = field(default_factory=list)
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def added_files(spark: SparkSession, table: TableName, since: int) -> tuple[int, int, int]:
    """Data files, delete files written since snapshot ``since``, and the buckets
    they went to: over every snapshot of main's lineage after ``since``, including
    those a published branch added without making them main's head (``delete_insert``'s
    DELETE), which the ``history`` table does not list."""
    loaded = iceberg_table(spark, table)
    ids, snapshot = [], loaded.currentSnapshot()
    while snapshot is not None and int(snapshot.snapshotId()) != since:
        ids.append(str(int(snapshot.snapshotId())))
        parent = snapshot.parentId()
        snapshot = None if parent is None else loaded.snapshot(parent)
    if not ids:
        return 0, 0, 0
    rows = spark.sql(
        f"SELECT data_file.content AS content, data_file.partition AS p FROM "
        f"{table.child('entries')} WHERE status = 1 AND snapshot_id IN ({', '.join(ids)})"
    ).collect()
    data = sum(1 for r in rows if r.content == 0)
    deletes = len(rows) - data
    return data, deletes, len({tuple(r.p) for r in rows if r.content == 0})


class Bench:
    """One seeded case (rows, change, mix) and its variants."""

    def __init__(self, spark: SparkSession, work: Path, tables: Tables, repeat: int) -> None:
        self.spark, self.work, self.tables, self.repeat = spark, work, tables, repeat
        self.stages = {
            s: MergeStage(spark, pipeline(bench_config(work, strategy=s)))
            for s in ("auto", *MERGE_STRATEGIES)
        }
        layout = "mor-v2"
        ledger = Tables.ledger(layout)
        self.batch = TableName(ledger.catalog, ledger.namespace, "accounts_batch")
        spark.read.format("iceberg").option("start-snapshot-id", tables.before_batch[layout]).load(
            ledger.dotted
        ).writeTo(self.batch.sql).using("iceberg").createOrReplace()
        self.events = spark.table(self.batch.sql).count()
        self.naive = contract(layout).naive_merge_sql(Tables.base(layout), self.batch)

    def icetide(self, strategy: str, layout: str) -> Callable[[], object]:
        return lambda: self.stages[strategy].merge_table(Tables.table(layout))

    def with_history(self, layout: str, appends: bool = True) -> Callable[[], object]:
        """``auto`` keeping an SCD type 2 history: the history is created and seeded from
        the seeded base once (one version per row, at the base's watermark), and every
        run starts from that snapshot of it again. ``appends`` False: the in-order batch
        takes the general recompute too (what every batch took before the append)."""
        log: list[str] = []
        stage = MergeStage(self.spark, pipeline(bench_config(self.work, history=True), log))
        stage.history = HistoryKeeper(self.spark, stage.pipeline, appends=appends)
        name = Tables.table(layout)
        self.tables.reset(layout)
        run = merge_version(self.spark, stage.pipeline, name)
        stage.history.before_batch(name, run, self.tables.before_batch[layout])
        history = Tables.history(layout)
        seeded = current_snapshot_id(self.spark, history)
        assert seeded is not None
        self.tables.history_seeds[layout] = seeded

        def run() -> None:
            stage.merge_table(name)
            for line in log:  # the history's own time, beside the run's
                if line.startswith("history") or "history" in line.split(":")[0]:
                    print(f"    {line}", file=sys.stderr, flush=True)
            log.clear()

        return run

    def open_versions_read(self, layout: str) -> Callable[[], object]:
        """:data:`OPEN_READ`: the seeded history's open versions (one per base row before
        the batch) read with every column, as the MERGE that ends some of them reads
        them, into Spark's ``noop`` sink: every row is read and nothing else is done."""
        history = Tables.history(layout)

        def run() -> None:
            frame = self.spark.table(history.sql).where(F.col(h.IS_CURRENT))
            frame.write.format("noop").mode("overwrite").save()

        return run

    def run(
        self, variants: dict[str, tuple[str, Callable[[], object]]], warmup: int = 0
    ) -> dict[str, Outcome]:
        """Alternate the variants ``repeat`` times; each from the seeded base.

        ``warmup`` untimed rounds go first: a variant's first run in the process pays
        one-time costs (code generation, class loading, the staging table's creation)
        that a running pipeline pays once, not per merge.
        """
        names = list(variants)
        for i in range(warmup):
            for name in names:
                layout, fn = variants[name]
                self.tables.reset(layout)
                print(
                    f"  warm-up {i + 1} {name:<20} {timed(fn):7.2f}s", file=sys.stderr, flush=True
                )
        out = {name: Outcome() for name in variants}
        for i in range(self.repeat):
            for name in names if i % 2 == 0 else reversed(names):
                layout, fn = variants[name]
                self.tables.reset(layout)
                base = Tables.base(layout)
                seed = self.tables.seeds[layout]
                seconds = timed(fn)
                data, deletes, touched = added_files(self.spark, base, seed)
                o = out[name]
                o.seconds.append(seconds)
                o.data_files.append(data)
                o.delete_files.append(deletes)
                o.touched.append(touched)
                print(f"  run {i + 1} {name:<24} {seconds:7.2f}s", file=sys.stderr, flush=True)
        return out


def pyiceberg_upsert(spark: SparkSession, work: Path, bench: Bench, repeat: int) -> Outcome:
    """PyIceberg's upsert of the deduplicated batch into a SqlCatalog copy of the base."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import In

    outcome = Outcome()
    export = work / "pyiceberg-export"
    spark.table(Tables.base("mor-v2").sql).drop("_icetide_source_ts").write.mode(
        "overwrite"
    ).parquet(str(export / "base"))
    latest = bench.spark.sql(
        f"SELECT id, max_by(_op, _position) AS op, max_by(_after, _position) AS after, "
        f"max(_position) AS pos FROM {bench.batch} GROUP BY id"
    )
    latest.write.mode("overwrite").parquet(str(export / "batch"))
    seed = pq.read_table(export / "base")
    batch = pq.read_table(export / "batch")
    living = batch.filter(pc.field("op") != "d")
    after = living.column("after").combine_chunks()
    rows = pa.table(
        {
            **{name: after.field(name) for name in ("id", "owner", "balance", "status")},
            "updated_at": after.field("updated_at"),
            "note": after.field("note"),
            "_icetide_position": living.column("pos"),
        }
    ).cast(seed.schema)
    deleted = batch.filter(pc.field("op") == "d").column("id").to_pylist()
    catalog = SqlCatalog(
        "bench",
        uri=f"sqlite:///{work / 'pyiceberg.db'}",
        warehouse=f"file://{work / 'pyiceberg-warehouse'}",
    )
    catalog.create_namespace_if_not_exists("b")
    for i in range(repeat):
        name = f"b.accounts_{i}"
        if catalog.table_exists(name):
            catalog.drop_table(name)
        table = catalog.create_table(name, schema=seed.schema)
        table.append(seed)

        def upsert(table=table) -> None:  # type: ignore[no-untyped-def]
            table.upsert(rows, join_cols=["id"])
            if deleted:
                table.delete(In("id", deleted))

        outcome.seconds.append(timed(upsert))
        print(
            f"  run {i + 1} {'pyiceberg upsert':<24} {outcome.seconds[-1]:7.2f}s", file=sys.stderr
        )
    outcome.note = "unpartitioned SqlCatalog copy; batch deduplicated beforehand (not timed)"
    return outcome


def floor(spark: SparkSession, work: Path, bench: Bench, repeat: int) -> Outcome:
    """pyarrow reads the base's key column and writes the changed rows as Parquet."""
    files = [
        r[0].removeprefix("file:")
        for r in spark.sql(
            f"SELECT file_path FROM {Tables.base('mor-v2').child('files')} WHERE content = 0"
        ).collect()
    ]
    changed = spark.table(bench.batch.sql).select("id", c.OP, c.AFTER, c.POSITION)
    changed.write.mode("overwrite").parquet(str(work / "floor-batch"))
    batch = pq.read_table(work / "floor-batch")
    outcome = Outcome()
    for i in range(repeat):

        def run(i: int = i) -> None:
            keys = pa.concat_tables(pq.read_table(f, columns=["id"]) for f in files)
            pc.is_in(batch.column("id"), value_set=keys.column("id").combine_chunks())
            pq.write_table(batch, work / f"floor-out-{i}.parquet")

        outcome.seconds.append(timed(run))
    return outcome


def accumulate(
    spark: SparkSession,
    work: Path,
    rows: int,
    merges: int = 20,
    compact_every: int | None = None,
    layout: str = "mor-v2",
) -> dict[str, Any]:
    """Base read time after ``merges`` merges as ``auto`` chooses them (0.1% changes each,
    in order: ``delete_insert``) against the same base freshly compacted, the two
    snapshots read in turn; and delete files accumulated. The read is also timed after
    every merge (median of 3): the merge's small-file rewrite runs every few merges, so
    "after the 20th" is one point of a cycle, and the cycle's mean and worst say what a
    reader meets between rewrites.
    ``compact_every`` is the tables' ``merge.compact_every`` (None: the default, the
    merge's own small-file rewrite; 0: none); ``layout`` the base's (merge-on-read with
    v2 position deletes or v3 deletion vectors, or copy-on-write)."""
    config = bench_config(work, strategy="auto", compact_every=compact_every)
    tables = build_tables(spark, config, rows, 0.001, Mix(), history=1, layouts=(layout,))
    stage = MergeStage(spark, pipeline(config))
    base, ledger = Tables.base(layout), Tables.ledger(layout)
    merge_seconds: list[float] = []
    cycle: list[float] = []
    compactions = rewritten = 0

    def read(snapshot: int | None = None) -> float:
        """A full read of the base as of ``snapshot`` (None: main's head)."""

        def frame() -> DataFrame:
            if snapshot is None:
                return spark.table(base.sql)
            reader = spark.read.format("iceberg").option("snapshot-id", str(snapshot))
            return reader.load(base.dotted)

        return timed(
            lambda: (
                frame()
                .agg(F.count("owner"), F.sum("balance"), F.max("note"), F.max("updated_at"))
                .collect()
            )
        )

    for i in range(merges):
        # With the merge figures in the snapshot, as the ledger stage appends.
        append_ledger(
            ledger_batch(spark, rows, 0.001, Mix(), 100 + i, salt=i * 7 + 3), ledger, BUCKETS
        )
        started = time.perf_counter()
        result = stage.merge_table(Tables.table(layout))
        merge_seconds.append(time.perf_counter() - started)
        if result.compaction is not None and result.compaction.rewritten:
            compactions += 1
            rewritten += result.compaction.rewritten
        cycle.append(statistics.median([read() for _ in range(3)]))
    del tables

    def files() -> tuple[int, int]:
        r = spark.sql(
            f"SELECT sum(IF(content = 0, 1, 0)), sum(IF(content > 0, 1, 0)) "
            f"FROM {base.child('files')}"
        ).first()
        assert r is not None
        return int(r[0] or 0), int(r[1] or 0)

    data_before, deletes_before = files()
    merged_snapshot = int(iceberg_table(spark, base).currentSnapshot().snapshotId())
    read()
    merged_first = statistics.median([read() for _ in range(9)])
    spark.sql(
        f"CALL lake.system.rewrite_data_files(table => 'b.{base.name}', "
        "options => map('delete-file-threshold', '1', 'rewrite-all', 'true'))"
    )
    spark.sql(f"CALL lake.system.rewrite_position_delete_files(table => 'b.{base.name}')")
    data_after, deletes_after = files()
    # The merged snapshot and the compacted one read in turn, so neither is read by a
    # JVM that has compiled less of the read's code (until ee9ed47 the compacted base
    # was read after the merged one, later in the process: ``merged_first``).
    for snapshot in (merged_snapshot, None):
        read(snapshot)
    turns = [(read(merged_snapshot), read()) for _ in range(9)]
    merged = statistics.median(m for m, _ in turns)
    compacted = statistics.median(c for _, c in turns)
    return {
        "merges": merges,
        "compactions": compactions,
        "compacted_files": rewritten,
        "merge_median_s": statistics.median(merge_seconds),
        "merge_total_s": sum(merge_seconds),
        "read_after_merges_s": merged,
        "read_after_merges_first_s": merged_first,
        "read_compacted_s": compacted,
        "ratio": merged / compacted,
        "cycle_mean_ratio": statistics.mean(cycle) / compacted,
        "cycle_max_ratio": max(cycle) / compacted,
        "data_files": data_before,
        "delete_files": deletes_before,
        "data_files_compacted": data_after,
        "delete_files_compacted": deletes_after,
        "layout": layout,
        "cycle": [round(c / compacted, 2) for c in cycle],
    }


def machine() -> str:
    cpus = os.cpu_count()
    load = os.getloadavg()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return (
        f"{platform.machine()} {cpus} cores, {platform.python_version()}, commit {commit}, "
        f"load average at start {load[0]:.1f} (shared machine)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="base table rows")
    parser.add_argument("--change", type=float, default=0.01, help="share of keys changed")
    parser.add_argument("--mix", choices=sorted(MIXES), default="default")
    parser.add_argument("--repeat", type=int, default=3, help="runs per variant")
    parser.add_argument(
        "--warmup", type=int, default=1, help="untimed rounds of every variant first"
    )
    parser.add_argument(
        "--variants",
        default="naive,shuffle,bucket_join,bucket_join_pruned,v3,cow,pyiceberg,floor",
        help="comma-separated subset",
    )
    parser.add_argument(
        "--accumulate", type=int, default=0, help="base rows for the 20-merge read test"
    )
    parser.add_argument(
        "--compact-every",
        type=int,
        default=None,
        help="merge.compact_every for the 20-merge read test (default: the table default)",
    )
    parser.add_argument(
        "--accumulate-layout",
        choices=("mor-v2", "mor-v3", "cow"),
        default="mor-v2",
        help="the base's layout for the 20-merge read test: merge-on-read with v2 position "
        "deletes (default) or v3 deletion vectors, or copy-on-write",
    )
    parser.add_argument(
        "--no-figures",
        action="store_true",
        help="seed the ledger without the merge figures (as written before they existed): "
        "the merge computes them with a Spark job",
    )
    parser.add_argument(
        "--history",
        action="store_true",
        help="add `auto` with and without an SCD type 2 history kept (history: scd2), "
        "to measure the history's share of a merge",
    )
    parser.add_argument(
        "--history-recompute",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --history, also the history with every batch recomputed (the slowest "
        "variant; --no-history-recompute leaves it out of a large run)",
    )
    parser.add_argument("--results", type=Path, help="write the table as Markdown here")
    args = parser.parse_args(argv)
    wanted = args.variants.split(",")
    work = work_dir()
    load_at_start = machine()
    layouts = ("mor-v2",) + tuple(
        layout for flag, layout in (("v3", "mor-v3"), ("cow", "cow")) if flag in wanted
    )
    spark = build_session(bench_config(work))
    if args.variants == "none":  # only the 20-merge read test
        acc = accumulate(
            spark,
            work,
            args.accumulate,
            compact_every=args.compact_every,
            layout=args.accumulate_layout,
        )
        text = render_accumulated(acc, args.accumulate, load_at_start)
        print(text)
        if args.results:
            args.results.parent.mkdir(parents=True, exist_ok=True)
            args.results.write_text(text)
        return 0
    mix = MIXES[args.mix]
    print(f"bench: {args.rows:,} rows, {args.change:.2%} changed, mix {mix.label}", file=sys.stderr)
    tables = build_tables(
        spark,
        bench_config(work),
        args.rows,
        args.change,
        mix,
        layouts=layouts,
        figures=not args.no_figures,
    )
    bench = Bench(spark, work, tables, args.repeat)
    variants: dict[str, tuple[str, Callable[[], object]]] = {}
    if "naive" in wanted:
        variants["naive"] = ("mor-v2", lambda: spark.sql(bench.naive))
    for s in ("shuffle", "bucket_join", "bucket_join_pruned", "delete_insert"):
        if s in wanted:
            variants[s] = ("mor-v2", bench.icetide(s, "mor-v2"))
    if "v3" in wanted:
        variants["auto (v3 deletion vectors)"] = ("mor-v3", bench.icetide("auto", "mor-v3"))
    if "cow" in wanted:
        variants["auto (copy-on-write)"] = ("cow", bench.icetide("auto", "cow"))
    if "auto" in wanted or args.history:
        variants["auto"] = ("mor-v2", bench.icetide("auto", "mor-v2"))
    if args.history:
        variants["auto + history (scd2)"] = ("mor-v2", bench.with_history("mor-v2"))
        if args.history_recompute:
            variants[GENERAL] = ("mor-v2", bench.with_history("mor-v2", appends=False))
        variants[OPEN_READ] = ("mor-v2", bench.open_versions_read("mor-v2"))
    results = bench.run(variants, args.warmup)
    if "pyiceberg" in wanted:
        try:
            results["pyiceberg upsert"] = pyiceberg_upsert(spark, work, bench, min(args.repeat, 2))
        except Exception as exc:  # noqa: BLE001 - a baseline that fails is reported, not fatal
            results["pyiceberg upsert"] = Outcome(note=f"failed: {exc!r}"[:200])
    if "floor" in wanted:
        results["floor (pyarrow)"] = floor(spark, work, bench, args.repeat)
    acc = (
        accumulate(
            spark,
            work_dir(),
            args.accumulate,
            compact_every=args.compact_every,
            layout=args.accumulate_layout,
        )
        if args.accumulate
        else None
    )
    text = render(args, mix, bench.events, results, acc, load_at_start)
    print(text)
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(text)
    return 0


def render(
    args: argparse.Namespace,
    mix: Mix,
    events: int,
    results: dict[str, Outcome],
    acc: dict[str, Any] | None,
    where: str,
) -> str:
    naive = results.get("naive")
    best = min(
        (o.median for k, o in results.items() if k in LAYOUT_FREE_STRATEGIES and o.seconds),
        default=float("nan"),
    )
    lines = [
        f"# Merge benchmark: {args.rows:,}-row base, {args.change:.2%} of keys changed "
        f"({events:,} events, mix {mix.label}), {args.repeat} runs each "
        f"after {args.warmup} untimed warm-up round(s)",
        "",
        f"Machine: {where}.",
        "",
    ]
    for name, o in results.items():
        if not o.seconds:
            lines.append(f"{name}: not measured ({o.note})")
            continue
        if naive and naive.seconds:
            lines.append(f"{name}: {o.median:.2f} s, vs naive {naive.median / o.median:.2f}x")
        else:
            lines.append(f"{name}: {o.median:.2f} s (naive not run)")
    lines += [
        "",
        "| variant | median s | naive ÷ it | it ÷ best icetide | data files/merge "
        "| delete files/merge | buckets written |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, o in results.items():
        if not o.seconds:
            continue
        ratio = naive.median / o.median if naive and naive.seconds else float("nan")
        files = (
            f"{statistics.median(o.data_files):.0f} | {statistics.median(o.delete_files):.0f} | "
            f"{statistics.median(o.touched):.0f}"
            if o.data_files
            else "- | - | -"
        )
        lines.append(f"| {name} | {o.median:.2f} | {ratio:.2f} | {o.median / best:.2f} | {files} |")
    plain = results.get("auto")
    for name in ("auto + history (scd2)", GENERAL):
        kept = results.get(name)
        if plain and kept and plain.seconds and kept.seconds:
            share = (kept.median - plain.median) / plain.median
            lines += [
                "",
                f"History maintenance ({name}): {kept.median - plain.median:.2f} s per merge, "
                f"{share:.0%} of the merge alone (auto {plain.median:.2f} s, "
                f"with the history {kept.median:.2f} s).",
            ]
    floor_read = results.get(OPEN_READ)
    if plain and floor_read and plain.seconds and floor_read.seconds:
        lines += [
            "",
            f"Floor of ending the open versions ({OPEN_READ}): {floor_read.median:.2f} s, "
            f"{floor_read.median / plain.median:.0%} of the merge alone.",
        ]
    notes = [f"- {name}: {o.note}" for name, o in results.items() if o.note]
    if notes:
        lines += ["", *notes]
    if acc:
        lines += ["", render_accumulated(acc, args.accumulate, None)]
    return "\n".join(lines) + "\n"


def render_accumulated(acc: dict[str, Any], rows: int, where: str | None) -> str:
    """The 20-merge read test as one paragraph."""
    text = (
        f"Base read after {acc['merges']:.0f} merges by auto (0.1% of keys each, "
        f"{rows:,}-row base; {acc['compactions']:.0f} of them bin-packed "
        f"{acc['compacted_files']:.0f} small files in all, "
        f"merges {acc['merge_total_s']:.1f} s in all, median {acc['merge_median_s']:.2f} s): "
        f"{acc['read_after_merges_s']:.2f} s with "
        f"{acc['data_files']:.0f} data + {acc['delete_files']:.0f} delete files; freshly "
        f"compacted: {acc['read_compacted_s']:.2f} s ({acc['data_files_compacted']:.0f} + "
        f"{acc['delete_files_compacted']:.0f} files), the two snapshots read in turn; "
        f"ratio {acc['ratio']:.2f}x (the merged base read first, before the compaction: "
        f"{acc['read_after_merges_first_s']:.2f} s, "
        f"{acc['read_after_merges_first_s'] / acc['read_compacted_s']:.2f}x). "
        f"Read after each of the {acc['merges']:.0f} merges against the compacted read: "
        f"mean {acc['cycle_mean_ratio']:.2f}x, worst {acc['cycle_max_ratio']:.2f}x "
        f"({', '.join(f'{c:.2f}' for c in acc['cycle'])}). Layout: {acc['layout']}."
    )
    return text + (f"\n\nMachine: {where}.\n" if where else "")


LAYOUT_FREE_STRATEGIES = (*MERGE_STRATEGIES, "auto")

if __name__ == "__main__":
    sys.exit(main())
