"""How many Spark jobs one ledger micro-batch runs: at a steady rate a job's fixed cost is
most of a micro-batch's time (docs/merge-performance.md, "Freshness: less work per event
and per micro-batch"), so the count is a property of the design, checked here without
timing anything."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

import icetide.lake.tables as lake_tables
import icetide.ledger.stage as ledger_stage
from icetide.demo.workload import Envelope, deliver, generate
from icetide.ledger.stage import LedgerStage
from icetide.schema.contract import ledger as c
from icetide.schema.contract.names import TableName
from icetide.schema.quoting import quote
from icetide.spark.session import LEDGER_POOL
from tests.integration.harness import Pipeline


def second_batch(stage: LedgerStage, pipeline: Pipeline) -> tuple[StreamingQuery, list[Envelope]]:
    """Two micro-batches of the demo's three tables, one query each: the first reads each
    table's last stored batch, so the second runs only the jobs of a steady state. The
    second's query, and the events of both."""
    first, second = generate(3, 300), generate(4, 300)
    deliver(first, pipeline.landing, seed=3, files=1, duplicate_rate=0.0)
    stage.start(once=True).awaitTermination()
    deliver(second, pipeline.landing, seed=4, files=1, duplicate_rate=0.0)
    query = stage.start(once=True)
    query.awaitTermination()
    return query, first.events + second.events


def test_a_micro_batch_stores_all_its_tables_in_one_spark_job(
    pipeline: Pipeline, compiled: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    spark = compiled  # Spark generates code for the batches' queries, as a pipeline's does
    stage = LedgerStage(spark, pipeline.pipeline)
    query, _ = second_batch(stage, pipeline)
    # A streaming query runs its micro-batches in a job group named by its run id.
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(str(query.runId))
    tables = [table.name for table in pipeline.config.tables]
    assert len(tables) == 3
    assert all(pipeline.rows(pipeline.refs(name).cdc) for name in tables)
    # One job whose tasks classify, project and write every table's files (the driver
    # commits them, no Spark job), in the batch's own thread and scheduler pool.
    assert len(jobs) == 1, sorted(jobs)
    assert pools_of(spark, jobs) == {"default"}
    # A third batch runs the same queries as the second: Spark compiles no new code for
    # them (a per-batch literal, such as the ingestion time, compiled each table's append
    # anew: 6 classes a batch before f130073).
    deliver(generate(5, 300), pipeline.landing, seed=5, files=1, duplicate_rate=0.0)
    compiled = codegen_compilations(spark)
    loads: Counter[str] = Counter()
    load = lake_tables._load

    def counted(spark: SparkSession, table: TableName) -> Any:
        loads[table.name] += 1
        return load(spark, table)

    monkeypatch.setattr(lake_tables, "_load", counted)
    started = datetime.now(UTC)
    stage.start(once=True).awaitTermination()
    ended = datetime.now(UTC)
    assert codegen_compilations(spark) - compiled == 0
    # Each table's ledger and dead-letter table not loaded from the catalog again: the
    # stage holds them from its first batch and refreshes them (a load parses the whole
    # metadata file); its base looked up once.
    for name in tables:
        refs = pipeline.refs(name)
        assert (loads[refs.cdc.name], loads[refs.dead_letters.name]) == (0, 0), loads
        assert loads[refs.base.name] <= 1, loads
    # Each table's rows of a batch carry the batch's one ingestion time.
    for name in tables:
        ledger = spark.table(pipeline.refs(name).cdc.sql)
        times = {r[0] for r in ledger.select(c.INGESTED_AT).distinct().collect()}
        assert len(times) == 3, (name, times)  # the three batches
        newest = max(times).replace(tzinfo=None)
        assert started.replace(tzinfo=None) <= newest <= ended.replace(tzinfo=None), (name, times)


def test_ledgers_partitioned_otherwise_are_appended_by_spark_in_chunks_in_the_ledgers_pool(
    pipeline: Pipeline, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger_stage, "CHUNK_TABLES", 1)  # three chunks of one table
    monkeypatch.setattr(ledger_stage, "PROGRESS_SECONDS", 0.0)  # a line after each chunk
    stage = LedgerStage(spark, pipeline.pipeline)
    stage.ensure_tables()
    for table in pipeline.config.tables:  # a batch's rows may now span partitions
        key = quote(pipeline.pipeline.schema(table.name).primary_key[0])
        cdc = pipeline.refs(table.name).cdc
        spark.sql(f"ALTER TABLE {cdc} ADD PARTITION FIELD bucket(2, {key})")
    query, events = second_batch(stage, pipeline)
    # The chunks' threads carry the batch's job group, so their jobs are found in it.
    jobs = sorted(spark.sparkContext.statusTracker().getJobIdsForGroup(str(query.runId)))
    tables = [table.name for table in pipeline.config.tables]
    # Classify, then per chunk its projection with its figures, and its append.
    assert len(jobs) == 1 + 2 * len(tables), jobs
    # The chunks' jobs in the ledger's pool, so the merge's get their share of the slots.
    assert pools_of(spark, jobs[:1]) == {"default"}
    assert pools_of(spark, jobs[1:]) == {LEDGER_POOL}
    for name in tables:  # every event of both batches, in its own table's ledger
        sent = sum(e.table == name for e in events)
        assert len(pipeline.rows(pipeline.refs(name).cdc)) == sent, name
    # While a batch stores its chunks it says how far it is, then its own line says all.
    second = [line for line in pipeline.logs if line.startswith("ledger batch 1:")]
    assert [line.split(" tables stored")[0] for line in second[:2]] == [
        "ledger batch 1: 1 of 3",
        "ledger batch 1: 2 of 3",
    ], second
    assert all(" of 300 events) in " in line for line in second[:2]), second
    assert second[2].startswith("ledger batch 1: 300 events ("), second
    assert len(second) == 3, second


def pools_of(spark: SparkSession, jobs: list[int]) -> set[str]:
    """The fair scheduler pools the stages of ``jobs`` ran in (Spark's status store)."""
    store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]
    tracker = spark.sparkContext.statusTracker()
    pools: set[str] = set()
    for job in jobs:
        info = tracker.getJobInfo(job)
        assert info is not None, job
        pools |= {str(store.lastStageAttempt(s).schedulingPool()) for s in info.stageIds}
    return pools


def codegen_compilations(spark: SparkSession) -> int:
    """Classes Spark's code generator has compiled in this JVM (its cache misses)."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def test_the_python_workers_of_a_local_session_run_icetides_daemon(spark: SparkSession) -> None:
    """PySpark's worker re-reads every zip archive on its path before each task on Python
    before 3.12; icetide's daemon spares Spark's own, and forks the workers with the
    ledger's modules imported and frozen (icetide/spark/worker_daemon.py)."""
    import sys

    import pyarrow as pa

    def probe(batches):  # type: ignore[no-untyped-def]
        import gc
        import importlib
        import sys as worker_sys
        import zipimport

        main = worker_sys.modules["__main__"].__spec__
        # What PySpark's worker does before each task, with every archive read counted.
        read_again: list[str] = []
        read_directory = zipimport._read_directory  # type: ignore[attr-defined]

        def counted(archive):  # type: ignore[no-untyped-def]
            read_again.append(archive)
            return read_directory(archive)

        zipimport._read_directory = counted  # type: ignore[attr-defined]
        try:
            importlib.invalidate_caches()
        finally:
            zipimport._read_directory = read_directory  # type: ignore[attr-defined]
        archives = sorted(
            key
            for key, finder in worker_sys.path_importer_cache.items()
            if isinstance(finder, zipimport.zipimporter)
        )
        for _ in batches:
            yield pa.RecordBatch.from_pydict(
                {
                    "main": [main.name if main else None],
                    "invalidate": [zipimport.zipimporter.invalidate_caches.__qualname__],
                    "frozen": [gc.get_freeze_count()],
                    "archives": [archives],
                    "read_again": [read_again],
                }
            )

    schema = (
        "main STRING, invalidate STRING, frozen BIGINT, archives ARRAY<STRING>, "
        "read_again ARRAY<STRING>"
    )
    rows = spark.range(1).mapInArrow(probe, schema).collect()
    assert {row.main for row in rows} == {"icetide.spark.worker_daemon"}
    # The daemon imported the ledger's modules and froze them before forking the worker.
    assert all(row.frozen > 10_000 for row in rows), rows
    if sys.version_info < (3, 12):
        assert {row.invalidate for row in rows} == {"keep_archives.<locals>.invalidate_caches"}
        # Spark's archives on the worker's path, its core jar among them (a jar is a zip
        # to Python), are not read again before a task: the jar alone took 73 ms a read.
        archives = {a for row in rows for a in row.archives}
        assert any(a.endswith(".jar") for a in archives), archives
        assert any(a.endswith("pyspark.zip") for a in archives), archives
        assert [row.read_again for row in rows] == [[] for _ in rows]


def test_the_classes_named_for_the_jvm_view_exist(spark: SparkSession) -> None:
    """A misspelt pinned name would fail PySpark's every call through it."""
    from icetide.spark.jvm import PYSPARK_NAMES, jvm_class

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    for short, name in PYSPARK_NAMES.items():
        assert jvm_class("java.lang.Class").forName(name).getName() == name
        # and the view answers the short name with that very class, from Python
        assert vars(jvm)[short]._fqn == name
