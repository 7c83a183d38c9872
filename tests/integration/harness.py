"""A pipeline under test: its config, its stages run in-process, and its tables read back."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pyspark.sql import SparkSession

from icetide.config import Config, load_config, load_table_schemas
from icetide.config.tables import TableMergeConfig
from icetide.demo.live import write_live_pipeline
from icetide.demo.run import compare_all, write_pipeline
from icetide.demo.workload import Workload, next_index
from icetide.devservers.mariadb import MariaDBServer
from icetide.lake.tables import TableRefs
from icetide.ledger.stage import LedgerStage
from icetide.merge.stage import MergeResult, MergeStage
from icetide.observe.compare import Comparison
from icetide.pipeline import Pipeline as StagePipeline
from icetide.progress import Reporter
from icetide.schema.contract.names import TableName
from icetide.schema.file import dump_schema_file, schema_from_dict
from icetide.schema.model import TableSchema
from icetide.schema.quoting import literal, quote

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


class Killed(BaseException):
    """Raised at the crash point :func:`killed_at` arms: a ``BaseException``, so no
    ``except Exception`` on the way up handles it, as nothing handles a ``kill -9``."""


@contextmanager
def killed_at(module: ModuleType, point: str) -> Iterator[None]:
    """Stop what runs inside at ``module``'s crash point ``point``, in this process (and
    fail unless it got there).

    The tables are left as a ``kill -9`` there leaves them (every commit before the point
    made, none after), without a child process starting a JVM of its own. Only for points
    whose way up runs no cleanup that writes a table; ``cli(..., fault=...)`` is the real
    kill.
    """
    real = module.crash_point

    def crash(name: str) -> None:
        if name == point:
            raise Killed(point)
        real(name)

    with pytest.MonkeyPatch.context() as patch, pytest.raises(Killed):
        patch.setattr(module, "crash_point", crash)
        yield


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
        transport: dict[str, Any] | None = None,
    ) -> Pipeline:
        """A pipeline over hand-written ``schemas`` (table → schema, table → source);
        ``transport`` replaces the default landing folder (a Kafka broker's topics)."""
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
        if transport is not None:
            doc["transport"] = transport
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

    def fingerprints(self) -> dict[str, Fingerprint]:
        """Every base table's rows, distinct keys and a digest of its rows, in one Spark job.

        Comparing bases by these (two bases are equal exactly when their digests are) moves
        no rows into Python and costs one job for all tables, where :meth:`base` costs a
        sorted read per table.
        """
        parts = []
        for table, schema in self.schemas.items():
            keys = ", ".join(quote(k) for k in schema.primary_key)
            parts.append(
                f"SELECT {literal(table)} AS t, count(*) AS n, count(DISTINCT k) AS k, "
                "sha2(concat_ws('\\n', array_sort(collect_list(j))), 256) AS d "
                f"FROM (SELECT struct({keys}) AS k, to_json(struct(*)) AS j "
                f"FROM {self.refs(table).base})"
            )
        rows = self.session.sql(" UNION ALL ".join(parts)).collect()
        return {r.t: Fingerprint(r.n, r.k, r.d) for r in rows}

    def compare(self, workload: Workload) -> list[Comparison]:
        return compare_all(self.session, self.config, workload)

    def dead_letters_raw(self, table: TableName | str) -> list[dict[str, Any]]:
        """Dead letters of ``table`` with payloads as bytes (registry frames are binary)."""
        rows = self.rows(table, order="message_id")
        for row in rows:
            # Strictly: unbroken RFC 4648 base64, as the dead-letter table promises.
            row["payload"] = base64.b64decode(row["payload_b64"], validate=True)
        return rows

    def dead_letters(self, table: TableName | str) -> list[dict[str, Any]]:
        """Dead letters of ``table`` (or of the unrouted table), with payloads decoded."""
        rows = self.rows(table, order="message_id")
        for row in rows:
            row["payload"] = base64.b64decode(row["payload_b64"], validate=True).decode()
        return rows


@dataclass(frozen=True)
class Fingerprint:
    """A base table in brief (:meth:`Pipeline.fingerprints`)."""

    rows: int
    keys: int
    """Distinct primary keys: fewer than ``rows`` when a key is there twice."""
    digest: str
    """SHA-256 of the rows as JSON (icetide columns included), sorted: equal digests,
    equal tables."""


def with_merge_strategy(config: Config, strategy: str, compact_every: int | None = None) -> Config:
    """``config`` with every table's ``merge.strategy`` (and ``compact_every``) set."""
    settings: dict[str, object] = {"strategy": strategy}
    if compact_every is not None:
        settings["compact_every"] = compact_every
    merge = TableMergeConfig.model_validate(settings)
    tables = tuple(t.model_copy(update={"merge": merge}) for t in config.tables)
    return config.model_copy(update={"tables": tables})


def assert_matches(comparisons: list[Comparison]) -> None:
    """Fail with the rendered differences unless every table matches."""
    bad = [c.render() for c in comparisons if not c.matches]
    assert not bad, "\n".join(bad)


def run_sql(spark: SparkSession) -> Callable[[str], None]:
    """A ``run_ddl`` for ``apply_plan``: each statement through ``spark.sql``."""

    def run(statement: str) -> None:
        spark.sql(statement)

    return run


def id_keyed_schema(
    table: str, version: int, *columns: tuple[int, str, str], last: int = 0
) -> TableSchema:
    """Schema ``version`` of ``table``: a ``long`` key ``id`` (column id 1), then
    ``columns`` as (id, name, type); ``last`` is the last column id ever used, for a
    version that dropped the highest one."""
    doc: dict[str, Any] = {
        "table": table,
        "version": version,
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            *[{"id": i, "name": n, "type": k} for i, n, k in columns],
        ],
    }
    if last:
        doc["last_column_id"] = last
    return schema_from_dict(doc)
