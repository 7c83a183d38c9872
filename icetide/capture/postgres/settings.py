"""Check, before reading a byte, that a PostgreSQL server's changes can be captured.

Logical decoding needs:

=========================  ==============  ==============================================
setting                    must be         why
=========================  ==============  ==============================================
``wal_level``              ``logical``     lower levels leave row data out of the WAL
``max_replication_slots``  more than 0     capture keeps its place in a slot
``max_wal_senders``        more than 0     the change stream is served by a WAL sender
the capture user           REPLICATION     only replication roles may stream changes
                           or superuser
=========================  ==============  ==============================================

All three server settings need a restart. :func:`find_problems` is the pure rule table;
:func:`check_server` reads the settings and raises
:class:`~icetide.capture.errors.ServerSettingsError` listing every one to change, the
``postgresql.conf`` lines and ``ALTER SYSTEM`` statements that do it.
:func:`check_tables` catches the table-level trap: a table without a primary key and
with ``REPLICA IDENTITY DEFAULT`` in a publication makes PostgreSQL *refuse* the
application's UPDATEs and DELETEs on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from icetide.capture.errors import ServerSettingsError
from icetide.sources.quoting import postgres_quote


@dataclass(frozen=True)
class ServerInfo:
    """What capture needs to know about the server it reads."""

    version: str
    version_num: int
    database: str
    user: str
    settings: Mapping[str, str]


@dataclass(frozen=True)
class Problem:
    """One thing to change: what is wrong and the lines that fix it."""

    text: str
    conf: tuple[str, ...] = ()
    """``postgresql.conf`` lines (need a restart)."""
    sql: tuple[str, ...] = ()
    """Statements to run (``ALTER SYSTEM`` needs a restart too; role changes do not)."""
    restart: bool = True


def _positive(value: str | None) -> bool:
    try:
        return value is not None and int(value) > 0
    except ValueError:
        return False


def find_problems(settings: Mapping[str, str | None], *, user: str = "") -> list[Problem]:
    """The requirements ``settings`` break. ``settings`` maps ``wal_level``,
    ``max_replication_slots``, ``max_wal_senders`` and ``rolreplication`` / ``rolsuper``
    (``t``/``f`` for the capture user) to their values.

    >>> good = {"wal_level": "logical", "max_replication_slots": "10",
    ...         "max_wal_senders": "10", "rolreplication": "t", "rolsuper": "f"}
    >>> find_problems(good)
    []
    >>> [p.text for p in find_problems({**good, "wal_level": "replica"})]
    ['wal_level is replica; it must be logical (lower levels leave row data out of the WAL)']
    """
    problems: list[Problem] = []
    level = settings.get("wal_level")
    if (level or "").strip().lower() != "logical":
        problems.append(
            Problem(
                f"wal_level is {level or 'unknown'}; it must be logical (lower levels leave "
                "row data out of the WAL)",
                ("wal_level = logical",),
                ("ALTER SYSTEM SET wal_level = logical;",),
            )
        )
    for name, default in (("max_replication_slots", 10), ("max_wal_senders", 10)):
        value = settings.get(name)
        if not _positive(value):
            why = (
                "capture keeps its place in a replication slot"
                if name == "max_replication_slots"
                else "the change stream is served by a WAL sender process"
            )
            problems.append(
                Problem(
                    f"{name} is {value if value is not None else 'unknown'}; it must be more "
                    f"than 0 ({why})",
                    (f"{name} = {default}",),
                    (f"ALTER SYSTEM SET {name} = {default};",),
                )
            )
    if settings.get("rolreplication") != "t" and settings.get("rolsuper") != "t":
        role = _quote_ident(user) if user else "<capture user>"
        problems.append(
            Problem(
                f"the user {user or '(unknown)'} has neither the REPLICATION attribute nor "
                "superuser (only replication roles may stream changes)",
                sql=(f"ALTER ROLE {role} WITH REPLICATION;",),
                restart=False,
            )
        )
    return problems


def settings_error(problems: Sequence[Problem], where: str = "the server") -> ServerSettingsError:
    """The error that lists ``problems`` and the lines that fix them."""
    conf = [line for p in problems for line in p.conf]
    sql = [line for p in problems for line in p.sql]
    count = len(problems)
    parts = [
        f"cannot capture from {where}: {count} setting{'s' if count > 1 else ''} must change",
        *(f"  - {p.text}" for p in problems),
    ]
    if conf:
        parts.append("  set in postgresql.conf (or run the ALTER SYSTEM statements below):")
        parts += [f"      {line}" for line in conf]
    if sql:
        parts.append("  as a superuser, run:")
        parts += [f"      {line}" for line in sql]
    restart = any(p.restart for p in problems)
    if restart:
        parts.append("  then restart PostgreSQL: these settings only take effect at server start")
    hint = (
        "restart the server after changing the settings (e.g. `pg_ctlcluster <version> "
        "<cluster> restart` or `systemctl restart postgresql`), then run `icetide capture` "
        "again"
        if restart
        else "then run `icetide capture` again"
    )
    fix = conf + sql
    return ServerSettingsError(
        "\n".join(parts), problems=[p.text for p in problems], fix=fix, hint=hint
    )


def _quote_ident(name: str) -> str:
    """``name`` as people write it in SQL: bare when PostgreSQL would fold it to itself."""
    if name.isidentifier() and name == name.lower():
        return name
    return postgres_quote(name)


_QUERY = """
SELECT current_setting('server_version'), current_setting('server_version_num')::int,
       current_database(), current_user,
       current_setting('wal_level'), current_setting('max_replication_slots'),
       current_setting('max_wal_senders'),
       r.rolreplication, r.rolsuper
FROM pg_roles r WHERE r.rolname = current_user
"""


def read_settings(conn: Any) -> ServerInfo:
    """The settings and role attributes capture looks at (a plain psycopg2 connection)."""
    with conn.cursor() as cur:
        cur.execute(_QUERY)
        row = cur.fetchone()
    version, number, database, user, level, slots, senders, replication, superuser = row
    return ServerInfo(
        str(version),
        int(number),
        str(database),
        str(user),
        {
            "wal_level": str(level),
            "max_replication_slots": str(slots),
            "max_wal_senders": str(senders),
            "rolreplication": "t" if replication else "f",
            "rolsuper": "t" if superuser else "f",
        },
    )


def check_server(conn: Any, where: str = "the server") -> ServerInfo:
    """Read the server's settings; raise ``ServerSettingsError`` listing every wrong one."""
    info = read_settings(conn)
    problems = find_problems(info.settings, user=info.user)
    if problems:
        raise settings_error(problems, where)
    return info


def table_problems(tables: Sequence[tuple[str, str, str, bool]]) -> list[Problem]:
    """Tables that cannot be captured as they are, from ``(schema, table,
    relreplident, has_primary_key)`` rows.

    >>> [p.sql for p in table_problems([("public", "log", "d", False)])]
    [('ALTER TABLE public.log REPLICA IDENTITY FULL;',)]
    """
    problems = []
    for schema, table, identity, has_key in tables:
        name = f"{_quote_ident(schema)}.{_quote_ident(table)}"
        if identity == "n" or (identity == "d" and not has_key):
            problems.append(
                Problem(
                    f"table {schema}.{table} has no primary key and REPLICA IDENTITY "
                    f"{'NOTHING' if identity == 'n' else 'DEFAULT'}: once it is published, "
                    "PostgreSQL rejects UPDATE and DELETE on it, and capture could not say "
                    "which row changed",
                    sql=(f"ALTER TABLE {name} REPLICA IDENTITY FULL;",),
                    restart=False,
                )
            )
    return problems


_TABLES_QUERY = """
SELECT n.nspname, c.relname, c.relreplident,
       EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE (n.nspname, c.relname) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
"""


def check_tables(
    conn: Any, tables: Sequence[tuple[str, str]], where: str = "the server"
) -> set[tuple[str, str]]:
    """Check the captured tables (``(schema, table)`` pairs); raise
    ``ServerSettingsError`` for one that would break the application once published.
    Returns the pairs that exist."""
    with conn.cursor() as cur:
        cur.execute(_TABLES_QUERY, ([s for s, _ in tables], [t for _, t in tables]))
        rows = [(str(s), str(t), str(r), bool(k)) for s, t, r, k in cur.fetchall()]
    problems = table_problems(rows)
    if problems:
        raise settings_error(problems, where)
    return {(s, t) for s, t, _, _ in rows}
