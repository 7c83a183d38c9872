"""Capture offsets across binlog rotations, and the capture lag ``icetide status`` shows.

After the server rotates its binlog, a caught-up capture's saved offset must point into
the new file (not at the end of the last transaction in the old one), so its lag is 0;
resuming from it must neither skip nor repeat a change.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from icetide.capture.runner import offset_store, run_capture
from icetide.config import Config, load_config
from icetide.devservers.mariadb import MariaDBServer
from icetide.devservers.ports import free_port
from icetide.observe.capture_lag import source_lag
from icetide.observe.status import pipeline_status, render_status, status_dicts
from tests.devservers.postgres import PostgresServer

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore:'db' is deprecated:DeprecationWarning"),
]


def _config(folder: Path, sources: list[dict[str, Any]], tables: dict[str, str]) -> Config:
    schema = {
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long"},
            {"id": 2, "name": "v", "type": "string"},
        ],
    }
    (folder / "schemas").mkdir(parents=True, exist_ok=True)
    for name in tables:
        (folder / "schemas" / f"{name}.yaml").write_text(yaml.safe_dump(schema))
    doc = {
        "pipeline": "lag",
        "state_dir": "./state",
        "catalog": {"namespace": "capture_lag"},
        "transport": {"type": "files", "path": "./landing"},
        "sources": sources,
        "tables": [{"name": name, "source": source} for name, source in tables.items()],
    }
    (folder / "icetide.yaml").write_text(yaml.safe_dump(doc))
    return load_config(folder / "icetide.yaml")


def _mysql_source(server: MariaDBServer, name: str = "shop") -> dict[str, Any]:
    source = {"name": name, "type": "mysql", "port": server.port, "user": server.user}
    return {**source, "password": server.password} if server.password else source


def _sql(server: MariaDBServer, *statements: str) -> list[Any]:
    with server.connect() as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
        return list(cur.fetchall())


def _master(server: MariaDBServer) -> tuple[str, int]:
    file, pos = _sql(server, "SHOW MASTER STATUS")[0][:2]
    return str(file), int(pos)


def _rotate(server: MariaDBServer) -> str:
    """FLUSH BINARY LOGS, then wait until MariaDB wrote the new file's own binlog
    checkpoint (it does so asynchronously, once the old file's commits are durable), so
    the log's end stops moving."""
    _sql(server, "FLUSH BINARY LOGS")
    file = _master(server)[0]
    deadline = time.monotonic() + 30
    while not any(
        row[2] == "Binlog_checkpoint" and row[5] == file
        for row in _sql(server, f"SHOW BINLOG EVENTS IN '{file}'")
    ):
        assert time.monotonic() < deadline, f"no binlog checkpoint in {file}"
        time.sleep(0.05)
    return file


def _landed(config: Config) -> list[int]:
    """The ids of every change event landed so far, in order."""
    folder = config.resolved_path(config.transport.path)
    ids = []
    for path in sorted(folder.glob("*.json")):
        for line in path.read_text().splitlines():
            payload = json.loads(line)
            payload = payload.get("payload", payload)
            image = payload.get("after") or payload.get("before")
            if image is not None:
                ids.append(int(image["id"]))
    return ids


def test_after_a_rotation_the_saved_offset_is_in_the_new_file_and_resumes_exactly(
    tmp_path: Path, mariadb: MariaDBServer
) -> None:
    db = "lag_rotation"
    _sql(mariadb, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v TEXT)")
    config = _config(tmp_path, [_mysql_source(mariadb)], {"t": f"{db}.t"})
    source = config.sources[0]
    run_capture(config, source, follow=False, from_now=True)

    _sql(mariadb, f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')")
    new_file = _rotate(mariadb)
    assert run_capture(config, source, follow=False).records == 2
    saved = offset_store(config, source).read()
    assert saved is not None
    # Caught up: the saved offset is the server's end of log, in the new file.
    assert (saved.offset["file"], saved.offset["pos"]) == _master(mariadb)
    assert saved.position.startswith(f"{new_file}:")
    lag = source_lag(config, source)
    assert (lag.lag_bytes, lag.state, lag.reason) == (0, "caught up", None)
    assert lag.saved_offset == lag.server_position == "{}:{}".format(*_master(mariadb))

    # Resuming there: a rotation between two changes loses neither and repeats neither.
    _sql(mariadb, f"INSERT INTO {db}.t VALUES (3, 'c')")
    _rotate(mariadb)
    _sql(mariadb, f"INSERT INTO {db}.t VALUES (4, 'd')", f"DELETE FROM {db}.t WHERE id = 1")
    assert run_capture(config, source, follow=False).records == 3
    assert run_capture(config, source, follow=False).records == 0
    assert _landed(config) == [1, 2, 3, 4, 1]
    assert source_lag(config, source).lag_bytes == 0


def test_status_shows_capture_lag_per_source_and_unknown_for_an_unreachable_one(
    tmp_path: Path, mariadb: MariaDBServer, postgres: PostgresServer, spark: SparkSession
) -> None:
    db, slot = "lag_status", "lag_status_slot"
    _sql(mariadb, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v TEXT)")
    postgres.create_database(db)
    postgres.execute("CREATE TABLE docs (id bigint PRIMARY KEY, v text)", db)
    down = free_port()
    config = _config(
        tmp_path,
        [
            {**_mysql_source(mariadb), "tables": ["t"]},
            postgres.source_entry(
                db, slot, name="pg", publication="lag_status_pub", tables=["docs"]
            ),
            {**_mysql_source(mariadb, "down"), "port": down, "tables": ["gone"]},
        ],
        {"t": f"{db}.t", "docs": "public.docs", "gone": "x.gone"},
    )
    shop, pg, gone = config.sources
    try:
        for source in (shop, pg):
            run_capture(config, source, follow=False, from_now=True)
        offset_store(config, gone).save(
            {"file": "mysql-bin.000001", "pos": 4}, position="mysql-bin.000001:4"
        )

        # Changes capture has not read yet: the lag is exactly the bytes written since.
        saved_pos = offset_store(config, shop).load()["pos"]  # type: ignore[index]
        _sql(mariadb, f"INSERT INTO {db}.t VALUES (1, REPEAT('x', 5000))")
        behind = source_lag(config, shop)
        assert behind.state == "behind"
        assert behind.lag_bytes == _master(mariadb)[1] - saved_pos > 5000
        postgres.execute(
            "INSERT INTO docs SELECT g, repeat('y', 100) FROM generate_series(1, 500) g", db
        )
        pg_behind = source_lag(config, pg)
        assert pg_behind.lag_bytes is not None and pg_behind.lag_bytes > 50_000

        for source in (shop, pg):
            run_capture(config, source, follow=False)
        status = pipeline_status(spark, config)
        rows = {r.table: r for r in status.tables}
        assert rows["t"].capture is not None and rows["t"].capture.lag_bytes == 0
        assert rows["t"].capture.server_position == "{}:{}".format(*_master(mariadb))
        pg_lag = rows["docs"].capture
        assert pg_lag is not None and pg_lag.lag_bytes is not None
        assert pg_lag.lag_bytes < pg_behind.lag_bytes and pg_lag.server_position
        unknown = rows["gone"].capture
        assert unknown is not None
        assert (unknown.lag_bytes, unknown.state, unknown.server_position) == (
            None,
            "unknown",
            None,
        )
        assert unknown.saved_offset == "mysql-bin.000001:4"
        assert unknown.reason is not None and f"127.0.0.1:{down}" in unknown.reason

        text = render_status(status)
        assert "saved offset" in text and "server position" in text
        assert any(line.split()[:2] == ["down", "mysql-bin.000001:4"] for line in text.splitlines())
        assert "unknown (cannot ask the server at 127.0.0.1:" in text
        assert "0 bytes (caught up)" in text
        dicts = json.loads(json.dumps(status_dicts(status)))
        by_table = {d["table"]: d for d in dicts}
        assert by_table["t"]["capture"]["lag_bytes"] == 0
        assert by_table["t"]["capture"]["state"] == "caught up"
        assert by_table["gone"]["capture"]["state"] == "unknown"
        assert set(by_table["docs"]["capture"]) == {
            "source",
            "type",
            "saved_offset",
            "saved_at",
            "server_position",
            "lag_bytes",
            "reason",
            "state",
        }
    finally:
        postgres.drop_slot(slot, db)
