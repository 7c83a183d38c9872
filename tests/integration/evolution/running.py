"""A pipeline kept running through schema changes: capture following the log in a
thread, the ledger stream running (with change detection), the merge called in turns,
each stage with its own Pipeline (its own schema store, as in its own process)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from icetide.bootstrap.run import Bootstrap
from icetide.capture.runner import run_capture
from icetide.config import load_config
from icetide.evolution.detect import Detector, capturing_source
from icetide.evolution.source_schema import read_source_schema
from icetide.lake.alter import int_property, table_properties
from icetide.ledger.stage import LedgerStage
from icetide.merge.stage import MergeStage
from icetide.observe.verify import TableVerdict, run_verify
from icetide.pipeline import Pipeline
from icetide.progress import Reporter
from icetide.schema.contract import ledger as c
from icetide.schema.contract import phases as p
from icetide.schema.file import dump_schema_file, schema_from_dict, schema_to_dict

TIMEOUT = 240.0


def write_config(
    root: Path,
    warehouse: Path,
    namespace: str,
    source: dict[str, Any],
    tables: dict[str, str],
    settings: dict[str, dict[str, Any]] | None = None,
    sinks: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """The pipeline file: ``tables`` maps table → source table, ``settings`` adds keys to
    a table's entry (e.g. its ``evolution`` policy); schemas are read from the source
    catalog (as onboarding does), with the ``sinks`` given (table → its ``sink:``)."""
    doc = {
        "pipeline": namespace,
        "state_dir": "./state",
        "catalog": {"name": "lake", "warehouse": str(warehouse), "namespace": namespace},
        "spark": {"master": "local[2]", "shuffle_partitions": 4},
        "sources": [source],
        "transport": {"type": "files", "path": "./landing", "roll_interval": "1s"},
        "schedule": {"stream_interval": "1s", "merge_interval": "1s"},
        "tables": [
            # The key is given: evolution/source_schema.py reads a PostgreSQL key's first
            # column as absent (int2vector subscripts start at 0; reported to evo/plan).
            {
                "name": n,
                "source": s,
                "schema": f"schemas/{n}.yaml",
                "buckets": 2,
                "primary_key": ["id"],
                **(settings or {}).get(n, {}),
            }
            for n, s in tables.items()
        ],
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root / "icetide.yaml"
    path.write_text(json.dumps(doc))
    config = load_config(path)
    for name in tables:
        table = config.table(name)
        schema = read_source_schema(capturing_source(config, table), table)
        if name in (sinks or {}):
            schema = schema_from_dict({**schema_to_dict(schema), "sink": (sinks or {})[name]})
        dump_schema_file(schema, root / "schemas" / f"{name}.yaml")
    return path


@dataclass
class Running:
    """Capture, ledger and merge running over one pipeline until :meth:`stop`."""

    spark: SparkSession
    config_path: Path
    logs: list[str] = field(default_factory=list)
    stop_capture: threading.Event = field(default_factory=threading.Event)
    capture_error: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.config = load_config(self.config_path)
        self.source = self.config.sources[0]
        self.ledger_pipeline = Pipeline(self.config, reporter=Reporter(Reporter.text(self._log)))
        self.merge_pipeline = Pipeline(self.config, reporter=Reporter(Reporter.text(self._log)))
        self.ledger = LedgerStage(
            self.spark, self.ledger_pipeline, on_signals=Detector(self.spark, self.ledger_pipeline)
        )
        self.merger = MergeStage(self.spark, self.merge_pipeline)
        self.query: StreamingQuery | None = None
        self.capture: threading.Thread | None = None

    def _log(self, line: str) -> None:
        self.logs.append(line)

    def start(self) -> Running:
        Bootstrap(self.spark, self.merge_pipeline, self.source).run()
        self.capture = threading.Thread(target=self._capture, daemon=True)
        self.capture.start()
        self.query = self.ledger.start(once=False)
        return self

    def _capture(self) -> None:
        try:
            run_capture(self.config, self.source, follow=True, should_stop=self.stop_capture.is_set)
        except BaseException as exc:  # surfaced by the test
            self.capture_error.append(exc)

    def pause_ledger(self) -> None:
        """Stop the ledger's stream; capture keeps landing files meanwhile."""
        assert self.query is not None
        self.query.stop()

    def landed(self, text: str) -> bool:
        """Whether a published landing file holds ``text`` (the stream reads it next)."""
        landing = self.config.resolved_path(self.config.transport.path)
        return any(
            text.encode() in path.read_bytes()
            for path in landing.rglob("*")
            if path.is_file() and not path.name.startswith((".", "_"))
        )

    def resume_ledger(self) -> None:
        """Start the ledger's stream again: its first micro-batch takes every file landed
        while it was paused."""
        self.query = self.ledger.start(once=False)

    def turn(self) -> None:
        """One merge of every table and one ledger tick (what `icetide run` loops on)."""
        assert not self.capture_error, self.capture_error
        assert self.query is not None and self.query.isActive, self.query and self.query.exception()
        self.merger.run_once()
        self.ledger.tick()

    def phases(self, table: str) -> dict[str, int | None]:
        refs = self.merge_pipeline.refs(table)
        ledger = table_properties(self.spark, refs.cdc)
        base = table_properties(self.spark, refs.base)
        return {
            "file": self.merge_pipeline.schema(table).version,
            "ledger": int_property(ledger, c.SCHEMA_VERSION_PROPERTY),
            "projection": int_property(ledger, p.PROJECTION_VERSION),
            "base": int_property(base, c.SCHEMA_VERSION_PROPERTY),
            "merge": int_property(base, p.MERGE_VERSION),
            "data": int_property(base, p.DATA_VERSION),
        }

    def converged(self, table: str, version: int) -> bool:
        phases = self.phases(table)
        return all(v == version for v in phases.values())

    def until(self, condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
        """Turns until ``condition()``; between two, a pause at least as long as the
        check took (a ``verify`` is a Spark job per table: checking back to back would
        leave the capture and the ledger threads little of the two cores)."""
        deadline = time.monotonic() + timeout
        while True:
            self.turn()
            started = time.monotonic()
            if condition():
                return
            assert time.monotonic() < deadline, f"timed out waiting for {what}:\n" + "\n".join(
                self.logs[-40:]
            )
            time.sleep(max(0.5, time.monotonic() - started))

    def verify(self, tables: list[str]) -> list[TableVerdict]:
        return run_verify(self.merge_pipeline, self.spark, tables)

    def until_verified(self, tables: list[str], timeout: float = TIMEOUT) -> None:
        last: list[TableVerdict] = []

        def matches() -> bool:
            nonlocal last
            last = self.verify(tables)
            return all(v.matches for v in last)

        try:
            self.until(matches, f"verify of {tables}", timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nlast verdicts: {last}") from None

    def stop(self) -> None:
        self.stop_capture.set()
        if self.capture is not None:
            self.capture.join(timeout=60)
        if self.query is not None and self.query.isActive:
            self.query.stop()
