"""A table's schema as its source database's catalog shows it now, with defaults: what
``icetide schema plan --from information_schema`` compares against the schema file.

MySQL/MariaDB: ``information_schema.COLUMNS`` (``COLUMN_TYPE``, ``IS_NULLABLE``,
``COLUMN_KEY``, ``COLUMN_DEFAULT``; MariaDB writes a text default quoted, which is how it
is read); PostgreSQL: ``pg_attribute`` with ``format_type``, ``pg_get_expr`` of the
default and the primary-key index's column order. Types map through the converters in
:mod:`icetide.schema.convert` and defaults through
:func:`icetide.schema.defaults.default_from_source`, as inference does. The ids are
meaningless until :func:`icetide.evolution.classify.candidate_schema` matches them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from icetide.config.model import SourceConfig, TableConfig
from icetide.errors import SchemaError
from icetide.schema.convert import mysql as mysql_types
from icetide.schema.convert import postgres as pg_types
from icetide.schema.infer import infer_table_schema
from icetide.schema.model import TableSchema

_MYSQL = """
SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE = 'YES', COLUMN_KEY = 'PRI', COLUMN_DEFAULT
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s
ORDER BY ORDINAL_POSITION
"""
_MYSQL_KEY = """
SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE
WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY'
ORDER BY ORDINAL_POSITION
"""
_POSTGRES = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,
       array_position(i.indkey::int2[], a.attnum) IS NOT NULL,
       pg_get_expr(d.adbin, d.adrelid), t.typtype = 'e',
       array_position(i.indkey::int2[], a.attnum)
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""


@dataclass(frozen=True)
class CatalogColumn:
    """One source column as the catalog describes it (what inference reads)."""

    name: str
    type_text: str
    nullable: bool
    primary: bool
    default: str | None
    dialect: Literal["mysql", "postgres"]
    enum: bool = False


def read_source_schema(source: SourceConfig, table: TableConfig) -> TableSchema:
    """``table``'s current columns at ``source`` as a :class:`TableSchema` (see module
    doc); :class:`SchemaError` when the catalog does not know the table."""
    if source.type == "mysql":
        columns, key = _mysql(source, table.source)
    else:
        columns, key = _postgres(source, table.source)
    if not columns:
        raise SchemaError(
            f"table {table.name}: source {source.name} has no table {table.source}",
            hint="check the table's source: in the config",
        )

    def type_of(column: CatalogColumn) -> tuple[str, str | None]:
        if column.dialect == "mysql":
            mapped, hint = mysql_types.icetide_type(column.type_text)
        else:
            mapped, hint = pg_types.icetide_type(column.type_text, enum=column.enum)
        return str(mapped), hint

    return infer_table_schema(table.name, columns, type_of, table.primary_key or key)


def _split(name: str, default: str | None) -> tuple[str, str]:
    if "." in name:
        first, rest = name.split(".", 1)
        return first, rest
    if default is None:
        raise SchemaError(f"source table {name!r} needs its database or schema: db.table")
    return default, name


def _mysql(source: SourceConfig, name: str) -> tuple[list[CatalogColumn], tuple[str, ...]]:
    from icetide.sources.connect import connect_mysql

    db, table = _split(name, source.database)
    conn = connect_mysql(source, database=None)
    try:
        with conn.cursor() as cur:
            cur.execute(_MYSQL, (db, table))
            rows: list[Any] = list(cur.fetchall())
            cur.execute(_MYSQL_KEY, (db, table))
            key = tuple(r[0] for r in cur.fetchall())
    finally:
        conn.close()
    columns = [CatalogColumn(r[0], str(r[1]), bool(r[2]), bool(r[3]), r[4], "mysql") for r in rows]
    return columns, key


def _postgres(source: SourceConfig, name: str) -> tuple[list[CatalogColumn], tuple[str, ...]]:
    from icetide.sources.connect import connect_postgres

    schema, table = _split(name, "public")
    conn = connect_postgres(source)
    try:
        with conn.cursor() as cur:
            cur.execute(_POSTGRES, (schema, table))
            rows: list[Any] = list(cur.fetchall())
    finally:
        conn.close()
    columns = [
        CatalogColumn(r[0], str(r[1]), bool(r[2]), bool(r[3]), r[4], "postgres", bool(r[5]))
        for r in rows
    ]
    # int2vector subscripts start at 0: the key's first column is at 0, not 1
    key = tuple(r[0] for r in sorted((r for r in rows if r[6] is not None), key=lambda r: r[6]))
    return columns, key
