"""The ledger's one pass (icetide/ledger/one_pass.py): a micro-batch classified, projected
and written by one Spark job stores what the per-message path decides for every line,
and a batch holding what the driver must see first is stored in two passes with no file
of the abandoned pass left behind."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import icetide.ledger.stage as ledger_stage
from icetide.ledger.decode import DEAD, ROW, SKIP, classify_one
from icetide.ledger.stage import LedgerStage, routes_of
from tests.integration.harness import Pipeline
from tests.ledger_lines import ITEMS, event, line, seeded_lines

ABANDONED = "counted before it is stored"
"""What a batch stored in two passes after its one pass was abandoned says."""


def items_pipeline(root: Path, warehouse: Path, namespace: str, spark: SparkSession) -> Pipeline:
    return Pipeline.custom(
        root, warehouse, namespace, {"items": ITEMS}, {"items": "shop.items"}, spark
    )


def land_bytes(pipe: Pipeline, name: str, lines: list[bytes]) -> bytes:
    content = b"\n".join(lines) + b"\n"
    pipe.landing.mkdir(parents=True, exist_ok=True)
    (pipe.root / name).write_bytes(content)
    (pipe.root / name).rename(pipe.landing / name)
    return content


def batch_jobs(stage: LedgerStage, spark: SparkSession) -> int:
    """Run the stage once over what was landed; the Spark jobs its batch ran."""
    query = stage.start(once=True)
    query.awaitTermination()
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(str(query.runId)))


def stored(pipe: Pipeline) -> dict[str, list[dict[str, Any]]]:
    """Every row the batch stored, by table, without the ingestion time (the batch's)."""
    refs = pipe.refs("items")
    tables = {
        "ledger": refs.cdc,
        "dead letters": refs.dead_letters,
        "unrouted": pipe.refs(pipe.config.dead_letter.unrouted_table).dead_letters,
    }
    out = {}
    for what, table in tables.items():
        rows = [
            {k: v for k, v in row.items() if k not in ("_ingested_at", "ingested_at")}
            for row in pipe.rows(table)
        ]
        out[what] = sorted(rows, key=lambda r: str(r.get("_message_id", r.get("message_id"))))
    return out


def test_one_pass_stores_what_two_passes_store(
    tmp_path: Path, warehouse: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Valid and hostile lines: mutated values, wrong types, invalid UTF-8, deep nesting,
    # unknown columns, tombstones, lines routed to no table.
    lines = [raw for raw, _ in seeded_lines(seed=29, count=400)]
    routes = None
    ways: dict[int, tuple[int, dict[str, list[dict[str, Any]]], str]] = {}
    # 0: only the tables earlier batches held are prepared, none before the first batch,
    # so a first batch is stored in two passes.
    for one_pass_tables in (ledger_stage.ONE_PASS_TABLES, 0):
        monkeypatch.setattr(ledger_stage, "ONE_PASS_TABLES", one_pass_tables)
        pipe = items_pipeline(
            tmp_path / str(one_pass_tables), warehouse, f"passes_{one_pass_tables}", spark
        )
        routes = routes_of(pipe.config)
        land_bytes(pipe, "hostile.json", lines)
        jobs = batch_jobs(LedgerStage(spark, pipe.pipeline), spark)
        summary = next(line for line in pipe.logs if line.startswith("ledger batch 0:"))
        ways[one_pass_tables] = jobs, stored(pipe), re.sub(r" \[[^]]*\]", "", summary)
    assert routes is not None
    kinds = {classify_one(raw, routes)[1:3] for raw in lines}
    assert {(ROW, ""), (SKIP, "tombstone"), (DEAD, "malformed_json")} <= kinds, kinds
    (one_jobs, one, one_line), (two_jobs, two, two_line) = ways.values()
    assert one_jobs == 1 and two_jobs > 1, (one_jobs, two_jobs)
    assert all(one[what] for what in one), {what: len(rows) for what, rows in one.items()}
    assert one == two
    assert one_line == two_line


def test_a_batch_the_driver_must_see_first_is_stored_in_two_passes_leaving_no_file(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    pipe = items_pipeline(tmp_path, warehouse, "one_pass_abandoned", spark)
    stage = LedgerStage(spark, pipe.pipeline)
    # File a: a dead letter of the table, then more rows than one Arrow batch holds, so
    # its task has written files when the pass is abandoned. File b: a schema-change
    # message (the driver acts on it before any row is projected), after a first Arrow
    # batch with a dead letter and a stray message: its task has begun two files.
    wrong = event(1, 1)
    wrong["after"]["qty"] = "many"
    rows = [line(event(10 + n, n)) for n in range(2, 12_002)]
    land_bytes(pipe, "a.json", [line(wrong), *rows])
    stray = event(20_000, 20_000)
    stray["source"]["table"] = "nowhere"
    ddl = {"source": event(20_001, 0)["source"], "databaseName": "shop", "tableChanges": [],
           "ddl": "ALTER TABLE items ADD COLUMN color VARCHAR(10)"}  # fmt: skip
    b = [line(wrong), line(stray), *rows[:9_998], line(ddl)]
    land_bytes(pipe, "b.json", b)

    assert batch_jobs(stage, spark) > 1
    assert [line for line in pipe.logs if ABANDONED in line] == [
        "ledger batch 0: a schema change of items: " + ABANDONED
    ], pipe.logs
    # Everything stored once: a.json's rows and b.json's (the same keys, other ids).
    ledger = pipe.rows(pipe.refs("items").cdc)
    assert len(ledger) == len({r["_message_id"] for r in ledger}) == 12_000 + 9_998
    dlt = pipe.rows(pipe.refs("items").dead_letters)
    assert sorted(r["message_id"] for r in dlt) == ["a.json:1", "b.json:1"]
    unrouted = pipe.rows(pipe.refs(pipe.config.dead_letter.unrouted_table).dead_letters)
    assert [r["message_id"] for r in unrouted] == ["b.json:2"]
    # No file of the abandoned pass is left: each table's data folder holds only the
    # files its snapshots reference.
    unrouted_table = pipe.refs(pipe.config.dead_letter.unrouted_table).dead_letters
    for ref in (pipe.refs("items").cdc, pipe.refs("items").dead_letters, unrouted_table):
        listed = {
            r.file_path.removeprefix("file:")
            for r in spark.sql(f"SELECT file_path FROM {ref.child('files')}").collect()
        }
        described = spark.sql(f"DESCRIBE TABLE EXTENDED {ref}")
        location = described.where("col_name = 'Location'").first()
        assert location is not None
        data = Path(location.data_type.removeprefix("file:")) / "data"
        on_disk = {str(p) for p in data.rglob("*.parquet")}
        assert on_disk == listed, (ref, on_disk - listed)

    # The next batch, with nothing the driver must see first, is one pass again.
    land_bytes(pipe, "c.json", [line(event(30_000 + n, n)) for n in range(5)])
    assert batch_jobs(stage, spark) == 1


def test_a_pipeline_of_many_tables_prepares_the_tables_its_batches_held(
    tmp_path: Path, warehouse: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two tables stand for many: above ONE_PASS_TABLES, a one-pass batch prepares only
    # the tables earlier batches held messages for.
    monkeypatch.setattr(ledger_stage, "ONE_PASS_TABLES", 1)
    tables = {"items": ITEMS, "things": ITEMS.renamed("things")}
    pipe = Pipeline.custom(
        tmp_path, warehouse, "one_pass_active", tables,
        {"items": "shop.items", "things": "shop.things"}, spark,
    )  # fmt: skip
    stage = LedgerStage(spark, pipe.pipeline)

    def of(table: str, first: int, n: int) -> list[bytes]:
        events = [event(first + i, i) for i in range(n)]
        for e in events:
            e["source"]["table"] = table
        return [line(e) for e in events]

    batches = [of("items", 0, 3), of("items", 10, 3), of("items", 20, 3) + of("things", 30, 2)]
    batches.append(of("items", 40, 3) + of("things", 50, 2))
    jobs = []
    for n, lines in enumerate(batches):
        land_bytes(pipe, f"{n}.json", lines)
        jobs.append(batch_jobs(stage, spark))
    # Nothing known at first: two passes; then one; a table new to the process: two
    # passes, saying why; then one again.
    assert jobs[1] == jobs[3] == 1 and jobs[0] > 1 and jobs[2] > 1, jobs
    assert [line for line in pipe.logs if ABANDONED in line] == [
        "ledger batch 2: messages of things, a table not prepared for this batch: " + ABANDONED
    ], pipe.logs
    ids = {t: sorted(r["_message_id"] for r in pipe.rows(pipe.refs(t).cdc)) for t in tables}
    assert ids == {
        "items": sorted(f"{n}.json:{i}" for n in range(4) for i in range(1, 4)),
        "things": sorted(f"{n}.json:{i}" for n in (2, 3) for i in range(4, 6)),
    }, ids


@pytest.mark.parametrize(
    ("one_pass_tables", "landed"),
    [(ledger_stage.ONE_PASS_TABLES, 6), (0, 6), (ledger_stage.ONE_PASS_TABLES, 12)],
)
def test_a_batch_in_many_splits_is_written_by_one_task_a_core(
    tmp_path: Path,
    warehouse: Path,
    spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch,
    one_pass_tables: int,
    landed: int,
) -> None:
    # Landing files, each its own split (a 1-byte split size), stored in one pass (the
    # default) or in two (0: the first batch of a many-table pipeline): each way writes
    # the table's files in one task a core (local[2]), not one a split; a task takes at
    # most SPLITS_A_TASK splits (12 files: three tasks).
    monkeypatch.setattr(ledger_stage, "ONE_PASS_TABLES", one_pass_tables)
    namespace = f"core_tasks_{one_pass_tables}_{landed}"
    pipe = items_pipeline(tmp_path, warehouse, namespace, spark)
    for n in range(landed):
        land_bytes(pipe, f"{n}.json", [line(event(100 * n + i, i)) for i in range(50)])
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1")
    try:
        batch_jobs(LedgerStage(spark, pipe.pipeline), spark)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    cores = spark.sparkContext.defaultParallelism
    tasks = max(cores, -(-landed // ledger_stage.SPLITS_A_TASK))
    cdc = pipe.refs("items").cdc
    files = spark.sql(f"SELECT record_count FROM {cdc.child('files')}").collect()
    if landed <= cores * ledger_stage.SPLITS_A_TASK:
        assert 1 <= len(files) <= cores < landed, (len(files), cores)
    else:
        assert len(files) == tasks > cores, (len(files), tasks)
    assert sum(f.record_count for f in files) == 50 * landed
    ids = sorted(r["_message_id"] for r in pipe.rows(cdc))
    assert ids == sorted(f"{n}.json:{i}" for n in range(landed) for i in range(1, 51))
