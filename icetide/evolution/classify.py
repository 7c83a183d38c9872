"""From a freshly read source schema to classified changes: which ids the new columns
keep, and what each change is (automatic, drop, rename, ambiguous or held, and why).

Two steps, each pure:

1. :func:`candidate_schema` gives the new source columns their ids: a column keeps the id
   of the old column with its name, or of the old column DDL evidence shows it was
   renamed from; any other column (and nested field, list element, map key/value) gets
   a new id above ``last_column_id``. Ids are never reused.
2. :func:`classify` diffs old and candidate by id (:func:`icetide.schema.diff.diff`) and
   names the kind of each change, one small function per kind of by-id change
   (:data:`BY_DIFF_KIND`); the kind's row of :data:`KINDS` gives the rest: the
   classification, how phase 3 fills what the base missed, and a held kind's manual
   path. The table below is :data:`KINDS` as text (a unit test holds the two together,
   and docs/schema-evolution.md's table to them):

   ================  ==================  ===============  =========================================
   kind              classification      fill             what and why
   ================  ==================  ===============  =========================================
   add_column        automatic           ledger           a nullable column: its values written
                                                          while the code lags are rescued in the
                                                          ledger, then filled from there
   add_nested        automatic           ledger           a nullable field inside a struct
   add_with_default  automatic_backfill  initial_default  a column with a DEFAULT on a table with
                                         keyed_backfill   rows: old rows hold the default without
                                                          any event; a computed default is read
                                                          back by key
   add_required      automatic_backfill  keyed_backfill   a NOT NULL column without DEFAULT on a
                                         ledger           table with rows: old rows hold the
                                                          source's implicit value, read back by
                                                          key; a required field inside a struct
                                                          of an empty table: from the ledger
   widen             automatic           —                int→long, float→double, decimal
                                                          precision up (same scale), enum symbols
                                                          added, enum→string
   source_only       automatic           —                the source type changed, its icetide
                                                          type did not (VARCHAR(32)→VARCHAR(64))
   optional          automatic           —                NOT NULL dropped
   metadata          automatic           —                doc, default or tags of a kept column
   rename            rename              —                the id is kept: DDL shows the rename
   drop              drop                —                soft (kept, commented) or hard, by policy
   ambiguous         ambiguous           —                a drop and an add of the same type at the
                                                          same place without DDL evidence: rename
                                                          or not? (approved as drop_add, the plan
                                                          fills it from the ledger)
   narrow            held                resnapshot       long→int, double→float, precision down …
   type_change       held                resnapshot       another category (string→long …), or a
                                                          decimal scale change
   required          held                —                NOT NULL added: events in flight may be
                                                          null
   key_change        held                resnapshot       the primary key changed: re-snapshot
   sensitive         held                ledger           a new column tagged sensitive, held until
                                                          someone approves it
   ================  ==================  ===============  =========================================

   A kind with two fills is filled the first way unless its row says when the second
   applies.

``has_rows`` says whether the table already holds rows (a column added with a default to
an empty table needs no fill).
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from icetide.errors import SchemaChangeError, SchemaError
from icetide.evolution.evidence import NO_EVIDENCE, Evidence, EvidenceKind, TableEvidence
from icetide.schema.change_kinds import ChangeKind
from icetide.schema.defaults import default_json
from icetide.schema.diff import FieldChange, diff
from icetide.schema.diff import Kind as DiffKind
from icetide.schema.model import TableSchema
from icetide.schema.promote import promote
from icetide.schema.types import SENSITIVE, Column, IcetideType, ListType, MapType, StructType
from icetide.schema.visitor import (
    Partner,
    PartnerVisitor,
    element_field,
    key_field,
    value_field,
    visit_with_partner,
)

Classification = Literal["automatic", "automatic_backfill", "rename", "drop", "ambiguous", "held"]
FillMethod = Literal["ledger", "initial_default", "keyed_backfill", "resnapshot"]
"""How phase 3 fills what the base table missed: from the values the ledger rescued while
the code lagged, by Iceberg's ``initial-default`` (a constant default), by reading the
column back from the source by primary key, or by re-snapshotting the table."""

HELD: frozenset[Classification] = frozenset({"held", "ambiguous"})


@dataclass(frozen=True)
class KindRule:
    """What every change of one kind is: a row of the module doc's table."""

    classification: Classification
    fills: tuple[FillMethod, ...] = ()
    """How phase 3 fills what the base missed: the first way, unless the change picks
    the second (the table says when); empty: nothing to fill."""
    manual: str | None = None
    """The documented manual path of a held or ambiguous kind (``{id}``: the change's id)."""


KINDS: Mapping[ChangeKind, KindRule] = MappingProxyType(
    {
        "add_column": KindRule("automatic", ("ledger",)),
        "add_nested": KindRule("automatic", ("ledger",)),
        "add_with_default": KindRule("automatic_backfill", ("initial_default", "keyed_backfill")),
        "add_required": KindRule("automatic_backfill", ("keyed_backfill", "ledger")),
        "widen": KindRule("automatic"),
        "source_only": KindRule("automatic"),
        "optional": KindRule("automatic"),
        "metadata": KindRule("automatic"),
        "rename": KindRule("rename"),
        "drop": KindRule("drop"),
        "ambiguous": KindRule(
            "ambiguous",
            manual=(
                "decide what happened: `icetide schema apply --approve '{id}=rename'` keeps "
                "the column's id and values (it was a rename), `--approve '{id}=drop_add'` "
                "drops the old column and adds the new one empty (filled from the ledger from "
                "now on)"
            ),
        ),
        "narrow": KindRule(
            "held",
            ("resnapshot",),
            manual=(
                "a narrower type cannot hold every stored value in place: either widen the "
                "source column back, or approve with `icetide schema apply --approve {id}`, "
                "which re-snapshots the table into the new type (values that do not fit go "
                "to the dead-letter table)"
            ),
        ),
        "type_change": KindRule(
            "held",
            ("resnapshot",),
            manual=(
                "Iceberg cannot change a column's type category in place: add a new column "
                "at the source (new name), fill it, drop the old one; or approve with "
                "`icetide schema apply --approve {id}` to re-snapshot the table with the new "
                "type"
            ),
        ),
        "required": KindRule(
            "held",
            manual=(
                "wait until the ledger has passed the source position of the change (events "
                "written before it may carry NULL), then `icetide schema apply --approve {id}`"
            ),
        ),
        "key_change": KindRule(
            "held",
            ("resnapshot",),
            manual=(
                "approve with `icetide schema apply --approve {id} --no-ddl`: the running "
                "ledger and merge re-snapshot the table under the new key, chunk by chunk, "
                "while capture and the other tables keep flowing"
            ),
        ),
        "sensitive": KindRule(
            "held",
            ("ledger",),
            manual=(
                "configure how the column reaches the lake (a hash/mask conversion in the "
                "sink config, or accept it as is), then `icetide schema apply --approve "
                "{id}`; until then its values stay in the ledger's rescued data only"
            ),
        ),
    }
)
"""Each kind of change → its :class:`KindRule` (the module doc's table, in its order)."""


@dataclass(frozen=True)
class SchemaChange:
    """One classified change to a table's schema.

    ``id`` is stable between ``icetide schema plan`` and ``apply`` (``kind:path``, e.g.
    ``narrow:amount``, ``ambiguous:email>mail``, ``key_change``): ``--approve`` names it.
    ``field_changes`` are the by-id changes it stands for (an ambiguous pair: its drop and
    its add; a key change: the key columns dropped or added). ``fill`` is how phase 3
    fills what the base missed (``None``: nothing to fill). :func:`classify` makes them
    with the classification, manual path and fill of the kind's row of :data:`KINDS`.
    """

    id: str
    kind: ChangeKind
    classification: Classification
    path: tuple[str, ...]
    field_id: int | None
    reason: str
    field_changes: tuple[FieldChange, ...] = ()
    manual: str | None = None
    fill: FillMethod | None = None
    evidence: tuple[Evidence, ...] = ()
    detail: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    @property
    def held(self) -> bool:
        """Whether the change waits for a decision (held or ambiguous)."""
        return self.classification in HELD

    @property
    def dotted(self) -> str:
        """The path as text."""
        return ".".join(self.path)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form for plans."""
        data: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "classification": self.classification,
            "path": self.dotted,
            "field_id": self.field_id,
            "reason": self.reason,
        }
        if self.fill:
            data["fill"] = self.fill
        if self.manual:
            data["manual"] = self.manual
        if self.detail:
            data["detail"] = self.detail
        if self.evidence:
            data["evidence"] = [e.statement for e in self.evidence]
        return data


def _change(
    kind: ChangeKind,
    path: tuple[str, ...],
    field_id: int | None,
    reason: str,
    field_changes: tuple[FieldChange, ...] = (),
    *,
    name: str | None = None,
    fill: FillMethod | None = None,
    evidence: tuple[Evidence, ...] = (),
    detail: dict[str, Any] | None = None,
) -> SchemaChange:
    """A change of ``kind`` with its row of :data:`KINDS`: classification, manual path, and
    the kind's first fill (``fill`` picks another one the row lists).

    Its id is ``kind:path``, ``kind:name`` where the path alone does not name it (an
    ambiguous pair), and ``kind`` alone for a change of the whole table.
    """
    rule = KINDS[kind]
    if fill is not None and fill not in rule.fills:
        raise ValueError(f"{kind} changes are not filled by {fill} (see KINDS)")
    label = ".".join(path) if name is None else name
    change_id = f"{kind}:{label}" if label else kind
    return SchemaChange(
        change_id,
        kind,
        rule.classification,
        path,
        field_id,
        reason,
        field_changes,
        manual=rule.manual.format(id=change_id) if rule.manual else None,
        fill=fill or (rule.fills[0] if rule.fills else None),
        evidence=evidence,
        detail=detail or {},
    )


# -- 1. the candidate schema ------------------------------------------------------------------


def candidate_schema(
    old: TableSchema,
    inferred: TableSchema,
    evidence: TableEvidence = NO_EVIDENCE,
    *,
    sensitive: Sequence[str] = (),
) -> TableSchema:
    """``inferred`` (a fresh read of the source, ids meaningless) with ``old``'s ids kept
    where a column is the same one: same name, or renamed per ``evidence``. New columns,
    fields, list elements and map keys/values get ids above ``old.last_column_id``, in
    column order. New columns whose name matches a ``sensitive`` pattern are tagged
    ``sensitive``. Returns ``old`` itself when nothing changed.

    >>> from icetide.schema.types import LongType, StringType
    >>> key = Column(1, "id", LongType(), False)
    >>> old = TableSchema("t", (key, Column(2, "email", StringType())), ("id",))
    >>> fresh = TableSchema(
    ...     "t", (key, Column(2, "mail", StringType()), Column(3, "ssn", StringType())), ("id",)
    ... )
    >>> from icetide.evolution.evidence import collect
    >>> ev = collect(["ALTER TABLE t RENAME COLUMN email TO mail"], "mysql")
    >>> new = candidate_schema(old, fresh, ev, sensitive=["ssn"])
    >>> [(c.id, c.name, sorted(c.tags)) for c in new.columns]
    [(1, 'id', []), (2, 'mail', []), (3, 'ssn', ['sensitive'])]
    """
    # Which old column each top-level name now holds, following the DDL in order (renames
    # by identity, so a swap swaps ids; a drop and a re-add under one name is a new
    # column); a name no DDL touched keeps the old column of that name.
    holds = identities(old, evidence)
    ids = _Ids(old.last_column_id)
    numbering = _Candidate(old, holds, ids, sensitive)
    columns = visit_with_partner(
        StructType(inferred.columns), StructType(old.columns), numbering
    ).fields
    names = {c.name.casefold(): c.id for c in columns}
    key_names = inferred.primary_key or old.primary_key
    missing = [k for k in key_names if k.casefold() not in names]
    if missing:
        raise SchemaError(
            f"table {old.table}: the source's primary key {list(key_names)} names "
            f"{', '.join(missing)}, which the new columns do not have"
        )
    key_ids = tuple(names[k.casefold()] for k in key_names)
    logical = dict(old.sink.logical)
    new_ids = {c.name.casefold(): c.id for c in columns}
    for fid, hint in inferred.sink.logical.items():
        name = next((c.name for c in inferred.columns if c.id == fid), None)
        if name is not None:
            logical[new_ids[name.casefold()]] = hint
    kept = {c.id for c in columns}
    logical = {i: h for i, h in logical.items() if i in kept}
    sink = dataclasses.replace(old.sink, logical=logical)
    if columns == old.columns and key_ids == old.key_ids and sink == old.sink:
        return old
    return TableSchema(
        old.table,
        columns,
        key_ids=key_ids,
        version=old.version + 1,
        last_column_id=max(old.last_column_id, ids.last),
        sink=sink,
    )


NEW = 0
"""The identity of a column the DDL added (an id no old column has)."""


class _Candidate(PartnerVisitor[Any]):
    """The inferred schema walked beside the old one, each field given the id of the old
    field it is: a column the one :func:`identities` says its name holds, a nested field
    the old struct's field of the same name (case-insensitive), a list element or map key
    or value the old list's or map's. Anything new takes the next id as the walk enters
    it, parents before what they hold; each id waits on a stack until its node is rebuilt
    (a map takes its value's id, then its key's). New columns whose name matches a
    ``sensitive`` pattern are tagged :data:`SENSITIVE`.
    """

    def __init__(
        self, old: TableSchema, holds: Mapping[str, int], ids: _Ids, sensitive: Sequence[str]
    ) -> None:
        self.by_id = {c.id: c for c in old.columns}
        self.holds = holds
        self.ids = ids
        self.patterns = tuple(p.casefold() for p in sensitive)
        self.depth = 0
        self.taken: list[int] = []

    def field_partners(self, struct: StructType, partner: IcetideType | None) -> list[Partner]:
        if self.depth == 0:  # the columns
            held = [self.holds.get(c.name.casefold()) for c in struct.fields]
            return [self.by_id.get(i) if i is not None else None for i in held]
        before = partner.fields if isinstance(partner, StructType) else ()
        by_name = {c.name.casefold(): c for c in before}
        return [by_name.get(c.name.casefold()) for c in struct.fields]

    def element_partner(self, list_type: ListType, partner: IcetideType | None) -> Partner:
        return element_field(partner) if isinstance(partner, ListType) else None

    def key_partner(self, map_type: MapType, partner: IcetideType | None) -> Partner:
        return key_field(partner) if isinstance(partner, MapType) else None

    def value_partner(self, map_type: MapType, partner: IcetideType | None) -> Partner:
        return value_field(partner) if isinstance(partner, MapType) else None

    def number(self, field: Column, partner: Partner) -> None:
        self.taken.append(partner.id if partner is not None else self.ids.next())

    before_list_element = before_map_key = before_map_value = number

    def before_field(self, field: Column, partner: Partner) -> None:
        self.depth += 1
        self.number(field, partner)

    def after_field(self, field: Column, partner: Partner) -> None:
        self.depth -= 1

    def schema(self, schema: TableSchema, partner: TableSchema | None, struct_result: Any) -> Any:
        return struct_result

    def struct(
        self, struct: StructType, partner: IcetideType | None, field_results: Sequence[Any]
    ) -> Any:
        return StructType(tuple(field_results))

    def field(self, field: Column, partner: Partner, field_result: Any) -> Any:
        field_id = self.taken.pop()
        if partner is None:
            tags = set(field.tags)
            name = field.name.casefold()
            if self.depth == 0 and any(fnmatch.fnmatch(name, p) for p in self.patterns):
                tags.add(SENSITIVE)
            return dataclasses.replace(field, id=field_id, type=field_result, tags=frozenset(tags))
        return dataclasses.replace(
            field,
            id=field_id,
            type=field_result,
            doc=field.doc if field.doc is not None else partner.doc,
            tags=field.tags | partner.tags,
        )

    def list(self, list_type: ListType, partner: IcetideType | None, element_result: Any) -> Any:
        return ListType(self.taken.pop(), element_result, list_type.element_nullable)

    def map(
        self, map_type: MapType, partner: IcetideType | None, key_result: Any, value_result: Any
    ) -> Any:
        value_id, key_id = self.taken.pop(), self.taken.pop()
        return MapType(key_id, key_result, value_id, value_result, map_type.value_nullable)

    def primitive(self, primitive: IcetideType, partner: IcetideType | None) -> Any:
        return primitive


def identities(old: TableSchema, evidence: TableEvidence) -> dict[str, int]:
    """Top-level name (case-folded) → the id of the old column it holds after the DDL of
    ``evidence`` ran, :data:`NEW` for a column the DDL added.

    The statements are replayed on ``old``'s names in order. The renames of one statement
    happen at once (MySQL's ``RENAME COLUMN x TO y, RENAME COLUMN y TO x`` swaps), so a
    swap, or a cycle through a temporary name, moves the ids with the names. A drop frees
    its name: an add under it later is a new column, never the dropped one back. A
    statement the schema already reflects (a rename whose old name is gone, an add whose
    name is there) is history and changes nothing.

    >>> from icetide.evolution.evidence import collect
    >>> from icetide.schema.types import IntType
    >>> t = TableSchema("t", (Column(1, "id", IntType(), False), Column(2, "x", IntType()),
    ...                        Column(3, "y", IntType())), ("id",))
    >>> swap = ["ALTER TABLE t RENAME COLUMN x TO tmp", "ALTER TABLE t RENAME COLUMN y TO x",
    ...         "ALTER TABLE t RENAME COLUMN tmp TO y"]
    >>> identities(t, collect(swap, "mysql"))
    {'id': 1, 'x': 3, 'y': 2}
    >>> identities(t, collect(["ALTER TABLE t DROP COLUMN x", "ALTER TABLE t ADD x INT"], "mysql"))
    {'id': 1, 'y': 3, 'x': 0}
    """
    names = {c.name.casefold(): c.id for c in old.columns}
    statements: dict[str, list[Any]] = {}
    for item in evidence.items:  # grouped by statement, in order
        statements.setdefault(item.statement, []).append(item)
    for items in statements.values():
        # A clause names a column as the statement found it (so x TO y, y TO x swaps),
        # or, when no such column was there, as an earlier clause left it (x TO tmp, …,
        # tmp TO y).
        vacated: set[str] = set()
        produced: dict[str, int] = {}
        for item in items:
            if item.kind != "rename" or not item.column or not item.new_name:
                continue
            was, now = item.column.casefold(), item.new_name.casefold()
            if was in names and was not in vacated:
                identity = names[was]
                vacated.add(was)
            elif was in produced:
                identity = produced.pop(was)
            else:
                continue  # history: the schema already shows it
            produced[now] = identity
        for was in vacated:
            names.pop(was, None)
        names.update(produced)
        for item in items:
            if item.kind == "drop" and item.column:
                names.pop(item.column.casefold(), None)
        for item in items:
            if item.kind == "add" and item.column and item.column.casefold() not in names:
                names[item.column.casefold()] = NEW
    return names


class _Ids:
    def __init__(self, last: int) -> None:
        self.last = last

    def next(self) -> int:
        self.last += 1
        return self.last


# -- 2. classification ------------------------------------------------------------------------


def classify(
    old: TableSchema,
    new: TableSchema,
    evidence: TableEvidence = NO_EVIDENCE,
    *,
    has_rows: bool = True,
) -> tuple[SchemaChange, ...]:
    """Every change from ``old`` to ``new`` (ids already matched), classified (see module
    doc), in the order they apply: key change first, then the by-id changes in diff
    order, then metadata."""
    try:
        field_changes = diff(old, new)
    except SchemaError as exc:
        return (
            _change(
                "type_change",
                (),
                None,
                f"{exc.message}; no in-place change expresses it",
                name="table",
            ),
        )
    changes: list[SchemaChange] = []
    consumed: set[int] = set()  # indexes into field_changes already part of a change
    if old.key_ids != new.key_ids:
        parts = [
            i
            for i, fc in enumerate(field_changes)
            if len(fc.path) == 1
            and (
                (fc.kind == "drop" and fc.field_id in old.key_ids)
                or (fc.kind == "add" and fc.field_id in new.key_ids)
                # a column leaving or joining the key changes its nullability with it
                or (
                    fc.kind in ("optional", "required")
                    and fc.field_id in {*old.key_ids, *new.key_ids}
                )
            )
        ]
        consumed.update(parts)
        changes.append(
            _change(
                "key_change",
                (),
                None,
                f"the primary key changes from {list(old.primary_key)} to "
                f"{list(new.primary_key)}: rows are keyed, bucketed and merged by it, so the "
                "table needs a re-snapshot under the new key",
                tuple(field_changes[i] for i in parts),
                evidence=evidence.of("key"),
                detail={"from": list(old.primary_key), "to": list(new.primary_key)},
            )
        )
    else:
        changes += _pinned_key_change(new, evidence)
    changes += _ambiguous(old, new, field_changes, evidence, consumed)
    seen = _Seen(new, evidence, has_rows)
    for i, fc in enumerate(field_changes):
        if i in consumed:
            continue
        change = BY_DIFF_KIND[fc.kind](fc, seen)
        if change is not None:
            changes.append(change)
    changes += _metadata(old, new)
    changes += _source_only(old, new, evidence, {c.field_id for c in changes})
    return tuple(changes)


@dataclass(frozen=True)
class _Seen:
    """What the by-id classifiers read besides the change itself."""

    new: TableSchema
    evidence: TableEvidence
    has_rows: bool

    def of(self, kind: EvidenceKind, fc: FieldChange) -> tuple[Evidence, ...]:
        """The DDL evidence of ``kind`` about the changed field's (last) name."""
        return self.evidence.of(kind, fc.path[-1])


def _of_field(
    kind: ChangeKind,
    fc: FieldChange,
    reason: str,
    *,
    path: tuple[str, ...] | None = None,
    fill: FillMethod | None = None,
    evidence: tuple[Evidence, ...] = (),
    detail: dict[str, Any] | None = None,
) -> SchemaChange:
    """A change of ``kind`` standing for the one by-id change ``fc`` (at ``fc``'s path
    unless ``path`` is given)."""
    return _change(
        kind,
        fc.path if path is None else path,
        fc.field_id,
        reason,
        (fc,),
        fill=fill,
        evidence=evidence,
        detail=detail,
    )


def _rename(fc: FieldChange, seen: _Seen) -> SchemaChange:
    assert fc.new_name is not None
    shown = seen.of("rename", fc)
    return _of_field(
        "rename",
        fc,
        f"renamed from {fc.path[-1]!r}"
        + (" (the DDL shows the rename)" if shown else "")
        + ": the id and values stay",
        path=(*fc.path[:-1], fc.new_name),
        evidence=shown,
        detail={"from": fc.path[-1], "to": fc.new_name},
    )


def _add(fc: FieldChange, seen: _Seen) -> SchemaChange:
    column = seen.new.find(fc.field_id)
    detail: dict[str, Any] = {"type": str(column.type), "after": fc.after}
    if column.default is not None:
        detail["default"] = default_json(column.default)
    ev = seen.of("add", fc)

    def added(kind: ChangeKind, reason: str, fill: FillMethod | None = None) -> SchemaChange:
        return _of_field(kind, fc, reason, fill=fill, evidence=ev, detail=detail)

    if SENSITIVE in column.tags:
        return added(
            "sensitive",
            "the new column is tagged sensitive: its values reach the lake only after "
            "someone approves it",
        )
    if len(fc.path) > 1:  # a field inside a struct
        if column.nullable:
            return added("add_nested", "a nullable field added inside a struct")
        return added(
            "add_required",
            "a required field added inside a struct: old rows need its value from the "
            "source, read back by key",
            None if seen.has_rows else "ledger",
        )
    if column.default is not None and seen.has_rows:
        constant = column.default.constant
        return added(
            "add_with_default",
            "added with a DEFAULT on a table that has rows: every old row holds the "
            "default at the source without any change event, so the base needs a fill "
            + (
                "(the constant default, as Iceberg initial-default or written by key)"
                if constant
                else f"(the default {column.default.sql} is computed: read back by key)"
            ),
            None if constant else "keyed_backfill",
        )
    if not column.nullable and seen.has_rows:
        return added(
            "add_required",
            "a NOT NULL column without DEFAULT on a table that has rows: old rows hold "
            "the source's implicit value, read back by key",
        )
    return added(
        "add_column",
        "a nullable column added: the tables gain it first, values written meanwhile "
        "are rescued in the ledger and filled in",
    )


def _drop(fc: FieldChange, seen: _Seen) -> SchemaChange:
    ev = seen.of("drop", fc)
    return _of_field(
        "drop",
        fc,
        "dropped at the source" + (" (the DDL shows the drop)" if ev else ""),
        evidence=ev,
        detail={"type": str(fc.old_type)},
    )


def _widen(fc: FieldChange, seen: _Seen) -> SchemaChange:
    """A type change by id: ``widen`` when it promotes, else held as ``narrow`` (the other
    way round promotes) or ``type_change``."""
    assert fc.old_type is not None and fc.new_type is not None
    ev = seen.of("type", fc)
    detail = {"from": str(fc.old_type), "to": str(fc.new_type)}
    try:
        promote(fc.old_type, fc.new_type)
    except SchemaChangeError as exc:
        narrowing = _promotes(fc.new_type, fc.old_type)
        what = "narrows" if narrowing else "changes the type category of"
        return _of_field(
            "narrow" if narrowing else "type_change",
            fc,
            f"{fc.old_type} → {fc.new_type} {what} the column: {exc.message}",
            evidence=ev,
            detail=detail,
        )
    return _of_field(
        "widen",
        fc,
        f"{fc.old_type} → {fc.new_type} widens in place",
        evidence=ev,
        detail=detail,
    )


def _optional(fc: FieldChange, seen: _Seen) -> SchemaChange:
    return _of_field(
        "optional",
        fc,
        "may now be NULL (every table column is nullable already)",
        evidence=seen.of("nullability", fc) or seen.of("type", fc),
    )


def _required(fc: FieldChange, seen: _Seen) -> SchemaChange:
    return _of_field(
        "required",
        fc,
        "now NOT NULL: events written before the change may still carry NULL and would "
        "be dead-lettered as null_in_required",
        evidence=seen.of("nullability", fc) or seen.of("type", fc),
    )


def _doc(fc: FieldChange, seen: _Seen) -> None:
    """Reported with the other metadata (:func:`_metadata`)."""
    return None


BY_DIFF_KIND: Mapping[DiffKind, Callable[[FieldChange, _Seen], SchemaChange | None]] = (
    MappingProxyType(
        {
            "rename": _rename,
            "add": _add,
            "drop": _drop,
            "widen": _widen,
            "optional": _optional,
            "required": _required,
            "doc": _doc,
        }
    )
)
"""Each kind of by-id change (:data:`icetide.schema.diff.ORDER`) → the function that
classifies one (``None``: reported elsewhere)."""


def _promotes(source: IcetideType, target: IcetideType) -> bool:
    try:
        promote(source, target)
    except SchemaChangeError:
        return False
    return True


# -- ambiguous pairs --------------------------------------------------------------------------


def _places(
    columns: Sequence[Column], parent: tuple[str, ...] = ()
) -> Iterator[tuple[int, tuple[tuple[str, ...], int]]]:
    """Field id → (parent path, index among its siblings), for struct fields at any depth."""
    for index, column in enumerate(columns):
        yield column.id, (parent, index)
        inner = column.type
        if isinstance(inner, StructType):
            yield from _places(inner.fields, (*parent, column.name))


def _ambiguous(
    old: TableSchema,
    new: TableSchema,
    field_changes: list[FieldChange],
    evidence: TableEvidence,
    consumed: set[int],
) -> list[SchemaChange]:
    before = dict(_places(old.columns))
    after = dict(_places(new.columns))
    adds = [
        (i, fc)
        for i, fc in enumerate(field_changes)
        if fc.kind == "add" and i not in consumed and fc.field_id in after
    ]
    found: list[SchemaChange] = []
    for i, drop in enumerate(field_changes):
        if drop.kind != "drop" or i in consumed or drop.field_id not in before:
            continue
        if evidence.of("drop", drop.path[-1]):
            continue  # the DDL says it was dropped
        was = old.find(drop.field_id)
        for j, add in adds:
            if j in consumed:
                continue
            column = new.find(add.field_id)
            if evidence.of("add", add.path[-1]):
                continue  # the DDL says it was added
            same_place = before[drop.field_id] == after[add.field_id]
            if same_place and column.type == was.type:
                consumed.update((i, j))
                found.append(
                    _change(
                        "ambiguous",
                        add.path,
                        add.field_id,
                        f"{drop.dotted!r} left and {add.dotted!r} came at the same place with "
                        f"the same type ({column.type}), and no DDL says whether it was a "
                        "rename",
                        (drop, add),
                        name=f"{drop.dotted}>{add.path[-1]}",
                        detail={
                            "dropped": drop.dotted,
                            "added": add.dotted,
                            "type": str(column.type),
                        },
                    )
                )
                break
    return found


# -- metadata and source-only changes ---------------------------------------------------------


def _metadata(old: TableSchema, new: TableSchema) -> list[SchemaChange]:
    found = []
    for path, fid in _paths(new.columns):
        try:
            was = old.find(fid)
        except SchemaError:
            continue
        now = new.find(fid)
        what: dict[str, Any] = {}
        if was.doc != now.doc:
            what["doc"] = now.doc
        if was.default != now.default:
            what["default"] = default_json(now.default)
        if was.tags != now.tags:
            what["tags"] = sorted(now.tags)
        if what:
            found.append(
                _change(
                    "metadata",
                    tuple(path.split(".")),
                    fid,
                    f"{', '.join(what)} changed (nothing to alter in the tables)",
                    detail=what,
                )
            )
    return found


def _paths(columns: Iterable[Column], parent: str = "") -> Iterator[tuple[str, int]]:
    for column in columns:
        path = f"{parent}{column.name}"
        yield path, column.id
        if isinstance(column.type, StructType):
            yield from _paths(column.type.fields, path + ".")


def _pinned_key_change(new: TableSchema, evidence: TableEvidence) -> list[SchemaChange]:
    """A key change the DDL shows while the schemas keep their key: the table's
    ``primary_key`` is pinned by the config, so the source's new key (or its lack of one)
    is not in the inferred schema. Held all the same: the pinned columns may no longer
    identify a row."""
    final = evidence.final_key()
    if final is None or [k.casefold() for k in final] == [k.casefold() for k in new.primary_key]:
        return []
    now = f"is now {list(final)}" if final else "was dropped"
    return [
        _change(
            "key_change",
            (),
            None,
            f"the source's primary key {now} while the table keeps {list(new.primary_key)} "
            "(pinned by primary_key: in the config): if those columns no longer identify a "
            "row, merging by them would fold rows together",
            evidence=evidence.of("key"),
            detail={"from": list(new.primary_key), "to": list(final)},
        )
    ]


def _source_only(
    old: TableSchema, new: TableSchema, evidence: TableEvidence, seen: set[int | None]
) -> list[SchemaChange]:
    """Source type changes that keep the icetide type: from the DDL, and from the hint
    alone (a PostgreSQL ``timestamp(3)`` → ``timestamp(6)`` has no DDL text, only a new
    Relation message). A changed hint changes how schemaless values are read
    (milliseconds → microseconds), so it is applied with a new version: ``detail["hint"]``
    says from what to what."""
    found = []
    for item in evidence.items:
        if item.kind != "type":
            continue
        name = item.new_name or item.column
        column = next(
            (c for c in new.columns if c.name.casefold() == (name or "").casefold()), None
        )
        if column is None or column.id in seen:
            continue
        try:
            was = old.find(column.id)
        except SchemaError:
            continue
        if was.type == column.type:
            seen.add(column.id)
            found.append(_source_only_change(old, new, column, item.source_type, (item,)))
    for column in new.columns:
        if column.id in seen or column.id not in {c.id for c in old.columns}:
            continue
        if old.find(column.id).type != column.type:
            continue
        if old.sink.logical.get(column.id) != new.sink.logical.get(column.id) and (
            new.sink.logical.get(column.id) is not None
        ):
            seen.add(column.id)
            found.append(_source_only_change(old, new, column, None, ()))
    return found


def _source_only_change(
    old: TableSchema,
    new: TableSchema,
    column: Column,
    source_type: str | None,
    evidence: tuple[Evidence, ...],
) -> SchemaChange:
    was, now = old.sink.logical.get(column.id), new.sink.logical.get(column.id)
    detail: dict[str, Any] = {"source_type": source_type, "type": str(column.type)}
    became = f"the source type became {source_type}" if source_type else "the source type changed"
    if now is not None and now != was:
        detail["hint"] = {"from": was, "to": now}
        reason = (
            f"{became}; it is still {column.type} here, but its values now arrive as {now} "
            f"(were {was or 'by the type alone'}): events are read that way from this version"
        )
    else:
        reason = f"{became}; it is still {column.type} here, so nothing changes in the tables"
    return _change(
        "source_only",
        (column.name,),
        column.id,
        reason,
        evidence=evidence,
        detail=detail,
    )
