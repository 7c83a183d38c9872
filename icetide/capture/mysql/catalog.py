"""A MySQL/MariaDB table's columns and primary key read from ``information_schema``.

``icetide onboard`` writes a table's first schema file from here. The type of each
column is read from ``COLUMNS.COLUMN_TYPE``, the same SQL text capture rebuilds from a
binlog table map, and mapped by the one converter
(:func:`icetide.schema.convert.mysql.icetide_type`), so the schema file holds the types
capture's events carry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from icetide.schema import infer
from icetide.schema.convert import mysql
from icetide.schema.model import TableSchema

_COLUMNS = """
SELECT c.COLUMN_NAME, c.COLUMN_TYPE, c.IS_NULLABLE = 'YES'
FROM information_schema.COLUMNS c
WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s
ORDER BY c.ORDINAL_POSITION
"""
_KEY = """
SELECT k.COLUMN_NAME
FROM information_schema.KEY_COLUMN_USAGE k
WHERE k.TABLE_SCHEMA = %s AND k.TABLE_NAME = %s AND k.CONSTRAINT_NAME = 'PRIMARY'
ORDER BY k.ORDINAL_POSITION
"""


@dataclass(frozen=True)
class CatalogColumn:
    """One column as ``information_schema.COLUMNS`` describes it."""

    name: str
    column_type: str
    nullable: bool
    primary: bool


def table_columns(conn: Any, database: str, table: str) -> tuple[list[CatalogColumn], list[str]]:
    """The columns of ``database.table`` in order, and its primary key in key order
    (empty lists: no such table)."""
    with conn.cursor() as cur:
        cur.execute(_KEY, (database, table))
        key = [str(r[0]) for r in cur.fetchall()]
        cur.execute(_COLUMNS, (database, table))
        rows = cur.fetchall()
    columns = [
        CatalogColumn(str(name), _text(ctype), bool(nullable), str(name) in key)
        for name, ctype, nullable in rows
    ]
    return columns, key


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)


def _type_of(column: CatalogColumn) -> tuple[str, str | None]:
    ctype, logical = mysql.icetide_type(column.column_type)
    return str(ctype), logical


def infer_schema(
    table: str, columns: Sequence[CatalogColumn], primary_key: Sequence[str]
) -> TableSchema:
    """The first schema of a table from its catalog columns (ids 1..n in order)."""
    return infer.infer_table_schema(table, columns, _type_of, primary_key)
