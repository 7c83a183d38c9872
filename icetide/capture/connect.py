"""Connection settings for a configured source, in the one form each driver takes.

Capture, bootstrap and verify all reach the source database; they take their
connection keywords from here so a source is described once, in ``sources:``.
"""

from __future__ import annotations

from typing import Any

from icetide.config.model import SourceConfig


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
    """A libpq connection string for psycopg2 (``dbname`` is ``database``)."""
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
        # MariaDB Connector/J 2.x, Debian's driver, accepts it.
        return f"jdbc:mysql://{source.host}:{source.resolved_port}/{db}"
    return f"jdbc:postgresql://{source.host}:{source.resolved_port}/{db or 'postgres'}"


def _libpq_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")
