"""``icetide demo``: a live MariaDB, captured, bootstrapped, streamed, merged, verified.

The demo starts a private MariaDB (binlog on, ROW format), creates and seeds a shop
database, and changes it from a background thread while icetide bootstraps the tables
(JDBC chunks), captures the binlog into landing files, streams them into the ledger and
merges them into the base tables, round after round. Then the writes stop, capture reads
to the end of the log, the last events are merged, and ``verify`` compares every base
table with the source row by row (count and checksum).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from icetide.demo.shop import ShopWorkload, shop_connector, shop_schemas
from icetide.pipeline import Pipeline
from icetide.progress import Reporter
from icetide.schema.file import dump_schema_file

if TYPE_CHECKING:
    from icetide.devservers.mariadb import MariaDBServer

OWNED = ("icetide.yaml", "schemas", "landing", "state", "warehouse")


def write_live_pipeline(
    workdir: Path,
    server: MariaDBServer,
    *,
    warehouse: Path | None = None,
    namespace: str = "shop",
    master: str = "local[2]",
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``icetide.yaml`` and the shop schema files for ``server``; return the config."""
    for schema in shop_schemas():
        dump_schema_file(schema, workdir / "schemas" / f"{schema.table}.yaml")
    doc: dict[str, Any] = {
        "pipeline": "shop",
        "state_dir": "./state",
        "catalog": {
            "name": "lake",
            "warehouse": str(warehouse or workdir / "warehouse"),
            "namespace": namespace,
        },
        "spark": {"master": master, "shuffle_partitions": 4},
        "sources": [
            {
                "name": "shop",
                "type": "mysql",
                "host": "127.0.0.1",
                "port": server.port,
                "user": server.user,
                "password": server.password or None,
                "server_id": 4242,
                "heartbeat": "1s",
            }
        ],
        "transport": {"type": "files", "path": "./landing", "roll_interval": "1s"},
        "tables": [
            {"name": s.table, "source": f"shop.{s.table}", "buckets": 4} for s in shop_schemas()
        ],
    }
    doc.update(extra or {})
    path = workdir / "icetide.yaml"
    workdir.mkdir(parents=True, exist_ok=True)
    path.write_text("# written by `icetide demo`\n" + yaml.safe_dump(doc, sort_keys=False))
    return path


def start_shop(server: MariaDBServer, seed: int) -> ShopWorkload:
    """Create and seed the shop database on ``server``; the workload is not started."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE shop")
    workload = ShopWorkload(shop_connector(server.connection_settings()), seed=seed)
    workload.create()
    return workload


def run_live_demo(
    workdir: Path, *, seconds: float, seed: int, log: Callable[[str], None] = print
) -> bool:
    """Run the demo in ``workdir`` (its earlier demo files are replaced); True on a match."""
    from icetide.bootstrap.run import Bootstrap
    from icetide.capture.runner import run_capture
    from icetide.config import load_config
    from icetide.devservers.mariadb import MariaDBServer
    from icetide.ledger.stage import LedgerStage
    from icetide.merge.stage import MergeStage
    from icetide.observe.verify import render_verdicts, run_verify
    from icetide.spark.session import build_session

    started = time.monotonic()
    for name in OWNED:
        target = workdir / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    log("demo: starting a private MariaDB (binlog on, ROW format) …")
    with MariaDBServer() as server:
        workload = start_shop(server, seed)
        log(
            f"demo: shop database seeded ({workload.customers:,} customers, "
            f"{workload.orders:,} orders) on port {server.port}"
        )
        config_path = write_live_pipeline(workdir, server)
        config = load_config(config_path)
        pipeline = Pipeline(config, reporter=Reporter(Reporter.text(log)))
        source = config.sources[0]
        log("demo: starting Spark with the Iceberg runtime …")
        spark = build_session(config)
        workload.start()
        log(
            "demo: live workload running (inserts, updates, deletes, transactions, a key "
            "update, a 10,000-row transaction)"
        )
        Bootstrap(spark, pipeline, source, chunk_rows=5_000).run()
        stop_capture = threading.Event()
        failures: list[BaseException] = []

        def capture() -> None:
            try:
                run_capture(config, source, follow=True, should_stop=stop_capture.is_set)
            except BaseException as exc:  # re-raised below
                failures.append(exc)

        follower = threading.Thread(target=capture, name="capture", daemon=True)
        follower.start()
        ledger = LedgerStage(spark, pipeline)
        merge = MergeStage(spark, pipeline)
        deadline = time.monotonic() + seconds
        rounds = 0
        while time.monotonic() < deadline and not failures:
            rounds += 1
            log(f"demo: round {rounds}: stream and merge while the shop keeps writing")
            ledger.start(once=True).awaitTermination()
            merge.run_once()
        counts = workload.stop()
        log(
            f"demo: writes stopped after {counts.statements:,} statements, "
            f"{counts.transactions:,} transactions ({counts.rollbacks} rolled back), "
            f"{counts.key_updates} key updates, {counts.big_transactions} big transaction"
        )
        stop_capture.set()
        follower.join()
        if failures:
            raise failures[0]
        progress = run_capture(config, source, follow=False, reporter=pipeline.reporter)
        log(f"demo: capture caught up at {progress.offset or 'the end of the log'}")
        ledger.start(once=True).awaitTermination()
        merge.run_once()
        verdicts = run_verify(pipeline, spark, None)
        log("demo: base tables against the live source:")
        log(render_verdicts(verdicts))
        ok = all(v.matches for v in verdicts)
    log(
        f"demo: {'PASSED' if ok else 'FAILED'} in {time.monotonic() - started:.0f}s; "
        f"explore the tables with `icetide status -c {config_path}`"
    )
    return ok
