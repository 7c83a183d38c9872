"""The ALTER statements that take a table's base and ledger from one schema version to
the next, built from :func:`icetide.schema.diff.diff` (changes matched by field id).

What each change does to the tables:

============  ==============================================  ============================
change        base (the mirror)                               ledger (``_cdc``)
============  ==============================================  ============================
rename        ``RENAME COLUMN``                               the key column (if a key)
                                                              and the field in ``_after``
                                                              and ``_before``
widen         ``ALTER COLUMN … TYPE`` (only when the Spark    same, in both row images
              type changes: ``enum`` symbols are text)        (and the key column)
add           ``ADD COLUMN … AFTER <previous>`` / ``FIRST``   the field in both images
drop (soft)   kept, with a comment saying when it left        kept, the same comment
drop (hard)   ``DROP COLUMN``                                 dropped from both images
optional      nothing: every non-key column and nested field is nullable in every table
required      nothing: the decoder enforces it (``null_in_required``); tables stay nullable
============  ==============================================  ============================

A key change, a move between parents and a type change :func:`~icetide.schema.promote.
promote` refuses raise :class:`~icetide.errors.SchemaError`: those need a re-snapshot.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from dataclasses import dataclass

from icetide.errors import SchemaChangeError, SchemaError
from icetide.schema.contract import base as b
from icetide.schema.contract import ledger as c
from icetide.schema.contract.builder import TableContract, column_path
from icetide.schema.contract.names import TableName
from icetide.schema.convert.spark import sql_type
from icetide.schema.diff import FieldChange, diff
from icetide.schema.model import TableSchema
from icetide.schema.promote import promote
from icetide.schema.quoting import literal, quote


@dataclass(frozen=True)
class AlterPlan:
    """The statements for each table, in the order they run."""

    changes: tuple[FieldChange, ...]
    base: tuple[str, ...]
    ledger: tuple[str, ...]


def alter_plan(
    old: TableContract,
    new: TableContract,
    base: TableName,
    ledger: TableName,
    drop: b.DropMode = "soft",
    kept: Collection[str] = (),
) -> AlterPlan:
    """The statements taking ``base`` and ``ledger`` from ``old``'s schema to ``new``'s.

    ``drop`` says what a column that left the schema does: ``soft`` keeps it in the
    tables (no longer written, its values stay readable), ``hard`` drops it. ``kept``
    names the top-level columns an earlier soft drop left in the tables: a column added
    under one of those names is a new column (a new id), so the kept one moves out of its
    way first (:data:`KEPT_AS`), and its old values never show under the new column.
    """
    was, now = old.target, new.target  # the tables' own names and types
    refuse_key_change(was, now)
    changes = untangled(diff(was, now))
    keys = set(now.key_ids)
    base_sql: list[str] = []
    ledger_sql: list[str] = []
    occupied = {k.casefold() for k in kept} | {
        c.path[0].casefold()
        for c in changes
        if c.kind == "drop" and drop == "soft" and len(c.path) == 1
    }
    added = {c.path[0].casefold() for c in changes if c.kind == "add" and len(c.path) == 1}
    for change in changes:
        check_change(change, now.table)
        if change.kind == "drop" and drop == "soft" and len(change.path) == 1:
            if change.path[0].casefold() in added:
                continue  # moved out of the way, and commented there, by the add below
        if change.kind == "add" and len(change.path) == 1:
            if change.path[0].casefold() in occupied:
                moved = _out_of_the_way(change.path[0], was.version)
                base_sql += moved(base, ())
                for image in c.ROW_IMAGES:
                    ledger_sql += moved(ledger, (image,))
        base_sql += change_statements(change, base, (), now.version, drop)
        if change.top in keys and len(change.path) == 1:  # the key column at top level too
            ledger_sql += change_statements(change, ledger, (), now.version, drop)
        for image in c.ROW_IMAGES:
            ledger_sql += change_statements(change, ledger, (image,), now.version, drop)
    version = f"('{c.SCHEMA_VERSION_PROPERTY}'={literal(str(now.version))})"
    if was.version != now.version:
        base_sql.append(f"ALTER TABLE {base} SET TBLPROPERTIES {version}")
        ledger_sql.append(f"ALTER TABLE {ledger} SET TBLPROPERTIES {version}")
    return AlterPlan(tuple(changes), tuple(base_sql), tuple(ledger_sql))


KEPT_AS = "{name}__dropped_v{version}"
"""The name a soft-dropped column takes when a new column is added under its name."""
RENAMING = "__icetide_renaming_{id}"
"""The temporary name of a column in a rename cycle while its new name is still taken."""


def untangled(changes: list[FieldChange]) -> list[FieldChange]:
    """``changes`` with renames that would collide made safe: when a field is renamed to
    a name another renamed field of the same parent still holds (two columns swapped, a
    cycle through a temporary name), each field of that parent's renames goes through a
    temporary name first (``RENAMING``), then to its new name, so no ALTER meets a name
    that is taken. Renames that collide with nothing stay one statement.

    >>> from icetide.schema.diff import FieldChange
    >>> swap = [FieldChange("rename", 2, ("x",), 2, new_name="y"),
    ...         FieldChange("rename", 3, ("y",), 3, new_name="x")]
    >>> [(c.path[-1], c.new_name) for c in untangled(swap)]
    [('x', '__icetide_renaming_2'), ('y', '__icetide_renaming_3'), \
('__icetide_renaming_2', 'y'), ('__icetide_renaming_3', 'x')]
    """
    renames = [c for c in changes if c.kind == "rename"]
    tangled: set[tuple[str, ...]] = set()
    for change in renames:
        parent = change.path[:-1]
        taken = {
            c.path[-1].casefold() for c in renames if c.path[:-1] == parent and c is not change
        }
        if (change.new_name or "").casefold() in taken:
            tangled.add(parent)
    if not tangled:
        return changes
    out: list[FieldChange] = []
    second: list[FieldChange] = []
    for change in changes:
        parent = change.path[:-1]
        if change.kind != "rename" or parent not in tangled:
            out.append(change)
            continue
        temporary = RENAMING.format(id=change.field_id)
        out.append(dataclasses.replace(change, new_name=temporary))
        second.append(dataclasses.replace(change, path=(*parent, temporary)))
    # The second half right after the last first half: before anything that names the
    # fields by their new names (a widening, a nested change).
    last = max(i for i, c in enumerate(out) if c.kind == "rename" and c.path[:-1] in tangled)
    return out[: last + 1] + second + out[last + 1 :]


def _out_of_the_way(name: str, version: int) -> Callable[[TableName, tuple[str, ...]], list[str]]:
    """The statements moving a kept (soft-dropped) column ``name`` out of the way of a new
    column of that name, commented as dropped."""
    renamed = KEPT_AS.format(name=name, version=version)
    note = literal(b.DROPPED_COMMENT.format(version=version) + f" (was {name})")

    def statements(table: TableName, prefix: tuple[str, ...]) -> list[str]:
        path = column_path(*prefix, name)
        moved = column_path(*prefix, renamed)
        return [
            f"ALTER TABLE {table} RENAME COLUMN {path} TO {quote(renamed)}",
            f"ALTER TABLE {table} ALTER COLUMN {moved} COMMENT {note}",
        ]

    return statements


def refuse_key_change(was: TableSchema, now: TableSchema) -> None:
    """Raise :class:`SchemaError` when the tables' key changes between two versions: no
    ALTER or schema update expresses that, only a re-snapshot does."""
    if was.key_ids != now.key_ids:
        raise SchemaError(
            f"table {now.table}: the primary key changed from {list(was.primary_key)} to "
            f"{list(now.primary_key)}",
            hint="a key change needs a re-snapshot: approve it (`icetide schema apply "
            "--approve key_change --no-ddl`) and the running ledger and merge rebuild the "
            "table from the source",
        )


def check_change(change: FieldChange, table: str) -> None:
    if change.kind == "widen":
        assert change.old_type is not None and change.new_type is not None
        try:
            promote(change.old_type, change.new_type)
        except SchemaChangeError as exc:
            raise SchemaChangeError(
                f"table {table}: column {change.dotted}: {exc.message}",
                from_type=exc.from_type,
                to_type=exc.to_type,
                column=change.dotted,
                hint=exc.hint,
            ) from None
    if change.kind == "drop" and change.path[-1:] in (("element",), ("key",), ("value",)):
        raise SchemaError(f"table {table}: {change.dotted} cannot be dropped")


def change_statements(
    change: FieldChange, table: TableName, prefix: tuple[str, ...], version: int, drop: b.DropMode
) -> list[str]:
    """The statements one change takes on ``table`` (``prefix``: the row image it is in)."""
    path = column_path(*prefix, *change.path)
    if change.kind == "rename":
        assert change.new_name is not None
        return [f"ALTER TABLE {table} RENAME COLUMN {path} TO {quote(change.new_name)}"]
    if change.kind == "widen":
        assert change.old_type is not None and change.new_type is not None
        if sql_type(change.old_type) == sql_type(change.new_type):
            return []
        return [f"ALTER TABLE {table} ALTER COLUMN {path} TYPE {sql_type(change.new_type)}"]
    if change.kind == "add":
        assert change.new_type is not None
        place = "FIRST" if change.after is None else f"AFTER {quote(change.after)}"
        return [f"ALTER TABLE {table} ADD COLUMN {path} {sql_type(change.new_type)} {place}"]
    if change.kind == "drop":
        if drop == "hard":
            return [f"ALTER TABLE {table} DROP COLUMN {path}"]
        note = literal(b.DROPPED_COMMENT.format(version=version))
        return [f"ALTER TABLE {table} ALTER COLUMN {path} COMMENT {note}"]
    return []  # optional, required, doc: nothing to alter (see module doc)
