"""A first schema for a source table, inferred from its columns: written once for every
source system, which only says how one of its column types maps to an icetide type.

A source column may also carry its catalog ``DEFAULT`` (``information_schema.COLUMNS.
COLUMN_DEFAULT`` on MySQL/MariaDB, ``pg_get_expr(adbin, adrelid)`` on PostgreSQL) as
``default`` text and the dialect it is written in as ``dialect``; the inferred column then
carries it as a typed :class:`~icetide.schema.types.ColumnDefault`
(:func:`icetide.schema.defaults.default_from_source`). Readers without them (the binlog's
table map) infer columns without defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from icetide.schema.defaults import Dialect, default_from_source
from icetide.schema.model import SinkSettings, TableSchema
from icetide.schema.types import Column, IcetideType, parse_type


class SourceColumn(Protocol):
    """What inference reads of a source column (both readers' ``ColumnInfo`` have it)."""

    @property
    def name(self) -> str: ...
    @property
    def nullable(self) -> bool: ...
    @property
    def primary(self) -> bool: ...


C = TypeVar("C", bound=SourceColumn)
TypeMapping = Callable[[C], tuple[IcetideType | str, str | None]]
"""A source column → (icetide type, or its text; Debezium logical type name or ``None``)."""


def infer_table_schema(
    table: str,
    columns: Sequence[C],
    type_of: TypeMapping[C],
    primary_key: Sequence[str] = (),
) -> TableSchema:
    """A first icetide schema for a table (ids 1..n in column order).

    The primary key is ``primary_key`` or, when empty, the columns marked ``primary``; key
    columns are not null. The logical names go to the sink settings, not the columns.
    """
    key = tuple(primary_key) or tuple(c.name for c in columns if c.primary)
    built = []
    logical: dict[int, str] = {}
    for number, info in enumerate(columns, start=1):
        type_name, hint = type_of(info)
        ctype = type_name if isinstance(type_name, IcetideType) else parse_type(type_name)
        default_text = getattr(info, "default", None)
        dialect: Dialect = "postgres" if getattr(info, "dialect", None) == "postgres" else "mysql"
        built.append(
            Column(
                id=number,
                name=info.name,
                type=ctype,
                nullable=info.nullable and info.name not in key,
                default=None
                if default_text is None or ctype.is_nested
                else default_from_source(ctype, default_text, dialect),
            )
        )
        if hint:
            logical[number] = hint
    return TableSchema(table, tuple(built), key, sink=SinkSettings(logical))
