"""From a freshly read source schema to classified changes: which ids the new columns
keep, and what each change is (automatic, drop, rename, ambiguous or held, and why).

Two steps, each pure:

1. :func:`candidate_schema` gives the new source columns their ids: a column keeps the id
   of the old column with its name, or of the old column DDL evidence shows it was
   renamed from; any other column (and nested field, list element, map key/value) gets
   a new id above ``last_column_id``. Ids are never reused.
2. :func:`classify` diffs old and candidate by id (:func:`icetide.schema.diff.diff`) and
   classifies each change (the table is in docs/schema-evolution.md):

   ==================  ==================  ==============================================
   kind                classification      what and why
   ==================  ==================  ==============================================
   add_column          automatic           a nullable column; its values while the code
                                           lags are rescued in the ledger, then filled
   add_nested          automatic           a nullable field inside a struct
   add_with_default    automatic_backfill  a column with a DEFAULT on a table with rows:
                                           old rows hold the default without any event
   add_required        automatic_backfill  a NOT NULL column without DEFAULT on a table
                                           with rows: old rows hold the source's implicit
                                           value, read back by key
   widen               automatic           int→long, float→double, decimal precision up
                                           (same scale), enum symbols added, enum→string
   source_only         automatic           the source type changed, its icetide type did
                                           not (VARCHAR(32)→VARCHAR(64))
   optional            automatic           NOT NULL dropped
   metadata            automatic           doc, default or tags of a kept column
   rename              rename              the id is kept: DDL shows the rename
   drop                drop                soft (kept, commented) or hard, by policy
   ambiguous           ambiguous           a drop and an add of the same type at the same
                                           place without DDL evidence: rename or not?
   narrow              held                long→int, double→float, precision down …
   type_change         held                another category (string→long …), or a
                                           decimal scale change
   required            held                NOT NULL added: events in flight may be null
   key_change          held                the primary key changed: re-snapshot
   sensitive           held                a new column tagged sensitive
   ==================  ==================  ==============================================

``has_rows`` says whether the table already holds rows (a column added with a default to
an empty table needs no fill).
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from icetide.config.tables import CHANGE_KINDS
from icetide.errors import SchemaChangeError, SchemaError
from icetide.evolution.evidence import NO_EVIDENCE, Evidence, TableEvidence
from icetide.schema.defaults import default_json
from icetide.schema.diff import FieldChange, diff
from icetide.schema.model import TableSchema
from icetide.schema.promote import promote
from icetide.schema.types import SENSITIVE, Column, IcetideType, ListType, MapType, StructType

ChangeKind = Literal[
    "add_column",
    "add_nested",
    "add_with_default",
    "add_required",
    "widen",
    "source_only",
    "optional",
    "required",
    "rename",
    "drop",
    "ambiguous",
    "narrow",
    "type_change",
    "key_change",
    "sensitive",
    "metadata",
]
assert get_args(ChangeKind) == CHANGE_KINDS, "keep ChangeKind and config CHANGE_KINDS equal"

Classification = Literal["automatic", "automatic_backfill", "rename", "drop", "ambiguous", "held"]
Fill = Literal["ledger", "initial_default", "keyed_backfill", "resnapshot"]
"""How phase 3 fills what the base table missed: from the values the ledger rescued while
the code lagged, by Iceberg's ``initial-default`` (a constant default), by reading the
column back from the source by primary key, or by re-snapshotting the table."""

HELD: frozenset[Classification] = frozenset({"held", "ambiguous"})

MANUAL: dict[str, str] = {
    "ambiguous": (
        "decide what happened: `icetide schema apply --approve '{id}=rename'` keeps the "
        "column's id and values (it was a rename), `--approve '{id}=drop_add'` drops the old "
        "column and adds the new one empty (filled from the ledger from now on)"
    ),
    "narrow": (
        "a narrower type cannot hold every stored value in place: either widen the source "
        "column back, or approve with `icetide schema apply --approve {id}`, which "
        "re-snapshots the table into the new type (values that do not fit go to the "
        "dead-letter table)"
    ),
    "type_change": (
        "Iceberg cannot change a column's type category in place: add a new column at the "
        "source (new name), fill it, drop the old one; or approve with `icetide schema "
        "apply --approve {id}` to re-snapshot the table with the new type"
    ),
    "required": (
        "wait until the ledger has passed the source position of the change (events "
        "written before it may carry NULL), then `icetide schema apply --approve {id}`"
    ),
    "key_change": (
        "approve with `icetide schema apply --approve {id} --no-ddl`: the running ledger "
        "and merge re-snapshot the table under the new key, chunk by chunk, while capture "
        "and the other tables keep flowing"
    ),
    "sensitive": (
        "configure how the column reaches the lake (a hash/mask conversion in the sink "
        "config, or accept it as is), then `icetide schema apply --approve {id}`; until "
        "then its values stay in the ledger's rescued data only"
    ),
}
"""The documented manual path of each held kind (``{id}``: the change's id)."""


@dataclass(frozen=True)
class Change:
    """One classified change to a table's schema.

    ``id`` is stable between ``icetide schema plan`` and ``apply`` (``kind:path``, e.g.
    ``narrow:amount``, ``ambiguous:email>mail``, ``key_change``): ``--approve`` names it.
    ``field_changes`` are the by-id changes it stands for (an ambiguous pair: its drop and
    its add; a key change: the key columns dropped or added). ``fill`` is how phase 3
    fills what the base missed (``None``: nothing to fill).
    """

    id: str
    kind: ChangeKind
    classification: Classification
    path: tuple[str, ...]
    field_id: int | None
    reason: str
    field_changes: tuple[FieldChange, ...] = ()
    manual: str | None = None
    fill: Fill | None = None
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
    by_id = {c.id: c for c in old.columns}
    ids = _Ids(old.last_column_id)
    patterns = tuple(p.casefold() for p in sensitive)

    def match(name: str, before: Sequence[Column], top: bool) -> Column | None:
        if top:
            held = holds.get(name.casefold())
            return by_id.get(held) if held is not None else None
        return {c.name.casefold(): c for c in before}.get(name.casefold())

    def fields(after: Sequence[Column], before: Sequence[Column], top: bool) -> tuple[Column, ...]:
        built = []
        for column in after:
            was = match(column.name, before, top)
            if was is None:
                tags = set(column.tags)
                if top and any(fnmatch.fnmatch(column.name.casefold(), p) for p in patterns):
                    tags.add(SENSITIVE)
                built.append(
                    dataclasses.replace(
                        column,
                        id=ids.next(),
                        type=kind(column.type, None),
                        tags=frozenset(tags),
                    )
                )
            else:
                built.append(
                    dataclasses.replace(
                        column,
                        id=was.id,
                        type=kind(column.type, was.type),
                        doc=column.doc if column.doc is not None else was.doc,
                        tags=column.tags | was.tags,
                    )
                )
        return tuple(built)

    def kind(now: IcetideType, was: IcetideType | None) -> IcetideType:
        if isinstance(now, StructType):
            before = was.fields if isinstance(was, StructType) else ()
            return StructType(fields(now.fields, before, False))
        if isinstance(now, ListType):
            same = was if isinstance(was, ListType) else None
            element_id = same.element_id if same else ids.next()
            element = kind(now.element, same.element if same else None)
            return ListType(element_id, element, now.element_nullable)
        if isinstance(now, MapType):
            same_map = was if isinstance(was, MapType) else None
            key_id = same_map.key_id if same_map else ids.next()
            key = kind(now.key, same_map.key if same_map else None)
            value_id = same_map.value_id if same_map else ids.next()
            value = kind(now.value, same_map.value if same_map else None)
            return MapType(key_id, key, value_id, value, now.value_nullable)
        return now

    columns = fields(inferred.columns, old.columns, True)
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
) -> tuple[Change, ...]:
    """Every change from ``old`` to ``new`` (ids already matched), classified (see module
    doc), in the order they apply: key change first, then the by-id changes in diff
    order, then metadata."""
    try:
        field_changes = diff(old, new)
    except SchemaError as exc:
        return (
            Change(
                "type_change:table",
                "type_change",
                "held",
                (),
                None,
                f"{exc.message}; no in-place change expresses it",
                manual=_manual("type_change", "type_change:table"),
                fill="resnapshot",
            ),
        )
    changes: list[Change] = []
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
            Change(
                "key_change",
                "key_change",
                "held",
                (),
                None,
                f"the primary key changes from {list(old.primary_key)} to "
                f"{list(new.primary_key)}: rows are keyed, bucketed and merged by it, so the "
                "table needs a re-snapshot under the new key",
                field_changes=tuple(field_changes[i] for i in parts),
                manual=_manual("key_change", "key_change"),
                fill="resnapshot",
                evidence=tuple(e for e in evidence.items if e.kind == "key"),
                detail={"from": list(old.primary_key), "to": list(new.primary_key)},
            )
        )
    else:
        changes += _pinned_key_change(new, evidence)
    changes += _ambiguous(old, new, field_changes, evidence, consumed)
    for i, fc in enumerate(field_changes):
        if i in consumed:
            continue
        change = _one(fc, old, new, evidence, has_rows)
        if change is not None:
            changes.append(change)
    changes += _metadata(old, new)
    changes += _source_only(old, new, evidence, {c.field_id for c in changes})
    return tuple(changes)


def _one(
    fc: FieldChange, old: TableSchema, new: TableSchema, evidence: TableEvidence, has_rows: bool
) -> Change | None:
    dotted = fc.dotted
    ev = evidence.of(_EVIDENCE_KIND.get(fc.kind, "type"), fc.path[-1])
    if fc.kind == "rename":
        assert fc.new_name is not None
        new_path = (*fc.path[:-1], fc.new_name)
        shown = tuple(e for e in evidence.of("rename", fc.path[-1]))
        return Change(
            f"rename:{'.'.join(new_path)}",
            "rename",
            "rename",
            new_path,
            fc.field_id,
            f"renamed from {fc.path[-1]!r}"
            + (
                " (the DDL shows the rename): the id and values stay"
                if shown
                else ": the id and values stay"
            ),
            (fc,),
            evidence=shown,
            detail={"from": fc.path[-1], "to": fc.new_name},
        )
    if fc.kind == "add":
        column = new.find(fc.field_id)
        nested = len(fc.path) > 1
        detail: dict[str, Any] = {"type": str(column.type), "after": fc.after}
        if column.default is not None:
            detail["default"] = default_json(column.default)
        if SENSITIVE in column.tags:
            return Change(
                f"sensitive:{dotted}",
                "sensitive",
                "held",
                fc.path,
                fc.field_id,
                "the new column is tagged sensitive: its values reach the lake only after "
                "someone approves it",
                (fc,),
                manual=_manual("sensitive", f"sensitive:{dotted}"),
                fill="ledger",
                evidence=ev,
                detail=detail,
            )
        if nested:
            if column.nullable:
                return Change(
                    f"add_nested:{dotted}",
                    "add_nested",
                    "automatic",
                    fc.path,
                    fc.field_id,
                    "a nullable field added inside a struct",
                    (fc,),
                    fill="ledger",
                    evidence=ev,
                    detail=detail,
                )
            return Change(
                f"add_required:{dotted}",
                "add_required",
                "automatic_backfill",
                fc.path,
                fc.field_id,
                "a required field added inside a struct: old rows need its value from the "
                "source, read back by key",
                (fc,),
                fill="keyed_backfill" if has_rows else "ledger",
                evidence=ev,
                detail=detail,
            )
        if column.default is not None and has_rows:
            constant = column.default.constant
            return Change(
                f"add_with_default:{dotted}",
                "add_with_default",
                "automatic_backfill",
                fc.path,
                fc.field_id,
                "added with a DEFAULT on a table that has rows: every old row holds the "
                "default at the source without any change event, so the base needs a fill "
                + (
                    "(the constant default, as Iceberg initial-default or written by key)"
                    if constant
                    else f"(the default {column.default.sql} is computed: read back by key)"
                ),
                (fc,),
                fill="initial_default" if constant else "keyed_backfill",
                evidence=ev,
                detail=detail,
            )
        if not column.nullable and has_rows:
            return Change(
                f"add_required:{dotted}",
                "add_required",
                "automatic_backfill",
                fc.path,
                fc.field_id,
                "a NOT NULL column without DEFAULT on a table that has rows: old rows hold "
                "the source's implicit value, read back by key",
                (fc,),
                fill="keyed_backfill",
                evidence=ev,
                detail=detail,
            )
        return Change(
            f"add_column:{dotted}",
            "add_column",
            "automatic",
            fc.path,
            fc.field_id,
            "a nullable column added: the tables gain it first, values written meanwhile "
            "are rescued in the ledger and filled in",
            (fc,),
            fill="ledger",
            evidence=ev,
            detail=detail,
        )
    if fc.kind == "drop":
        return Change(
            f"drop:{dotted}",
            "drop",
            "drop",
            fc.path,
            fc.field_id,
            "dropped at the source" + (" (the DDL shows the drop)" if ev else ""),
            (fc,),
            evidence=ev,
            detail={"type": str(fc.old_type)},
        )
    if fc.kind == "widen":
        assert fc.old_type is not None and fc.new_type is not None
        detail = {"from": str(fc.old_type), "to": str(fc.new_type)}
        try:
            promote(fc.old_type, fc.new_type)
        except SchemaChangeError as exc:
            narrowing = _promotes(fc.new_type, fc.old_type)
            kind: ChangeKind = "narrow" if narrowing else "type_change"
            what = "narrows" if narrowing else "changes the type category of"
            return Change(
                f"{kind}:{dotted}",
                kind,
                "held",
                fc.path,
                fc.field_id,
                f"{fc.old_type} → {fc.new_type} {what} the column: {exc.message}",
                (fc,),
                manual=_manual(kind, f"{kind}:{dotted}"),
                fill="resnapshot",
                evidence=ev,
                detail=detail,
            )
        return Change(
            f"widen:{dotted}",
            "widen",
            "automatic",
            fc.path,
            fc.field_id,
            f"{fc.old_type} → {fc.new_type} widens in place",
            (fc,),
            evidence=ev,
            detail=detail,
        )
    if fc.kind == "optional":
        return Change(
            f"optional:{dotted}",
            "optional",
            "automatic",
            fc.path,
            fc.field_id,
            "may now be NULL (every table column is nullable already)",
            (fc,),
            evidence=evidence.of("nullability", fc.path[-1]) or ev,
        )
    if fc.kind == "required":
        return Change(
            f"required:{dotted}",
            "required",
            "held",
            fc.path,
            fc.field_id,
            "now NOT NULL: events written before the change may still carry NULL and would "
            "be dead-lettered as null_in_required",
            (fc,),
            manual=_manual("required", f"required:{dotted}"),
            evidence=evidence.of("nullability", fc.path[-1]) or ev,
        )
    if fc.kind == "doc":
        return None  # reported with the other metadata
    return None


_EVIDENCE_KIND: dict[str, Any] = {"add": "add", "drop": "drop", "rename": "rename", "widen": "type"}


def _promotes(source: IcetideType, target: IcetideType) -> bool:
    try:
        promote(source, target)
    except SchemaChangeError:
        return False
    return True


def _manual(kind: str, change_id: str) -> str:
    return MANUAL[kind].format(id=change_id)


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
) -> list[Change]:
    before = dict(_places(old.columns))
    after = dict(_places(new.columns))
    adds = [
        (i, fc)
        for i, fc in enumerate(field_changes)
        if fc.kind == "add" and i not in consumed and fc.field_id in after
    ]
    found: list[Change] = []
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
                change_id = f"ambiguous:{drop.dotted}>{add.path[-1]}"
                found.append(
                    Change(
                        change_id,
                        "ambiguous",
                        "ambiguous",
                        add.path,
                        add.field_id,
                        f"{drop.dotted!r} left and {add.dotted!r} came at the same place with "
                        f"the same type ({column.type}), and no DDL says whether it was a "
                        "rename",
                        (drop, add),
                        manual=_manual("ambiguous", change_id),
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


def _metadata(old: TableSchema, new: TableSchema) -> list[Change]:
    names = {i: n for n, i in _paths(new.columns)}
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
                Change(
                    f"metadata:{names[fid]}",
                    "metadata",
                    "automatic",
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


def _pinned_key_change(new: TableSchema, evidence: TableEvidence) -> list[Change]:
    """A key change the DDL shows while the schemas keep their key: the table's
    ``primary_key`` is pinned by the config, so the source's new key (or its lack of one)
    is not in the inferred schema. Held all the same: the pinned columns may no longer
    identify a row."""
    final = evidence.final_key()
    if final is None or [k.casefold() for k in final] == [k.casefold() for k in new.primary_key]:
        return []
    now = f"is now {list(final)}" if final else "was dropped"
    return [
        Change(
            "key_change",
            "key_change",
            "held",
            (),
            None,
            f"the source's primary key {now} while the table keeps {list(new.primary_key)} "
            "(pinned by primary_key: in the config): if those columns no longer identify a "
            "row, merging by them would fold rows together",
            manual=_manual("key_change", "key_change"),
            fill="resnapshot",
            evidence=tuple(e for e in evidence.items if e.kind == "key"),
            detail={"from": list(new.primary_key), "to": list(final)},
        )
    ]


def _source_only(
    old: TableSchema, new: TableSchema, evidence: TableEvidence, seen: set[int | None]
) -> list[Change]:
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
) -> Change:
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
    return Change(
        f"source_only:{column.name}",
        "source_only",
        "automatic",
        (column.name,),
        column.id,
        reason,
        evidence=evidence,
        detail=detail,
    )
