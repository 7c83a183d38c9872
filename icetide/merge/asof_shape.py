"""The columns a table had at a source position: its shape as the source had it then.

A table as of a position before an ``ADD COLUMN``, a rename or a widening is the table
the source had then, so it has the columns the source had then, under the names they had
then, with the types they had then, and their values. The ledger records where each
schema version detected at the source starts (its DDL's position, or the first event
showing the change: :data:`~icetide.schema.contract.phases.VERSION_POSITIONS`); the
version in effect at a position is the newest one starting at or before it.

The rows themselves are rebuilt in the current shape (:mod:`icetide.merge.asof`), where
every column is found by its stable id however it was named; this module only says how
to read them back in the older shape. The decisions are pure, so they are tested
without Spark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from icetide.schema.contract import base as b
from icetide.schema.contract.ledger import POSITION_SQL
from icetide.schema.convert.spark import sql_type
from icetide.schema.model import TableSchema
from icetide.schema.quoting import literal, quote
from icetide.schema.types import DecimalType, IcetideType, PrimitiveType


def version_at(versions: Sequence[int], starts: Mapping[int, int], target: Decimal) -> int:
    """The schema version the source had at ``target``.

    ``versions`` oldest first; ``starts`` the position each version detected at the
    source starts at. Walking back from the newest, a version that starts after the
    target gives way to the one before it; a version with no recorded start (the first,
    or one made by hand rather than detected at the source) cannot be placed, so it is
    taken as in effect.

    >>> version_at([1, 2, 3], {2: 100, 3: 200}, Decimal(150))
    2
    >>> version_at([1, 2, 3], {2: 100, 3: 200}, Decimal(200)), version_at([1, 2], {2: 100}, 99)
    (3, 1)
    >>> version_at([1, 2, 3], {3: 200}, Decimal(5))  # 2 was not detected at the source
    2
    """
    chosen = len(versions) - 1
    while chosen > 0:
        start = starts.get(versions[chosen])
        if start is None or start <= target:
            break
        chosen -= 1
    return versions[chosen]


@dataclass(frozen=True)
class Shape:
    """How to read rows of the current shape back in the shape of ``version``."""

    version: int
    select: tuple[str, ...]
    """Spark SQL select list over the current shape's frame: each column the table had
    then under its name then (cast back when it was widened since), then the position
    and source time."""
    keys: tuple[str, ...]
    """The primary key's columns by their names then."""
    gone: tuple[str, ...]
    """Columns the source had then that the table no longer has (dropped since), by
    their names then: they are not rebuilt."""


def shape_at(
    history: Sequence[TableSchema],
    current: TableSchema,
    starts: Mapping[int, int],
    target: Decimal,
    defaults: Mapping[int, str] | None = None,
) -> Shape:
    """The shape of ``current``'s table at ``target`` (see :func:`version_at`).

    ``history`` oldest first; versions newer than ``current`` (detected, not yet merged)
    are left out: the rows are rebuilt in ``current``. ``defaults`` (column id → Spark
    SQL literal of a constant source default) fill a column added with a default on the
    rows last changed before the version that added it started, as the source did when
    it added the column (and as the merge's data convergence does on the base).
    """
    kept = [s for s in history if s.version <= current.version] or [current]
    version = version_at([s.version for s in kept], starts, target)
    then = next((s for s in kept if s.version == version), current)
    if then.version == current.version:
        then = current
    now = {col.id: col for col in current.columns}
    select, gone = [], []
    for col in then.columns:
        found = now.get(col.id)
        if found is None:
            gone.append(col.name)
            continue
        value = quote(found.name)
        added = next(s.version for s in kept if col.id in s.field_ids())
        if defaults and col.id in defaults and added != kept[0].version and added in starts:
            before = f"CAST({literal(str(starts[added]))} AS {POSITION_SQL})"
            value = (
                f"CASE WHEN {value} IS NULL AND {b.POSITION} < {before} "
                f"THEN {defaults[col.id]} ELSE {value} END"
            )
        if _narrower(col.type, found.type):
            value = f"CAST({value} AS {sql_type(col.type)})"
        select.append(value if value == quote(col.name) else f"{value} AS {quote(col.name)}")
    select += [b.POSITION, b.SOURCE_TS]
    return Shape(then.version, tuple(select), tuple(then.primary_key), tuple(gone))


def _narrower(then: IcetideType, now: IcetideType) -> bool:
    """Whether a value of ``now``'s type is read back as ``then``'s: a scalar widened
    since (int → bigint, float → double, a decimal's precision up), whose values from
    before the widening fit the old type exactly. A nested type changed since keeps its
    current form (a struct's later fields are NULL before they existed)."""
    scalar = (PrimitiveType, DecimalType)
    return isinstance(then, scalar) and isinstance(now, scalar) and sql_type(then) != sql_type(now)
