"""Model-based: random multi-table workloads, delivered badly, merged in rounds, must equal
the plain-Python model of the source that generated them."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.demo.run import plan_rounds
from icetide.demo.workload import deliver, generate
from tests.integration.harness import Pipeline, assert_matches


@pytest.mark.parametrize(
    ("seed", "mode", "events", "rounds"),
    [(11, "merge-on-read", 900, 3), (23, "copy-on-write", 500, 2)],
)
def test_rounds_of_bad_delivery_equal_the_model(
    tmp_path: Path,
    warehouse: Path,
    spark: SparkSession,
    seed: int,
    mode: str,
    events: int,
    rounds: int,
) -> None:
    pipeline = Pipeline.create(
        tmp_path, warehouse, f"model_{seed}", spark=spark, mode=mode, buckets=3
    )
    workload = generate(seed, events)
    parts = plan_rounds(workload, rounds, seed, late_rate=0.08)
    # The bad delivery does happen: events held back cross a merge, and duplicates land.
    order = {id(e): n for n, e in enumerate(workload.events)}
    for earlier, later in itertools.pairwise(parts):
        held = min(order[id(e)] for e in later.events)
        assert held < max(order[id(e)] for e in earlier.events), "no event came late"
    for number, part in enumerate(parts):
        files = deliver(
            part, pipeline.landing, seed=seed * 100 + number, files=3, duplicate_rate=0.15
        )
        landed = sum(len(f.read_text().splitlines()) for f in files)
        assert landed > len(part.events), f"round {number} delivered no duplicate"
        pipeline.stream()
        pipeline.merge()
        # An intermediate state is a prefix with holes, so only the end is compared; but
        # no key may ever appear twice (counted in Spark, one job for all tables).
        for table, found in pipeline.fingerprints().items():
            assert found.keys == found.rows, f"{table}: duplicate keys after round {number}"
    # Every event has now arrived at least once (held-back events come in the last round).
    assert_matches(pipeline.compare(workload))
    # The whole stream again, with tombstones and transaction markers, changes nothing.
    deliver(
        workload,
        pipeline.landing,
        seed=seed,
        files=2,
        duplicate_rate=0.0,
        redeliver_all=True,
        noise=True,
    )
    pipeline.stream()
    pipeline.merge()
    assert_matches(pipeline.compare(workload))
    ledger_events = spark.table(pipeline.refs("customers").cdc.sql).count()
    assert ledger_events > sum(1 for e in workload.events if e.table == "customers")


def test_replaying_the_whole_ledger_into_an_empty_base_gives_the_same_base(
    pipeline: Pipeline,
) -> None:
    workload = generate(5, 600)
    # Two merges, late events held from the first into the second.
    for number, part in enumerate(plan_rounds(workload, 2, 5, late_rate=0.1)):
        deliver(part, pipeline.landing, seed=number, files=2)
        pipeline.stream()
        pipeline.merge()
    before = pipeline.fingerprints()
    for table in pipeline.schemas:
        pipeline.session.sql(f"DROP TABLE {pipeline.refs(table).base}")
    results = pipeline.merge()
    assert all(r.start_snapshot is None and r.events > 0 for r in results)
    # Equal digests: the same rows, icetide columns included; and the base before the
    # replay equalled the model too, since the replayed one does.
    assert pipeline.fingerprints() == before
    assert_matches(pipeline.compare(workload))


def test_a_merge_with_nothing_new_to_apply_still_moves_the_watermark(
    pipeline: Pipeline,
) -> None:
    from icetide.lake.progress import read_watermark
    from icetide.lake.tables import current_snapshot_id

    workload = generate(3, 200, tables=["customers"])
    deliver(workload, pipeline.landing, seed=1, files=1, duplicate_rate=0.0)
    pipeline.stream()
    pipeline.merge()
    refs = pipeline.refs("customers")
    rows = pipeline.base("customers")
    # Redelivery: every event is older than or equal to what the base holds.
    deliver(workload, pipeline.landing, seed=2, files=1, duplicate_rate=0.0)
    pipeline.stream()
    [result] = [r for r in pipeline.merge() if r.table == "customers"]
    assert result.events == 200
    spark = pipeline.session
    assert read_watermark(spark, refs.base) == current_snapshot_id(spark, refs.cdc)
    assert pipeline.base("customers") == rows
    [again] = [r for r in pipeline.merge() if r.table == "customers"]
    assert again.events == 0
