"""Bootstrap under live writes, capture, stream, merge — then ``verify`` against MariaDB.

The shop workload keeps writing (single statements, multi-row transactions, rollbacks, a
primary-key update and a 10,000-row transaction) while the bootstrap reads the tables in
JDBC chunks and capture follows the binlog; after the writes stop and the last events
are merged, every base table must equal its source table, row for row.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.bootstrap import write as bootstrap_write
from icetide.bootstrap.run import Bootstrap
from icetide.capture.errors import CaptureError
from icetide.capture.runner import offset_store, run_capture
from icetide.demo.live import start_shop
from icetide.devservers.mariadb import MariaDBServer
from icetide.observe.verify import run_verify
from icetide.schema.contract.base import BOOTSTRAP_CHUNK, BOOTSTRAP_STATE
from tests.integration.harness import Pipeline, killed_at

_namespaces = itertools.count()


@pytest.fixture
def server() -> Iterator[MariaDBServer]:
    with MariaDBServer() as started:
        yield started


def live(tmp_path: Path, warehouse: Path, server: MariaDBServer, spark: SparkSession) -> Pipeline:
    return Pipeline.live(tmp_path, warehouse, f"live{next(_namespaces)}", server, spark)


def test_bootstrap_during_writes_then_capture_makes_the_mirror_exact(
    tmp_path: Path, warehouse: Path, server: MariaDBServer, spark: SparkSession
) -> None:
    workload = start_shop(server, seed=11)
    workload.pause = 0.01
    pipe = live(tmp_path, warehouse, server, spark)
    source = pipe.config.sources[0]
    workload.start()
    Bootstrap(spark, pipe.pipeline, source, chunk_rows=2_500).run()
    assert offset_store(pipe.config, source).load() is not None
    stop = threading.Event()
    follower = threading.Thread(
        target=run_capture,
        args=(pipe.config, source),
        kwargs={"follow": True, "should_stop": stop.is_set},
        daemon=True,
    )
    follower.start()
    # A round while capture follows and the shop keeps writing, then the last one below.
    pipe.stream()
    pipe.merge()
    counts = workload.stop()
    stop.set()
    follower.join(timeout=60)
    assert not follower.is_alive()
    run_capture(pipe.config, source, follow=False)
    pipe.stream()
    pipe.merge()

    # The workload did what the acceptance asks for, while the bootstrap and capture ran.
    assert counts.big_transactions == 1 and counts.key_updates >= 1
    assert counts.transactions > 0 and counts.rollbacks >= 0
    ledger_events = spark.table(pipe.refs("orders").cdc.sql).count()
    assert ledger_events >= 10_000, "the 10,000-row transaction reached the ledger"
    chunk_commits = spark.sql(
        f"SELECT count(*) FROM {pipe.refs('orders').base}.snapshots "
        f"WHERE summary['{BOOTSTRAP_CHUNK}'] IS NOT NULL"
    ).first()
    assert chunk_commits is not None and chunk_commits[0] >= 4  # 12,000 rows in 2,500-row chunks

    verdicts = run_verify(pipe.pipeline, spark, None)
    assert [v.table for v in verdicts] == ["customers", "orders"]
    assert all(v.matches for v in verdicts), [v for v in verdicts if not v.matches]
    assert all(v.source_rows > 0 for v in verdicts)


def test_a_killed_bootstrap_resumes_at_its_first_missing_chunk(
    tmp_path: Path, warehouse: Path, server: MariaDBServer, spark: SparkSession
) -> None:
    start_shop(server, seed=12)
    pipe = live(tmp_path, warehouse, server, spark)
    source = pipe.config.sources[0]
    with killed_at(bootstrap_write, "bootstrap.after_chunk"):  # the first chunk committed
        Bootstrap(spark, pipe.pipeline, source, chunk_rows=4000).run()
    pipe.logs.clear()  # what follows is about the merge and the resumed run
    base = pipe.refs("customers").base.sql
    state = spark.sql(f"SELECT summary['{BOOTSTRAP_STATE}'] FROM {base}.snapshots").collect()
    assert [r[0] for r in state if r[0]] == ["running"]
    # The merge leaves a table alone while its bootstrap runs.
    pipe.merge()
    assert any("waiting for bootstrap" in line for line in pipe.logs)

    resumed = Bootstrap(spark, pipe.pipeline, source, chunk_rows=4000).run()
    assert [(r.table, r.skipped) for r in resumed] == [("customers", 1), ("orders", 0)]
    run_capture(pipe.config, source, follow=False)
    pipe.stream()
    pipe.merge()
    verdicts = run_verify(pipe.pipeline, spark, None)
    assert all(v.matches for v in verdicts), verdicts
    assert spark.table(base).count() == verdicts[0].source_rows  # no chunk loaded twice


def test_capture_refuses_to_start_without_an_offset_and_bootstrap_refuses_a_full_base(
    tmp_path: Path, warehouse: Path, server: MariaDBServer, spark: SparkSession
) -> None:
    start_shop(server, seed=13)
    pipe = live(tmp_path, warehouse, server, spark)
    refused = pipe.cli("capture", "--once")
    assert refused.returncode == 2
    assert "no saved offset" in refused.stderr and "icetide bootstrap" in refused.stderr
    assert "Traceback" not in refused.stderr
    source = pipe.config.sources[0]
    Bootstrap(spark, pipe.pipeline, source).run()
    with pytest.raises(CaptureError, match="already has rows") as refused_again:
        Bootstrap(spark, pipe.pipeline, source).run()
    assert "--replace" in str(refused_again.value.hint)
