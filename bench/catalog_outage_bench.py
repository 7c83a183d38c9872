"""A REST catalog outage of ``--outage-seconds`` (default 30) during a live merge round.

On a private object store (SeaweedFS) and Iceberg's REST catalog server with its
warehouse there, the demo's ``customers`` table: ``--rounds`` rounds (deliver, ledger,
merge) of ``--events`` events each, in one local Spark. In the middle round the catalog
server is stopped once the merge has planned its batch, and started again on the same
port ``--outage-seconds`` later; the merge retries with backoff
(:func:`icetide.spark.retry.retry_step`) and completes. Printed: that round's merge time
against the median of the rounds without an outage (same process), the retries, the
seconds from the catalog's return to the merge's end, and whether the base equals the
generator's model and the watermark the ledger's head. Exit 1 when not.

The integration test (tests/integration/lakehouse/test_catalog_races.py) stops the
catalog for a few seconds only; this is the 30-second run the test cannot afford.

    python bench/catalog_outage_bench.py
    python bench/catalog_outage_bench.py --outage-seconds 90 --events 2000
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from icetide.config import load_config
from icetide.demo.lakehouse import aws_bundle_jars
from icetide.demo.run import compare_all, plan_rounds, write_pipeline
from icetide.demo.workload import deliver, generate
from icetide.devservers.objectstore import ObjectStoreServer
from icetide.devservers.rest_catalog import RestCatalogServer
from icetide.lake.progress import read_watermark
from icetide.lake.tables import current_snapshot_id
from icetide.ledger.stage import LedgerStage
from icetide.merge import stage as merge_stage
from icetide.merge.stage import MergeStage
from icetide.pipeline import Pipeline
from icetide.progress import Reporter
from icetide.spark.jars import S3_FILE_IO
from icetide.spark.session import build_session

TABLE = "customers"
KEY_ENV, SECRET_ENV = "ICETIDE_BENCH_S3_KEY", "ICETIDE_BENCH_S3_SECRET"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage-seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--events", type=int, default=500, help="events per round")
    args = parser.parse_args()
    outage_round = args.rounds // 2

    with (
        tempfile.TemporaryDirectory() as tmp,
        ObjectStoreServer() as store,
        RestCatalogServer(store.endpoint) as catalog,
    ):
        endpoint = store.endpoint
        os.environ[KEY_ENV], os.environ[SECRET_ENV] = endpoint.access_key, endpoint.secret_key
        section = {
            "name": "lake",
            "type": "rest",
            "uri": catalog.url,
            "namespace": "outage",
            "properties": {
                "io-impl": S3_FILE_IO,
                "s3.endpoint": endpoint.url,
                "s3.path-style-access": "true",
                "s3.access-key-id": "${" + KEY_ENV + "}",
                "s3.secret-access-key": "${" + SECRET_ENV + "}",
                "client.region": endpoint.region,
            },
        }
        spark_section = {
            "master": "local[2]",
            "shuffle_partitions": 4,
            "extra_jars": [str(j) for j in aws_bundle_jars()],
        }
        path = write_pipeline(Path(tmp), extra={"catalog": section, "spark": spark_section})
        config = load_config(path)
        lines: list[str] = []
        pipeline = Pipeline(config, reporter=Reporter(Reporter.text(lines.append)))
        spark = build_session(config)
        landing = config.resolved_path(config.transport.path)
        workload = generate(11, args.rounds * args.events, tables=[TABLE], key_space=1000)
        parts = plan_rounds(workload, args.rounds, 11, late_rate=0.05)
        stage = MergeStage(spark, pipeline)
        refs = pipeline.refs(TABLE)

        real = merge_stage.__dict__["crash_point"]
        back_at: list[float] = []
        armed = threading.Event()

        def outage(point: str) -> None:
            if point == "merge.after_plan" and armed.is_set():
                armed.clear()
                catalog.halt()

                def restart() -> None:
                    time.sleep(args.outage_seconds)
                    catalog.start()
                    back_at.append(time.monotonic())

                threading.Thread(target=restart, daemon=True).start()
            real(point)

        merge_stage.__dict__["crash_point"] = outage
        seconds: list[float] = []
        outage_seconds = 0.0
        for number, part in enumerate(parts):
            deliver(part, landing, seed=number, files=2, duplicate_rate=0.05)
            LedgerStage(spark, pipeline).start(once=True).awaitTermination()
            if number == outage_round:
                armed.set()
                lines.clear()
            started = time.monotonic()
            stage.run_once()
            took = time.monotonic() - started
            if number == outage_round:
                outage_seconds, retries = took, [line for line in lines if "retry" in line]
                tail = time.monotonic() - back_at[0] if back_at else float("nan")
            elif number > 0:  # the first merge creates the base
                seconds.append(took)
        merge_stage.__dict__["crash_point"] = real

        comparisons = compare_all(spark, config, workload)
        exact = all(c.matches for c in comparisons)
        watermark_ok = read_watermark(spark, refs.base) == current_snapshot_id(spark, refs.cdc)
        usual = statistics.median(seconds)
        print(
            f"catalog down {args.outage_seconds:.0f}s during round {outage_round + 1} of "
            f"{args.rounds} ({args.events} events each): that merge {outage_seconds:.1f}s, "
            f"the others' median {usual:.1f}s (ratio {outage_seconds / usual:.1f}x); "
            f"{len(retries)} retries; merge done {tail:.1f}s after the catalog was back; "
            f"base equals the model: {exact}; watermark at the ledger's head: {watermark_ok}"
        )
        for line in retries:
            print(f"  {line}")
        spark.stop()
        raise SystemExit(0 if exact and watermark_ok and retries else 1)


if __name__ == "__main__":
    main()
