"""Connections capture opens to a PostgreSQL server, with the session settings it needs.

pgoutput writes values as text shaped by session settings (``DateStyle``,
``IntervalStyle``, ``extra_float_digits`` …); :mod:`~icetide.sources.postgres_types`
parses exactly the forms :data:`~icetide.sources.postgres_catalog.SESSION_SETTINGS`
gives, so every capture connection (control and replication) carries them in its
``options``. Opening goes through :func:`icetide.sources.connect.open_postgres`, the
one wording of "cannot connect".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg2.extensions

from icetide.sources.connect import open_postgres
from icetide.sources.postgres_catalog import SESSION_SETTINGS

Dsn = str | Mapping[str, Any]
"""A libpq connection string, or psycopg2 keywords."""

SESSION_OPTIONS = " ".join(f"-c {name}={value}" for name, value in SESSION_SETTINGS)
"""The ``options`` that set :data:`SESSION_SETTINGS` for a connection."""


def session_dsn(dsn: Dsn) -> str:
    """``dsn`` with :data:`SESSION_OPTIONS` added to its ``options``."""
    params = dict(psycopg2.extensions.parse_dsn(dsn) if isinstance(dsn, str) else dsn)
    params = {k: str(v) for k, v in params.items() if v is not None}
    params["options"] = (params.get("options", "") + " " + SESSION_OPTIONS).strip()
    return psycopg2.extensions.make_dsn(**params)


def _plain_dsn(dsn: Dsn) -> str:
    if isinstance(dsn, str):
        return dsn
    return psycopg2.extensions.make_dsn(**{k: str(v) for k, v in dsn.items() if v is not None})


def where(dsn: Dsn) -> str:
    """``host:port/database`` of the server, for messages.

    >>> where("host=db port=5433 dbname=shop"), where({"user": "app"})
    ('db:5433/shop', 'localhost:5432/app')
    """
    params = psycopg2.extensions.parse_dsn(_plain_dsn(dsn))
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    return f"{host}:{port}/{params.get('dbname') or params.get('user') or ''}"


def connect(dsn: Dsn, **options: Any) -> Any:
    """A psycopg2 connection to ``dsn`` with the session settings; ``options`` go to
    ``psycopg2.connect`` (``connection_factory`` for a replication connection)."""
    return open_postgres(
        session_dsn(dsn), where=f"the PostgreSQL server at {where(dsn)}", **options
    )


def control(dsn: Dsn) -> Any:
    """An autocommit connection for catalog queries and slot management."""
    conn = connect(dsn)
    conn.autocommit = True
    return conn
