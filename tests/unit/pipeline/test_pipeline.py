"""The Pipeline stages receive: a schema store read at each batch boundary, versions kept
in a history, table references, and one structured progress reporter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from icetide.config.example import write_example
from icetide.config.loader import load_config
from icetide.errors import SchemaError
from icetide.pipeline import Pipeline
from icetide.progress import Progress, Reporter


def _pipeline(tmp_path: Path, lines: list[str] | None = None) -> Pipeline:
    write_example(tmp_path)
    config = load_config(tmp_path / "icetide.yaml")
    reporter = Reporter(Reporter.lines(lines if lines is not None else []))
    return Pipeline(config, reporter=reporter)


def _edit_schema(tmp_path: Path, change: dict[str, object]) -> None:
    path = tmp_path / "schemas" / "customers.yaml"
    data = yaml.safe_load(path.read_text())
    data.update(change)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    later = path.stat().st_mtime_ns + 1_000_000_000  # a visible change on any clock
    os.utime(path, ns=(later, later))


def test_the_schema_is_read_again_when_its_file_changes(tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path)
    first = pipeline.schema("customers")
    assert pipeline.schema("customers") is first  # unchanged file: no re-read
    columns = [*yaml.safe_load((tmp_path / "schemas" / "customers.yaml").read_text())["columns"]]
    columns.append({"id": 7, "name": "phone", "type": "string"})
    _edit_schema(tmp_path, {"version": 2, "columns": columns})

    second = pipeline.schema("customers")
    assert second.version == 2 and "phone" in second.by_name
    assert pipeline.contract("customers").schema == second
    history = pipeline.schemas.history("customers")
    assert [s.version for s in history.versions] == [1, 2]
    kept = tmp_path / ".icetide" / "schemas" / "customers.history.yaml"
    assert [v["version"] for v in yaml.safe_load(kept.read_text())["versions"]] == [1, 2]
    # A new process finds the same history.
    again = Pipeline(load_config(tmp_path / "icetide.yaml"), reporter=Reporter(print))
    assert [s.version for s in again.schemas.history("customers").versions] == [1, 2]


def test_a_new_version_reusing_a_dropped_id_is_refused(tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path)
    data = yaml.safe_load((tmp_path / "schemas" / "customers.yaml").read_text())
    without_email = [c for c in data["columns"] if c["name"] != "email"]
    _edit_schema(tmp_path, {"version": 2, "columns": without_email})
    assert "email" not in pipeline.schema("customers").by_name
    reused = [*without_email, {"id": 2, "name": "mail", "type": "string"}]
    _edit_schema(tmp_path, {"version": 3, "columns": reused, "last_column_id": 6})
    with pytest.raises(SchemaError, match="reuse|reused"):
        pipeline.schema("customers")


def test_refs_name_the_three_tables(tmp_path: Path) -> None:
    refs = _pipeline(tmp_path).refs("customers")
    assert (refs.base.sql, refs.cdc.sql, refs.dead_letters.sql) == (
        "`lake`.`cdc`.`customers`",
        "`lake`.`cdc`.`customers_cdc`",
        "`lake`.`cdc`.`customers_dlt`",
    )


def test_progress_is_one_structured_record_for_every_sink(tmp_path: Path) -> None:
    lines: list[str] = []
    records: list[Progress] = []
    pipeline = _pipeline(tmp_path, lines)
    pipeline.reporter = Reporter(Reporter.lines(lines), records.append)
    pipeline.report("merge", "merge customers: 3 events", table="customers", events=3)
    assert lines == ["merge customers: 3 events"]
    assert json.loads(records[0].to_json()) == {
        "stage": "merge",
        "message": "merge customers: 3 events",
        "table": "customers",
        "events": 3,
    }
