"""Model-based: the SCD type 2 history the merge keeps (``history: scd2``) equals the
source model's intervals, after random workloads delivered badly (duplicates,
reordering, events held back across merges), merges stopped at each commit point of
the history's maintenance, and a whole redelivery."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import SparkSession

from icetide.config import load_config
from icetide.demo.run import plan_rounds
from icetide.demo.workload import Workload, deliver, generate
from icetide.merge import history as history_module
from icetide.merge import stage as stage_module
from icetide.observe.compare import normalize
from icetide.schema.contract import history as h
from tests.integration.harness import Pipeline, assert_matches, killed_at


def with_history(pipeline: Pipeline) -> Pipeline:
    """``pipeline`` with ``history: scd2`` on every table."""
    doc = yaml.safe_load(pipeline.config_path.read_text())
    for table in doc["tables"]:
        table["history"] = "scd2"
    pipeline.config_path.write_text(yaml.safe_dump(doc))
    pipeline.config = load_config(pipeline.config_path)
    return pipeline


def _ms(value: datetime | None) -> int | None:
    if value is None:
        return None
    if value.tzinfo is None:  # PySpark's TIMESTAMP: a naive local time
        value = value.astimezone(UTC)
    return round(value.timestamp() * 1000)


def history_differences(pipeline: Pipeline, workload: Workload) -> list[str]:
    """Every difference between each table's history and the model's intervals."""
    spark = pipeline.session
    out: list[str] = []
    for schema in workload.schemas:
        table = schema.table
        rows = spark.table(pipeline.refs(table).history.sql).collect()
        found: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in rows:
            r = row.asDict(recursive=True)
            key = tuple(r[k] for k in schema.primary_key)
            if (key, int(r[h.FROM_POSITION])) in found:
                out.append(f"{table}: version {key} at {r[h.FROM_POSITION]} twice")
            found[(key, int(r[h.FROM_POSITION]))] = r
        want = {(i.key, i.from_position): i for i in workload.intervals(table)}
        for missing in sorted(want.keys() - found.keys(), key=repr)[:5]:
            out.append(f"{table}: version {missing} missing")
        for extra in sorted(found.keys() - want.keys(), key=repr)[:5]:
            out.append(f"{table}: version {extra} not in the model")
        for at in want.keys() & found.keys():
            i, r = want[at], found[at]
            to = None if r[h.TO_POSITION] is None else int(r[h.TO_POSITION])
            got = (to, _ms(r[h.VALID_FROM]), _ms(r[h.VALID_TO]), r[h.IS_CURRENT])
            expected = (i.to_position, i.from_ms, i.to_ms, i.to_position is None)
            if got != expected:
                out.append(f"{table}: version {at}: interval {got}, model {expected}")
            for col in schema.columns:
                a, b = normalize(i.row.get(col.name), col.type), normalize(r[col.name], col.type)
                if a != b:
                    out.append(f"{table}: version {at}: {col.name} {b!r}, model {a!r}")
    return out


def test_history_equals_the_model_across_bad_delivery_and_stops_at_each_commit_point(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    pipeline = with_history(
        Pipeline.create(tmp_path, warehouse, "scd2_model", spark=spark, buckets=2)
    )
    workload = generate(41, 700, tables=["customers", "products"])
    parts = plan_rounds(workload, 4, 41, late_rate=0.1)
    # Rounds 1..3 stop at a commit point (as a kill -9 there would), then merge again.
    stops = [
        None,
        (stage_module, "merge.after_commit"),  # the base committed, the history not
        (history_module, history_module.BEFORE_COMMIT),
        (history_module, history_module.AFTER_COMMIT),
    ]
    for number, (part, stop) in enumerate(zip(parts, stops, strict=True)):
        deliver(part, pipeline.landing, seed=number, files=2, duplicate_rate=0.15)
        pipeline.stream()
        if stop is not None:
            with killed_at(*stop):
                pipeline.merge()
        pipeline.merge()
    assert_matches(pipeline.compare(workload))
    assert history_differences(pipeline, workload) == []
    products = spark.table(pipeline.refs("products").history.sql)
    assert products.where(f"size({h.INHERITED}) > 0").count() > 0, "no unchanged TOAST value"

    # The whole stream again: nothing changes, not even a version rewritten.
    history = pipeline.refs("customers").history
    before = spark.table(history.sql).count()
    deliver(workload, pipeline.landing, seed=9, files=2, duplicate_rate=0.0, redeliver_all=True)
    pipeline.stream()
    pipeline.merge()
    assert history_differences(pipeline, workload) == []
    assert spark.table(history.sql).count() == before
