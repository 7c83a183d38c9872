"""``icetide views`` and ``icetide artifacts`` end to end through the CLI, without Spark:
views derived and kept current when the schema file changes, publish --all building only
what changed (twice is a no-op, two at once build each package once), JSON output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from icetide.cli import main


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main([*argv, "--output", "json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    assert main(["init", str(tmp_path)]) == 0
    return tmp_path / "icetide.yaml"


def add_column(config: Path) -> None:
    """Version 2 of customers: a nullable column added (as an applied change would)."""
    path = config.parent / "schemas" / "customers.yaml"
    data = yaml.safe_load(path.read_text())
    data["version"] = 2
    data["columns"].append({"id": 7, "name": "Phone", "type": "string"})
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_views_and_publish_through_the_cli(
    pipeline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    c = str(pipeline)
    star = run_json(capsys, "views", "add", "everyone", "--sql", "SELECT * FROM customers", "-c", c)
    assert isinstance(star, dict) and star["status"] == "ready"
    named = run_json(
        capsys,
        "views", "add", "rich", "-c", c, "--sql",
        "SELECT ID, Email AS Mail FROM everyone WHERE balance > 10",
    )  # fmt: skip
    assert isinstance(named, dict)
    assert [(col["name"], col.get("nullable", True)) for col in named["columns"]] == [
        ("id", False),
        ("Mail", True),
    ]
    published = named["refresh"]["published"]  # views add publishes the view
    assert [(p["package"], p["version"]) for p in published] == [
        ("icetide-schema-cdc-rich", "1.0.0")
    ]
    first = run_json(capsys, "artifacts", "publish", "--all", "-c", c)
    assert isinstance(first, dict)
    assert sorted((p["package"], p["version"]) for p in first["published"]) == [
        ("icetide-schema-inventory-customers", "1.0.0"),
    ]
    again = run_json(capsys, "artifacts", "publish", "--all", "-c", c)
    assert isinstance(again, dict) and again["published"] == []
    assert (pipeline.parent / "schemas" / "customers.avsc").is_file()

    add_column(pipeline)
    after = run_json(capsys, "artifacts", "publish", "--all", "-c", c)
    assert isinstance(after, dict)
    assert sorted((p["package"], p["version"]) for p in after["published"]) == [
        ("icetide-schema-cdc-everyone", "1.1.0"),  # SELECT * gained Phone
        ("icetide-schema-inventory-customers", "1.1.0"),
    ]  # rich selects named columns: unchanged
    shown = run_json(capsys, "views", "show", "everyone", "-c", c)
    assert isinstance(shown, dict) and shown["columns"][-1]["name"] == "Phone"
    listed = run_json(capsys, "artifacts", "list", "-c", c)
    assert isinstance(listed, list) and len(listed) == 5
    out = pipeline.parent / "dist"
    built = run_json(capsys, "artifacts", "build", "--view", "rich", "--out", str(out), "-c", c)
    assert isinstance(built, list) and [Path(b["wheel"]).name for b in built] == [
        "icetide_schema_cdc_rich-1.0.0-py3-none-any.whl"
    ]
    assert (out / "icetide_schema_cdc_rich-1.0.0-py3-none-any.whl").is_file()


def test_two_publishers_at_once_build_each_package_once(pipeline: Path) -> None:
    command = [sys.executable, "-m", "icetide.cli", "artifacts", "publish", "--all"]
    command += ["-c", str(pipeline), "--output", "json"]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    reports = [json.loads(run.communicate(timeout=120)[0]) for run in runs]
    assert all(run.returncode == 0 for run in runs)
    assert sorted(len(r["published"]) for r in reports) == [0, 1]  # one built, one found it
    index = json.loads((pipeline.parent / ".icetide/artifacts/index/index.json").read_text())
    assert [p["version"] for p in index["packages"]] == ["1.0.0"]


def test_a_bad_view_is_one_error_line(pipeline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["views", "add", "bad", "--sql", "SELECT nope FROM customers", "-c", str(pipeline)])
        == 2
    )
    err = capsys.readouterr().err
    assert "icetide: error: view bad: Column 'nope' could not be resolved" in err
    assert "Traceback" not in err
