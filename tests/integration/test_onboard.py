"""``icetide onboard`` on the private MariaDB and PostgreSQL: schema files written from
the source catalogs, never overwritten silently, refreshed with ids kept by ``--force``;
the ledger, base and dead-letter tables created once from the generated DDL.

Each test makes its own database and Iceberg namespace; the CLI runs in-process on the
session's SparkSession."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from icetide.cli import main
from icetide.devservers.mariadb import MariaDBServer
from tests.devservers.postgres import PostgresServer

_databases = itertools.count(1)


def write_config(
    root: Path, warehouse: Path, namespace: str, source: dict[str, Any], tables: list[Any]
) -> Path:
    doc = {
        "pipeline": "onboarding",
        "state_dir": "./state",
        "catalog": {"name": "lake", "warehouse": str(warehouse), "namespace": namespace},
        "spark": {"master": "local[2]", "shuffle_partitions": 4},
        "sources": [source],
        "tables": tables,
    }
    path = root / "icetide.yaml"
    path.write_text(json.dumps(doc))
    return path


def onboard(config: Path, capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> Any:
    assert main(["onboard", "-c", str(config), "--output", "json", *args]) == code
    out = capsys.readouterr().out
    return {r["table"]: r for r in json.loads(out)} if code == 0 else out


def columns(spark: SparkSession, table: str) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in spark.table(table).schema}


def test_mariadb_tables_are_onboarded_from_information_schema(
    tmp_path: Path,
    warehouse: Path,
    spark: SparkSession,
    mariadb: MariaDBServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = f"onboard_m{next(_databases)}"
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(
            f"CREATE TABLE {db}.users (id BIGINT PRIMARY KEY, email VARCHAR(64) NOT NULL, "
            "balance DECIMAL(12,2), created DATETIME(6), visits INT UNSIGNED, note TEXT)"
        )
        cur.execute(
            f"CREATE TABLE {db}.lines (qty INT, line_no INT, order_id BIGINT, "
            "PRIMARY KEY (order_id, line_no))"
        )
        cur.execute(f"CREATE TABLE {db}.loose (a INT, b INT)")
    settings = mariadb.connection_settings()
    source = {
        "name": "shop",
        "type": "mysql",
        "host": settings["host"],
        "port": settings["port"],
        "user": settings["user"],
        "server_id": 77,
    }
    if settings["password"]:
        source["password"] = settings["password"]
    tables = [
        {"name": "users", "source": f"{db}.users"},
        {"name": "lines", "source": f"{db}.lines"},
    ]
    namespace = f"{db}_ns"
    config = write_config(tmp_path, warehouse, namespace, source, tables)

    dry = onboard(config, capsys, "--dry-run")
    assert dry["users"]["file"] == "would be written"
    assert not (tmp_path / "schemas" / "users.yaml").exists()

    first = onboard(config, capsys)
    users_file = tmp_path / "schemas" / "users.yaml"
    written = yaml.safe_load(users_file.read_text())
    assert first["users"]["file"] == "written"
    assert written["primary_key"] == ["id"]
    assert [(c["id"], c["name"], c["type"]) for c in written["columns"]] == [
        (1, "id", "long"),
        (2, "email", "string"),
        (3, "balance", "decimal(12,2)"),
        (4, "created", "timestamp"),
        (5, "visits", "long"),
        (6, "note", "string"),
    ]
    assert written["columns"][1]["nullable"] is False
    assert written["sink"]["logical"] == {"created": "io.debezium.time.MicroTimestamp"}
    lines = yaml.safe_load((tmp_path / "schemas" / "lines.yaml").read_text())
    assert lines["primary_key"] == ["order_id", "line_no"]  # key order, not column order
    assert [t["action"] for t in first["users"]["tables"]] == ["created"] * 3
    assert columns(spark, f"lake.{namespace}.users") == {
        "id": "bigint",
        "email": "string",
        "balance": "decimal(12,2)",
        "created": "timestamp_ntz",
        "visits": "bigint",
        "note": "string",
        "_icetide_position": "decimal(38,0)",
        "_icetide_source_ts": "timestamp",
    }
    assert "_after" in columns(spark, f"lake.{namespace}.users_cdc")
    assert "payload_b64" in columns(spark, f"lake.{namespace}.users_dlt")

    # Again: nothing changes, nothing is created twice.
    again = onboard(config, capsys)
    assert again["users"]["file"] == "exists, unchanged"
    assert [t["action"] for t in again["lines"]["tables"]] == ["exists"] * 3

    # A sink mapping added by hand, then a column added at the source: the file is kept
    # and the difference reported; --force refreshes it with ids and the mapping kept.
    written["sink"]["columns"] = {"email": {"name": "email_address"}}
    written["columns"][1]["tags"] = ["sensitive"]
    users_file.write_text(yaml.safe_dump(written, sort_keys=False))
    with mariadb.connect() as conn, conn.cursor() as cur:
        cur.execute(f"ALTER TABLE {db}.users ADD COLUMN phone VARCHAR(20) AFTER email")
    kept = users_file.read_text()
    differs = onboard(config, capsys, "--table", "users")
    assert list(differs) == ["users"]
    assert differs["users"]["file"] == "exists, differs"
    assert differs["users"]["differences"] == ["phone: add string"]
    assert users_file.read_text() == kept
    forced = onboard(config, capsys, "--table", "users", "--force")
    assert forced["users"]["file"] == "refreshed"
    refreshed = yaml.safe_load(users_file.read_text())
    assert refreshed["version"] == 2
    assert [(c["id"], c["name"]) for c in refreshed["columns"]][:4] == [
        (1, "id"),
        (2, "email"),
        (7, "phone"),
        (3, "balance"),
    ]
    assert refreshed["sink"]["columns"] == {"email": {"name": "email_address"}}
    assert refreshed["columns"][1]["tags"] == ["sensitive"]  # what only the file knows

    # A table without a primary key is refused, naming the table and the fix.
    tables.append({"name": "loose", "source": f"{db}.loose"})
    config = write_config(tmp_path, warehouse, namespace, source, tables)
    assert main(["onboard", "-c", str(config), "--table", "loose"]) == 2
    err = capsys.readouterr().err
    assert f"table loose: {db}.loose has no primary key" in err
    assert "primary_key" in err


def test_postgres_tables_are_onboarded_from_pg_catalog(
    tmp_path: Path,
    warehouse: Path,
    spark: SparkSession,
    postgres: PostgresServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = f"onboard_p{next(_databases)}"
    postgres.create_database(db)
    postgres.execute("CREATE SCHEMA sales", db)
    postgres.execute("CREATE TYPE sales.mood AS ENUM ('ok', 'sad')", db)
    postgres.execute(
        "CREATE TABLE sales.orders (region text NOT NULL, id integer NOT NULL, "
        "total numeric(10,3), placed timestamptz, ref uuid, doc jsonb, tags integer[], "
        "mood sales.mood, PRIMARY KEY (id, region))",
        db,
    )
    settings = postgres.connection_settings(db)
    source = {
        "name": "pg",
        "type": "postgres",
        "host": settings["host"],
        "port": settings["port"],
        "user": settings["user"],
        "database": db,
    }
    namespace = f"{db}_ns"
    config = write_config(
        tmp_path, warehouse, namespace, source, [{"name": "orders", "source": "sales.orders"}]
    )
    files = onboard(config, capsys, "--files-only")
    assert files["orders"]["file"] == "written" and files["orders"]["tables"] == []
    assert not spark.catalog.tableExists(f"lake.{namespace}.orders")
    first = onboard(config, capsys)
    assert first["orders"]["file"] == "exists, unchanged"
    assert [t["action"] for t in first["orders"]["tables"]] == ["created"] * 3
    written = yaml.safe_load((tmp_path / "schemas" / "orders.yaml").read_text())
    assert written["primary_key"] == ["id", "region"]
    assert {c["name"]: c["type"] for c in written["columns"]} == {
        "region": "string",
        "id": "int",
        "total": "decimal(10,3)",
        "placed": "timestamptz",
        "ref": "uuid",
        "doc": "json",
        "tags": {"list": {"element_id": 9, "element": "int"}},  # ids after the columns'
        "mood": "string",
    }
    assert columns(spark, f"lake.{namespace}.orders")["placed"] == "timestamp"
    assert columns(spark, f"lake.{namespace}.orders")["tags"] == "array<int>"
    # The base table is bucketed by the first key column, through the same contract.
    partitioning = spark.sql(f"DESCRIBE TABLE lake.{namespace}.orders").collect()
    assert any("bucket(16, id)" in str(r[1]) for r in partitioning)

    assert main(["onboard", "-c", str(config)]) == 0
    text = capsys.readouterr().out
    assert "schema file" in text and "exists, unchanged" in text
    assert "base table lake." in text and ": exists" in text
