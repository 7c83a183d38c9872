"""Stable field ids for a view's columns across its versions.

A view's columns come from many tables, whose ids may collide (two tables both have an
id 1), so a view numbers its own: a field keeps the id it had in the view's previous
version when its path (names, case-insensitive, with ``element``/``key``/``value`` for
what a list or map holds) is the same, and anything new gets an id above the highest the
view ever used. The version bump (:mod:`icetide.artifacts.versioning`) then compares two
view versions by id, as it does for tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from icetide.schema.model import TableSchema
from icetide.schema.types import Column, IcetideType, ListType, MapType, StructType
from icetide.schema.visitor import PathVisitor, field_paths, visit

Path = tuple[str, ...]


def paths(columns: tuple[Column, ...], parent: Path = ()) -> list[tuple[Path, int]]:
    """Every ``(path, id)`` of the columns and what they hold (names case-folded)."""
    found = field_paths(StructType(columns))
    return [((*parent, *(name.casefold() for name in path)), i) for path, i in found]


class _Ids:
    def __init__(self, previous: tuple[Column, ...], last_id: int) -> None:
        self.known = dict(paths(previous))
        self.last = max([last_id, *self.known.values()])

    def get(self, path: Path) -> int:
        if path in self.known:
            return self.known[path]
        self.last += 1
        self.known[path] = self.last
        return self.last


def assign_ids(
    columns: tuple[Column, ...], previous: tuple[Column, ...] = (), last_id: int = 0
) -> tuple[tuple[Column, ...], int]:
    """``columns`` with the view's own ids, and the highest id now used.

    >>> from icetide.schema.types import LongType, StringType
    >>> old = (Column(1, "id", LongType()),)
    >>> now = (Column(7, "email", StringType()), Column(9, "ID", LongType()))
    >>> new, last = assign_ids(now, old, 1)
    >>> [(c.name, c.id) for c in new], last
    ([('email', 2), ('ID', 1)], 2)
    """
    ids = _Ids(previous, last_id)
    out: StructType = visit(StructType(columns), _Renumber(ids))
    return out.fields, ids.last


class _Renumber(PathVisitor[Any]):
    """The same types, each field's id looked up by its case-folded path.

    Ids are taken as the walk enters each field, parents before what they hold, so new
    ids number in that order; each waits on a stack until its node is rebuilt, after
    everything the node holds (a map takes its value's id, then its key's).
    """

    def __init__(self, ids: _Ids) -> None:
        super().__init__()
        self.ids = ids
        self.taken: list[int] = []

    def enter(self, field: Column) -> None:
        super().enter(field)
        self.taken.append(self.ids.get(tuple(name.casefold() for name in self.path)))

    def schema(self, schema: TableSchema, struct_result: Any) -> Any:
        return struct_result

    def struct(self, struct: StructType, field_results: Sequence[Any]) -> Any:
        return StructType(tuple(field_results))

    def field(self, field: Column, field_result: Any) -> Any:
        return replace(field, id=self.taken.pop(), type=field_result)

    def list(self, list_type: ListType, element_result: Any) -> Any:
        return replace(list_type, element_id=self.taken.pop(), element=element_result)

    def map(self, map_type: MapType, key_result: Any, value_result: Any) -> Any:
        value_id, key_id = self.taken.pop(), self.taken.pop()
        return replace(
            map_type, key_id=key_id, key=key_result, value_id=value_id, value=value_result
        )

    def primitive(self, primitive: IcetideType) -> Any:
        return primitive
