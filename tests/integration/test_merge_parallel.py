"""A merge round merges tables at once (``merge.parallel_tables``), in threads of one
SparkSession, and every table still ends equal to its source."""

from __future__ import annotations

import threading

from pyspark.sql import SparkSession

from icetide.cli.run import marks_due_tables
from icetide.demo.workload import deliver, generate
from icetide.ledger.stage import LedgerStage
from icetide.merge.compact import PackingTurn
from icetide.merge.round import TablesDue
from icetide.merge.stage import MergeResult, MergeStage
from icetide.pipeline import Pipeline as StagePipeline
from icetide.progress import Reporter
from tests.integration.harness import Pipeline, assert_matches


class Overlapping(MergeStage):
    """A merge stage whose first two merges each wait, before merging, until both have
    begun: a round that merged one table after the other would never get past the first."""

    def __init__(self, spark: SparkSession, pipeline: StagePipeline) -> None:
        super().__init__(spark, pipeline)
        self.together = threading.Barrier(2, timeout=20)
        self.threads: set[str] = set()
        self.begun = 0
        self.lock = threading.Lock()

    def merge_table(self, name: str, turn: PackingTurn | None = None) -> MergeResult:
        with self.lock:
            self.threads.add(threading.current_thread().name)
            self.begun += 1
            first_two = self.begun <= 2
        if first_two:
            self.together.wait()
        return super().merge_table(name, turn)


def test_two_tables_merge_at_once_and_each_matches_its_source(
    pipeline: Pipeline, spark: SparkSession
) -> None:
    workload = generate(5, 600, tables=["customers", "order_lines"])
    deliver(workload, pipeline.landing, seed=3, files=3, duplicate_rate=0.1)
    pipeline.stream()
    config = pipeline.config.model_copy(
        update={"merge": pipeline.config.merge.model_copy(update={"parallel_tables": 2})}
    )
    stage = Overlapping(spark, StagePipeline(config, pipeline.schemas))
    results = stage.run_once()
    assert [r.table for r in results] == [t.name for t in config.tables]
    assert len(stage.threads) == 2, stage.threads
    assert all(r.events > 0 for r in results if r.table in ("customers", "order_lines"))
    assert_matches(pipeline.compare(workload))


def test_the_session_keeps_a_rounds_compiled_code(spark: SparkSession) -> None:
    """Spark's default 100 compiled classes are fewer than one ledger micro-batch and one
    merge round of three tables generate (~140): with it, each round compiled all its
    code again (docs/merge-performance.md)."""
    from icetide.spark.session import CODEGEN_CACHE_ENTRIES

    assert CODEGEN_CACHE_ENTRIES >= 500
    setting = spark.sparkContext.getConf().get("spark.sql.codegen.cache.maxEntries")
    assert setting == str(CODEGEN_CACHE_ENTRIES)


def test_a_round_visits_the_tables_given_events_and_an_idle_table_runs_no_spark_job(
    pipeline: Pipeline, spark: SparkSession
) -> None:
    """As in ``icetide run``: the ledger's records mark the tables it stored events for
    (merge/round.py, TablesDue), and a round after the first visits only those; a table
    visited with nothing new reads metadata only, no Spark job."""
    names = [t.name for t in pipeline.config.tables]
    due = TablesDue(names, sweep_after=3600)
    config = pipeline.config.model_copy(
        update={"merge": pipeline.config.merge.model_copy(update={"parallel_tables": 1})}
    )
    stages = StagePipeline(config, pipeline.schemas, Reporter(marks_due_tables(due)))
    ledger = LedgerStage(spark, stages)
    merge = MergeStage(spark, stages)
    merge.rounds.due = due
    deliver(generate(5, 300), pipeline.landing, seed=3, files=1, duplicate_rate=0.0)
    ledger.start(once=True).awaitTermination()
    first = merge.run_once()  # every table's first visit, the busiest first
    assert sorted(r.table for r in first if r.events) == sorted(names)
    assert merge.run_once() == []  # nothing stored since
    deliver(generate(6, 200, tables=["customers"]), pipeline.landing, seed=4, files=1)
    ledger.start(once=True).awaitTermination()
    context = spark.sparkContext
    try:
        # parallel_tables 1: the round merges in this thread, in its job group.
        context.setJobGroup("icetide-test-round", "a round after events for one table")
        results = merge.run_once()
        context.setJobGroup("icetide-test-idle", "a visit of a table with nothing new")
        idle = merge.merge_table("products")
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert [(r.table, r.events > 0) for r in results] == [("customers", True)]
    assert context.statusTracker().getJobIdsForGroup("icetide-test-round")
    assert idle.events == 0
    assert context.statusTracker().getJobIdsForGroup("icetide-test-idle") == []
