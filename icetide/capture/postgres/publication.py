"""The publication naming the tables capture reads, and the table names in it.

pgoutput sends the changes of a publication's tables only, so capture ensures one that
lists every captured table before it streams (and before a bootstrap's snapshot, so no
change after the slot's consistent point is left out).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from psycopg2 import sql

from icetide.capture.errors import CaptureError, ServerSettingsError
from icetide.capture.postgres.settings import check_tables


def split_table(name: str) -> tuple[str, str]:
    """``schema.table`` (or ``table`` in ``public``, or ``db.schema.table``) → pair.

    >>> split_table("shop.orders"), split_table("orders"), split_table('db."Sales".x')
    (('shop', 'orders'), ('public', 'orders'), ('Sales', 'x'))
    """
    parts = [p.strip().strip('"') for p in name.strip().split(".")]
    if not all(parts) or not 1 <= len(parts) <= 3:
        raise CaptureError(
            f"table {name!r} must be written schema.table", hint="e.g. public.customers"
        )
    return ("public", parts[0]) if len(parts) == 1 else (parts[-2], parts[-1])


def require_tables(ctl: Any, pairs: Sequence[tuple[str, str]], where: str) -> None:
    """Refuse tables that do not exist at ``where`` (``host:port/database``), naming them;
    :func:`~icetide.capture.postgres.settings.check_tables` refuses those PostgreSQL
    would not let capture read."""
    found = check_tables(ctl, pairs, f"the server at {where}")
    missing = [f"{s}.{t}" for s, t in pairs if (s, t) not in found]
    if missing:
        raise CaptureError(
            f"table{'s' if len(missing) > 1 else ''} {', '.join(missing)} not found at {where}",
            hint="check the table names (schema.table) and the database in the connection",
        )


def ensure_publication(
    conn: Any, publication: str, tables: Iterable[str | tuple[str, str]]
) -> None:
    """Create ``publication`` for ``tables``, or add the ones it lacks (idempotent).

    A new publication publishes partitions' changes under their partitioned table
    (``publish_via_partition_root``), so capturing a partitioned table by its own name
    works. ``conn`` is an autocommit psycopg2 connection by a user owning the tables.
    """
    wanted = sorted({split_table(t) if isinstance(t, str) else t for t in tables})
    names = sql.SQL(", ").join(sql.Identifier(s, t) for s, t in wanted)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT puballtables, pubviaroot FROM pg_publication WHERE pubname = %s",
            (publication,),
        )
        row = cur.fetchone()
        if row is None:
            cur.execute(
                sql.SQL(
                    "CREATE PUBLICATION {} FOR TABLE {} WITH (publish_via_partition_root = true)"
                ).format(sql.Identifier(publication), names)
            )
            return
        all_tables, via_root = row
        if not via_root:
            _refuse_partitioned(cur, publication, wanted)
        if all_tables:
            return
        cur.execute(
            "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
            (publication,),
        )
        present = {(str(s), str(t)) for s, t in cur.fetchall()}
        missing = [pair for pair in wanted if pair not in present]
        if missing:
            cur.execute(
                sql.SQL("ALTER PUBLICATION {} ADD TABLE {}").format(
                    sql.Identifier(publication),
                    sql.SQL(", ").join(sql.Identifier(s, t) for s, t in missing),
                )
            )


def _refuse_partitioned(cur: Any, publication: str, wanted: Sequence[tuple[str, str]]) -> None:
    """Without ``publish_via_partition_root`` a partitioned table's changes arrive under
    its partitions' names and would be dropped: say how to fix the publication."""
    cur.execute(
        "SELECT n.nspname, c.relname FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind = 'p' AND (n.nspname, c.relname) IN "
        "(SELECT * FROM unnest(%s::text[], %s::text[]))",
        ([s for s, _ in wanted], [t for _, t in wanted]),
    )
    partitioned = [f"{s}.{t}" for s, t in cur.fetchall()]
    if partitioned:
        quoted = sql.Identifier(publication).as_string(cur)
        raise ServerSettingsError(
            f"publication {publication} sends the changes of partitioned "
            f"table{'s' if len(partitioned) > 1 else ''} {', '.join(partitioned)} under "
            "the partitions' names, so capture would not see them",
            problems=[f"publication {publication} has publish_via_partition_root = false"],
            fix=[f"ALTER PUBLICATION {quoted} SET (publish_via_partition_root = true);"],
            hint="run the statement above as the publication's owner, then capture again",
        )
