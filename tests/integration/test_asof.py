"""Model-based: the table as of random source positions and times equals the plain-Python
model of the source replayed up to them, after a workload delivered badly (duplicates,
reordering, events held back across merges) and merged in rounds."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.cli import main
from icetide.demo.run import plan_rounds
from icetide.demo.workload import deliver, generate
from icetide.merge.asof import table_as_of
from icetide.merge.asof_plan import Target, Unreachable, parse_target
from icetide.observe.compare import compare_rows
from tests.integration.events import SCHEMAS, SOURCES, TOAST, postgres
from tests.integration.harness import Pipeline, assert_matches


@pytest.mark.long
def test_as_of_random_positions_and_times_equals_the_model(
    pipeline: Pipeline, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spark = pipeline.session
    workload = generate(31, 400, tables=["customers", "products"])
    for number, part in enumerate(plan_rounds(workload, 2, 31, late_rate=0.1)):
        deliver(part, pipeline.landing, seed=number, files=2, duplicate_rate=0.15)
        pipeline.stream()
        pipeline.merge()
    rng = random.Random(31)
    checked = []
    starts = set()
    for schema in workload.schemas:
        table = schema.table
        changes = [ch for ch in workload.journal if ch.table == table]
        # Instants all along the stream: the first event's, before any merge snapshot
        # (empty start), inside each merged range and between two positions.
        positions = [changes[0].position, changes[-1].position]
        positions += [rng.choice(changes).position, rng.choice(changes).position - 1]
        for position in positions:
            asof = table_as_of(
                spark,
                pipeline.pipeline,
                table,
                Target("position", str(position), Decimal(position)),
            )
            starts.add(asof.plan.start is None)
            rows = [r.asDict() for r in asof.frame.collect()]
            checked.append(compare_rows(schema, workload.state_at(table, position), rows))
            checked[-1].table = f"{table} at {position} ({asof.describe()})"
    assert_matches(checked)
    assert starts == {True, False}, "no as-of started from an empty table, or none from a merge"

    # A time: the newest position committed at or before it.
    customers = [ch for ch in workload.journal if ch.table == "customers"]
    moment = customers[len(customers) // 2]
    when = datetime.fromtimestamp(moment.ts_ms / 1000, UTC)
    asof = table_as_of(spark, pipeline.pipeline, "customers", parse_target(when.isoformat()))
    newest = max(ch.position for ch in customers if ch.ts_ms <= moment.ts_ms)
    assert asof.plan.target == newest
    rows = [r.asDict() for r in asof.frame.collect()]
    schema = pipeline.schemas["customers"]
    assert_matches([compare_rows(schema, workload.state_at("customers", newest), rows)])

    # Before the first event: unreachable, and the error says the earliest point.
    first = customers[0].position
    with pytest.raises(Unreachable) as caught:
        table_as_of(
            spark, pipeline.pipeline, "customers", Target("position", "x", Decimal(first - 1))
        )
    assert caught.value.earliest == first
    assert str(first) in caught.value.message

    # The command: into a branch of the base table, and into Parquet; the same rows.
    config = ["-c", str(pipeline.config_path)]
    middle = customers[len(customers) // 3].position
    want = workload.state_at("customers", middle)
    assert (
        main(["asof", "customers", "--at", str(middle), "--to", "branch:at_middle", *config]) == 0
    )
    branch = spark.table(pipeline.refs("customers").base.branch("at_middle"))
    assert_matches([compare_rows(schema, want, [r.asDict() for r in branch.collect()])])
    assert len(pipeline.base("customers")) == len(workload.expected["customers"])  # main kept
    out = tmp_path / "customers_middle"
    capsys.readouterr()
    to = ["--to", f"parquet:{out}", "--output", "json"]
    assert main(["asof", "customers", "--at", str(middle), *to, *config]) == 0
    assert json.loads(capsys.readouterr().out)["position"] == str(middle)
    assert spark.read.parquet(str(out)).count() == len(want)
    assert main(["asof", "customers", "--at", str(middle), "--output", "json", *config]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(r["id"] for r in printed) == sorted(k[0] for k in want)
    copy = f"{pipeline.config.catalog.namespace}.customers_middle"
    for _ in range(2):  # created, then replaced
        assert main(["asof", "customers", "--at", str(middle), "--to", copy, *config]) == 0
    assert spark.table(f"{pipeline.config.catalog.name}.{copy}").count() == len(want)
    assert main(["asof", "customers", "--at", str(first - 1), *config]) == 2
    assert f"earliest reachable position {first}" in capsys.readouterr().err


def test_a_key_change_without_its_unchanged_toast_value_inherits_it_as_of_then(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    """PostgreSQL, REPLICA IDENTITY DEFAULT: ``UPDATE docs SET id = 2 WHERE id = 1`` sends
    the new key without its TOASTed body. As of after the change the body comes from the
    old key's row in the base snapshot the as-of starts from, as the merge takes it from
    the mirror; as of before it, the old key is still there."""
    shop = Pipeline.custom(tmp_path, warehouse, "asof_key_toast", SCHEMAS, SOURCES, spark)
    body = "body " + "x" * 3000

    def step(*lines: str) -> None:
        shop.land(list(lines))
        shop.stream()
        shop.merge()

    step(
        postgres("c", 0x100, after={"id": 1, "title": "one", "body": body}),
        postgres("c", 0x110, after={"id": 3, "title": "three", "body": "short"}),
    )
    step(
        postgres("d", 0x200, before={"id": 1}),
        postgres("c", 0x200, after={"id": 2, "title": "two", "body": TOAST}),
        postgres("c", 0x300, after={"id": 5, "title": "five", "body": "later"}),
    )

    def docs(at: str) -> dict[int, tuple[str, str]]:
        asof = table_as_of(spark, shop.pipeline, "docs", parse_target(at))
        try:
            return {r["id"]: (r["title"], r["body"]) for r in asof.frame.collect()}
        finally:
            asof.release()

    assert docs("0/200") == {2: ("two", body), 3: ("three", "short")}
    assert docs("0/1FF") == {1: ("one", body), 3: ("three", "short")}
    assert docs("0/100") == {1: ("one", body)}
