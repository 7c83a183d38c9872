"""The SCD type 2 history in tests: a pipeline with ``history: scd2`` on, and every
difference between a table's history and the source model's intervals."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import yaml

from icetide.config import load_config
from icetide.demo.workload import Workload
from icetide.observe.compare import normalize
from icetide.schema.contract import history as h
from tests.integration.harness import Pipeline


def with_history(pipeline: Pipeline) -> Pipeline:
    """``pipeline`` with ``history: scd2`` on every table."""
    doc = yaml.safe_load(pipeline.config_path.read_text())
    for table in doc["tables"]:
        table["history"] = "scd2"
    pipeline.config_path.write_text(yaml.safe_dump(doc))
    pipeline.config = load_config(pipeline.config_path)
    return pipeline


def _ms(value: datetime | None) -> int | None:
    if value is None:
        return None
    if value.tzinfo is None:  # PySpark's TIMESTAMP: a naive local time
        value = value.astimezone(UTC)
    return round(value.timestamp() * 1000)


def history_differences(pipeline: Pipeline, workload: Workload) -> list[str]:
    """Every difference between each table's history and the model's intervals."""
    spark = pipeline.session
    out: list[str] = []
    for schema in workload.schemas:
        table = schema.table
        rows = spark.table(pipeline.refs(table).history.sql).collect()
        found: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in rows:
            r = row.asDict(recursive=True)
            key = tuple(r[k] for k in schema.primary_key)
            if (key, int(r[h.FROM_POSITION])) in found:
                out.append(f"{table}: version {key} at {r[h.FROM_POSITION]} twice")
            found[(key, int(r[h.FROM_POSITION]))] = r
        want = {(i.key, i.from_position): i for i in workload.intervals(table)}
        for missing in sorted(want.keys() - found.keys(), key=repr)[:5]:
            out.append(f"{table}: version {missing} missing")
        for extra in sorted(found.keys() - want.keys(), key=repr)[:5]:
            out.append(f"{table}: version {extra} not in the model")
        for at in want.keys() & found.keys():
            i, r = want[at], found[at]
            to = None if r[h.TO_POSITION] is None else int(r[h.TO_POSITION])
            got = (to, _ms(r[h.VALID_FROM]), _ms(r[h.VALID_TO]), r[h.IS_CURRENT])
            expected = (i.to_position, i.from_ms, i.to_ms, i.to_position is None)
            if got != expected:
                out.append(f"{table}: version {at}: interval {got}, model {expected}")
            for col in schema.columns:
                a, b = normalize(i.row.get(col.name), col.type), normalize(r[col.name], col.type)
                if a != b:
                    out.append(f"{table}: version {at}: {col.name} {b!r}, model {a!r}")
    return out
