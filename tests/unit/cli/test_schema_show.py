"""``icetide schema show``: the schema with its sink config, and with ``--sql`` the DDL,
MERGE and projection plan the table-contract builder generates (no Spark needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from icetide.cli import main


@pytest.fixture
def config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["init", str(tmp_path)]) == 0
    schema_file = tmp_path / "schemas" / "customers.yaml"
    schema = yaml.safe_load(schema_file.read_text())
    schema["sink"] = {
        "columns": {
            "email": {"name": "email_sha256", "convert": "sha256"},
            "balance": {"type": "decimal(18,2)"},
        }
    }
    schema["columns"][1]["tags"] = ["sensitive"]
    schema["columns"][4]["default"] = "0.00"
    schema_file.write_text(yaml.safe_dump(schema))
    capsys.readouterr()
    return tmp_path / "icetide.yaml"


def test_json_shows_columns_with_their_iceberg_names_and_every_generated_statement(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["schema", "show", "customers", "--sql", "--output", "json", "-c", str(config)]
    assert main(args) == 0
    shown = json.loads(capsys.readouterr().out)
    email = next(c for c in shown["columns"] if c["name"] == "email")
    assert email["iceberg_name"] == "email_sha256" and email["convert"] == "sha256"
    balance = next(c for c in shown["columns"] if c["name"] == "balance")
    assert balance["override"] == balance["iceberg_type"] == "decimal(18,2)"
    assert email["tags"] == ["sensitive"] and balance["default"] == "0.00"
    assert shown["primary_key"] == ["id"] and shown["columns"][0]["key"] == 1
    sql = shown["sql"]
    assert "`email_sha256` STRING" in sql["base"][0] and "DECIMAL(18,2)" in sql["base"][0]
    assert "SET IDENTIFIER FIELDS `id`" in sql["base"][1]
    assert "_after STRUCT<`id`: BIGINT, `email_sha256`: STRING" in sql["ledger"][0]
    assert "payload_b64" in sql["dead_letter"][0]
    assert "`email_sha256` = CASE WHEN s._v2 IS NULL" in sql["merge"]
    assert "USING `icetide_batch_customers` s" in sql["merge"]
    assert "2: email string -> sha256 -> email_sha256 string" in sql["projection"]
    assert "5: balance decimal(12,2) -> cast -> balance decimal(18,2)" in sql["projection"]


def test_text_without_sql_is_the_column_table_only(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schema", "show", "customers", "-c", str(config)]) == 0
    out = capsys.readouterr().out
    assert "email_sha256" in out and "convert sha256; tags sensitive" in out
    assert "CREATE TABLE" not in out and "MERGE INTO" not in out
    assert main(["schema", "show", "customers", "--sql", "-c", str(config)]) == 0
    out = capsys.readouterr().out
    assert "-- merge" in out and "MERGE INTO `lake`.`cdc`.`customers`" in out


def test_an_unknown_table_exits_2_naming_the_tables(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schema", "show", "custmers", "-c", str(config)]) == 2
    err = capsys.readouterr().err
    assert "custmers" in err and "customers" in err
