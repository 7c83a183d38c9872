"""What changed between two versions of a table's schema, field by field, by id.

Fields are matched by id, never by name, so a rename is one change and a drop plus an
add of the same name are two. Each :class:`FieldChange` carries its path (the names that
reach it, ``element``/``key``/``value`` for a list element or map key/value) so the
table-contract builder can turn it into an ALTER and evolution can classify it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from icetide.errors import SchemaError
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, IcetideType, ListType, MapType, StructType
from icetide.schema.visitor import HookVisitor, Partner, PartnerVisitor, visit, visit_with_partner

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
    changes = visit_with_partner(new, old, _Diff())
    _check_moves(old, new)
    rank = {kind: i for i, kind in enumerate(ORDER)}
    return sorted(changes, key=lambda ch: (rank[ch.kind], len(ch.path)))


Changes = list[FieldChange]


class _Diff(PartnerVisitor[Changes]):
    """The changes from each partner in the old schema to the new node, fields matched by
    id; a node and its partner of different kinds, or different leaves, are a ``widen``.

    :attr:`path` holds the new names down to the field being visited, :attr:`ids` their
    ids (the first is the top-level column's).
    """

    def __init__(self) -> None:
        self.path: list[str] = []
        self.ids: list[int] = []

    def element_partner(self, list_type: ListType, partner: IcetideType | None) -> Partner:
        if isinstance(partner, ListType) and partner.element_id != list_type.element_id:
            raise SchemaError(f"{'.'.join(self.path)}: the list element's id changed")
        return super().element_partner(list_type, partner)

    def key_partner(self, map_type: MapType, partner: IcetideType | None) -> Partner:
        ids = (map_type.key_id, map_type.value_id)
        if isinstance(partner, MapType) and (partner.key_id, partner.value_id) != ids:
            raise SchemaError(f"{'.'.join(self.path)}: the map's key or value id changed")
        return super().key_partner(map_type, partner)

    def enter(self, field: Column, partner: Partner) -> None:
        self.path.append(field.name)
        self.ids.append(field.id)

    def leave(self, field: Column, partner: Partner) -> None:
        self.path.pop()
        self.ids.pop()

    before_field = before_list_element = before_map_key = before_map_value = enter
    after_field = after_list_element = after_map_key = after_map_value = leave

    def schema(
        self, schema: TableSchema, partner: TableSchema | None, struct_result: Changes
    ) -> Changes:
        return struct_result

    def struct(
        self, struct: StructType, partner: IcetideType | None, field_results: Sequence[Changes]
    ) -> Changes:
        if not isinstance(partner, StructType):
            return self._widen(partner, struct)
        parent, top = tuple(self.path), self.ids[0] if self.ids else None
        before = {f.id: f for f in partner.fields}
        changes: Changes = []
        previous: str | None = None
        for field, inner in zip(struct.fields, field_results, strict=True):
            owner = field.id if top is None else top
            was = before.get(field.id)
            if was is None:
                changes.append(
                    FieldChange(
                        "add",
                        field.id,
                        (*parent, field.name),
                        owner,
                        new_type=field.type,
                        after=previous,
                        doc=field.doc,
                    )
                )
            else:
                if was.name != field.name:
                    changes.append(
                        FieldChange(
                            "rename", field.id, (*parent, was.name), owner, new_name=field.name
                        )
                    )
                here = (*parent, field.name)
                if was.nullable != field.nullable:
                    kind: Kind = "optional" if field.nullable else "required"
                    changes.append(FieldChange(kind, field.id, here, owner))
                if was.doc != field.doc:
                    changes.append(FieldChange("doc", field.id, here, owner, doc=field.doc))
                changes += inner
            previous = field.name
        kept = {f.id for f in struct.fields}
        for field in partner.fields:
            if field.id not in kept:
                owner = field.id if top is None else top
                changes.append(
                    FieldChange(
                        "drop",
                        field.id,
                        (*parent, field.name),
                        owner,
                        old_type=field.type,
                        doc=field.doc,
                    )
                )
        return changes

    def field(self, field: Column, partner: Partner, field_result: Changes) -> Changes:
        return field_result

    def list(
        self, list_type: ListType, partner: IcetideType | None, element_result: Changes
    ) -> Changes:
        if not isinstance(partner, ListType):
            return self._widen(partner, list_type)
        changes = self._nullability(
            partner.element_nullable, list_type.element_nullable, list_type.element_id, "element"
        )
        return changes + element_result

    def map(
        self,
        map_type: MapType,
        partner: IcetideType | None,
        key_result: Changes,
        value_result: Changes,
    ) -> Changes:
        if not isinstance(partner, MapType):
            return self._widen(partner, map_type)
        changes = self._nullability(
            partner.value_nullable, map_type.value_nullable, map_type.value_id, "value"
        )
        return key_result + changes + value_result

    def primitive(self, primitive: IcetideType, partner: IcetideType | None) -> Changes:
        return self._widen(partner, primitive)

    def _nullability(self, was: bool, now: bool, field_id: int, name: str) -> Changes:
        if was == now:
            return []
        kind: Kind = "optional" if now else "required"
        return [FieldChange(kind, field_id, (*self.path, name), self.ids[0])]

    def _widen(self, old: IcetideType | None, new: IcetideType) -> Changes:
        if old == new:
            return []
        path, top = tuple(self.path), self.ids[0]
        return [FieldChange("widen", self.ids[-1], path, top, old_type=old, new_type=new)]


def _parents(schema: TableSchema) -> dict[int, int | None]:
    """Field id → the id of the struct field that holds it (``None`` at top level)."""
    parents = _Parents()
    visit(schema, parents)
    return parents.found


class _Parents(HookVisitor):
    """Each struct field's parent: the innermost struct field around it, through lists
    and maps (a list element or map value is not a parent)."""

    def __init__(self) -> None:
        self.found: dict[int, int | None] = {}
        self.holders: list[int] = []

    def before_field(self, field: Column) -> None:
        self.found[field.id] = self.holders[-1] if self.holders else None
        self.holders.append(field.id)

    def after_field(self, field: Column) -> None:
        self.holders.pop()


def _check_moves(old: TableSchema, new: TableSchema) -> None:
    before, after = _parents(old), _parents(new)
    for field_id, parent in after.items():
        if field_id in before and before[field_id] != parent:
            raise SchemaError(
                f"table {new.table}: field id {field_id} moved to another parent; "
                "a move is a drop and an add with a new id"
            )
