"""A PostgreSQL table onboarded before arrays were lists keeps its arrays as JSON text, and
the documented evolution step turns them into lists on the live table: ``icetide schema
plan --retype`` shows ``json → list<…>`` as a held type change, ``icetide schema apply
--retype … --approve … --no-ddl`` records it, and the ledger and merge rebuild the table
from the source (the re-snapshot path), with changes made meanwhile merged on top."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from icetide.artifacts.runtime import read_iceberg, table_metadata
from icetide.capture.runner import run_capture
from icetide.cli.main import main as icetide
from icetide.config import load_config, load_table_schemas
from icetide.observe.verify import render_verdicts, run_verify
from icetide.schema.file import dump_schema_file, schema_from_dict
from tests.devservers.postgres import PostgresServer
from tests.integration.harness import Pipeline

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DB = "arrays_to_lists"
DDL = "CREATE TABLE labels (id integer PRIMARY KEY, tags text[], grid int[][], note text)"
ROWS = """
INSERT INTO labels VALUES
  (1, '{a,"b,c",NULL}', '{{1,2},{3,NULL}}', 'one'),
  (2, '{}', '[0:0][1:2]={{7,8}}', 'two'),
  (3, NULL, NULL, 'three');
"""
JSON_SCHEMA = {
    "table": "labels",
    "primary_key": ["id"],
    "columns": [
        {"id": 1, "name": "id", "type": "int", "nullable": False},
        {"id": 2, "name": "tags", "type": "json"},
        {"id": 3, "name": "grid", "type": "json"},
        {"id": 4, "name": "note", "type": "string"},
    ],
}


def _pipeline(root: Path, warehouse: Path, spark: SparkSession, postgres: PostgresServer) -> Any:
    dump_schema_file(schema_from_dict(JSON_SCHEMA), root / "schemas" / "labels.yaml")
    doc = {
        "pipeline": "lists",
        "state_dir": "./state",
        "catalog": {"name": "lake", "warehouse": str(warehouse), "namespace": DB},
        "spark": {"master": "local[2]", "shuffle_partitions": 4},
        "artifacts": {"refresh": "off"},
        "sources": [postgres.source_entry(DB, f"{DB}_{os.getpid()}", name="pg", publication=DB)],
        "transport": {"type": "files", "path": "./landing", "roll_interval": "1s"},
        "tables": [{"name": "labels", "source": "public.labels", "buckets": 2}],
    }
    path = root / "icetide.yaml"
    path.write_text(json.dumps(doc))
    config = load_config(path)
    return Pipeline(root, path, config, load_table_schemas(config), spark)


def _catch_up(pipe: Pipeline, rounds: int = 1) -> None:
    run_capture(pipe.config, pipe.config.sources[0], follow=False)
    pipe.stream()
    for _ in range(rounds):
        pipe.merge()


def _base(pipe: Pipeline) -> dict[int, dict[str, Any]]:
    return {r["id"]: r for r in pipe.base("labels")}


def _plan(pipe: Pipeline, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = icetide(["schema", "plan", "-c", str(pipe.config_path), "--output", "json", *args])
    assert code == 0
    (plan,) = json.loads(capsys.readouterr().out)
    return dict(plan)


def test_a_json_array_column_becomes_a_list_by_an_approved_retype(
    tmp_path: Path,
    warehouse: Path,
    spark: SparkSession,
    postgres: PostgresServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    postgres.create_database(DB)
    postgres.execute(DDL, DB)
    pipe = _pipeline(tmp_path, warehouse, spark, postgres)
    slot = str(pipe.config.sources[0].slot)
    try:
        run_capture(pipe.config, pipe.config.sources[0], follow=False, from_now=True)
        postgres.execute(ROWS, DB)
        postgres.execute("UPDATE labels SET tags = '{x}' WHERE id = 2", DB)
        _catch_up(pipe)
        before = _base(pipe)
        # Declared json, the arrays stay JSON text, exactly as before lists existed.
        assert before[1]["tags"] == '["a","b,c",null]' and before[2]["tags"] == '["x"]'
        assert before[1]["grid"] == "[[1,2],[3,null]]"

        # The catalog read keeps the json declaration: nothing to plan ...
        assert _plan(pipe, capsys)["changes"] == []
        # ... unless asked to compare the columns with what their source types map to now.
        retype = ["--table", "labels", "--retype", "tags", "--retype", "grid"]
        planned = {c["id"]: c for c in _plan(pipe, capsys, *retype)["changes"]}
        assert set(planned) == {"type_change:tags", "type_change:grid"}
        assert planned["type_change:tags"]["classification"] == "held"
        assert planned["type_change:grid"]["detail"] == {"from": "json", "to": "list<list<int>>"}
        assert all(c["fill"] == "resnapshot" for c in planned.values())

        approve = ["--approve", "type_change:tags", "--approve", "type_change:grid"]
        code = icetide(
            ["schema", "apply", "-c", str(pipe.config_path), "--no-ddl", *retype, *approve]
        )
        assert code == 0, capsys.readouterr()
        capsys.readouterr()
        pipe.schemas = load_table_schemas(pipe.config)  # the stages' store reads the file
        schema = pipe.pipeline.schema("labels")
        assert (schema.version, str(schema.by_name["tags"].type)) == (2, "list<string>")
        assert str(schema.by_name["grid"].type) == "list<list<int>>"
        assert _plan(pipe, capsys)["changes"] == []  # the list is what the source maps to

        # Changes while the table converts: the new ledger takes them; the merge rebuilds
        # the base from the source (one chunk, the first round) and merges them on top
        # (the next).
        postgres.execute(
            "UPDATE labels SET tags = '{y,NULL}', note = 'again' WHERE id = 1; "
            "INSERT INTO labels VALUES (4, '{z}', '{{5}}', 'four')",
            DB,
        )
        _catch_up(pipe, rounds=2)
        assert spark.catalog.tableExists(pipe.refs("labels").cdc.suffixed("_g1").sql)
        after = _base(pipe)
        assert after[1]["tags"] == ["y", None] and after[1]["note"] == "again"
        assert after[1]["grid"] == [[1, 2], [3, None]] and after[2]["grid"] == [[7, 8]]
        assert after[2]["tags"] == ["x"] and after[3]["tags"] is None
        assert after[4]["tags"] == ["z"] and after[4]["grid"] == [[5]]
        # An independent reader sees lists in the Iceberg files; verify compares them.
        location = spark.sql(f"DESCRIBE TABLE EXTENDED {pipe.refs('labels').base.sql}")
        where = next(r.data_type for r in location.collect() if r.col_name == "Location")
        folder = where.removeprefix("file://").removeprefix("file:")
        read = read_iceberg(table_metadata(folder), ["id", "tags", "grid"]).to_pylist()
        assert sorted(read, key=lambda r: r["id"]) == [
            {"id": 1, "tags": ["y", None], "grid": [[1, 2], [3, None]]},
            {"id": 2, "tags": ["x"], "grid": [[7, 8]]},
            {"id": 3, "tags": None, "grid": None},
            {"id": 4, "tags": ["z"], "grid": [[5]]},
        ]
        verdicts = run_verify(pipe.pipeline, spark, None)
        assert all(v.matches for v in verdicts), render_verdicts(verdicts)
        dead_letters = pipe.refs("labels").dead_letters
        assert (
            not spark.catalog.tableExists(dead_letters.sql) or pipe.dead_letters(dead_letters) == []
        )
    finally:
        postgres.drop_slot(slot, DB)
