"""`icetide schema plan|apply` on a real source and real Iceberg tables: the source's new
columns read from its catalog (defaults included), the DDL as evidence, the ALTERs run
through Spark, the schema file, audit log and table properties written.

One table per database server (MariaDB, PostgreSQL), each in its own database and
Iceberg namespace; the stages are not running (the runtime's side is tested with it).
A declared type the source type still fits (TINYINT(1) as boolean, an enum by its labels)
is no change in the plan; a real change of that source type is one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from icetide.artifacts.index import LocalIndex
from icetide.artifacts.workspace import index_folder
from icetide.cli import main
from icetide.config import load_config
from icetide.config.loader import load_schema_file
from icetide.devservers.mariadb import MariaDBServer
from icetide.evolution.source_schema import read_source_schema
from icetide.lake.tables import TableRefs, iceberg_table
from icetide.schema.contract.builder import TableContract
from icetide.schema.file import dump_schema_file
from icetide.schema.types import ColumnDefault
from tests.devservers.postgres import PostgresServer

CREATE = "CREATE TABLE customers (id BIGINT PRIMARY KEY, email VARCHAR(64), amount DECIMAL(10,2))"
DDL = {
    "mysql": [
        "ALTER TABLE customers RENAME COLUMN email TO mail",
        "ALTER TABLE customers MODIFY amount DECIMAL(12,2)",
        "ALTER TABLE customers ADD COLUMN note VARCHAR(20) NOT NULL DEFAULT 'n/a'",
    ],
    "postgres": [
        "ALTER TABLE customers RENAME COLUMN email TO mail",
        "ALTER TABLE customers ALTER COLUMN amount TYPE numeric(12,2)",
        "ALTER TABLE customers ADD COLUMN note varchar(20) NOT NULL DEFAULT 'n/a'",
    ],
}


def _source(kind: str, server: Any, db: str, *statements: str) -> dict[str, Any]:
    """A new database ``db`` on ``server`` with ``statements`` run in it; its source config."""
    if kind == "mysql":
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {db}")
        _run(kind, server, db, *statements)
        return {"name": "src", "type": "mysql", "port": server.port, "user": "root"}
    server.create_database(db)
    _run(kind, server, db, *statements)
    return {
        "name": "src",
        "type": "postgres",
        "port": server.port,
        "user": "postgres",
        "database": db,
    }


def _run(kind: str, server: Any, db: str, *statements: str) -> None:
    if kind == "mysql":
        with server.connect(db) as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
            conn.commit()
        return
    for statement in statements:
        server.execute(statement, db=db)


def _config(
    tmp_path: Path, warehouse: Path, kind: str, db: str, namespace: str, source: Any
) -> Path:
    """``icetide.yaml`` with one table, ``customers``, read from ``source``."""
    path = tmp_path / "icetide.yaml"
    table = f"{db}.customers" if kind == "mysql" else "public.customers"
    path.write_text(
        yaml.safe_dump(
            {
                "pipeline": f"evo{kind}",
                "catalog": {"name": "lake", "warehouse": str(warehouse), "namespace": namespace},
                "sources": [source],
                "tables": [{"name": "customers", "source": table}],
            }
        )
    )
    (tmp_path / "schemas").mkdir()
    return path


@pytest.mark.parametrize("kind", ["mysql", "postgres"])
def test_schema_apply_takes_a_source_change_to_the_iceberg_tables(
    kind: str,
    request: pytest.FixtureRequest,
    spark: SparkSession,
    warehouse: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server: MariaDBServer | PostgresServer = request.getfixturevalue(
        "mariadb" if kind == "mysql" else "postgres"
    )
    db, namespace = f"evo_{kind}", f"evo_apply_{kind}"
    source = _source(kind, server, db, CREATE, "INSERT INTO customers VALUES (1, 'a@x', 1.50)")
    config_path = _config(tmp_path, warehouse, kind, db, namespace, source)
    config = load_config(config_path)
    # Onboarding's part, done here by hand: the first schema from the catalog, the tables.
    first = read_source_schema(config.sources[0], config.table("customers"))
    dump_schema_file(first, tmp_path / "schemas" / "customers.yaml")
    refs = TableRefs.of(config, "customers")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `lake`.`{namespace}`")
    spark.sql(TableContract(first).base_ddl(refs.base))
    spark.sql(TableContract(first).ledger_ddl(refs.cdc))

    _run(kind, server, db, *DDL[kind])
    cli = ["-c", str(config_path), "--table", "customers"]
    if kind == "postgres":
        # pgoutput sends no DDL: without it, the rename cannot be told from drop + add.
        assert main(["schema", "plan", *cli, "--output", "json"]) == 0
        plan = json.loads(capsys.readouterr().out)[0]
        assert plan["held"] == ["ambiguous:email>mail"]
    ddl_file = tmp_path / "migration.sql"
    ddl_file.write_text(";\n".join(DDL[kind]) + ";\n")
    assert (
        main(["schema", "apply", *cli, "--ddl", str(ddl_file), "--by", "ana", "--reason", "t"]) == 0
    )
    capsys.readouterr()

    schema = load_schema_file(tmp_path / "schemas" / "customers.yaml")
    assert schema.version == 2
    assert [(c.id, c.name, str(c.type)) for c in schema.columns] == [
        (1, "id", "long"),
        (2, "mail", "string"),
        (3, "amount", "decimal(12,2)"),
        (4, "note", "string"),
    ]
    assert schema.by_name["note"].default == ColumnDefault("n/a")
    base = spark.table(refs.base.sql)
    assert base.columns[:4] == ["id", "mail", "amount", "note"]
    assert base.schema["amount"].dataType.simpleString() == "decimal(12,2)"
    props = {
        r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {refs.base.sql}").collect()
    }
    assert props["icetide.schema.version"] == "2"
    assert json.loads(props["icetide.schema.audit"])["by"] == "ana"
    ledger_after = spark.table(refs.cdc.sql).schema["_after"].dataType.fieldNames()
    assert ledger_after[:4] == ["id", "mail", "amount", "note"]
    # Each table took the version (rename, widening, add) as one schema (by ALTERs: 3).
    for table in (refs.base, refs.cdc):
        assert iceberg_table(spark, table).schemas().size() == 2, table
    record = json.loads((tmp_path / "schemas" / "customers.audit.jsonl").read_text())
    assert [c["id"] for c in record["changes"]] == [
        "rename:mail",
        "widen:amount",
        "add_with_default:note",
    ]
    # artifacts.refresh is auto: the apply published the new version (a rename: major)
    # and set the base table's Avro literal to it
    index = LocalIndex(index_folder(config))
    package = f"icetide-schema-{db if kind == 'mysql' else 'public'}-customers".replace("_", "-")
    assert [e.version for e in index.versions(package)] == ["1.0.0", "2.0.0"]
    assert [f["name"] for f in json.loads(props["avro.schema.literal"])["fields"]] == [
        "id",
        "mail",
        "amount",
        "note",
    ]
    # applying again changes nothing, runs nothing and publishes nothing
    assert main(["schema", "apply", *cli, "--ddl", str(ddl_file)]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert [e.version for e in index.versions(package)] == ["1.0.0", "2.0.0"]


DECLARED = {
    "mysql": (
        "CREATE TABLE customers (id BIGINT PRIMARY KEY, vip TINYINT(1), token CHAR(36), "
        "status ENUM('new','it''s paid'))",
        "ALTER TABLE customers MODIFY vip INT",
        "type_change:vip",
    ),
    "postgres": (
        "CREATE TYPE mood AS ENUM ('sad', 'ok'); "
        "CREATE TABLE customers (id bigint PRIMARY KEY, status mood)",
        "ALTER TYPE mood ADD VALUE 'happy'",
        "widen:status",
    ),
}


@pytest.mark.parametrize("kind", ["mysql", "postgres"])
def test_schema_plan_keeps_declared_types_the_source_types_still_fit(
    kind: str,
    request: pytest.FixtureRequest,
    warehouse: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The schema file declares a MariaDB TINYINT(1) as boolean, a CHAR(36) as uuid and
    an ENUM as an enum of its labels (PostgreSQL: an enum type as an enum of its
    pg_enum labels): the catalog read keeps them, so the plan has no change; a real
    change of the source type (MODIFY vip INT; a label added) is still planned."""
    server: MariaDBServer | PostgresServer = request.getfixturevalue(
        "mariadb" if kind == "mysql" else "postgres"
    )
    db = f"evo_declared_{kind}"
    create, change, expected = DECLARED[kind]
    source = _source(kind, server, db, create)
    config_path = _config(tmp_path, warehouse, kind, db, db, source)
    columns: list[dict[str, Any]] = [{"id": 1, "name": "id", "type": "long", "nullable": False}]
    if kind == "mysql":
        columns += [
            {"id": 2, "name": "vip", "type": "boolean"},
            {"id": 3, "name": "token", "type": "uuid"},
            {"id": 4, "name": "status", "type": {"enum": ["new", "it's paid", "shipped"]}},
        ]
    else:
        columns += [{"id": 2, "name": "status", "type": {"enum": ["sad", "ok"]}}]
    (tmp_path / "schemas" / "customers.yaml").write_text(
        yaml.safe_dump({"table": "customers", "primary_key": ["id"], "columns": columns})
    )
    cli = ["schema", "plan", "-c", str(config_path), "--table", "customers", "--output", "json"]

    assert main(cli) == 0
    [plan] = json.loads(capsys.readouterr().out)
    assert plan["changes"] == [] and not plan["changed"], plan["changes"]
    _run(kind, server, db, change)
    assert main(cli) == 0
    [plan] = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in plan["changes"]] == [expected]
