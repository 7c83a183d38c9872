"""Artifacts benchmark: snapshot publish over many tables and views, and one event.

Generates a pipeline of ``--tables`` tables (6–9 columns each, one enum, one struct) and
``--views`` views: ``--dependents`` views over table ``t000`` (a chain and a fan: each
reads the table or the view before it), the rest over other tables (projections, joins,
aggregates). No Spark is needed: publishing reads schema files and histories. Measures:

* the first ``publish --all`` (every table and view built as a wheel; printed once);
* ``publish --all`` with no change (content hashes only: nothing is built);
* ``publish --all`` after one ALTER (a nullable column added to one table: that table's
  new minor; its view names its columns, so its schema and package stay as they are);
* the event-driven refresh of one ALTER on ``t000`` (``TableChanged``), which publishes
  the table and re-derives and publishes its ``--dependents`` views.

Each timed case runs ``--repeat`` times (a fresh ALTER each time); medians are printed,
with the per-wheel cost for the cases that build. Machines here are small and shared:
read medians, not single runs.

    python bench/artifacts_bench.py --tables 200 --views 50 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from icetide.artifacts.refresh import ViewChanged
from icetide.artifacts.workspace import on_table_changed, publish_all, refresher
from icetide.config import load_config
from icetide.pipeline import Pipeline
from icetide.schema.file import dump_schema_file, schema_from_dict
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, StringType


def table_schema(i: int) -> TableSchema:
    extra = [{"id": 10 + k, "name": f"c{k}", "type": "long"} for k in range(i % 4)]
    return schema_from_dict(
        {
            "table": f"t{i:03d}",
            "primary_key": ["id"],
            "columns": [
                {"id": 1, "name": "id", "type": "long", "nullable": False},
                {"id": 2, "name": "Name", "type": "string"},
                {"id": 3, "name": "state", "type": {"enum": ["new", "open", "closed"]}},
                {"id": 4, "name": "amount", "type": "decimal(12,2)"},
                {"id": 5, "name": "at", "type": "timestamptz"},
                {
                    "id": 6,
                    "name": "address",
                    "type": {"struct": [{"id": 7, "name": "city", "type": "string"}]},
                },
                *extra,
            ],
        }
    )


def make_pipeline(root: Path, tables: int) -> Path:
    entries = []
    for i in range(tables):
        schema = table_schema(i)
        dump_schema_file(schema, root / "schemas" / f"{schema.table}.yaml")
        entries.append({"name": schema.table, "source": f"shop.{schema.table}"})
    doc = {
        "pipeline": "bench",
        "state_dir": "./state",
        "catalog": {"warehouse": str(root / "warehouse"), "namespace": "cdc"},
        "tables": entries,
    }
    path = root / "icetide.yaml"
    path.write_text(json.dumps(doc))
    return path


def view_sqls(tables: int, views: int, dependents: int) -> list[tuple[str, str]]:
    out = [("d00", "SELECT id, Name, state FROM t000")]
    for k in range(1, dependents):
        source = "t000" if k % 2 else f"d{k - 1:02d}"
        out.append((f"d{k:02d}", f"SELECT * FROM {source} WHERE id > {k}"))
    shapes = [
        "SELECT id, Name AS name_{n}, state FROM {t}",
        "SELECT a.id, a.state, b.amount FROM {t} a LEFT JOIN {u} b ON b.id = a.id",
        "SELECT state, COUNT(*) AS n, SUM(amount) AS total FROM {t} GROUP BY state",
        "SELECT id, CASE WHEN amount > 10 THEN 'big' ELSE 'small' END AS size, "
        "address.city FROM {t}",
    ]
    for n in range(views - dependents):
        t, u = f"t{1 + n % (tables - 2):03d}", f"t{2 + n % (tables - 2):03d}"
        out.append((f"v{n:02d}", shapes[n % len(shapes)].format(n=n, t=t, u=u)))
    return out


def alter(pipeline: Pipeline, table: str, step: int) -> int:
    """Add a nullable column to ``table``'s schema file; returns the new version."""
    config = pipeline.config.table(table)
    schema = pipeline.schema(table)
    new_id = schema.last_column_id + 1
    new = schema.with_columns(
        (*schema.columns, Column(new_id, f"added_{step}", StringType())),
        version=schema.version + 1,
    )
    path = pipeline.config.resolved_path(config.schema_file)
    dump_schema_file(new, path)
    return pipeline.schemas.history(table).current.version


def timed(action: object) -> tuple[float, object]:
    started = time.perf_counter()
    result = action()  # type: ignore[operator]
    return time.perf_counter() - started, result


def built(report: object) -> int:
    return sum(1 for o in report.published if o.action == "published")  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--views", type=int, default=50)
    parser.add_argument("--dependents", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="icetide-artifacts-bench-") as scratch:
        root = Path(scratch)
        pipeline = Pipeline(load_config(make_pipeline(root, args.tables)))
        r = refresher(pipeline, publish=False)
        r.adopt_tables([t.name for t in pipeline.config.tables])
        started = time.perf_counter()
        for name, sql in view_sqls(args.tables, args.views, args.dependents):
            r.refresh(ViewChanged(name, sql))
        register = time.perf_counter() - started
        print(f"registered {args.views} views in {register:.2f}s")

        first, report = timed(lambda: publish_all(pipeline))
        print(
            f"first publish --all: {first:.1f}s, {built(report)} wheels "
            f"({first / max(built(report), 1) * 1000:.0f} ms per wheel)"
        )

        quiet, alters, events = [], [], []
        for _ in range(args.repeat):
            seconds, report = timed(lambda: publish_all(pipeline))
            assert built(report) == 0
            quiet.append(seconds)
        for step in range(args.repeat):
            alter(pipeline, "t001", step)
            seconds, report = timed(lambda: publish_all(pipeline))
            alters.append((seconds, built(report)))
        for step in range(args.repeat):
            version = alter(pipeline, "t000", step)
            seconds, report = timed(lambda v=version: on_table_changed(pipeline, "t000", v))
            events.append((seconds, built(report), len(report.views)))  # type: ignore[attr-defined]

        med = statistics.median
        print(
            f"publish --all, no change: median {med(quiet):.2f}s over {args.repeat} runs "
            f"({args.tables} tables, {args.views} views, nothing built)"
        )
        print(
            f"publish --all after one ALTER: median {med(s for s, _ in alters):.2f}s, "
            f"{alters[0][1]} wheels built per run"
        )
        print(
            f"event (TableChanged) with {args.dependents} dependent views: median "
            f"{med(s for s, _, _ in events):.2f}s, {events[0][1]} wheels built, "
            f"{events[0][2]} views derived again per event"
        )


if __name__ == "__main__":
    main()
