"""A private PostgreSQL server in a temporary folder, for tests and the demo.

The server gets its own data directory and unix socket folder, listens on a free port of
127.0.0.1 only, trusts every local connection (replication included) and never touches a
system cluster. By default it is set up the way capture needs it (``wal_level=logical``,
replication slots and WAL senders); pass ``settings`` to change or drop a setting, e.g.
``{"wal_level": "replica"}``::

    with PostgresServer() as server:
        server.create_database("shop")
        server.execute("CREATE TABLE t (id int PRIMARY KEY)", "shop")
        with server.connect("shop") as conn:
            ...

Run as root, the data folder belongs to the ``postgres`` user and ``initdb``/``pg_ctl``
run as that user (PostgreSQL refuses to run as root). Needs Debian's ``postgresql``
(``initdb``, ``pg_ctl`` and ``postgres`` under ``/usr/lib/postgresql/<version>/bin``).
Settings are written to ``icetide.conf``, included from ``postgresql.conf``, so an
``ALTER SYSTEM`` followed by :meth:`PostgresServer.restart` still takes effect.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.errors
import psycopg2.extensions
from psycopg2 import sql

from icetide.devservers.errors import LocalServerError
from icetide.devservers.lifecycle import LocalServer, overridden

_INSTALL_HINT = "install it with `apt-get install postgresql` (or run `make install`)"
_OS_USER = "postgres"
# Unix socket paths longer than this do not fit sockaddr_un ("/.s.PGSQL.65535" included).
_MAX_SOCKET_DIR = 90


def find_pg_program(name: str) -> str:
    """The full path of a PostgreSQL program (newest ``/usr/lib/postgresql/*/bin`` first).

    ``PG_BINDIR`` names a folder to look in before the others.
    """
    folders = [os.environ.get("PG_BINDIR", "")]
    folders += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for folder in folders:
        candidate = Path(folder) / name
        if folder and candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise LocalServerError(
        f"cannot find the PostgreSQL program {name} (looked in /usr/lib/postgresql/*/bin "
        "and on PATH)",
        hint=_INSTALL_HINT,
    )


def _version_key(folder: str) -> tuple[int, ...]:
    version = Path(folder).parent.name
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def default_settings(port: int, socket_dir: Path) -> dict[str, str]:
    """The ``postgresql.conf`` settings of a private, capture-ready instance."""
    return {
        "port": str(port),
        "listen_addresses": "'127.0.0.1'",
        "unix_socket_directories": f"'{socket_dir}'",
        "wal_level": "logical",
        "max_replication_slots": "10",
        "max_wal_senders": "10",
        # Tests: durability is not needed, speed is; and a small footprint.
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "shared_buffers": "32MB",
        "max_connections": "50",
        "log_min_messages": "warning",
        "timezone": "'UTC'",
    }


def render_settings(settings: Mapping[str, str]) -> str:
    """``name = value`` lines of a configuration file.

    >>> print(render_settings({"wal_level": "logical", "port": "5433"}), end="")
    wal_level = logical
    port = 5433
    """
    return "".join(f"{name} = {value}\n" for name, value in settings.items())


_HBA = """\
# icetide private server: trust everything local, never listen elsewhere.
local   all             all                     trust
local   replication     all                     trust
host    all             all     127.0.0.1/32    trust
host    replication     all     127.0.0.1/32    trust
"""


class PostgresServer(LocalServer):
    """A private PostgreSQL server with its data in ``base`` (a new temp folder by default).

    ``settings`` overrides the :func:`default_settings` (values as written in
    ``postgresql.conf``: quote strings yourself); a key mapped to ``None`` removes that
    setting. The folder is removed on :meth:`stop` when the server created it, unless
    ``keep`` is set. ``wal_start`` names the first WAL segment file of a new cluster
    (``pg_resetwal -l``), e.g. ``"0000000100000000000000FF"`` starts the WAL at
    ``0/FF000000``, so a test can cross ``0/FFFFFFFF`` with one ``pg_switch_wal()``.
    """

    def __init__(
        self,
        base: Path | None = None,
        *,
        settings: Mapping[str, str | None] | None = None,
        startup_timeout: float = 60.0,
        keep: bool = False,
        wal_start: str | None = None,
    ) -> None:
        super().__init__(base, "icetide-pg-", keep)
        self._wal_start = wal_start
        self._overrides = dict(settings or {})
        self._startup_timeout = startup_timeout
        self._started = False
        self.socket_dir = self._pick_socket_dir()
        self.user = "postgres"
        """The database superuser (created by ``initdb``)."""

    # --- public API ---------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        """The cluster's data directory."""
        return self.base / "data"

    @property
    def settings(self) -> dict[str, str]:
        """The server settings after overrides (``None``-valued overrides removed)."""
        return overridden(default_settings(self.port, self.socket_dir), self._overrides)

    def connection_settings(self, dbname: str = "postgres") -> dict[str, Any]:
        """psycopg2 connection keywords for this server (TCP on 127.0.0.1)."""
        return {"host": "127.0.0.1", "port": self.port, "user": self.user, "dbname": dbname}

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq connection string for ``dbname``."""
        return psycopg2.extensions.make_dsn(**self.connection_settings(dbname))

    def connect(
        self, dbname: str = "postgres", *, autocommit: bool = True, **kwargs: Any
    ) -> psycopg2.extensions.connection:
        """A new psycopg2 connection (autocommit by default) to ``dbname``."""
        conn = psycopg2.connect(**self.connection_settings(dbname), **kwargs)
        conn.autocommit = autocommit
        return conn

    def execute(
        self, statement: str, db: str = "postgres", params: Sequence[Any] | None = None
    ) -> list[tuple[Any, ...]]:
        """Run one statement in autocommit mode; the rows it returns (``[]`` if none)."""
        conn = self.connect(db)
        try:
            with conn.cursor() as cur:
                cur.execute(statement, params)
                return list(cur.fetchall()) if cur.description is not None else []
        finally:
            conn.close()

    def drop_slot(self, slot: str, db: str = "postgres", timeout: float = 30.0) -> None:
        """Drop replication slot ``slot`` if it exists: a test sharing the server cleans up
        after itself, because an abandoned slot holds WAL for ever.

        A capture just stopped may still hold the slot: the server ends its walsender
        only after the client has gone. That backend is ended, and the drop tried again
        until the slot is free."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name = %s",
                    db,
                    [slot],
                )
                return
            except psycopg2.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    raise
                self.execute(
                    "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                    "WHERE slot_name = %s AND active_pid IS NOT NULL",
                    db,
                    [slot],
                )
                time.sleep(0.1)

    def source_entry(self, db: str, slot: str, **settings: Any) -> dict[str, Any]:
        """Database ``db`` of this server as an entry of a pipeline config's ``sources:``
        (type ``postgres``, named ``db``), read through replication slot and publication
        ``slot``, with ``settings`` added or overriding (``heartbeat``, ``name`` …)."""
        return {
            "name": db,
            "type": "postgres",
            "host": "127.0.0.1",
            "port": self.port,
            "user": "postgres",
            "database": db,
            "slot": slot,
            "publication": slot,
            **settings,
        }

    def create_database(self, name: str) -> None:
        """Create database ``name`` unless it exists."""
        if self.execute("SELECT 1 FROM pg_database WHERE datname = %s", params=[name]):
            return
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        finally:
            conn.close()

    def start(self) -> PostgresServer:
        """Create a fresh cluster (first start only) and start the server."""
        if self._started:
            return self
        self._prepare_base()
        if not (self.data_dir / "PG_VERSION").is_file():
            self._initdb()
            if self._wal_start:
                self._run(
                    [find_pg_program("pg_resetwal"), "-l", self._wal_start, str(self.data_dir)],
                    "pg_resetwal",
                )

        def attempt() -> None:
            self._write_config()
            self._pg_ctl("start", "-w", "-t", str(int(self._startup_timeout)), "-l", self._log)
            self._started = True
            self._wait_ready()

        self._start_on_a_free_port(attempt, lambda: "already in use" in self.server_log(200))
        return self

    def restart(self) -> None:
        """Stop and start again (after ``ALTER SYSTEM`` of a restart-only setting)."""
        self._terminate()
        self.start()

    @property
    def running(self) -> bool:
        """Whether the postmaster is alive."""
        pid = self._postmaster_pid()
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True

    def server_log(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the server's log."""
        path = Path(self._log)
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    # --- internals ----------------------------------------------------------------------

    @property
    def _log(self) -> str:
        return str(self.base / "postgres.log")

    @property
    def _as_root(self) -> bool:
        return os.geteuid() == 0

    def _pick_socket_dir(self) -> Path:
        if len(str(self.base)) <= _MAX_SOCKET_DIR:
            return self.base
        return self._scratch_folder("itp-")

    def _prepare_base(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        if not self._as_root:
            return
        try:
            owner = pwd.getpwnam(_OS_USER)
        except KeyError as exc:
            raise LocalServerError(
                f"there is no '{_OS_USER}' OS user to run PostgreSQL as (it refuses root)",
                hint=_INSTALL_HINT + "; the package creates the user",
            ) from exc
        for folder in {self.base, self.socket_dir}:
            os.chown(folder, owner.pw_uid, owner.pw_gid)
            for path in folder.rglob("*"):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        probe = subprocess.run(["test", "-w", str(self.base)], user=_OS_USER, check=False)
        if probe.returncode != 0:
            raise LocalServerError(
                f"the '{_OS_USER}' OS user cannot write to {self.base} (a parent folder "
                "is not reachable for it)",
                hint="give no base folder (a temp folder is made) or use one under /tmp",
            )

    def _run(self, args: Sequence[str], what: str) -> None:
        result = subprocess.run(
            list(args),
            capture_output=True,
            cwd=self.base,
            check=False,
            user=_OS_USER if self._as_root else None,
            stdin=subprocess.DEVNULL,
        )
        if result.returncode != 0:
            output = (result.stdout + result.stderr).decode(errors="replace").strip()
            log = self.server_log()
            raise LocalServerError(
                f"{what} failed (exit {result.returncode}) in {self.base}:\n"
                + "\n".join(output.splitlines()[-15:])
                + (f"\nserver log:\n{log}" if log else ""),
                hint="check the server settings; the lines above are its output",
            )

    def _initdb(self) -> None:
        self._run(
            [
                find_pg_program("initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                self.user,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            "initdb",
        )
        (self.data_dir / "pg_hba.conf").write_text(_HBA)
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write("\ninclude_if_exists = 'icetide.conf'\n")

    def _write_config(self) -> None:
        path = self.data_dir / "icetide.conf"
        path.write_text(render_settings(self.settings))
        if self._as_root:
            owner = pwd.getpwnam(_OS_USER)
            for name in ("icetide.conf", "pg_hba.conf", "postgresql.conf"):
                os.chown(self.data_dir / name, owner.pw_uid, owner.pw_gid)

    def _pg_ctl(self, *args: str) -> None:
        self._run([find_pg_program("pg_ctl"), "-D", str(self.data_dir), *args], "pg_ctl")

    def _postmaster_pid(self) -> int | None:
        path = self.data_dir / "postmaster.pid"
        try:
            return int(path.read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def _terminate(self, timeout: float = 30.0) -> None:
        self._started = False
        pid = self._postmaster_pid()
        if pid is None or not self.running:
            return
        try:
            self._pg_ctl("stop", "-m", "fast", "-w", "-t", str(int(timeout)))
            return
        except LocalServerError:
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            return
        deadline = time.monotonic() + timeout
        while self.running and time.monotonic() < deadline:
            time.sleep(0.1)

    def _wait_ready(self) -> None:
        self._wait_until_it_connects(
            "postgres",
            lambda: self.connect(connect_timeout=2),
            psycopg2.OperationalError,
            self.server_log,
        )
