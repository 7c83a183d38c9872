"""Maintenance through Iceberg's procedures: compaction per bucket, delete files gone, the
base unchanged, expiry that never takes a snapshot a stage needs, and maintenance beside
live merges (two threads in one process, sharing the session's Spark) losing no merge."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from icetide.demo.run import plan_rounds
from icetide.demo.workload import Workload, deliver, generate
from icetide.lake.progress import events_after, read_watermark
from icetide.lake.tables import current_snapshot_id, lineage_summaries
from icetide.ledger.stage import LedgerStage
from icetide.maintenance.files import data_files_per_partition, file_counts
from icetide.maintenance.retention import expiry_due, snapshot_time
from icetide.maintenance.run import MaintenanceResult, last_maintenance, maintain_table
from icetide.merge import compact
from icetide.merge.history import read_history_watermark
from icetide.merge.stage import MergeResult, MergeStage
from icetide.schema.contract.base import WATERMARK_PROPERTY
from icetide.schema.quoting import literal
from icetide.spark.retry import retry_step
from tests.integration.harness import Pipeline, assert_matches, with_merge_strategy
from tests.integration.scd2 import history_differences, with_history

TABLE = "customers"


def _rounds(p: Pipeline, parts: list[Workload], seed: int) -> list[MergeResult]:
    """Deliver each part, let the running ledger stream take it, and merge it (a merge
    refused by a concurrent maintenance commit is redone)."""
    results = []
    query = LedgerStage(p.session, p.pipeline).start(once=False)
    try:
        for number, part in enumerate(parts):
            deliver(part, p.landing, seed=seed * 1000 + number, files=1, duplicate_rate=0.05)
            query.processAllAvailable()
            stage = MergeStage(p.session, p.pipeline)
            results.append(retry_step("merge", lambda s=stage: s.merge_table(TABLE)))
    finally:
        query.stop()
    return results


# Four merges into 8 buckets already leave several data files in most buckets and delete
# files (both asserted), which is all compaction needs to prove itself; the long run (200
# merges) is a benchmark: bench/maintenance_bench.py. (16 buckets cost the test twice the
# tasks in every merge and rewrite, for nothing more asserted.)
MERGES = 4
BUCKETS = 8


@pytest.mark.timeout(900)
def test_after_many_merges_maintain_leaves_one_file_per_bucket_and_keeps_the_watermark(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    # As aggressive as the config allows: expire everything a millisecond old, keep one.
    aggressive: dict[str, Any] = {
        "maintenance": {"snapshots": {"max_age": "1ms", "keep_last": 1}},
        "merge": {"tombstone_retention": "1ms"},
    }
    aggressive["schedule"] = {"stream_interval": "100ms"}
    p = Pipeline.create(
        tmp_path, warehouse, "maint_files", spark=spark, buckets=BUCKETS, extra=aggressive
    )
    # The SCD type 2 history kept too: maintained beside the base, its watermark kept.
    with_history(p)
    # The merge's own small-file rewrite off: every merge's files are left for maintain.
    p.config = with_merge_strategy(p.config, "auto", compact_every=0)
    workload = generate(31, 400, tables=[TABLE], key_space=120)
    # In order: late events would send the history down its general path, which
    # re-reads the whole history every merge (tests/integration/test_merge_scd2.py holds
    # it); this test is about what maintenance does to the tables afterwards.
    parts = plan_rounds(workload, MERGES + 1, 31, late_rate=0.0)
    merges = _rounds(p, parts[:MERGES], seed=31)
    assert sum(1 for m in merges if m.events) == MERGES
    refs = p.refs(TABLE)
    before = file_counts(spark, refs.base)
    assert before.data_files > BUCKETS and before.delete_files > 0, before
    # The counts come from the snapshot summaries' totals: they are the files' own.
    assert before.data_files == sum(data_files_per_partition(spark, refs.base).values())
    delete_files = spark.sql(f"SELECT count(*) FROM {refs.base.child('delete_files')}")
    assert before.delete_files == delete_files.first()[0]  # type: ignore[index]
    several = [n for n in data_files_per_partition(spark, refs.base).values() if n > 1]
    assert len(several) > BUCKETS // 2, f"only {len(several)} buckets hold several data files"

    # More events reach the ledger but are not merged: the watermark's ledger snapshot is
    # no longer the current one, so only the retention rule keeps it.
    deliver(parts[MERGES], p.landing, seed=32, files=1, duplicate_rate=0.0)
    p.stream()
    watermark = read_watermark(spark, refs.base)
    assert watermark is not None
    ledger_snapshots = file_counts(spark, refs.cdc).snapshots
    rows = p.base(TABLE)
    history_before = file_counts(spark, refs.history)
    assert read_history_watermark(spark, refs.history) == (True, watermark)
    # Expiry is called only when a snapshot is due (it costs Spark jobs even when not).
    now = datetime.now(UTC)
    assert expiry_due(spark, refs.base, now, keep_last=1)
    assert not expiry_due(spark, refs.base, now, keep_last=before.snapshots)
    assert not expiry_due(spark, refs.base, now - timedelta(days=1), keep_last=1)

    result = maintain_table(spark, p.pipeline, TABLE)

    base = result.part("base")
    assert base is not None and base.before == before
    assert base.after.delete_files == 0
    per_bucket = data_files_per_partition(spark, refs.base)
    assert 1 <= len(per_bucket) <= BUCKETS and max(per_bucket.values()) == 1, per_bucket
    assert p.base(TABLE) == rows
    # Expiry did run (the ledger lost snapshots) but kept the watermark's, and the base
    # snapshot naming it.
    ledger = result.part("ledger")
    assert ledger is not None and ledger.after.snapshots < ledger_snapshots
    assert snapshot_time(spark, refs.cdc, watermark) is not None
    assert read_watermark(spark, refs.base) == watermark
    # The history was packed and expired too, but its newest snapshot naming its own
    # watermark stays: without it the next merge would seed the history again.
    history = result.part("history")
    assert history is not None and history.before == history_before
    assert history.after.data_files < history_before.data_files
    assert history.after.snapshots < history_before.snapshots
    assert read_history_watermark(spark, refs.history) == (True, watermark)
    assert last_maintenance(p.pipeline, TABLE)["outcome"] == "ok"  # type: ignore[index]
    # The lag (the events after the watermark) from the ledger's summaries, across the
    # ledger's rewrite (a replace commit, which adds no events), and the whole ledger.
    end = current_snapshot_id(spark, refs.cdc)
    assert end is not None and end != watermark
    assert events_after(spark, refs.cdc, watermark, end) == len(parts[MERGES].events)
    assert events_after(spark, refs.cdc, None, end) == spark.table(refs.cdc.sql).count()
    # And the next merge picks up exactly where the watermark says.
    [after] = [r for r in p.merge() if r.table == TABLE]
    assert after.start_snapshot == watermark and after.events == len(parts[MERGES].events)
    assert_matches(p.compare(workload))
    assert history_differences(p, workload) == []


@pytest.mark.parametrize(
    ("mode", "strategy"), [("merge-on-read", None), ("copy-on-write", "delete_insert")]
)
def test_a_small_base_is_bin_packed_by_its_fourth_merge_by_default(
    tmp_path: Path, warehouse: Path, spark: SparkSession, mode: str, strategy: str | None
) -> None:
    """Without merge settings, a small base (far below the 200,000 rows where ``auto``
    stops shuffling it) still has its small files bin-packed every fourth merge: a
    shuffle merge reads every file of the base, so a base never packed makes each merge
    slower than the last (bench/results/freshness.md, 2026-11-27, commit a17e48a). A
    copy-on-write base merged by ``delete_insert`` too: both of a merge's commits add data
    files there, and until 2b234be they counted as two merges, so such a base never packed."""
    p = Pipeline.create(
        tmp_path,
        warehouse,
        f"maint_default_{mode.replace('-', '_')}",
        spark=spark,
        buckets=4,
        mode=mode,
        extra={"schedule": {"stream_interval": "100ms"}},
    )
    if strategy is not None:
        p.config = with_merge_strategy(p.config, strategy)
    # A large first load, then three small merges over a wide key space: each small
    # merge adds a small file per bucket that the next ones rarely touch (a copy-on-write
    # merge rewrites the files it deletes from, folding them).
    workload = generate(37, 2000, tables=[TABLE], key_space=1500)
    events, first = workload.events, len(workload.events) - 99
    parts = [replace(workload, events=events[:first])] + [
        replace(workload, events=events[first + i * 33 : first + (i + 1) * 33]) for i in range(3)
    ]
    merges = _rounds(p, parts, seed=37)
    assert [m.events > 0 for m in merges] == [True] * 4
    # The first merge shuffles either way: the base has no snapshot yet.
    assert [m.strategy for m in merges] == ["shuffle"] + [strategy or "shuffle"] * 3
    packed = [m.compaction for m in merges]
    assert packed[:3] == [None, None, None], packed
    assert packed[3] is not None and packed[3].rewritten > packed[3].added > 0, packed
    assert max(data_files_per_partition(spark, p.refs(TABLE).base).values()) < 4
    assert_matches(p.compare(workload))


DANGLING_EVERY_HERE = 2
"""Dangling delete files go every second packing here (``DANGLING_EVERY`` is 4): "every
n-th, not each" is the same rule for any n above one, and each packing costs two rounds."""
# Each table packs every other round (the other one's turn between), so its second
# packing, the first to remove dangling delete files, comes by the fifth round.
PACKING_ROUNDS = 2 * DANGLING_EVERY_HERE + 1


@pytest.mark.long
def test_one_table_packs_per_round_and_dangling_deletes_go_every_nth_packing(
    tmp_path: Path, warehouse: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tables due to pack in every round (``compact_every: 1``): each round packs one
    of them and the other packs at its next merge, and a table's dangling delete files
    are removed on its every ``DANGLING_EVERY``-th packing, not on each (both habits keep
    a packing merge short for freshness: icetide/merge/compact.py)."""
    monkeypatch.setattr(compact, "DANGLING_EVERY", DANGLING_EVERY_HERE)
    tables = [TABLE, "products"]
    p = Pipeline.create(
        tmp_path,
        warehouse,
        "maint_turns",
        spark=spark,
        buckets=4,
        extra={"schedule": {"stream_interval": "100ms"}},
    )
    p.config = with_merge_strategy(p.config, "auto", compact_every=1)
    workload = generate(41, 400, tables=tables, key_space=40)
    stage = MergeStage(p.session, p.pipeline)
    query = LedgerStage(p.session, p.pipeline).start(once=False)
    rounds: list[list[MergeResult]] = []
    try:
        parts = plan_rounds(workload, PACKING_ROUNDS, 41, late_rate=0.0)
        for number, part in enumerate(parts):
            deliver(part, p.landing, seed=41_000 + number, files=1, duplicate_rate=0.05)
            query.processAllAvailable()
            rounds.append([r for r in stage.run_once() if r.table in tables])
    finally:
        query.stop()
    for results in rounds:
        ran = [r.table for r in results if r.compaction is not None and not r.compaction.deferred]
        assert len(ran) <= 1, f"{ran} packed in one round"
    deferred = [
        r.table for results in rounds for r in results if r.compaction and r.compaction.deferred
    ]
    assert set(deferred) == set(tables), deferred  # each table waited for its turn once at least

    for table in tables:
        # Oldest first: the packings (replace commits writing data files) between two
        # dangling-delete removals (replace commits that only remove delete files).
        summaries = list(lineage_summaries(spark, p.refs(table).base))[::-1]
        runs, since = [], 0
        for summary in summaries:
            if summary.get("operation") != "replace":
                continue
            if int(summary.get("added-data-files", "0")) > 0:
                since += 1
            elif int(summary.get("removed-delete-files", "0")) > 0:
                runs.append(since)
                since = 0
        assert runs and min(runs) >= DANGLING_EVERY_HERE, (table, runs, since)
        removed = [
            r.compaction.dangling_removed
            for results in rounds
            for r in results
            if r.table == table and r.compaction is not None and r.compaction.dangling_removed
        ]
        assert len(removed) == len(runs), (table, removed, runs)
    assert_matches(p.compare(workload))


LIVE_MERGES = 4


def test_maintenance_beside_live_merges_loses_no_merge_commit(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    fast = {"schedule": {"stream_interval": "100ms"}}
    p = Pipeline.create(tmp_path, warehouse, "maint_live", spark=spark, buckets=4, extra=fast)
    workload = generate(41, 900, tables=[TABLE], key_space=60)
    refs = p.refs(TABLE)
    done = threading.Event()
    runs: list[MaintenanceResult] = []
    failures: list[BaseException] = []

    def maintain_until_done() -> None:
        # Back to back, maintenance took the shared session's task slots from the merges
        # and each of its compactions widened the window a merge commit could conflict
        # in: on a loaded machine the test ran ten times longer. After each run it rests
        # as long as the run took, so it is beside the merges half the time.
        try:
            while not done.is_set():
                began = time.monotonic()
                runs.append(maintain_table(spark, p.reporting(lambda _: None), TABLE))
                done.wait(time.monotonic() - began)
        except BaseException as exc:  # surfaced in the main thread
            failures.append(exc)

    # The base exists before maintenance starts.
    first, rest = plan_rounds(workload, 2, 41, late_rate=0.0)
    deliver(first, p.landing, seed=1, files=1, duplicate_rate=0.0)
    p.stream()
    p.merge()
    worker = threading.Thread(target=maintain_until_done, name="maintenance")
    worker.start()
    try:
        merges = _rounds(p, plan_rounds(rest, LIVE_MERGES, 42, late_rate=0.05), seed=42)
        # Wait (on a condition, not a clock) for one maintenance run that began after the
        # merges, so at least one ran wholly beside them.
        while len(runs) < 2 and not failures and worker.is_alive():
            worker.join(0.5)
    finally:
        done.set()
        worker.join()
    assert not failures, failures
    assert runs, "maintenance never completed"
    applied = [m for m in merges if m.events]
    assert len(applied) == LIVE_MERGES
    # Every merge commit is on the base table's current lineage.
    mark = f"s.summary[{literal(WATERMARK_PROPERTY)}]"
    lineage = {
        int(r[0])
        for r in spark.sql(
            f"SELECT {mark} FROM {refs.base.child('snapshots')} s "
            f"JOIN {refs.base.child('history')} h ON s.snapshot_id = h.snapshot_id "
            f"WHERE h.is_current_ancestor AND {mark} IS NOT NULL"
        ).collect()
    }
    missing = [m.end_snapshot for m in applied if m.end_snapshot not in lineage]
    assert not missing, f"merge commits lost: {missing}"
    assert_matches(p.compare(workload))
    conflicts = sum(t.conflicts_retried for r in runs for t in r.tables)
    print(json.dumps({"maintenance_runs": len(runs), "conflicts_retried": conflicts}))
