"""A table's schema as its source database's catalog shows it now, with defaults: what
``icetide schema plan --from information_schema`` compares against the schema file.

MySQL/MariaDB: ``information_schema.COLUMNS`` (``COLUMN_TYPE``, ``IS_NULLABLE``,
``COLUMN_KEY``, ``COLUMN_DEFAULT``; MariaDB writes a text default quoted, which is how it
is read); PostgreSQL: ``pg_attribute`` with ``format_type``, ``pg_get_expr`` of the
default and the primary-key index's column order. Types map through the converters in
:mod:`icetide.schema.convert` and defaults through
:func:`icetide.schema.defaults.default_from_source`, as inference does. The ids are
meaningless until :func:`icetide.evolution.classify.candidate_schema` matches them.

**Declared types.** A schema file may declare a column as another type than inference
reads, when that type holds the source type's values too: MySQL's ``TINYINT(1)`` as
``boolean``, ``CHAR(36)`` as ``uuid``, an enum as an icetide ``enum`` holding its labels.
Given the schema file's columns (``declared``), a column keeps its declared type while
the converter still :func:`accepts <icetide.schema.convert.mysql.accepts>` it for the
source type. So change detection, ``schema plan`` and ``onboard`` compare the source's
shape with what the file means, not with one spelling of it: an untouched ``TINYINT(1)``
declared ``boolean`` is no ``boolean → int`` change, while ``MODIFY vip INT`` (which
``boolean`` does not fit) is. Why this and not a comparison with the source's previous
catalog: the schema file records no source types, only icetide types, so "what the
source said last time" does not exist for tables onboarded before; which declarations
fit a source type is a fact about the type, kept once in its converter.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from icetide.config.sections import SourceConfig
from icetide.config.tables import TableConfig
from icetide.errors import SchemaError
from icetide.schema.convert import mysql as mysql_types
from icetide.schema.convert import postgres as pg_types
from icetide.schema.infer import infer_table_schema
from icetide.schema.model import TableSchema
from icetide.schema.types import IcetideType

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
SELECT a.attname,
       -- A domain by its base type: the values capture and Debezium send are the base's
       -- (an array of a domain's elements too).
       CASE WHEN t.typtype = 'd' THEN format_type(t.typbasetype, t.typtypmod)
            WHEN et.typtype = 'd' THEN format_type(et.typbasetype, et.typtypmod) || '[]'
            ELSE format_type(a.atttypid, a.atttypmod) END,
       NOT a.attnotnull,
       array_position(i.indkey::int2[], a.attnum) IS NOT NULL,
       pg_get_expr(d.adbin, d.adrelid),
       -- An enum, or an array of one (sent as a JSON array of labels).
       t.typtype = 'e' OR COALESCE(et.typtype = 'e', false),
       array_position(i.indkey::int2[], a.attnum),
       CASE WHEN t.typtype = 'e' THEN ARRAY(
           SELECT e.enumlabel::text FROM pg_enum e
           WHERE e.enumtypid = t.oid ORDER BY e.enumsortorder) END,
       a.attndims
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type et ON t.typcategory = 'A' AND et.oid = t.typelem
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""


@dataclass(frozen=True)
class CatalogColumn:
    """One source column as the catalog describes it (what inference reads); ``labels``:
    a PostgreSQL enum's labels (a MySQL enum's are in ``type_text``)."""

    name: str
    type_text: str
    nullable: bool
    primary: bool
    default: str | None
    dialect: Literal["mysql", "postgres"]
    enum: bool = False
    labels: tuple[str, ...] = ()
    dims: int = 0
    """A PostgreSQL array column's declared dimensions (``attndims``; 0: not said)."""

    def mapped(self, declared: IcetideType | None = None) -> tuple[IcetideType, str | None]:
        """The icetide type (and Debezium logical name) of the column: ``declared`` when
        its converter accepts that for the source type (see the module doc), else the
        type inference reads."""
        if self.dialect == "mysql":
            ctype, hint = mysql_types.icetide_type(self.type_text)
            fits = declared is not None and mysql_types.accepts(self.type_text, declared)
        else:
            ctype, hint = pg_types.icetide_type(self.type_text, enum=self.enum, dims=self.dims)
            fits = declared is not None and pg_types.accepts(
                self.type_text, declared, enum=self.enum, labels=self.labels
            )
        if fits and declared is not None:
            return declared, hint
        return ctype, hint


@dataclass(frozen=True)
class Catalog:
    """What a source's catalog says of one table: its columns in order and primary key."""

    columns: tuple[CatalogColumn, ...]
    key: tuple[str, ...]


class KeylessTable(SchemaError):
    """The source table has no primary key and the config names none: nothing identifies
    a row, so the table cannot be mirrored (said as it is, not as the schema check would
    say it of the inferred schema)."""


def read_source_schema(
    source: SourceConfig,
    table: TableConfig,
    declared: TableSchema | None = None,
    retype: Collection[str] = (),
) -> TableSchema:
    """``table``'s current columns at ``source`` as a :class:`TableSchema`, keeping the
    types of ``declared`` (the schema file) that still fit (see module doc) except for the
    columns named in ``retype``; :class:`SchemaError` when the catalog does not know the
    table."""
    return schema_from_catalog(table, read_catalog(source, table), declared, retype)


def read_catalog(source: SourceConfig, table: TableConfig) -> Catalog:
    """``table``'s columns and key as ``source``'s catalog describes them now;
    :class:`SchemaError` when it does not know the table."""
    if source.type == "mysql":
        columns, key = _mysql(source, table.source)
    else:
        columns, key = _postgres(source, table.source)
    if not columns:
        raise SchemaError(
            f"table {table.name}: source {source.name} has no table {table.source}",
            hint="check the table's source: in the config",
        )
    return Catalog(tuple(columns), key)


def schema_from_catalog(
    table: TableConfig,
    catalog: Catalog,
    declared: TableSchema | None = None,
    retype: Collection[str] = (),
) -> TableSchema:
    """The :class:`TableSchema` of a catalog's columns (ids 1..n), each column of the type
    :meth:`CatalogColumn.mapped` gives it against ``declared``'s column of the same name
    (case-insensitive, as :func:`~icetide.evolution.classify.candidate_schema` matches).
    A column named in ``retype`` gets the type its source type maps to now, whatever it
    is declared as (``icetide schema plan --retype``: a PostgreSQL array declared ``json``
    becomes a list, a held type change)."""
    fresh = {name.casefold() for name in retype}
    by_name = (
        {c.name.casefold(): c.type for c in declared.columns if c.name.casefold() not in fresh}
        if declared
        else {}
    )

    def type_of(column: CatalogColumn) -> tuple[IcetideType, str | None]:
        return column.mapped(by_name.get(column.name.casefold()))

    if not catalog.key and not table.primary_key:
        raise KeylessTable(
            f"the source table {table.source} has no primary key",
            hint="give it a primary key at the source, or name the columns that identify "
            f"a row in the config (tables[{table.name}].primary_key)",
        )

    return infer_table_schema(
        table.name, catalog.columns, type_of, table.primary_key or catalog.key
    )


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
        CatalogColumn(
            r[0],
            str(r[1]),
            bool(r[2]),
            bool(r[3]),
            r[4],
            "postgres",
            bool(r[5]),
            tuple(r[7] or ()),
            int(r[8] or 0),
        )
        for r in rows
    ]
    # int2vector subscripts start at 0: the key's first column is at 0, not 1
    key = tuple(r[0] for r in sorted((r for r in rows if r[6] is not None), key=lambda r: r[6]))
    return columns, key
