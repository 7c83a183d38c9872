"""A private MariaDB server in a temporary folder, for tests and the demo.

The server gets its own data directory, socket and binlog folder, listens on a free port
of 127.0.0.1 only, and reads no option file (``--no-defaults``), so it never touches a
system installation. By default the binlog is set up the way capture needs it (ROW
format, FULL row image and row metadata); pass ``options`` to change or drop a setting,
e.g. ``{"binlog-format": "STATEMENT"}`` or ``{"log-bin": None}``::

    with MariaDBServer() as server:
        with server.connect() as conn:
            ...

Needs Debian's ``mariadb-server`` (``mariadb-install-db`` and ``mariadbd``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pymysql

from icetide.devservers.errors import LocalServerError
from icetide.devservers.lifecycle import LocalServer, overridden

_SEARCH_PATH = os.pathsep.join(
    [os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
)
_INSTALL_HINT = "install it with `apt-get install mariadb-server` (or run `make install`)"
# Unix socket paths longer than this do not fit sockaddr_un on Linux.
_MAX_SOCKET_PATH = 100


def find_program(*names: str) -> str:
    """The full path of the first of ``names`` found on PATH or in the sbin folders."""
    for name in names:
        found = shutil.which(name, path=_SEARCH_PATH)
        if found:
            return found
    raise LocalServerError(f"cannot find {' or '.join(names)}", hint=_INSTALL_HINT)


def default_options(base: Path, port: int, socket_path: Path) -> dict[str, str | None]:
    """The server options of a private, capture-ready instance (``None`` = a bare flag)."""
    options: dict[str, str | None] = {
        "datadir": str(base / "data"),
        # Its own temporary folder: servers started at once (parallel test workers)
        # otherwise share /tmp, where MariaDB's temporary-table file names can collide.
        "tmpdir": str(base / "tmp"),
        "socket": str(socket_path),
        "port": str(port),
        "bind-address": "127.0.0.1",
        "pid-file": str(base / "mariadbd.pid"),
        "log-error": str(base / "mariadbd.err"),
        "log-bin": str(base / "binlog" / "mysql-bin"),
        "binlog-format": "ROW",
        "binlog-row-image": "FULL",
        "binlog-row-metadata": "FULL",
        "server-id": "1",
        "character-set-server": "utf8mb4",
        "collation-server": "utf8mb4_general_ci",
        # Small footprint: tests start several of these on a small machine.
        "innodb-buffer-pool-size": "32M",
        "innodb-log-file-size": "16M",
        "performance-schema": "OFF",
        "max-connections": "50",
    }
    if os.geteuid() == 0:
        options["user"] = "root"  # mariadbd refuses to run as root without it
    return options


def render_options(options: Mapping[str, str | None]) -> list[str]:
    """``--name=value`` arguments (``--name`` for a ``None`` value).

    >>> render_options({"port": "3307", "skip-log-bin": None})
    ['--port=3307', '--skip-log-bin']
    """
    return [
        f"--{name}" if value is None else f"--{name}={value}" for name, value in options.items()
    ]


class MariaDBServer(LocalServer):
    """A private ``mariadbd`` with its data in ``base`` (a new temp folder by default).

    ``options`` overrides the :func:`default_options`; a key mapped to ``None`` in
    ``options`` removes that option (``{"log-bin": None}`` starts without a binlog).
    ``extra_args`` are appended verbatim. The folder is removed on :meth:`stop` when the
    server created it, unless ``keep`` is set.
    """

    def __init__(
        self,
        base: Path | None = None,
        *,
        options: Mapping[str, str | None] | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 60.0,
        keep: bool = False,
    ) -> None:
        super().__init__(base, "icetide-mariadb-", keep)
        self._overrides = dict(options or {})
        self._extra_args = list(extra_args)
        self._startup_timeout = startup_timeout
        self.socket_path = self._pick_socket_path()
        self.user = "root"
        self.password = ""

    # --- public API ---------------------------------------------------------------------

    @property
    def options(self) -> dict[str, str | None]:
        """The server options after overrides (``None``-valued overrides removed)."""
        return overridden(default_options(self.base, self.port, self.socket_path), self._overrides)

    @property
    def binlog_dir(self) -> Path:
        """The folder holding the binlog files (only meaningful with ``log-bin``)."""
        return self.base / "binlog"

    def connection_settings(self, database: str | None = None) -> dict[str, Any]:
        """pymysql / python-mysql-replication connection keywords for this server."""
        settings: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": self.port,
            "user": self.user,
            "password": self.password,
        }
        if database:
            settings["database"] = database
        return settings

    def source_entry(self, name: str, **settings: Any) -> dict[str, Any]:
        """This server as an entry of a pipeline config's ``sources:`` (type ``mysql``),
        with ``settings`` added (``server_id``, ``heartbeat``, ``tables`` …)."""
        return {
            "name": name,
            "type": "mysql",
            "host": "127.0.0.1",
            "port": self.port,
            "user": self.user,
            "password": self.password or None,
            **settings,
        }

    def connect(self, database: str | None = None, **kwargs: Any) -> pymysql.Connection[Any]:
        """A new autocommit pymysql connection (utf8mb4) to this server."""
        settings = {"charset": "utf8mb4", "autocommit": True, **kwargs}
        return pymysql.connect(**self.connection_settings(database), **settings)

    def start(self) -> MariaDBServer:
        """Install a fresh data directory (first start only) and start the server."""
        if self._process is not None:
            return self
        self.base.mkdir(parents=True, exist_ok=True)
        self.binlog_dir.mkdir(exist_ok=True)
        if not (self.base / "data" / "mysql").is_dir():
            self._install()
        log_start = 0

        def attempt() -> None:
            nonlocal log_start
            log_start = self._log_size()
            self._launch()
            self._wait_ready()

        self._start_on_a_free_port(attempt, lambda: "already in use" in self._log_since(log_start))
        return self

    def error_log(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the server's error log and console output."""
        text = []
        for name in ("mariadbd.err", "mariadbd.out"):
            path = self.base / name
            if path.exists():
                text += path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    # --- internals ----------------------------------------------------------------------

    def _pick_socket_path(self) -> Path:
        path = self.base / "mysqld.sock"
        if len(str(path)) <= _MAX_SOCKET_PATH:
            return path
        return self._scratch_folder("itm-") / "mysqld.sock"

    def _launch(self) -> None:
        (self.base / "tmp").mkdir(exist_ok=True)
        args = [find_program("mariadbd", "mysqld"), "--no-defaults"]
        args += render_options(self.options) + self._extra_args
        with (self.base / "mariadbd.out").open("ab") as log:
            self._process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def _log_size(self) -> int:
        path = self.base / "mariadbd.err"
        return path.stat().st_size if path.exists() else 0

    def _log_since(self, offset: int) -> str:
        path = self.base / "mariadbd.err"
        if not path.exists():
            return ""
        with path.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def _install(self) -> None:
        (self.base / "tmp").mkdir(exist_ok=True)
        args = [
            find_program("mariadb-install-db", "mysql_install_db"),
            "--no-defaults",
            f"--datadir={self.base / 'data'}",
            # Passed on to the bootstrapping mariadbd: a temporary folder of its own, as
            # the server's (see default_options).
            f"--tmpdir={self.base / 'tmp'}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--innodb-log-file-size=16M",
        ]
        if os.geteuid() == 0:
            args.append("--user=root")
        result = subprocess.run(args, capture_output=True, cwd=self.base, check=False)
        if result.returncode != 0:
            output = (result.stdout + result.stderr).decode(errors="replace").strip()
            raise LocalServerError(
                f"mariadb-install-db failed (exit {result.returncode}) in {self.base}:\n"
                + "\n".join(output.splitlines()[-15:]),
                hint=_INSTALL_HINT,
            )

    def _wait_ready(self) -> None:
        def alive() -> None:
            if self._process is None or self._process.poll() is not None:
                code = None if self._process is None else self._process.returncode
                raise LocalServerError(
                    f"mariadbd exited with code {code} while starting in {self.base}:\n"
                    + self.error_log(),
                    hint="check the server options; the lines above are its error log",
                )

        self._wait_until_it_connects(
            "mariadbd",
            lambda: self.connect(connect_timeout=2),
            pymysql.err.OperationalError,
            self.error_log,
            alive,
        )
