"""A PostgreSQL table's column types as capture sees them, read from the catalog.

Capture learns a column's type from pgoutput's Relation message and resolves it with
the catalog (domains by their base type, arrays by their element, enums by label). The
reads that happen outside the log — the bootstrap's copy and ``icetide verify``'s
checksums — must resolve types the same way to write and compare the same values; this
module is that one resolution for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icetide.sources.postgres_types import ENUM, PgType, builtin_type, is_json_array

SESSION_SETTINGS = (
    ("DateStyle", "ISO"),
    ("TimeZone", "UTC"),
    ("IntervalStyle", "iso_8601"),
    ("bytea_output", "hex"),
    ("extra_float_digits", "1"),
)
"""The settings capture's replication session pins (they shape every value's text);
a session that renders values as text for comparison with capture pins the same."""

SOURCE_VALUES: dict[tuple[str, str], str] = {
    # ZonedTime: the time of day in UTC, as capture writes it (without the offset).
    ("time", "timetz"): "((({c}) AT TIME ZONE 'UTC')::time)",
    # MicroDuration: months count 30.4375 days, as capture (and Debezium) counts them.
    ("long", "interval"): (
        "((extract(year FROM {c}) * 12 + extract(month FROM {c}))::bigint * 2629800000000 "
        "+ extract(day FROM {c})::bigint * 86400000000 + (extract(hour FROM {c}) * 3600000000 "
        "+ extract(minute FROM {c}) * 60000000 + extract(microseconds FROM {c}))::bigint)"
    ),
    # A real declared double holds the double of the real's shortest text, as capture
    # parses it (not the real widened, which has binary noise).
    ("double", "float4"): "((({c})::text)::float8)",
}
"""(icetide type, PostgreSQL base type name) → SQL (``{c}``: the quoted column) for the
value capture sends when it is not the column's plain value: what the bootstrap reads
and ``icetide verify`` compares for such columns."""

_COLUMNS = """
SELECT a.attname, a.atttypid, coalesce(b.typname, t.typname),
       coalesce(b.typcategory, t.typcategory) = 'A'
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type b ON t.typtype = 'd' AND b.oid = t.typbasetype
WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""
_TYPE = """
SELECT t.typname, t.typtype, t.typbasetype, t.typelem, t.typcategory,
       ARRAY(SELECT e.enumlabel::text FROM pg_enum e WHERE e.enumtypid = t.oid
             ORDER BY e.enumsortorder)
FROM pg_type t WHERE t.oid = %s
"""


@dataclass(frozen=True)
class SourceColumn:
    """A column's PostgreSQL type: the catalog's name of its base type (``int4``,
    ``timetz``, ``_text`` …; domains by their base type), whether it is an array, and
    the type as capture resolves it (``None`` when not looked up)."""

    type_name: str
    is_array: bool = False
    pg_type: PgType | None = None

    @property
    def json_array(self) -> bool:
        """Whether capture sends the values as JSON arrays (elements of a known type)."""
        return self.pg_type is not None and is_json_array(self.pg_type)


def resolve_type(conn: Any, oid: int, depth: int = 0) -> PgType:
    """The :class:`PgType` of ``oid`` exactly as capture's reader resolves it."""
    known = builtin_type(oid)
    if known is not None:
        return known
    with conn.cursor() as cur:
        cur.execute(_TYPE, (oid,))
        row = cur.fetchone()
    if row is None or depth > 5:
        return PgType(oid)
    name, typtype, base, element, category, labels = row
    if typtype == "e":
        return PgType(ENUM, str(name), enum_values=tuple(labels or ()))
    if typtype == "d" and base:
        inner = resolve_type(conn, int(base), depth + 1)
        return PgType(inner.oid, str(name), inner.element, inner.enum_values)
    if category == "A" and element:
        return PgType(oid, str(name), resolve_type(conn, int(element), depth + 1))
    return PgType(oid, str(name))


def source_columns(conn: Any, schema: str, table: str) -> dict[str, SourceColumn]:
    """Column name → :class:`SourceColumn` of ``schema.table`` (empty: no such table)."""
    with conn.cursor() as cur:
        cur.execute(_COLUMNS, (schema, table))
        rows = cur.fetchall()
    return {
        str(name): SourceColumn(
            str(type_name), bool(is_array), resolve_type(conn, int(oid)) if is_array else None
        )
        for name, oid, type_name, is_array in rows
    }
