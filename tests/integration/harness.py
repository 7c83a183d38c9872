"""A pipeline under test: its config, its stages run in-process, and its tables read back."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from icetide.config import Config, load_config, load_table_schemas
from icetide.demo.live import write_live_pipeline
from icetide.demo.run import compare_all, write_pipeline
from icetide.demo.workload import Workload, next_index
from icetide.devservers.mariadb import MariaDBServer
from icetide.ledger.stage import LedgerStage
from icetide.merge.stage import MergeResult, MergeStage
from icetide.observe.compare import Comparison
from icetide.pipeline import Pipeline as StagePipeline
from icetide.progress import Reporter
from icetide.schema.contract.names import TableName
from icetide.schema.file import dump_schema_file
from icetide.schema.model import TableSchema
from icetide.spark.sql import quote
from icetide.spark.tables import TableRefs

REPO = Path(__file__).resolve().parents[2]


def run_script(
    script: str, *args: str, fault: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -c script args`` from the repository in a fresh process, with the crash
    point ``fault`` armed (``ICETIDE_FAULT``) when given: a child to kill as ``kill -9``."""
    env = {k: v for k, v in os.environ.items() if k != "ICETIDE_FAULT"}
    if fault:
        env["ICETIDE_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )


@dataclass
class Pipeline:
    """One pipeline folder (config, landing, state) in the shared warehouse."""

    root: Path
    config_path: Path
    config: Config
    schemas: dict[str, TableSchema]
    spark: SparkSession | None = None
    logs: list[str] = field(default_factory=list)

    @classmethod
    def create(
        cls,
        root: Path,
        warehouse: Path,
        namespace: str,
        spark: SparkSession | None = None,
        **options: Any,
    ) -> Pipeline:
        """Write the demo pipeline into ``root`` with tables in ``namespace``."""
        path = write_pipeline(root, warehouse=warehouse, namespace=namespace, **options)
        config = load_config(path)
        return cls(root, path, config, load_table_schemas(config), spark)

    @classmethod
    def live(
        cls,
        root: Path,
        warehouse: Path,
        namespace: str,
        server: MariaDBServer,
        spark: SparkSession,
        **extra: Any,
    ) -> Pipeline:
        """The live shop pipeline (a MySQL source on ``server``) with tables in ``namespace``."""
        path = write_live_pipeline(
            root, server, warehouse=warehouse, namespace=namespace, extra=extra
        )
        config = load_config(path)
        return cls(root, path, config, load_table_schemas(config), spark)

    @classmethod
    def custom(
        cls,
        root: Path,
        warehouse: Path,
        namespace: str,
        schemas: dict[str, TableSchema],
        sources: dict[str, str],
        spark: SparkSession,
        mode: str = "merge-on-read",
    ) -> Pipeline:
        """A pipeline over hand-written ``schemas`` (table → schema, table → source)."""
        tables = []
        for name, schema in schemas.items():
            dump_schema_file(schema, root / "schemas" / f"{name}.yaml")
            tables.append(
                {
                    "name": name,
                    "source": sources[name],
                    "schema": f"schemas/{name}.yaml",
                    "buckets": 2,
                    "mode": mode,
                }
            )
        doc = {
            "pipeline": "custom",
            "state_dir": "./state",
            "catalog": {"name": "lake", "warehouse": str(warehouse), "namespace": namespace},
            "spark": {"master": "local[2]", "shuffle_partitions": 4},
            "tables": tables,
        }
        path = root / "icetide.yaml"
        path.write_text(json.dumps(doc))
        config = load_config(path)
        return cls(root, path, config, load_table_schemas(config), spark)

    # -- running ------------------------------------------------------------------------
    @property
    def session(self) -> SparkSession:
        assert self.spark is not None
        return self.spark

    @property
    def landing(self) -> Path:
        return self.config.resolved_path(self.config.transport.path)

    def land(self, lines: list[str], name: str | None = None) -> Path:
        """Write raw lines as the next landing file (atomically, as producers must)."""
        self.landing.mkdir(parents=True, exist_ok=True)
        final = self.landing / (name or f"events-{next_index(self.landing):06d}.json")
        tmp = final.with_name("." + final.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line in lines))
        tmp.rename(final)
        return final

    @property
    def pipeline(self) -> StagePipeline:
        """What the stages take: this pipeline's config and schemas, progress into ``logs``."""
        return self.reporting(self.logs.append)

    def reporting(self, log: Callable[[str], None]) -> StagePipeline:
        """The same, with each progress line handed to ``log`` (a test's hook)."""
        return StagePipeline(self.config, self.schemas, Reporter(Reporter.text(log)))

    def stream(self) -> None:
        """Run the ledger stage over everything landed so far."""
        LedgerStage(self.session, self.pipeline).start(once=True).awaitTermination()

    def merge(self) -> list[MergeResult]:
        """Run the merge stage once for every table."""
        return MergeStage(self.session, self.pipeline).run_once()

    def cli(
        self, *args: str, fault: str | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """Run ``icetide <args> -c <config>`` in a fresh process (its own Spark)."""
        env = {k: v for k, v in os.environ.items() if k != "ICETIDE_FAULT"}
        if fault:
            env["ICETIDE_FAULT"] = fault
        return subprocess.run(
            [sys.executable, "-m", "icetide.cli", *args, "-c", str(self.config_path)],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    # -- reading ------------------------------------------------------------------------
    def refs(self, table: str) -> TableRefs:
        return TableRefs.of(self.config, table)

    def rows(self, table: TableName | str, order: str | None = None) -> list[dict[str, Any]]:
        """All rows of a (qualified) table as dicts."""
        frame = self.session.table(str(table))
        if order:
            frame = frame.orderBy(order)
        return [r.asDict(recursive=True) for r in frame.collect()]

    def base(self, table: str) -> list[dict[str, Any]]:
        """A base table's rows, sorted by primary key, icetide columns included."""
        keys = self.schemas[table].primary_key
        frame = self.session.table(self.refs(table).base.sql).orderBy(*[quote(k) for k in keys])
        return [r.asDict(recursive=True) for r in frame.collect()]

    def compare(self, workload: Workload) -> list[Comparison]:
        return compare_all(self.session, self.config, workload)

    def dead_letters_raw(self, table: TableName | str) -> list[dict[str, Any]]:
        """Dead letters of ``table`` with payloads as bytes (registry frames are binary)."""
        rows = self.rows(table, order="message_id")
        for row in rows:
            row["payload"] = base64.b64decode(row["payload_b64"])
        return rows

    def dead_letters(self, table: TableName | str) -> list[dict[str, Any]]:
        """Dead letters of ``table`` (or of the unrouted table), with payloads decoded."""
        rows = self.rows(table, order="message_id")
        for row in rows:
            row["payload"] = base64.b64decode(row["payload_b64"]).decode()
        return rows


def assert_matches(comparisons: list[Comparison]) -> None:
    """Fail with the rendered differences unless every table matches."""
    bad = [c.render() for c in comparisons if not c.matches]
    assert not bad, "\n".join(bad)


def run_sql(spark: SparkSession) -> Callable[[str], None]:
    """A ``run_ddl`` for ``apply_plan``: each statement through ``spark.sql``."""

    def run(statement: str) -> None:
        spark.sql(statement)

    return run
