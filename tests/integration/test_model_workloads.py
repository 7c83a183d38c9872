"""Model-based: random multi-table workloads, delivered badly, merged in rounds, must equal
the plain-Python model of the source that generated them; then the same pipeline
redelivered (a merge with nothing new to apply) and replayed from its ledger."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.demo.run import plan_rounds
from icetide.demo.workload import deliver, generate
from icetide.lake.progress import read_watermark
from icetide.lake.tables import current_snapshot_id
from tests.integration.harness import Pipeline, assert_matches


@pytest.mark.parametrize(
    ("seed", "mode", "events", "rounds"),
    [(11, "merge-on-read", 400, 3), (23, "copy-on-write", 300, 2)],
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
        merged = pipeline.fingerprints()
        for table, found in merged.items():
            assert found.keys == found.rows, f"{table}: duplicate keys after round {number}"
    # Every event has now arrived at least once (held-back events come in the last round).
    # From here on the bases are compared with this state by digest (icetide columns
    # included): equal digests, equal to the model too.
    assert_matches(pipeline.compare(workload))

    # The whole stream again, with tombstones and transaction markers: every event is
    # older than or equal to what the bases hold, so the merge applies nothing, changes
    # no row, and still moves each watermark to the ledger's snapshot.
    refs = {table: pipeline.refs(table) for table in pipeline.schemas}
    ledgered = {t: spark.table(r.cdc.sql).count() for t, r in refs.items()}
    deliver(workload, pipeline.landing, seed=seed, files=2, duplicate_rate=0.0, noise=True)
    pipeline.stream()
    redelivered = {t: spark.table(r.cdc.sql).count() - ledgered[t] for t, r in refs.items()}
    counts = {t: sum(1 for e in workload.events if e.table == t) for t in refs}
    assert redelivered == counts
    assert {r.table: r.events for r in pipeline.merge()} == redelivered
    for table, ref in refs.items():
        assert read_watermark(spark, ref.base) == current_snapshot_id(spark, ref.cdc), table
    assert pipeline.fingerprints() == merged
    assert {r.table: r.events for r in pipeline.merge()} == dict.fromkeys(refs, 0)

    # Replaying the whole ledger (duplicates, late events and redeliveries in it) into
    # empty bases gives the same bases.
    for ref in refs.values():
        spark.sql(f"DROP TABLE {ref.base}")
    results = pipeline.merge()
    assert all(r.start_snapshot is None and r.events > 0 for r in results)
    assert pipeline.fingerprints() == merged
