"""``icetide demo``: a live MariaDB, captured, bootstrapped, streamed, merged, verified.

The demo starts a private MariaDB (binlog on, ROW format), creates and seeds a shop
database, and changes it from a background thread while icetide bootstraps the tables
(JDBC chunks), captures the binlog into landing files, streams them into the ledger and
merges them into the base tables, round after round. Then the writes stop, capture reads
to the end of the log, the last events are merged, and ``verify`` compares every base
table with the source row by row (count and checksum). With a :class:`~icetide.demo.
lakehouse.Lakehouse` the tables go to a REST catalog with its warehouse on an S3 store
instead of a Hadoop catalog in a folder, and PyIceberg reads them back at the end.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from icetide.demo.shop import BIG_TRANSACTION_ROWS, ShopWorkload, shop_connector, shop_schemas
from icetide.pipeline import Pipeline
from icetide.progress import Reporter
from icetide.schema.file import dump_schema_file
from icetide.sources.quoting import mysql_quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.config import Config
    from icetide.demo.lakehouse import Lakehouse
    from icetide.devservers.mariadb import MariaDBServer
    from icetide.observe.verify import TableVerdict

OWNED = ("icetide.yaml", "schemas", "landing", "state", "warehouse", "lakehouse.env")
SEED_ORDERS = 12_000
"""Orders the shop is seeded with (and a sixth as many customers)."""


def write_live_pipeline(
    workdir: Path,
    server: MariaDBServer,
    *,
    warehouse: Path | None = None,
    namespace: str = "shop",
    master: str = "local[2]",
    extra: dict[str, Any] | None = None,
    lakehouse: Lakehouse | None = None,
    catalog: str = "lake",
    database: str = "shop",
) -> Path:
    """Write ``icetide.yaml`` and the shop schema files for ``server``; return the config.

    With ``lakehouse`` the catalog is its REST catalog (keys as ``${VAR}``; Spark's default
    packages then include the AWS SDK bundle its ``S3FileIO`` needs); else a Hadoop
    catalog in a folder.
    """
    for schema in shop_schemas():
        dump_schema_file(schema, workdir / "schemas" / f"{schema.table}.yaml")
    spark: dict[str, Any] = {"master": master, "shuffle_partitions": 4}
    if lakehouse is None:
        catalog_section: dict[str, Any] = {
            "name": catalog,
            "warehouse": str(warehouse or workdir / "warehouse"),
            "namespace": namespace,
        }
    else:
        # Its io-impl, S3FileIO, adds the AWS SDK bundle to Spark's default packages.
        catalog_section = lakehouse.catalog_section(catalog, namespace)
    doc: dict[str, Any] = {
        "pipeline": "shop",
        "state_dir": "./state",
        "catalog": catalog_section,
        "spark": spark,
        "sources": [server.source_entry("shop", server_id=4242, heartbeat="1s")],
        "transport": {"type": "files", "path": "./landing", "roll_interval": "1s"},
        "tables": [
            {"name": s.table, "source": f"{database}.{s.table}", "buckets": 4}
            for s in shop_schemas()
        ],
    }
    doc.update(extra or {})
    path = workdir / "icetide.yaml"
    workdir.mkdir(parents=True, exist_ok=True)
    path.write_text("# written by `icetide demo`\n" + yaml.safe_dump(doc, sort_keys=False))
    return path


def start_shop(
    server: MariaDBServer, seed: int, orders: int = SEED_ORDERS, database: str = "shop"
) -> ShopWorkload:
    """Create and seed the shop ``database`` on ``server`` with ``orders`` orders and a
    sixth as many customers; the workload is not started."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {mysql_quote(database)}")
    workload = ShopWorkload(
        shop_connector(server.connection_settings(), database),
        seed=seed,
        customers=max(orders // 6, 1),
        orders=orders,
    )
    workload.create()
    return workload


def run_live_demo(
    workdir: Path,
    *,
    seconds: float,
    seed: int,
    log: Callable[[str], None] = print,
    lakehouse: Lakehouse | None = None,
    catalog: str = "lake",
    namespace: str = "shop",
    orders: int = SEED_ORDERS,
    secrets: Callable[[Iterable[str]], None] = lambda _values: None,
    mariadb: MariaDBServer | None = None,
    database: str = "shop",
    pause: float = ShopWorkload.pause,
) -> bool:
    """Run the demo in ``workdir`` (its earlier demo files are replaced); True on a match.

    ``lakehouse`` puts the tables on that REST catalog and object store; ``secrets``
    hears every secret value of the demo's config (the CLI's scrubber masks them).
    ``mariadb`` is a running server to use instead of starting one (the shop is created
    in its ``database``, which must not exist yet). The workload writes for ``seconds``
    from its start (the bootstrap included), a statement every ``pause`` seconds at most.
    """
    from icetide.bootstrap.run import Bootstrap
    from icetide.capture.runner import run_capture
    from icetide.config import load_config
    from icetide.config.secrets import secret_values
    from icetide.devservers.mariadb import MariaDBServer
    from icetide.lake.preflight import check_lake
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
    if mariadb is None:
        log("demo: starting a private MariaDB (binlog on, ROW format) …")
    with MariaDBServer() if mariadb is None else nullcontext(mariadb) as server:
        workload = start_shop(server, seed, orders, database)
        log(
            f"demo: shop database seeded ({workload.customers:,} customers, "
            f"{workload.orders:,} orders) on port {server.port}"
        )
        config_path = write_live_pipeline(
            workdir,
            server,
            namespace=namespace,
            lakehouse=lakehouse,
            catalog=catalog,
            database=database,
        )
        if lakehouse is not None:
            lakehouse.export_keys()
        config = load_config(config_path)
        secrets(secret_values(config))
        pipeline = Pipeline(config, reporter=Reporter(Reporter.text(log)))
        source = config.sources[0]
        check_lake(config, log=lambda line: log(f"demo: {line}"))
        log("demo: starting Spark with the Iceberg runtime …")
        spark = build_session(config)
        workload.pause = pause
        workload.start()
        deadline = time.monotonic() + seconds
        log(
            "demo: live workload running (inserts, updates, deletes, transactions, a key "
            f"update, a {min(orders, BIG_TRANSACTION_ROWS):,}-row transaction)"
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
        if lakehouse is not None:
            show_lakehouse(spark, config, lakehouse, workdir, verdicts, log)
    explore = (
        f"explore the tables with `icetide status -c {config_path}`"
        if lakehouse is None
        else "the tables live while the servers run (--keep-running keeps them up)"
    )
    log(f"demo: {'PASSED' if ok else 'FAILED'} in {time.monotonic() - started:.0f}s; {explore}")
    return ok


def show_lakehouse(
    spark: SparkSession,
    config: Config,
    lakehouse: Lakehouse,
    workdir: Path,
    verdicts: list[TableVerdict],
    log: Callable[[str], None],
) -> None:
    """Say where each base table lives on the store, read them back with PyIceberg (when
    installed) and print how to, the key named by its environment variable."""
    from icetide.lake.tables import TableRefs

    for verdict in verdicts:
        base = TableRefs.of(config, verdict.table).base
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {base.sql}").collect()
        location = next((r[1] for r in rows if r[0] == "Location"), "?")
        log(f"demo: {verdict.table} lives in {location}")
    env_file = lakehouse.write_env_file(workdir)
    table = f"{config.catalog.namespace}.{verdicts[-1].table}"
    try:
        from pyiceberg.catalog import load_catalog
    except ImportError:
        log("demo: (pip install pyiceberg to read the tables from Python)")
    else:
        catalog = load_catalog(
            config.catalog.name,
            type="rest",
            uri=lakehouse.catalog_uri,
            **lakehouse.store.pyiceberg_properties(),
        )
        read = {
            v.table: catalog.load_table(f"{config.catalog.namespace}.{v.table}").scan().to_arrow()
            for v in verdicts
        }
        counts = ", ".join(f"{name} {rows.num_rows:,} rows" for name, rows in read.items())
        log(f"demo: PyIceberg reads the same tables through the REST catalog: {counts}")
    log(f"demo: read them with PyIceberg while the servers run (`set -a; . {env_file}` first):")
    for line in lakehouse.pyiceberg_lines(config.catalog.name, table):
        log(f"    {line}")
