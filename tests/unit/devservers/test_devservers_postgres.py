"""The private PostgreSQL helper's settings handling (no server is started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from icetide.devservers.errors import LocalServerError
from tests.devservers.postgres import PostgresServer, find_pg_program


def test_defaults_make_a_capture_ready_private_server(tmp_path: Path) -> None:
    server = PostgresServer(tmp_path)
    settings = server.settings
    assert settings["wal_level"] == "logical"
    assert int(settings["max_replication_slots"]) > 0 and int(settings["max_wal_senders"]) > 0
    assert settings["port"] == str(server.port)
    assert settings["listen_addresses"] == "'127.0.0.1'"
    assert server.connection_settings("shop") == {
        "host": "127.0.0.1",
        "port": server.port,
        "user": "postgres",
        "dbname": "shop",
    }
    assert f"port={server.port}" in server.dsn("shop") and "dbname=shop" in server.dsn("shop")


def test_overrides_change_or_drop_settings(tmp_path: Path) -> None:
    server = PostgresServer(tmp_path, settings={"wal_level": "replica", "fsync": None})
    assert server.settings["wal_level"] == "replica"
    assert "fsync" not in server.settings


def test_long_base_paths_get_a_short_socket_folder(tmp_path: Path) -> None:
    server = PostgresServer(tmp_path / ("x" * 120))
    try:
        assert len(str(server.socket_dir)) < 90
    finally:
        server.stop()  # removes the socket folder; never started, nothing else to do


def test_missing_programs_say_how_to_install() -> None:
    with pytest.raises(LocalServerError) as err:
        find_pg_program("surely-not-a-postgres-binary")
    assert "apt-get install postgresql" in err.value.render()
