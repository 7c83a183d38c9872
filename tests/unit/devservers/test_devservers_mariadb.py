"""The private MariaDB helper's option handling (no server is started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from icetide.devservers.errors import LocalServerError
from icetide.devservers.mariadb import MariaDBServer, find_program
from icetide.devservers.ports import free_port


def test_defaults_make_a_capture_ready_private_server(tmp_path: Path) -> None:
    server = MariaDBServer(tmp_path)
    options = server.options
    assert options["datadir"] == str(tmp_path / "data")
    assert options["port"] == str(server.port) and options["bind-address"] == "127.0.0.1"
    assert (options["binlog-format"], options["binlog-row-image"]) == ("ROW", "FULL")
    assert options["binlog-row-metadata"] == "FULL" and options["server-id"] == "1"
    assert options["log-bin"] == str(tmp_path / "binlog" / "mysql-bin")
    assert server.connection_settings("shop") == {
        "host": "127.0.0.1",
        "port": server.port,
        "user": "root",
        "password": "",
        "database": "shop",
    }


def test_overrides_change_or_drop_options(tmp_path: Path) -> None:
    server = MariaDBServer(
        tmp_path, options={"binlog-format": "STATEMENT", "log-bin": None, "skip-ssl": None}
    )
    options = server.options
    assert options["binlog-format"] == "STATEMENT"
    assert "log-bin" not in options and "skip-ssl" not in options


def test_long_base_paths_get_a_short_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 120)
    server = MariaDBServer(deep)
    try:
        assert len(str(server.socket_path)) < 100
    finally:
        server.stop()  # removes the socket folder; never started, nothing else to do


def test_missing_programs_say_how_to_install() -> None:
    with pytest.raises(LocalServerError) as err:
        find_program("surely-not-a-mariadb-binary")
    assert "apt-get install mariadb-server" in err.value.render()


def test_free_port_is_a_port() -> None:
    assert 0 < free_port() < 65536
