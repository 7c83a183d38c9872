"""``icetide demo``: the whole spine on embedded defaults, checked against the generator.

The demo writes a pipeline (config + schema files) into a work folder, generates a seeded
multi-table Debezium stream, lands it in rounds the way real pipelines see it (duplicates,
shuffled files, events held back into a later round, a final full redelivery with
tombstones and transaction markers), runs the ledger and merge stages after every round and
compares each base table with the generator's plain-Python model of the source.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from icetide.demo.workload import Workload, deliver, demo_schemas, demo_sources, generate
from icetide.observe.compare import Comparison, compare_rows
from icetide.pipeline import Pipeline
from icetide.progress import Reporter
from icetide.schema.file import dump_schema_file
from icetide.schema.model import TableSchema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.config import Config

OWNED = ("icetide.yaml", "schemas", "landing", "state", "warehouse")


def write_pipeline(
    workdir: Path,
    *,
    warehouse: Path | None = None,
    namespace: str = "demo",
    mode: str = "merge-on-read",
    buckets: int = 4,
    master: str = "local[2]",
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``icetide.yaml`` and the demo schema files into ``workdir``; return the config.

    ``extra`` is merged into the top level of the YAML (tests tune the schedule with it).
    """
    sources = demo_sources()
    for schema in demo_schemas():
        dump_schema_file(schema, workdir / "schemas" / f"{schema.table}.yaml")
    doc: dict[str, Any] = {
        "pipeline": "demo",
        "state_dir": "./state",
        "catalog": {
            "name": "lake",
            "warehouse": str(warehouse or workdir / "warehouse"),
            "namespace": namespace,
        },
        "spark": {"master": master, "shuffle_partitions": 4},
        "transport": {"type": "files", "path": "./landing"},
        "tables": [
            {
                "name": schema.table,
                "source": sources[schema.table],
                "schema": f"schemas/{schema.table}.yaml",
                "buckets": buckets,
                "mode": mode,
            }
            for schema in demo_schemas()
        ],
    }
    doc.update(extra or {})
    path = workdir / "icetide.yaml"
    workdir.mkdir(parents=True, exist_ok=True)
    path.write_text("# written by `icetide demo`\n" + yaml.safe_dump(doc, sort_keys=False))
    return path


def plan_rounds(workload: Workload, rounds: int, seed: int, late_rate: float) -> list[Workload]:
    """Split the stream into ``rounds`` deliveries, holding ``late_rate`` of each round's
    events back to the next one, so late and out-of-order events cross merges."""
    rng = random.Random(f"icetide-demo-rounds-{seed}")
    size = -(-len(workload.events) // rounds)
    out: list[Workload] = []
    held: list[Any] = []
    for i in range(rounds):
        chunk = held + workload.events[i * size : (i + 1) * size]
        last = i == rounds - 1
        held = [] if last else [e for e in chunk if rng.random() < late_rate]
        late = {id(e) for e in held}
        kept = [e for e in chunk if id(e) not in late]
        out.append(replace(workload, events=kept))
    return out


def read_base(spark: SparkSession, config: Config, schema: TableSchema) -> list[dict[str, Any]]:
    """Every row of a base table as dicts of its schema columns."""
    from icetide.lake.tables import TableRefs

    refs = TableRefs.of(config, schema.table)
    names = [f"`{c.name}`" for c in schema.columns]
    return [row.asDict() for row in spark.table(refs.base.sql).selectExpr(*names).collect()]


def compare_all(spark: SparkSession, config: Config, workload: Workload) -> list[Comparison]:
    """Compare every base table of the workload with the generator's expected rows."""
    return [
        compare_rows(schema, workload.expected[schema.table], read_base(spark, config, schema))
        for schema in workload.schemas
    ]


def run_demo(workdir: Path, events: int, seed: int, log: Callable[[str], None] = print) -> bool:
    """Run the demo in ``workdir`` (its earlier demo files are replaced); True on a match."""
    from icetide.config import load_config
    from icetide.ledger.stage import LedgerStage
    from icetide.merge.stage import MergeStage
    from icetide.spark.session import build_session

    started = time.monotonic()
    for name in OWNED:
        target = workdir / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    config_path = write_pipeline(workdir)
    config = load_config(config_path)
    pipeline = Pipeline(config, reporter=Reporter(Reporter.text(log)))
    schemas = pipeline.schemas.all()
    workload = generate(seed, events)
    log(
        f"demo: {len(workload.events):,} change events over {len(schemas)} tables "
        f"in {workdir} (seed {seed})"
    )
    log("demo: starting Spark with the Iceberg runtime …")
    spark = build_session(config)
    ledger = LedgerStage(spark, pipeline)
    merge = MergeStage(spark, pipeline)
    landing = config.resolved_path(config.transport.path)
    index = 1
    rounds = plan_rounds(workload, rounds=3, seed=seed, late_rate=0.05)
    for number, part in enumerate(rounds, start=1):
        log(
            f"demo: round {number}/{len(rounds) + 1}: landing {len(part.events):,} events "
            "with duplicates, shuffled over 3 files"
        )
        paths = deliver(part, landing, seed=seed + number, files=3, start_index=index)
        index += len(paths)
        ledger.start(once=True).awaitTermination()
        merge.run_once()
    log(
        f"demo: round {len(rounds) + 1}/{len(rounds) + 1}: redelivering the whole stream "
        "with tombstones and transaction markers"
    )
    deliver(
        workload, landing, seed=seed, files=2, duplicate_rate=0.0, noise=True, start_index=index
    )
    ledger.start(once=True).awaitTermination()
    merge.run_once()
    comparisons = compare_all(spark, config, workload)
    log("demo: base tables against the generator's model of the source:")
    for comparison in comparisons:
        log("  " + comparison.render().replace("\n", "\n  "))
    ok = all(c.matches for c in comparisons)
    log(
        f"demo: {'PASSED' if ok else 'FAILED'} in {time.monotonic() - started:.0f}s; "
        f"explore with `icetide status -c {config_path}`"
    )
    return ok
