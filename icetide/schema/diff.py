"""What changed between two versions of a table's schema, field by field, by id.

Fields are matched by id, never by name, so a rename is one change and a drop plus an
add of the same name are two. Each :class:`FieldChange` carries its path (the names that
reach it, ``element``/``key``/``value`` for a list element or map key/value) so the
table-contract builder can turn it into an ALTER and evolution can classify it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from icetide.errors import SchemaError
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, IcetideType, ListType, MapType, StructType

Kind = Literal["rename", "widen", "optional", "required", "add", "drop", "doc"]
ORDER: tuple[Kind, ...] = ("rename", "widen", "optional", "required", "doc", "add", "drop")
"""The order changes apply in: renames first (later paths use the new names), drops last."""


@dataclass(frozen=True)
class FieldChange:
    """One change to one field.

    ``path`` names the field as it is when the change applies: parents by their new
    names, the field itself by its old name for ``rename`` and ``drop``, its new name
    otherwise. ``top`` is the id of the top-level column the field belongs to.
    """

    kind: Kind
    field_id: int
    path: tuple[str, ...]
    top: int
    old_type: IcetideType | None = None
    new_type: IcetideType | None = None
    new_name: str | None = None
    after: str | None = None
    """For ``add``: the sibling the new field follows (``None``: it comes first)."""
    doc: str | None = None

    @property
    def dotted(self) -> str:
        """The path as text, for messages."""
        return ".".join(self.path)


def diff(old: TableSchema, new: TableSchema) -> list[FieldChange]:
    """Every change from ``old`` to ``new``, in :data:`ORDER` (parents before children).

    Raises :class:`SchemaError` for what no ALTER expresses: a field moved to another
    parent, or a list/map whose element, key or value id changed.
    """
    changes = list(_fields(old.columns, new.columns, (), None))
    _check_moves(old, new)
    rank = {kind: i for i, kind in enumerate(ORDER)}
    return sorted(changes, key=lambda ch: (rank[ch.kind], len(ch.path)))


def _fields(
    old: tuple[Column, ...], new: tuple[Column, ...], parent: tuple[str, ...], top: int | None
) -> Iterator[FieldChange]:
    before = {f.id: f for f in old}
    previous: str | None = None
    for field in new:
        owner = field.id if top is None else top
        was = before.get(field.id)
        if was is None:
            yield FieldChange(
                "add",
                field.id,
                (*parent, field.name),
                owner,
                new_type=field.type,
                after=previous,
                doc=field.doc,
            )
        else:
            if was.name != field.name:
                yield FieldChange(
                    "rename", field.id, (*parent, was.name), owner, new_name=field.name
                )
            here = (*parent, field.name)
            if was.nullable != field.nullable:
                kind: Kind = "optional" if field.nullable else "required"
                yield FieldChange(kind, field.id, here, owner)
            if was.doc != field.doc:
                yield FieldChange("doc", field.id, here, owner, doc=field.doc)
            yield from _types(was.type, field.type, field.id, here, owner)
        previous = field.name
    kept = {f.id for f in new}
    for field in old:
        if field.id not in kept:
            owner = field.id if top is None else top
            yield FieldChange(
                "drop", field.id, (*parent, field.name), owner, old_type=field.type, doc=field.doc
            )


def _types(
    old: IcetideType, new: IcetideType, field_id: int, path: tuple[str, ...], top: int
) -> Iterator[FieldChange]:
    if isinstance(old, StructType) and isinstance(new, StructType):
        yield from _fields(old.fields, new.fields, path, top)
    elif isinstance(old, ListType) and isinstance(new, ListType):
        if old.element_id != new.element_id:
            raise SchemaError(f"{'.'.join(path)}: the list element's id changed")
        if old.element_nullable != new.element_nullable:
            kind: Kind = "optional" if new.element_nullable else "required"
            yield FieldChange(kind, new.element_id, (*path, "element"), top)
        yield from _types(old.element, new.element, new.element_id, (*path, "element"), top)
    elif isinstance(old, MapType) and isinstance(new, MapType):
        if (old.key_id, old.value_id) != (new.key_id, new.value_id):
            raise SchemaError(f"{'.'.join(path)}: the map's key or value id changed")
        yield from _types(old.key, new.key, new.key_id, (*path, "key"), top)
        if old.value_nullable != new.value_nullable:
            kind = "optional" if new.value_nullable else "required"
            yield FieldChange(kind, new.value_id, (*path, "value"), top)
        yield from _types(old.value, new.value, new.value_id, (*path, "value"), top)
    elif old != new:
        yield FieldChange("widen", field_id, path, top, old_type=old, new_type=new)


def _parents(schema: TableSchema) -> dict[int, int | None]:
    """Field id → the id of the struct field that holds it (``None`` at top level)."""
    out: dict[int, int | None] = {}

    def walk(columns: tuple[Column, ...], parent: int | None) -> None:
        for column in columns:
            out[column.id] = parent
            inner = column.type
            while isinstance(inner, ListType | MapType):
                inner = inner.element if isinstance(inner, ListType) else inner.value
            if isinstance(inner, StructType):
                walk(inner.fields, column.id)

    walk(schema.columns, None)
    return out


def _check_moves(old: TableSchema, new: TableSchema) -> None:
    before, after = _parents(old), _parents(new)
    for field_id, parent in after.items():
        if field_id in before and before[field_id] != parent:
            raise SchemaError(
                f"table {new.table}: field id {field_id} moved to another parent; "
                "a move is a drop and an add with a new id"
            )
