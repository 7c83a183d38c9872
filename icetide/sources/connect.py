"""Reaching a source database: its settings in each driver's form, and opening a connection.

Capture, bootstrap, verify and status all reach the source database. They take their
connection keywords from here, so a source is described once (in ``sources:``), and they
open connections here, so "cannot connect" reads the same everywhere: one
:class:`~icetide.sources.errors.SourceUnavailableError` saying which server, the
driver's reason, and what to check. Errors *after* connecting (a query that fails, a
lost stream) are the caller's to word: only it knows what it was doing.

The drivers are imported when a connection is opened: they are optional dependencies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from icetide.config.sections import SourceConfig
from icetide.sources.errors import SourceUnavailableError

CONNECT_TIMEOUT = 10
"""Seconds a connection to a configured source may take before it counts as failed."""

MYSQL_HINT = "check host, port, user and password, and that the server runs"
"""What to check when a MySQL/MariaDB server given by bare settings cannot be reached."""
POSTGRES_HINT = (
    "check host, port, user, password and database, that the server runs, and "
    "that pg_hba.conf admits this user (replication connections too)"
)
"""What to check when a PostgreSQL server given by a bare DSN cannot be reached."""


# -- settings ------------------------------------------------------------------------------


def mysql_settings(source: SourceConfig, database: str | None = None) -> dict[str, Any]:
    """pymysql / python-mysql-replication keywords (host, port, user, password)."""
    settings: dict[str, Any] = {
        "host": str(source.host),
        "port": source.resolved_port,
        "user": str(source.user),
        "password": str(source.password or ""),
    }
    if database or source.database:
        settings["database"] = str(database or source.database)
    return settings


def postgres_dsn(source: SourceConfig) -> str:
    """A libpq connection string for psycopg2 (``dbname`` is ``database``).

    >>> from icetide.config.sections import SourceConfig
    >>> source = SourceConfig(name="app", type="postgres", host="db", user="o'neil")
    >>> postgres_dsn(source)
    "host='db' port='5432' user='o\\\\'neil' dbname='postgres'"
    """
    parts = {
        "host": str(source.host),
        "port": str(source.resolved_port),
        "user": str(source.user),
        "dbname": str(source.database or "postgres"),
    }
    if source.password:
        parts["password"] = str(source.password)
    return " ".join(f"{k}='{_libpq_escape(v)}'" for k, v in parts.items())


def jdbc_url(source: SourceConfig, database: str | None = None) -> str:
    """The JDBC URL Spark's JDBC source uses for bootstrap reads."""
    db = database or source.database or ""
    if source.type == "mysql":
        # The jdbc:mysql scheme makes Spark pick its MySQL dialect (backtick quoting);
        # MariaDB Connector/J 2.x, Debian's driver, accepts it, and 3.x (fetched from
        # Maven) with permitMysqlScheme.
        return f"jdbc:mysql://{source.host}:{source.resolved_port}/{db}?permitMysqlScheme"
    return f"jdbc:postgresql://{source.host}:{source.resolved_port}/{db or 'postgres'}"


def describe(source: SourceConfig) -> str:
    """The source as messages name it.

    >>> from icetide.config.sections import SourceConfig
    >>> describe(SourceConfig(name="shop", type="mysql", host="db", user="u", server_id=7))
    "source 'shop' (mysql at db:3306)"
    """
    return f"source {source.name!r} ({source.type} at {source.host}:{source.resolved_port})"


def source_hint(source: SourceConfig) -> str:
    """What to check when a configured source cannot be reached."""
    return (
        f"check host, port, user and password of source {source.name!r} in sources: "
        "and that the database is running"
    )


def _libpq_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


# -- connections ---------------------------------------------------------------------------


def open_mysql(
    settings: Mapping[str, Any], *, where: str | None = None, hint: str | None = None
) -> Any:
    """A pymysql connection made with ``settings`` (``pymysql.connect``'s keywords).

    ``where`` and ``hint`` word the failure; by default the server is named by its
    address and the hint is :data:`MYSQL_HINT`.
    """
    import pymysql

    try:
        return pymysql.connect(**settings)
    except pymysql.err.MySQLError as exc:
        host = settings.get("host") or settings.get("unix_socket") or "?"
        port = settings.get("port")
        address = f"{host}:{port}" if port else str(host)
        raise _unavailable(
            where or f"the MySQL/MariaDB server at {address}", exc, hint or MYSQL_HINT
        ) from exc


def open_postgres(
    dsn: str | Mapping[str, Any],
    *,
    where: str | None = None,
    hint: str | None = None,
    **options: Any,
) -> Any:
    """A psycopg2 connection to ``dsn`` (a libpq string or its keywords); ``options``
    go to ``psycopg2.connect`` (``connect_timeout``, ``connection_factory`` …).

    ``where`` and ``hint`` word the failure; by default the server is named by its
    address and database and the hint is :data:`POSTGRES_HINT`.
    """
    import psycopg2
    import psycopg2.extensions

    text = dsn if isinstance(dsn, str) else _make_dsn(dsn)
    try:
        return psycopg2.connect(text, **options)
    except psycopg2.OperationalError as exc:
        if where is None:
            params = psycopg2.extensions.parse_dsn(text)
            host, port = params.get("host") or "localhost", params.get("port") or "5432"
            database = params.get("dbname") or params.get("user") or ""
            where = f"the PostgreSQL server at {host}:{port}/{database}"
        raise _unavailable(where, exc, hint or POSTGRES_HINT) from exc


def connect_mysql(source: SourceConfig, **settings: Any) -> Any:
    """A pymysql connection to the configured MySQL/MariaDB ``source``; ``settings``
    add to or replace its keywords (``autocommit=True``, ``database=None`` …)."""
    merged = {**mysql_settings(source), "connect_timeout": CONNECT_TIMEOUT, **settings}
    return open_mysql(merged, where=describe(source), hint=source_hint(source))


def connect_postgres(source: SourceConfig, **options: Any) -> Any:
    """A psycopg2 connection to the configured PostgreSQL ``source``; ``options`` go to
    ``psycopg2.connect``."""
    return open_postgres(
        postgres_dsn(source),
        where=describe(source),
        hint=source_hint(source),
        **{"connect_timeout": CONNECT_TIMEOUT, **options},
    )


def _make_dsn(params: Mapping[str, Any]) -> str:
    import psycopg2.extensions

    return psycopg2.extensions.make_dsn(**{k: str(v) for k, v in params.items() if v is not None})


def _unavailable(where: str, exc: Exception, hint: str) -> SourceUnavailableError:
    """The one wording of a failed connection."""
    detail = str(exc).strip()
    return SourceUnavailableError(
        f"cannot connect to {where}: {detail}", where=where, detail=detail, hint=hint
    )
