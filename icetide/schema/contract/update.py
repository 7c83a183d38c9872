"""A table's schema version as one Iceberg schema update: the operations of Iceberg's
``UpdateSchema`` (``addColumn``, ``renameColumn``, ``updateColumn``, ``updateColumnDoc``,
``deleteColumn``, ``moveFirst``/``moveAfter``) that take the base and the ledger from one
version to the next, as plain data. :mod:`icetide.lake.schema_update` carries them out
through the JVM, all in one commit with the version property, so no reader ever sees a
table half-way between two versions (a rename done, its widening not).

The changes are the ones :func:`icetide.schema.contract.alter.alter_plan` turns into
ALTER statements (the same diff by field id, the same soft and hard drops, the same
kept-column moves, the same placement of added fields); only the naming differs. One
``UpdateSchema`` resolves every name against the schema it started from, so a field is
named by its *old* path (renames of one update happen at once: columns swapping names
need no temporary names), and an added field by its old parent's path and its new name.

Iceberg refuses, within one update, to add a field under a name the table still holds,
even when the same update renames that holder (a holder the update deletes is no
obstacle: deletes come before the adds). A version that adds a column under the name a
rename or a soft drop's move frees is therefore two updates (:attr:`TableUpdate.
passes`): first everything else, then the adds (named as the first one left the table);
both are still one commit (one Iceberg transaction).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from icetide.schema.contract import base as b
from icetide.schema.contract import ledger as c
from icetide.schema.contract.alter import KEPT_AS, check_change, refuse_key_change
from icetide.schema.contract.builder import TableContract
from icetide.schema.convert.spark import sql_type
from icetide.schema.diff import FieldChange, diff
from icetide.schema.types import ColumnDefault, IcetideType
from icetide.schema.visitor import field_paths

OpKind = Literal["add", "rename", "widen", "doc", "delete", "move_first", "move_after"]
Path = tuple[str, ...]


@dataclass(frozen=True)
class SchemaOp:
    """One ``UpdateSchema`` call.

    ``path`` names the field as the update's starting schema has it; for ``add``, the
    parent (empty: the table itself). ``name`` is the added field's name or a rename's new
    name; ``type`` the added field's type or a widening's new primitive type; ``doc`` the
    new doc of ``doc``. ``after`` is the path of the sibling a ``move_after`` places the
    field behind. ``default`` is the constant an added top-level column of a format-v3
    base carries as Iceberg initial-default and write-default (:mod:`icetide.lake.
    defaults`)."""

    kind: OpKind
    path: Path
    name: str | None = None
    type: IcetideType | None = None
    doc: str | None = None
    after: Path | None = None
    default: ColumnDefault | None = None

    def __str__(self) -> str:
        def q(path: Iterable[str]) -> str:
            return json.dumps(".".join(path))

        type_text = sql_type(self.type) if self.type is not None else "?"
        if self.kind == "add":
            parent = q(self.path) if self.path else "null"
            text = f"addColumn({parent}, {json.dumps(self.name)}, {type_text}"
            if self.default is not None:
                text += f", doc={json.dumps(self.doc)}, default={self.default.value!r}"
            return text + ")"
        if self.kind == "rename":
            return f"renameColumn({q(self.path)}, {json.dumps(self.name)})"
        if self.kind == "widen":
            return f"updateColumn({q(self.path)}, {type_text})"
        if self.kind == "doc":
            return f"updateColumnDoc({q(self.path)}, {json.dumps(self.doc)})"
        if self.kind == "delete":
            return f"deleteColumn({q(self.path)})"
        if self.kind == "move_first":
            return f"moveFirst({q(self.path)})"
        assert self.after is not None
        return f"moveAfter({q(self.path)}, {q(self.after)})"


@dataclass(frozen=True)
class TableUpdate:
    """One table's schema version as Iceberg updates, all in one commit: usually one
    ``UpdateSchema``; two when an add takes a name the version frees (module doc)."""

    passes: tuple[tuple[SchemaOp, ...], ...] = ()

    @property
    def ops(self) -> tuple[SchemaOp, ...]:
        """Every operation, in order."""
        return tuple(op for one in self.passes for op in one)

    def __bool__(self) -> bool:
        return bool(self.ops)

    def render(self) -> str:
        """The calls, one a line, passes separated by ``commit()``."""
        return "\n".join(
            "\n".join([*(str(op) for op in one), "commit()"]) for one in self.passes if one
        )


@dataclass(frozen=True)
class VersionUpdate:
    """The base's and the ledger's updates from one schema version to the next."""

    changes: tuple[FieldChange, ...]
    base: TableUpdate
    ledger: TableUpdate
    renamed: Mapping[str, str] = field(default_factory=dict)
    """Kept (soft-dropped) top-level columns moved out of a new column's way: old → new."""
    old: TableContract | None = None
    new: TableContract | None = None
    drop: b.DropMode = "soft"

    def with_kept(self, kept: Collection[str]) -> VersionUpdate:
        """The same version for tables that keep ``kept`` soft-dropped columns (known
        only once the tables are read)."""
        assert self.old is not None and self.new is not None
        return version_update(self.old, self.new, self.drop, kept)


def version_update(
    old: TableContract,
    new: TableContract,
    drop: b.DropMode = "soft",
    kept: Collection[str] = (),
) -> VersionUpdate:
    """The updates taking the base and the ledger from ``old``'s schema to ``new``'s
    (``drop`` and ``kept`` as for :func:`~icetide.schema.contract.alter.alter_plan`:
    ``kept`` names the top-level columns an earlier soft drop left in the tables).

    Raises :class:`SchemaError` for what no update expresses: a key change, a move
    between parents, a type change :func:`~icetide.schema.promote.promote` refuses.
    """
    was, now = old.target, new.target
    refuse_key_change(was, now)
    changes = diff(was, now)
    for change in changes:
        check_change(change, now.table)
    old_paths = {fid: path for path, fid in field_paths(was)}
    new_paths = {fid: path for path, fid in field_paths(now)}
    new_ids = {path: fid for fid, path in new_paths.items()}
    keys = set(now.key_ids)
    top_drops = {
        ch.path[0].casefold(): ch for ch in changes if ch.kind == "drop" and len(ch.path) == 1
    }
    occupied = {k.casefold(): k for k in kept}
    if drop == "soft":
        occupied |= {name: ch.path[0] for name, ch in top_drops.items()}
    moved: dict[str, str] = {}
    added: dict[str, str] = {}  # the holder's name → the new column's (the same but case)
    for ch in changes:
        if ch.kind == "add" and len(ch.path) == 1 and ch.path[0].casefold() in occupied:
            holder = occupied[ch.path[0].casefold()]
            moved[holder] = KEPT_AS.format(name=ch.path[0], version=was.version)
            added[holder] = ch.path[0]
    moved_names = {m.casefold() for m in moved}

    def freed(parent: Path) -> set[str]:
        """The names of ``parent`` (an old path) this version renames away from a field
        (a hard drop frees its name within the update: deletes come before the adds)."""
        names = {
            old_paths[ch.field_id][-1].casefold()
            for ch in changes
            if ch.kind == "rename" and old_paths[ch.field_id][:-1] == parent
        }
        return names | (moved_names if parent == () else set())

    two_passes = any(
        ch.kind == "add"
        and ch.path[-1].casefold() in freed(_old_parent(ch, new_ids, old_paths, new_paths))
        for ch in changes
    )

    def ops_for(prefix: Path, key_column: bool) -> list[list[SchemaOp]]:
        first: list[SchemaOp] = []
        adds: list[SchemaOp] = []
        # In the second pass the first one's renames are done: fields go by new names.
        names = new_paths if two_passes else old_paths
        for holder, renamed in moved.items():
            if key_column:
                continue
            note = b.DROPPED_COMMENT.format(version=was.version) + f" (was {added[holder]})"
            first.append(SchemaOp("rename", (*prefix, holder), name=renamed))
            first.append(SchemaOp("doc", (*prefix, holder), doc=note))
        for ch in changes:
            if key_column and not (ch.top in keys and len(ch.path) == 1):
                continue
            here = (*prefix, *old_paths.get(ch.field_id, ()))
            if ch.kind == "rename":
                assert ch.new_name is not None
                first.append(SchemaOp("rename", here, name=ch.new_name))
            elif ch.kind == "widen":
                assert ch.old_type is not None and ch.new_type is not None
                if sql_type(ch.old_type) != sql_type(ch.new_type):
                    first.append(SchemaOp("widen", here, type=ch.new_type))
            elif ch.kind == "drop":
                if drop == "hard":
                    first.append(SchemaOp("delete", here))
                elif ch.path[0].casefold() not in moved_names or len(ch.path) > 1:
                    note = b.DROPPED_COMMENT.format(version=now.version)
                    first.append(SchemaOp("doc", here, doc=note))
            elif ch.kind == "add":
                adds += _add(ch, prefix, names, new_ids, new.settings.format_version, new)
        return [first, adds] if two_passes else [first + adds]

    def update(passes: list[list[SchemaOp]]) -> TableUpdate:
        return TableUpdate(tuple(tuple(one) for one in passes if one))

    base = update(ops_for((), False))
    # The ledger: the key columns at top level (renamed or widened only: the first
    # pass), then the fields of both row images.
    ledger = ops_for((), True)
    for image in c.ROW_IMAGES:
        for number, one in enumerate(ops_for((image,), False)):
            ledger[number] += [_no_default(op) for op in one]
    return VersionUpdate(tuple(changes), base, update(ledger), moved, old, new, drop)


def _old_parent(
    ch: FieldChange,
    new_ids: Mapping[Path, int],
    old_paths: Mapping[int, Path],
    new_paths: Mapping[int, Path],
) -> Path:
    """The old path of an added field's parent (the parent exists: a new parent brings
    its fields along as one add)."""
    parent = new_paths[ch.field_id][:-1]
    if not parent:
        return ()
    return old_paths[new_ids[parent]]


def _add(
    ch: FieldChange,
    prefix: Path,
    names: Mapping[int, Path],
    new_ids: Mapping[Path, int],
    format_version: int,
    new: TableContract,
) -> list[SchemaOp]:
    """``addColumn`` then its placement, as ``ADD COLUMN … FIRST | AFTER`` places it."""
    assert ch.new_type is not None
    new_path = next(p for p, fid in new_ids.items() if fid == ch.field_id)
    parent = names[new_ids[new_path[:-1]]] if len(new_path) > 1 else ()
    default = None
    column = new.target.find(ch.field_id) if len(new_path) == 1 else None
    if (
        column is not None
        and not prefix
        and format_version >= 3
        and column.default is not None
        and column.default.constant
        and column.default.value is not None
        and ch.field_id not in set(new.schema.sink.conversions) | set(new.schema.sink.types)
    ):
        default = column.default
    added = SchemaOp(
        "add",
        (*prefix, *parent),
        name=ch.path[-1],
        type=ch.new_type,
        doc=column.doc if default is not None and column is not None else None,
        default=default,
    )
    full = (*prefix, *parent, ch.path[-1])
    if ch.after is None:
        return [added, SchemaOp("move_first", full)]
    sibling = new_ids[(*new_path[:-1], ch.after)]
    after = names.get(sibling, (*parent, ch.after))
    return [added, SchemaOp("move_after", full, after=(*prefix, *after))]


def _no_default(op: SchemaOp) -> SchemaOp:
    return op if op.default is None else SchemaOp(op.kind, op.path, op.name, op.type)
