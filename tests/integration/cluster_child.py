"""Run by the standalone-cluster test in a child process (the session fixture is local):
bootstrap, change the source (the SQL statements given), capture to the log's end,
stream and merge on the cluster named by the config's ``spark.master``, then verify;
prints one JSON line with the verdicts and where an executor imported icetide from."""

from __future__ import annotations

import json
import sys

from icetide.bootstrap.run import Bootstrap
from icetide.capture.runner import run_capture
from icetide.config import load_config
from icetide.ledger.stage import LedgerStage
from icetide.merge.stage import MergeStage
from icetide.observe.verify import run_verify
from icetide.pipeline import Pipeline
from icetide.sources.connect import connect_mysql
from icetide.spark.session import build_session

CHANGES = (
    "INSERT INTO shop.customers (id, name, email, balance, vip, updated_at) "
    "SELECT id + 500000, CONCAT(name, ' jr'), email, balance, vip, updated_at "
    "FROM shop.customers WHERE id % 4 = 0",
    "UPDATE shop.customers SET balance = balance * 2 WHERE id % 3 = 0",
    "DELETE FROM shop.orders WHERE id % 5 = 0",
    "UPDATE shop.orders SET status = 'shipped' WHERE status = 'paid'",
)


def _icetide_origin(_: int) -> str:
    """Run on an executor: the file its Python imported icetide from."""
    import icetide

    return icetide.__file__ or ""


def main(config_path: str) -> int:
    config = load_config(config_path)
    pipeline = Pipeline(config)
    spark = build_session(config)
    try:
        master = spark.sparkContext.master
        source = config.sources[0]
        # Orders (12,000 rows) still copied in 3 chunks, each its own job on the cluster.
        Bootstrap(spark, pipeline, source, chunk_rows=5_000).run()
        conn = connect_mysql(source, autocommit=True)
        try:
            with conn.cursor() as cur:
                for statement in CHANGES:
                    cur.execute(statement)
        finally:
            conn.close()
        run_capture(config, source, follow=False)
        LedgerStage(spark, pipeline).start(once=True).awaitTermination()
        merged = MergeStage(spark, pipeline).run_once()
        verdicts = run_verify(pipeline, spark)
        # After the work: the worker's executor has registered by now (driver + 1).
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()  # type: ignore[union-attr]
        code = spark.sparkContext.parallelize([0], 1).map(_icetide_origin).collect()[0]
        print(
            json.dumps(
                {
                    "master": master,
                    "executors": int(executors),
                    "merged": {m.table: m.events for m in merged},
                    "matches": {v.table: v.matches for v in verdicts},
                    "code": code,
                }
            ),
            flush=True,
        )
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
