"""Server-setting checks: which settings are wrong and the exact lines that fix them."""

from __future__ import annotations

from typing import Any

import pytest

from icetide.capture.errors import ServerSettingsError
from icetide.capture.mysql.settings import check_server, find_problems, server_info, settings_error
from icetide.errors import IcetideError, Terminal

GOOD = {
    "log_bin": "ON",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
    "server_id": "1",
    "version": "10.11.6-MariaDB-log",
}


def test_good_settings_have_no_problems() -> None:
    assert find_problems(GOOD) == []
    assert find_problems({**GOOD, "binlog_format": "row", "binlog_row_value_options": ""}) == []


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("log_bin", "OFF"),
        ("binlog_format", "MIXED"),
        ("binlog_row_image", "MINIMAL"),
        ("binlog_row_metadata", "MINIMAL"),
        ("binlog_row_metadata", None),
        ("server_id", "0"),
        ("binlog_row_value_options", "PARTIAL_JSON"),
    ],
)
def test_each_wrong_setting_is_reported(variable: str, value: str | None) -> None:
    variables: dict[str, Any] = {**GOOD, variable: value}
    if value is None:
        del variables[variable]
    problems = find_problems(variables)
    assert [r.variable for r, _ in problems] == [variable]


def test_the_error_lists_every_problem_and_the_cnf_lines() -> None:
    problems = find_problems({**GOOD, "log_bin": "OFF", "binlog_format": "STATEMENT"})
    error = settings_error(problems, "the server at db:3306")
    assert isinstance(error, IcetideError) and isinstance(error, Terminal)
    text = error.render()
    assert "the server at db:3306" in text and "2 server settings must change" in text
    assert "log_bin is OFF; it must be ON" in text
    assert "binlog_format is STATEMENT; it must be ROW" in text
    assert error.fix == ("[mysqld]", "log_bin = mysql-bin", "binlog_format = ROW")
    assert "restart" in (error.hint or "")


def test_dynamic_settings_suggest_set_global() -> None:
    problems = find_problems({**GOOD, "binlog_row_image": "MINIMAL", "server_id": "0"})
    hint = settings_error(problems).hint or ""
    assert "SET GLOBAL binlog_row_image = 'FULL'" in hint
    assert "SET GLOBAL server_id = 1" in hint


def test_server_info_flavor_and_gtid() -> None:
    mariadb = server_info(GOOD)
    assert (mariadb.flavor, mariadb.gtid_enabled, mariadb.server_id) == ("mariadb", True, 1)
    mysql = server_info({**GOOD, "version": "8.0.36", "gtid_mode": "OFF"})
    assert (mysql.flavor, mysql.gtid_enabled) == ("mysql", False)
    assert server_info({**GOOD, "version": "8.4.0", "gtid_mode": "ON"}).gtid_enabled


class _Cursor:
    def __init__(self, rows: list[tuple[str, str]]) -> None:
        self.rows = rows

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *args: object) -> None:
        pass

    def execute(self, sql: str, args: Any = None) -> None:
        assert "SHOW GLOBAL VARIABLES" in sql

    def fetchall(self) -> list[tuple[str, str]]:
        return self.rows


class _Connection:
    def __init__(self, variables: dict[str, str]) -> None:
        self.variables = variables

    def cursor(self) -> _Cursor:
        return _Cursor(list(self.variables.items()))


def test_check_server_raises_or_returns_info() -> None:
    assert check_server(_Connection(GOOD)).flavor == "mariadb"
    with pytest.raises(ServerSettingsError) as err:
        check_server(_Connection({**GOOD, "binlog_format": "STATEMENT"}))
    assert err.value.problems == (
        "binlog_format is STATEMENT; it must be ROW (only ROW format logs the changed rows "
        "themselves)",
    )
