"""Stable field ids for a view's columns across its versions.

A view's columns come from many tables, whose ids may collide (two tables both have an
id 1), so a view numbers its own: a field keeps the id it had in the view's previous
version when its path (names, case-insensitive, with ``element``/``key``/``value`` for
what a list or map holds) is the same, and anything new gets an id above the highest the
view ever used. The version bump (:mod:`icetide.artifacts.versioning`) then compares two
view versions by id, as it does for tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from icetide.schema.types import Column, IcetideType, ListType, MapType, StructType

Path = tuple[str, ...]


def paths(columns: tuple[Column, ...], parent: Path = ()) -> Iterator[tuple[Path, int]]:
    """Every ``(path, id)`` of the columns and what they hold."""
    for column in columns:
        here = (*parent, column.name.casefold())
        yield here, column.id
        yield from _type_paths(column.type, here)


def _type_paths(ctype: IcetideType, here: Path) -> Iterator[tuple[Path, int]]:
    if isinstance(ctype, StructType):
        yield from paths(ctype.fields, here)
    elif isinstance(ctype, ListType):
        yield (*here, "element"), ctype.element_id
        yield from _type_paths(ctype.element, (*here, "element"))
    elif isinstance(ctype, MapType):
        yield (*here, "key"), ctype.key_id
        yield from _type_paths(ctype.key, (*here, "key"))
        yield (*here, "value"), ctype.value_id
        yield from _type_paths(ctype.value, (*here, "value"))


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
    out = tuple(_column(c, (), ids) for c in columns)
    return out, ids.last


def _column(column: Column, parent: Path, ids: _Ids) -> Column:
    here = (*parent, column.name.casefold())
    return replace(column, id=ids.get(here), type=_type(column.type, here, ids))


def _type(ctype: IcetideType, here: Path, ids: _Ids) -> IcetideType:
    if isinstance(ctype, StructType):
        return StructType(tuple(_column(f, here, ids) for f in ctype.fields))
    if isinstance(ctype, ListType):
        element = (*here, "element")
        return replace(
            ctype, element_id=ids.get(element), element=_type(ctype.element, element, ids)
        )
    if isinstance(ctype, MapType):
        key, value = (*here, "key"), (*here, "value")
        return replace(
            ctype,
            key_id=ids.get(key),
            key=_type(ctype.key, key, ids),
            value_id=ids.get(value),
            value=_type(ctype.value, value, ids),
        )
    return ctype
