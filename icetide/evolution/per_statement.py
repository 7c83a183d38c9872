"""A schema version for each DDL statement the log brings, not one for all of them.

The ledger hands the evolution layer the DDL statements of a micro-batch; a batch may
hold several for one table, with rows written between them. Every event is projected
under the schema version in force at its log position
(:attr:`icetide.ledger.decode.Projection.earlier`), so each statement must start a
version of its own: if ``RENAME COLUMN p TO tmp``, ``RENAME COLUMN q TO p`` and
``RENAME COLUMN tmp TO q`` became one version starting at the first statement, a row
written between the first two (columns ``tmp`` and ``q``) would be read by the final
names, and the source's ``q`` value would land in the column that was ``p``.

The source's catalog cannot give those in-between shapes: it shows the table as it is
now, which may even be ahead of the log (statements capture has not brought yet). So
each statement is applied, as its :mod:`~icetide.evolution.evidence` says, to the shape
before it (:func:`after_statement`, renames by identity as
:func:`~icetide.evolution.classify.identities` replays them), and the catalog is used
for the last shape only when it agrees with it (the same column names in the same
order, and the same types for the columns no statement defined): the catalog then gives
the types, defaults and order exactly as the source states them. When it does not agree,
the catalog has moved on and the statements read so far say what the table was at the
batch's end; the later statements come with their own batch.

Decisions only: :func:`statement_steps` returns the steps and
:class:`~icetide.evolution.detect.Detector` plans and applies them one by one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from icetide.errors import SchemaError
from icetide.evolution.classify import NEW, identities
from icetide.evolution.evidence import Dialect, Evidence, TableEvidence, collect
from icetide.evolution.source_schema import CatalogColumn
from icetide.ledger.signals import ChangeSignal
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, IcetideType


@dataclass(frozen=True)
class Step:
    """One schema version to plan: the ``signals`` it answers (its DDL statement first),
    their ``evidence``, and the ``source`` columns after them (ids not matched yet:
    :func:`~icetide.evolution.classify.candidate_schema` matches them).
    ``from_catalog`` says whether ``source`` is the catalog's reading or the
    statements'."""

    signals: tuple[ChangeSignal, ...]
    evidence: TableEvidence
    source: TableSchema
    from_catalog: bool

    @property
    def position(self) -> int | None:
        """Where the version starts in the source's log: its first statement's position."""
        placed = [s.position for s in self.signals if s.position is not None]
        return min(placed) if placed else None


def statement_steps(
    current: TableSchema,
    signals: Sequence[ChangeSignal],
    catalog: TableSchema,
    dialect: Dialect,
    source_table: str | None = None,
    *,
    key_pinned: bool = False,
) -> tuple[Step, ...] | None:
    """A step per DDL statement of ``signals`` (in log order), each shape derived from
    the one before it, the last one ``catalog``'s when the names agree (module doc).

    ``None`` when the statements cannot be replayed and the caller plans the catalog's
    reading against all of them at once, as for a change without DDL: a PostgreSQL
    change (its log carries column lists, no DDL), a signal without a log position, a
    statement sqlglot does not parse, a type it cannot map, or a dropped primary key.

    >>> from icetide.schema.types import IntType
    >>> t = TableSchema("t", (Column(1, "id", IntType(), False), Column(2, "p", IntType()),
    ...                       Column(3, "q", IntType())), ("id",))
    >>> ddl = ["RENAME COLUMN p TO tmp", "RENAME COLUMN q TO p", "RENAME COLUMN tmp TO q"]
    >>> signals = [ChangeSignal("t", "ddl", ddl=f"ALTER TABLE t {d}", position=10 + i)
    ...            for i, d in enumerate(ddl)]
    >>> now = t.with_columns([t.columns[0], t.columns[2], t.columns[1]])  # id, q, p
    >>> steps = statement_steps(t, signals, now, "mysql")
    >>> [([(c.name, c.id) for c in s.source.columns], s.position) for s in steps[:2]]
    [([('id', 1), ('tmp', 2), ('q', 3)], 10), ([('id', 1), ('tmp', 2), ('p', 3)], 11)]
    >>> steps[2].from_catalog, steps[2].position
    (True, 12)
    >>> statement_steps(t, signals, t, "mysql")[2].from_catalog  # id, p, q: not that table
    False
    """
    if dialect != "mysql":
        return None
    statements = sorted((s for s in signals if s.ddl), key=lambda s: s.position or 0)
    if not statements or any(s.position is None for s in statements):
        return None
    others = tuple(s for s in signals if not s.ddl)
    steps: list[Step] = []
    shape = current
    defined: set[int] = set()  # the columns a statement states the type of, by id
    for i, signal in enumerate(statements):
        evidence = collect([str(signal.ddl)], dialect, source_table)
        after = after_statement(shape, evidence, key_pinned=key_pinned)
        if after is None:
            return None
        last = i == len(statements) - 1
        steps.append(Step((signal, *others) if last else (signal,), evidence, after, False))
        shape = after
        named = {
            item.column.casefold()
            for item in evidence.items
            if item.kind in ("add", "type") and item.column
        }
        defined |= {c.id for c in after.columns if c.name.casefold() in named}
    if _agrees(catalog, shape, defined):
        steps[-1] = replace(steps[-1], source=catalog, from_catalog=True)
    return tuple(steps)


def _agrees(catalog: TableSchema, shape: TableSchema, defined: set[int]) -> bool:
    """Whether the catalog shows the shape the statements leave: the same column names
    in the same order, and the same types for the columns no statement defined (a later
    statement the log has not brought yet shows there: a ``MODIFY``, names traded between
    columns of two types, or between columns of one type, which only the order tells:
    a catalog read after ``p``/``q`` traded names still lists the names the shape has)."""
    theirs = [(c.name.casefold(), c.type) for c in catalog.columns]
    ours = [(c.name.casefold(), c) for c in shape.columns]
    return [n for n, _ in theirs] == [n for n, _ in ours] and all(
        kind == c.type
        for (_, kind), (_, c) in zip(theirs, ours, strict=True)
        if c.id not in defined
    )


def after_statement(
    schema: TableSchema, evidence: TableEvidence, *, key_pinned: bool = False
) -> TableSchema | None:
    """``schema``'s table as the statement(s) of ``evidence`` leave it: renamed columns
    keep their ids, dropped ones go, added ones get new ids (placed ``FIRST``/``AFTER``
    as said, else last), a redefined column (MySQL ``MODIFY``/``CHANGE``) gets its new
    type, nullability and default, and the logical name its values arrive under
    (``DATETIME(6)``: microseconds) in the sink settings. A type the source's converter
    accepts as the column's declared type (``TINYINT(1)`` declared ``boolean``) keeps
    it, as a catalog reading does (:meth:`~icetide.evolution.source_schema.CatalogColumn.mapped`).

    ``None`` when the statement says too little to know the shape: sqlglot does not
    parse it, the converter does not map a type, or it drops the primary key (what the
    table is keyed by next comes from the catalog).
    """
    if evidence.unparsed:
        return None
    holds = identities(schema, evidence)
    spelled = _spellings(schema, evidence)
    redefined = {i.column.casefold(): i for i in evidence.items if i.kind == "type" and i.column}
    next_id = schema.last_column_id
    kept: list[Column] = []
    hints: dict[int, str | None] = {}  # a defined column's logical name (DATETIME(6): micros)
    for column in schema.columns:
        name = next((n for n, held in holds.items() if held == column.id), None)
        if name is None:
            continue  # dropped
        moved: Column | None = replace(column, name=spelled.get(name, column.name))
        item = redefined.get(name)
        if item is not None:
            moved = _defined(column.id, spelled.get(name, column.name), item, hints, column.type)
        if moved is None:
            return None
        kept.append(_attributes(moved, evidence))
    for item in evidence.items:
        if item.kind != "add" or not item.column or holds.get(item.column.casefold()) != NEW:
            continue
        next_id += 1
        added = _defined(next_id, item.column, item, hints)
        if added is None:
            return None
        kept = _placed(kept, _attributes(added, evidence), item)
    key = None if key_pinned else evidence.final_key()
    if key == ():
        return None
    key_ids = None
    if key is not None:
        by_name = {c.name.casefold(): c.id for c in kept}
        if any(k.casefold() not in by_name for k in key):
            return None
        key_ids = tuple(by_name[k.casefold()] for k in key)
        # A primary key's columns are NOT NULL (MySQL makes them so).
        kept = [replace(c, nullable=False) if c.id in key_ids else c for c in kept]
    logical = {i: h for i, h in schema.sink.logical.items() if i not in hints}
    logical.update({i: h for i, h in hints.items() if h is not None})
    try:
        return schema.with_columns(
            kept, key_ids=key_ids, sink=replace(schema.sink, logical=logical)
        )
    except SchemaError:
        return None  # a shape no table has (two columns of one name): the catalog says


def _spellings(schema: TableSchema, evidence: TableEvidence) -> dict[str, str]:
    """Case-folded name → the name as the statement spells it (renames and adds)."""
    out = {c.name.casefold(): c.name for c in schema.columns}
    for item in evidence.items:
        for name in (item.new_name, item.column if item.kind == "add" else None):
            if name:
                out[name.casefold()] = name
    return out


def _defined(
    column_id: int,
    name: str,
    item: Evidence,
    hints: dict[int, str | None],
    declared: IcetideType | None = None,
) -> Column | None:
    """The column a definition (``ADD``, ``MODIFY``, ``CHANGE``) states, its logical
    name put in ``hints``; ``declared``: the type the schema declares for the column it
    redefines."""
    if item.source_type is None or item.icetide_type is None:
        return None
    read = CatalogColumn(name, item.source_type, True, False, None, item.dialect)
    ctype, hints[column_id] = read.mapped(declared)
    # A MySQL column definition is whole: without NOT NULL the column is nullable, without
    # DEFAULT it has none.
    nullable = True if item.nullable is None else item.nullable
    return Column(column_id, name, ctype, nullable, default=item.default)


def _attributes(column: Column, evidence: TableEvidence) -> Column:
    """``ALTER COLUMN … SET/DROP DEFAULT`` and nullability clauses on ``column``."""
    for item in evidence.items:
        if (item.column or "").casefold() != column.name.casefold():
            continue
        if item.kind == "default":
            column = replace(column, default=item.default)
        elif item.kind == "nullability" and item.nullable is not None:
            column = replace(column, nullable=item.nullable)
    return column


def _placed(columns: list[Column], added: Column, item: Evidence) -> list[Column]:
    if item.first:
        return [added, *columns]
    if item.after is not None:
        at = next(
            (i for i, c in enumerate(columns) if c.name.casefold() == item.after.casefold()),
            None,
        )
        if at is not None:
            return [*columns[: at + 1], added, *columns[at + 1 :]]
    return [*columns, added]
