"""Wrong server settings stop ``icetide capture`` with the fix and exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from icetide.devservers.mariadb import MariaDBServer
from tests.devservers.postgres import PostgresServer
from tests.integration.harness import REPO


def _capture(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "icetide.cli", "capture", "--from-now", "--once", "-c", str(config)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _config(folder: Path, source: dict[str, object], table_source: str) -> Path:
    schema = {
        "table": "t",
        "primary_key": ["id"],
        "columns": [{"id": 1, "name": "id", "type": "long", "nullable": False}],
    }
    (folder / "schemas").mkdir(parents=True)
    (folder / "schemas" / "t.yaml").write_text(yaml.safe_dump(schema))
    doc = {
        "pipeline": "settings",
        "sources": [source],
        "tables": [{"name": "t", "source": table_source}],
    }
    path = folder / "icetide.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_statement_binlog_format_is_refused_with_the_my_cnf_fix(tmp_path: Path) -> None:
    with MariaDBServer(options={"binlog-format": "STATEMENT"}) as server:
        config = _config(
            tmp_path,
            {"name": "shop", "type": "mysql", "port": server.port, "user": server.user},
            "shop.t",
        )
        done = _capture(config)
    assert done.returncode == 2, done.stderr
    assert "binlog_format" in done.stderr and "ROW" in done.stderr
    assert "Traceback" not in done.stderr


def test_wal_level_replica_is_refused_with_the_postgresql_conf_fix(tmp_path: Path) -> None:
    with PostgresServer(settings={"wal_level": "replica"}) as server:
        server.execute("CREATE TABLE t (id bigint PRIMARY KEY)", "postgres")
        config = _config(
            tmp_path,
            {
                "name": "app",
                "type": "postgres",
                "port": server.port,
                "user": "postgres",
                "database": "postgres",
            },
            "public.t",
        )
        done = _capture(config)
    assert done.returncode == 2, done.stderr
    assert "wal_level" in done.stderr and "logical" in done.stderr
    assert "Traceback" not in done.stderr
