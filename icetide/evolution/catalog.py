"""A source table's schema as its catalog says now (information_schema on MySQL/MariaDB,
pg_catalog on PostgreSQL): the candidate the change detection compares with the schema
file. Ids are 1..n in column order; matching them to the file's ids is the proposal's
job (:mod:`icetide.evolution.detect`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icetide.config.model import Config, SourceConfig, TableConfig
from icetide.errors import ConfigError
from icetide.schema.convert import mysql as my
from icetide.schema.convert import postgres as pg
from icetide.schema.infer import infer_table_schema
from icetide.schema.model import TableSchema
from icetide.sources.connect import connect_mysql, connect_postgres

_MYSQL = """
SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE = 'YES', COLUMN_KEY = 'PRI', COLUMN_DEFAULT
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s
ORDER BY ORDINAL_POSITION
"""
_POSTGRES = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,
       coalesce(a.attnum = ANY(i.indkey), false), pg_get_expr(d.adbin, d.adrelid),
       coalesce(b.typtype, t.typtype) = 'e'
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type b ON t.typtype = 'd' AND b.oid = t.typbasetype
LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""


@dataclass(frozen=True)
class CatalogColumn:
    """One column as the source catalog describes it."""

    name: str
    type_text: str
    nullable: bool
    primary: bool
    default: str | None
    dialect: str
    enum: bool = False


def capturing_source(config: Config, table: TableConfig) -> SourceConfig:
    """The configured source that captures ``table``."""
    for source in config.sources:
        if table in config.source_tables(source):
            return source
    raise ConfigError(
        f"table {table.name!r}: no source in sources: captures it, so its catalog cannot be read",
        hint="list the table under tables: of its source in sources:",
    )


def _names(source: SourceConfig, table: TableConfig) -> tuple[str, str]:
    parts = str(table.source).split(".")
    if len(parts) >= 2:
        return parts[-2], parts[-1]
    if source.type == "mysql" and source.database:
        return str(source.database), parts[-1]
    return "public", parts[-1]


def catalog_columns(config: Config, table: TableConfig) -> list[CatalogColumn]:
    """The columns of ``table``'s source table, in order (empty: no such table)."""
    source = capturing_source(config, table)
    container, name = _names(source, table)
    if source.type == "mysql":
        conn: Any = connect_mysql(source, autocommit=True)
        query, dialect = _MYSQL, "mysql"
    else:
        conn = connect_postgres(source)
        query, dialect = _POSTGRES, "postgres"
    try:
        with conn.cursor() as cur:
            cur.execute(query, (container, name))
            rows = cur.fetchall()
    finally:
        conn.close()
    return [
        CatalogColumn(
            str(r[0]),
            str(r[1]),
            bool(r[2]),
            bool(r[3]),
            None if r[4] is None else str(r[4]),
            dialect,
            bool(r[5]) if len(r) > 5 else False,
        )
        for r in rows
    ]


def _type_of(column: CatalogColumn) -> tuple[str, str | None]:
    if column.dialect == "mysql":
        ctype, hint = my.icetide_type(column.type_text)
    else:
        ctype, hint = pg.icetide_type(column.type_text, enum=column.enum)
    return str(ctype), hint


def catalog_schema(config: Config, table: str) -> TableSchema | None:
    """The candidate schema of ``table`` from its source catalog; None if it is gone."""
    settings = config.table(table)
    columns = catalog_columns(config, settings)
    if not columns:
        return None
    return infer_table_schema(table, columns, _type_of)
