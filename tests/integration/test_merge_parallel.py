"""A merge round merges tables at once (``merge.parallel_tables``), in threads of one
SparkSession, and every table still ends equal to its source."""

from __future__ import annotations

import threading

from pyspark.sql import SparkSession

from icetide.demo.workload import deliver, generate
from icetide.merge.compact import PackingTurn
from icetide.merge.stage import MergeResult, MergeStage
from icetide.pipeline import Pipeline as StagePipeline
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
