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

from dataclasses import dataclass
from typing import Literal

from icetide.errors import SchemaChangeError, SchemaError
from icetide.schema.contract import base as b
from icetide.schema.contract import ledger as c
from icetide.schema.contract.builder import TableContract, column_path
from icetide.schema.contract.names import TableName
from icetide.schema.convert.spark import sql_type
from icetide.schema.diff import FieldChange, diff
from icetide.schema.promote import promote
from icetide.schema.quoting import literal, quote

Drop = Literal["soft", "hard"]


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
    drop: Drop = "soft",
) -> AlterPlan:
    """The statements taking ``base`` and ``ledger`` from ``old``'s schema to ``new``'s.

    ``drop`` says what a column that left the schema does: ``soft`` keeps it in the
    tables (no longer written, its values stay readable), ``hard`` drops it.
    """
    was, now = old.target, new.target  # the tables' own names and types
    if was.key_ids != now.key_ids:
        raise SchemaError(
            f"table {now.table}: the primary key changed from {list(was.primary_key)} to "
            f"{list(now.primary_key)}",
            hint="a key change needs a re-snapshot: approve it (`icetide schema apply "
            "--approve key_change --no-ddl`) and the running ledger and merge rebuild the "
            "table from the source",
        )
    changes = diff(was, now)
    keys = set(now.key_ids)
    base_sql: list[str] = []
    ledger_sql: list[str] = []
    for change in changes:
        _check(change, now.table)
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


def _check(change: FieldChange, table: str) -> None:
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
    change: FieldChange, table: TableName, prefix: tuple[str, ...], version: int, drop: Drop
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
