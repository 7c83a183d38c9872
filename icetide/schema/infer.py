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

from icetide.schema.convert import NextId, ids_from
from icetide.schema.defaults import Dialect, default_from_source
from icetide.schema.model import SinkSettings, TableSchema
from icetide.schema.types import Column, IcetideType, ListType, MapType, StructType, parse_type


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
    """A first icetide schema for a table (ids 1..n in column order, then the ids of what
    nested types hold: a list's element, in column order, depth first).

    The primary key is ``primary_key`` or, when empty, the columns marked ``primary``; key
    columns are not null. The logical names go to the sink settings, not the columns.
    """
    key = tuple(primary_key) or tuple(c.name for c in columns if c.primary)
    built = []
    logical: dict[int, str] = {}
    nested_ids = ids_from(len(columns) + 1)
    for number, info in enumerate(columns, start=1):
        type_name, hint = type_of(info)
        ctype = type_name if isinstance(type_name, IcetideType) else parse_type(type_name)
        ctype = numbered(ctype, nested_ids)
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


def numbered(ctype: IcetideType, next_id: NextId) -> IcetideType:
    """``ctype`` with fresh ids from ``next_id`` for everything it holds (a source
    converter's ids are placeholders until the table places them).

    >>> from icetide.schema.types import IntType
    >>> numbered(ListType(1, ListType(2, IntType())), ids_from(8))
    ListType(element_id=8, element=ListType(element_id=9, element=IntType(), \
element_nullable=True), element_nullable=True)
    """
    if isinstance(ctype, ListType):
        return ListType(next_id(), numbered(ctype.element, next_id), ctype.element_nullable)
    if isinstance(ctype, MapType):
        key_id, value_id = next_id(), next_id()
        return MapType(
            key_id,
            numbered(ctype.key, next_id),
            value_id,
            numbered(ctype.value, next_id),
            ctype.value_nullable,
        )
    if isinstance(ctype, StructType):
        ids = [next_id() for _ in ctype.fields]
        return StructType(
            tuple(
                Column(i, f.name, numbered(f.type, next_id), f.nullable, f.doc, f.default, f.tags)
                for i, f in zip(ids, ctype.fields, strict=True)
            )
        )
    return ctype
