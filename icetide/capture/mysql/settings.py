"""Check, before reading a byte, that a MySQL/MariaDB server's binlog can be captured.

Capture needs every changed row in full, with column names, in the binary log:

==========================  ========  ==================================================
variable                    must be   why
==========================  ========  ==================================================
``log_bin``                 ``ON``    no binary log, nothing to read
``binlog_format``           ``ROW``   STATEMENT/MIXED log SQL text, not the rows
``binlog_row_image``        ``FULL``  MINIMAL/NOBLOB leave columns out of before/after
``binlog_row_metadata``     ``FULL``  column names, signedness, ENUM/SET values
``server_id``               not 0     a server without id cannot serve replicas
``binlog_row_value_options`` empty    PARTIAL_JSON logs JSON diffs (MySQL only)
==========================  ========  ==================================================

:func:`find_problems` is the pure rule table; :func:`check_server` reads the variables
and raises :class:`~icetide.capture.errors.ServerSettingsError` listing every setting to
change and the ``my.cnf`` lines that do it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from icetide.capture.errors import ServerSettingsError

Flavor = Literal["mariadb", "mysql"]


@dataclass(frozen=True)
class Requirement:
    """One server variable capture depends on."""

    variable: str
    expected: str
    cnf_line: str
    why: str
    dynamic: bool
    """Whether ``SET GLOBAL`` can change it without a restart."""

    def satisfied_by(self, value: str | None) -> bool:
        """Whether the server's ``value`` (``None``: variable unknown) is acceptable."""
        if self.variable == "server_id":
            return value is not None and value.strip() not in ("", "0")
        if self.variable == "binlog_row_value_options":
            return value is None or value.strip() == ""  # absent on MariaDB: fine
        return value is not None and value.strip().upper() == self.expected


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement("log_bin", "ON", "log_bin = mysql-bin", "the binary log is off", False),
    Requirement(
        "binlog_format",
        "ROW",
        "binlog_format = ROW",
        "only ROW format logs the changed rows themselves",
        True,
    ),
    Requirement(
        "binlog_row_image",
        "FULL",
        "binlog_row_image = FULL",
        "before and after images must hold every column",
        True,
    ),
    Requirement(
        "binlog_row_metadata",
        "FULL",
        "binlog_row_metadata = FULL",
        "row events must carry column names, signedness and ENUM/SET values "
        "(MySQL 8.0.14+ / MariaDB 10.5+)",
        True,
    ),
    Requirement(
        "server_id",
        "non-zero",
        "server_id = 1",
        "a server without a server id cannot serve binlog readers",
        True,
    ),
    Requirement(
        "binlog_row_value_options",
        "empty",
        "binlog_row_value_options = ''",
        "PARTIAL_JSON logs JSON updates as diffs, not full values",
        True,
    ),
)
"""Every setting :func:`check_server` checks, in the order problems are reported."""


@dataclass(frozen=True)
class ServerInfo:
    """What capture needs to know about the server it reads."""

    flavor: Flavor
    version: str
    server_id: int
    gtid_enabled: bool
    """MariaDB always writes GTIDs; MySQL only with ``gtid_mode=ON``."""


def find_problems(variables: Mapping[str, str | None]) -> list[tuple[Requirement, str | None]]:
    """The requirements ``variables`` (lower-case name → value) break, with the value found.

    >>> good = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL",
    ...         "binlog_row_metadata": "FULL", "server_id": "1"}
    >>> find_problems(good)
    []
    >>> [(r.variable, v) for r, v in find_problems({**good, "binlog_format": "STATEMENT"})]
    [('binlog_format', 'STATEMENT')]
    """
    return [
        (r, variables.get(r.variable))
        for r in REQUIREMENTS
        if not r.satisfied_by(variables.get(r.variable))
    ]


def settings_error(
    problems: list[tuple[Requirement, str | None]], where: str = "the server"
) -> ServerSettingsError:
    """The error that lists ``problems`` and the ``my.cnf`` lines that fix them."""
    lines = []
    for requirement, value in problems:
        found = "not set (server too old?)" if value is None else f"{value or 'empty'}"
        lines.append(
            f"{requirement.variable} is {found}; it must be {requirement.expected}"
            f" ({requirement.why})"
        )
    fix = ["[mysqld]"] + [r.cnf_line for r, _ in problems]
    count = len(problems)
    message = (
        f"cannot capture from {where}: {count} server setting{'s' if count > 1 else ''} "
        "must change\n"
        + "\n".join(f"  - {line}" for line in lines)
        + "\n  add to the server's my.cnf and restart it:\n"
        + "\n".join(f"      {line}" for line in fix)
    )
    dynamic = [r for r, _ in problems if r.dynamic]
    hint = "then run `icetide capture` again"
    if dynamic and len(dynamic) == count:
        statements = "; ".join(_set_global(r) for r in dynamic)
        hint = (
            f"these can also change without a restart ({statements}); sessions already "
            "open keep the old value, and my.cnf keeps it across restarts"
        )
    elif any(r.variable == "log_bin" for r, _ in problems):
        hint = "log_bin needs a server restart; the other settings take effect with it"
    return ServerSettingsError(message, problems=lines, fix=fix, hint=hint)


def _set_global(requirement: Requirement) -> str:
    value = requirement.cnf_line.split("=", 1)[1].strip()
    if value.isdigit() or value == "''":
        return f"SET GLOBAL {requirement.variable} = {value}"
    return f"SET GLOBAL {requirement.variable} = '{value}'"


_VARIABLES = (
    "log_bin",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "binlog_row_value_options",
    "server_id",
    "gtid_mode",
    "version",
)


def read_variables(conn: Any) -> dict[str, str]:
    """The global variables capture looks at, lower-case name → value text."""
    placeholders = ", ".join(["%s"] * len(_VARIABLES))
    with conn.cursor() as cur:
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({placeholders})", _VARIABLES)
        rows = cur.fetchall()
    out: dict[str, str] = {}
    for row in rows:
        name, value = (row["Variable_name"], row["Value"]) if isinstance(row, dict) else row[:2]
        out[str(name).lower()] = "" if value is None else str(value)
    return out


def server_info(variables: Mapping[str, str]) -> ServerInfo:
    """Flavor, version, id and GTID mode from :func:`read_variables` output.

    >>> server_info({"version": "10.11.6-MariaDB-0+deb12u1-log", "server_id": "1"}).flavor
    'mariadb'
    """
    version = variables.get("version", "")
    flavor: Flavor = "mariadb" if "mariadb" in version.lower() else "mysql"
    gtid = flavor == "mariadb" or variables.get("gtid_mode", "").upper() == "ON"
    try:
        server_id = int(variables.get("server_id") or 0)
    except ValueError:
        server_id = 0
    return ServerInfo(flavor, version, server_id, gtid)


def check_server(conn: Any, where: str = "the server") -> ServerInfo:
    """Read the server's settings; raise ``ServerSettingsError`` listing every wrong one."""
    variables = read_variables(conn)
    problems = find_problems(variables)
    if problems:
        raise settings_error(problems, where)
    return server_info(variables)
