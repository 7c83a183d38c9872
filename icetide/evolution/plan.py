"""The evolution plan of one table: what changed (by id), how each change is classified,
what the policy decides, the schema version that results, and the three phases that take
the running pipeline there.

Shaped like PyIceberg's ``UpdateSchema``: the changes are collected first, keyed by field
id; :meth:`EvolutionPlan.apply` gives the new :class:`TableSchema` version (only the
changes whose decision is ``apply``); nothing is altered until ``icetide schema apply``
(:func:`icetide.evolution.apply.apply_plan`) runs the plan. The phases:

1. **schema divergence**: the ALTERs for the base and ledger tables
   (:func:`icetide.schema.contract.alter.alter_plan`: new columns nullable, drops soft or
   hard by policy); the dead-letter table's columns do not depend on the schema;
2. **code convergence**: the new schema version is written (schema file and history);
   running stages pick it up at a batch boundary, the merge first, then the ledger's
   projection;
3. **data convergence**: what the base missed is filled, per change, from the ledger's
   rescued values, by Iceberg ``initial-default``, by a keyed backfill from the source,
   or by re-snapshotting the table.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icetide.errors import SchemaError
from icetide.evolution.classify import FillMethod, SchemaChange, classify
from icetide.evolution.evidence import NO_EVIDENCE, TableEvidence
from icetide.evolution.policy import Decision, Policy, decide
from icetide.schema.contract.alter import AlterPlan, alter_plan
from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.contract.ledger import SUFFIX as LEDGER_SUFFIX
from icetide.schema.contract.names import TableName
from icetide.schema.contract.update import VersionUpdate, version_update
from icetide.schema.defaults import default_json
from icetide.schema.file import schema_to_dict
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, IcetideType, ListType, MapType, StructType
from icetide.schema.visitor import Partner, PartnerVisitor, visit_with_partner

if TYPE_CHECKING:
    from icetide.pipeline import Pipeline

RESNAPSHOT_KINDS = frozenset({"narrow", "type_change", "key_change"})
"""Changes no ALTER expresses: once approved, the table is re-snapshotted."""


@dataclass(frozen=True)
class Phase:
    """One phase of the plan: its number, name and steps (text a person reads)."""

    number: int
    name: str
    steps: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form."""
        return {"phase": self.number, "name": self.name, "steps": list(self.steps)}


@dataclass(frozen=True)
class Fill:
    """Phase 3 for one applied change: fill ``path`` (field ``field_id``) by ``method``."""

    change: str
    path: str
    field_id: int | None
    method: FillMethod
    detail: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class EvolutionPlan:
    """One table's plan (see module doc). Build it with :func:`build_plan`."""

    table: str
    old: TableSchema
    new: TableSchema
    """The source's schema with ids matched (every change, decided or not)."""
    target: TableSchema
    """The version the applied changes give (``old`` when nothing applies)."""
    changes: tuple[SchemaChange, ...]
    decisions: tuple[Decision, ...]
    policy: Policy
    evidence: TableEvidence
    alter: AlterPlan | None
    ddl_note: str | None
    fills: tuple[Fill, ...]
    phases: tuple[Phase, ...]
    base: TableName = TableName("lake", "cdc", "t")
    ledger: TableName = TableName("lake", "cdc", "t_cdc")
    settings: TableSettings = TableSettings()
    has_rows: bool = True
    update: VersionUpdate | None = None
    """Phase 1 as Iceberg schema updates, one commit per table (``alter`` is the same as
    SQL, for people to read)."""

    def with_approvals(self, ids: Sequence[str]) -> EvolutionPlan:
        """The same plan with the changes ``ids`` approved (an ambiguous one as
        ``id=rename`` or ``id=drop_add``); an id the plan does not have is an error."""
        known = {c.id for c in self.changes}
        unknown = [i for i in ids if i.partition("=")[0] not in known]
        if unknown:
            raise SchemaError(
                f"table {self.table}: --approve {', '.join(unknown)}: no such change in the plan",
                hint="the plan's changes are "
                + (", ".join(sorted(known)) or "none")
                + " (see `icetide schema plan`)",
            )
        return build_plan(
            self.old,
            self.new,
            self.evidence,
            self.policy.approving(ids),
            has_rows=self.has_rows,
            base=self.base,
            ledger=self.ledger,
            settings=self.settings,
        )

    @property
    def key_change(self) -> bool:
        """Whether the new version changes the primary key."""
        return self.target.key_ids != self.old.key_ids

    # -- what it does --------------------------------------------------------------------
    def apply(self) -> TableSchema:
        """The new schema version (PyIceberg's ``UpdateSchema.apply()``)."""
        return self.target

    @property
    def changed(self) -> bool:
        """Whether a new schema version results."""
        return self.target != self.old

    def decision(self, change_id: str) -> Decision:
        """The decision on the change with ``change_id``."""
        for d in self.decisions:
            if d.change == change_id:
                return d
        raise SchemaError(
            f"table {self.table}: no change {change_id!r} in the plan; changes are "
            f"{', '.join(c.id for c in self.changes) or 'none'}"
        )

    @property
    def applied(self) -> tuple[SchemaChange, ...]:
        """The changes that go into the new version (a ``source_only`` change alters
        nothing here unless the column's hint changes, so only then is it among them)."""
        ids = {d.change for d in self.decisions if d.applies}
        return tuple(c for c in self.changes if c.id in ids and _moves_version(c))

    @property
    def held(self) -> tuple[SchemaChange, ...]:
        """The changes waiting for a decision (held or ambiguous, not approved)."""
        ids = {d.change for d in self.decisions if d.action == "hold"}
        return tuple(c for c in self.changes if c.id in ids)

    @property
    def refused(self) -> tuple[SchemaChange, ...]:
        """The changes the policy refuses (freeze, discard_row, discard_value)."""
        ids = {d.change for d in self.decisions if d.action not in ("apply", "hold")}
        return tuple(c for c in self.changes if c.id in ids)

    @property
    def automatic(self) -> bool:
        """Whether the plan may apply with no human: the policy's ``auto_apply`` is on
        and nothing it applies needed an approval."""
        return self.policy.auto_apply and not any(d.approved for d in self.decisions)

    @property
    def resnapshot(self) -> bool:
        """Whether phase 3 re-snapshots the table."""
        return any(f.method == "resnapshot" for f in self.fills)

    @property
    def ddl(self) -> tuple[str, ...]:
        """Phase 1's statements: the base's, then the ledger's."""
        if self.alter is None:
            return ()
        return (*self.alter.base, *self.alter.ledger)

    def hash(self) -> str:
        """A digest of what applying changes (old and new version, applied change ids,
        statements): the same plan has the same hash in every process."""
        payload = json.dumps(
            {
                "old": _schema_json(self.old),
                "target": _schema_json(self.target),
                "applied": [c.id for c in self.applied],
                "ddl": list(self.ddl),
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    # -- output --------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The plan as JSON-able data (``icetide schema plan --output json``)."""
        decisions = {d.change: d for d in self.decisions}
        return {
            "table": self.table,
            "from_version": self.old.version,
            "to_version": self.target.version,
            "changed": self.changed,
            "automatic": self.automatic,
            "plan_hash": self.hash(),
            "changes": [
                {**c.to_json(), "decision": decisions[c.id].to_json()} for c in self.changes
            ],
            "held": [c.id for c in self.held],
            "evidence": [e.to_json() for e in self.evidence.items],
            "unparsed_ddl": list(self.evidence.unparsed),
            "ddl": {
                "base": list(self.alter.base) if self.alter else [],
                "ledger": list(self.alter.ledger) if self.alter else [],
                "note": self.ddl_note,
            },
            "fills": [f.to_json() for f in self.fills],
            "phases": [p.to_json() for p in self.phases],
            "policy": self.policy.to_json(),
            "schema": _schema_json(self.target),
        }

    def render(self) -> str:
        """The plan as text for a person (``icetide schema plan``)."""
        lines = [
            f"table {self.table}: schema version {self.old.version} → {self.target.version}"
            + ("" if self.changed else " (nothing to apply)"),
        ]
        if not self.changes:
            lines.append("  no changes")
        decisions = {d.change: d for d in self.decisions}
        for change in self.changes:
            d = decisions[change.id]
            field = f" (id {change.field_id})" if change.field_id is not None else ""
            lines.append(
                f"  [{d.action}] {change.id}{field}: {change.classification}: {change.reason}"
            )
            if d.action == "hold" and change.manual:
                lines.append(f"      manual path: {change.manual}")
            elif d.approved:
                lines.append(f"      decision: {d.reason}")
            elif d.action not in ("apply", "hold"):
                lines.append(f"      {d.reason}")
        if self.evidence.unparsed:
            lines.append(
                f"  note: {len(self.evidence.unparsed)} DDL statement(s) could not be parsed; "
                "evidence may be incomplete"
            )
        for phase in self.phases:
            lines.append(f"  phase {phase.number}, {phase.name}:")
            lines += [f"    {step}" for step in phase.steps] or ["    nothing"]
        lines.append(f"  plan hash {self.hash()}")
        return "\n".join(lines)


def table_plan(
    pipeline: Pipeline,
    table: str,
    old: TableSchema,
    new: TableSchema,
    evidence: TableEvidence = NO_EVIDENCE,
    *,
    has_rows: bool = True,
) -> EvolutionPlan:
    """:func:`build_plan` for one of ``pipeline``'s tables: its policy, the names of its
    base and ledger in the configured catalog and namespace, its layout, all from the
    config (the one place they are read for a plan)."""
    refs = pipeline.refs(table)
    return build_plan(
        old,
        new,
        evidence,
        Policy.from_config(pipeline.config.table(table).evolution),
        has_rows=has_rows,
        base=refs.base,
        ledger=refs.cdc,
        settings=pipeline.contract(table).settings,
    )


def build_plan(
    old: TableSchema,
    new: TableSchema,
    evidence: TableEvidence = NO_EVIDENCE,
    policy: Policy | None = None,
    *,
    has_rows: bool = True,
    base: TableName | None = None,
    ledger: TableName | None = None,
    settings: TableSettings | None = None,
) -> EvolutionPlan:
    """The plan taking ``old`` to ``new`` (ids matched: see
    :func:`icetide.evolution.classify.candidate_schema`) under ``policy``.

    ``base``/``ledger`` name the tables the DDL is written for (default
    ``lake.cdc.<table>`` and its ``_cdc``: for tests and golden cases; a pipeline's table
    is planned with :func:`table_plan`); ``has_rows`` whether the table holds rows.
    """
    policy = policy or Policy()
    base = base or TableName("lake", "cdc", old.table)
    ledger = ledger or base.suffixed(LEDGER_SUFFIX)
    settings = settings or TableSettings()
    changes = classify(old, new, evidence, has_rows=has_rows)
    decisions = tuple(decide(c, policy) for c in changes)
    target = _target(old, new, changes, decisions, skip=frozenset())
    skip = frozenset(
        c.id for c in changes if c.kind in RESNAPSHOT_KINDS and c.id in _applied_ids(decisions)
    )
    alter: AlterPlan | None = None
    update: VersionUpdate | None = None
    note: str | None = None
    if target != old:
        ddl_target = _target(old, new, changes, decisions, skip=skip) if skip else target
        try:
            contracts = (TableContract(old, settings), TableContract(ddl_target, settings))
            alter = alter_plan(*contracts, base, ledger, drop=policy.drop)
            update = version_update(*contracts, drop=policy.drop)
        except SchemaError as exc:
            note = f"no ALTER expresses this change ({exc.message}); the re-snapshot rebuilds"
        if skip:
            note = (
                f"{', '.join(sorted(skip))}: no ALTER expresses it; the re-snapshot recreates "
                "the base table with the new schema"
            )
    fills = tuple(_fills(old, target, changes, decisions))
    phases = _phases(old, target, alter, note, fills, changes, decisions)
    return EvolutionPlan(
        old.table,
        old,
        new,
        target,
        changes,
        decisions,
        policy,
        evidence,
        alter,
        note,
        fills,
        phases,
        base,
        ledger,
        settings,
        has_rows,
        update,
    )


# -- the target schema -------------------------------------------------------------------------


def _applied_ids(decisions: Sequence[Decision]) -> set[str]:
    return {d.change for d in decisions if d.applies}


def _moves_version(change: SchemaChange) -> bool:
    """Whether applying ``change`` makes a new version (a ``source_only`` change only when
    it changes the column's hint)."""
    return change.kind != "source_only" or "hint" in change.detail


def _target(
    old: TableSchema,
    new: TableSchema,
    changes: Sequence[SchemaChange],
    decisions: Sequence[Decision],
    skip: frozenset[str],
) -> TableSchema:
    """``old`` with the applied changes (except ``skip``) taken from ``new``, by id; the
    hints too, only those of columns an applied change touches. A plan that applies
    nothing that moves the version is ``old`` itself: a held change (its hint included)
    or a reorder nobody listed writes no version."""
    applied = {d.change: d for d in decisions if d.applies and d.change not in skip}
    moving = [c for c in changes if c.id in applied and _moves_version(c)]
    if not moving:
        return old
    touched = {c.field_id for c in moving} | {fc.field_id for c in moving for fc in c.field_changes}
    take: set[tuple[str, int]] = set()
    rewrite: dict[int, int] = {}
    key_change = False
    for change in changes:
        decision = applied.get(change.id)
        if decision is None:
            continue
        if change.kind == "key_change":
            key_change = True
        if change.kind == "ambiguous" and decision.resolution == "rename":
            dropped, added = change.field_changes
            rewrite[added.field_id] = dropped.field_id
            take.update(
                (k, dropped.field_id) for k in ("rename", "optional", "required", "metadata")
            )
            continue
        if change.kind == "metadata" and change.field_id is not None:
            take.add(("metadata", change.field_id))
        for fc in change.field_changes:
            take.add((fc.kind, fc.field_id))
    source = _reid(new, rewrite) if rewrite else new
    columns = _merge_fields(old.columns, source.columns, take)
    key_ids = source.key_ids if key_change else old.key_ids
    # A key column is never null, whatever the source now says of a column that stays
    # in the key (a held key change keeps the old key).
    columns = tuple(
        dataclasses.replace(c, nullable=False) if c.id in key_ids and c.nullable else c
        for c in columns
    )
    candidate = TableSchema(
        old.table,
        columns,
        key_ids=key_ids,
        version=old.version,
        last_column_id=old.last_column_id
        if not columns
        else max(old.last_column_id, max(_ids(columns))),
        sink=old.sink,
    )
    kept = candidate.field_ids()
    hints = {**old.sink.logical}
    for field_id in touched | {rewrite.get(i, i) for i in touched if i is not None}:
        if field_id is not None and field_id in source.sink.logical:
            hints[field_id] = source.sink.logical[field_id]
    logical = {i: h for i, h in hints.items() if i in kept}
    sink = dataclasses.replace(old.sink, logical=logical)
    if candidate.columns == old.columns and key_ids == old.key_ids and sink == old.sink:
        return old
    return TableSchema(
        old.table,
        columns,
        key_ids=key_ids,
        version=old.version + 1,
        last_column_id=candidate.last_column_id,
        sink=sink,
    )


def _ids(columns: Sequence[Column]) -> list[int]:
    from icetide.schema.model import column_ids

    return list(column_ids(columns))


def _merge_fields(
    old: Sequence[Column], new: Sequence[Column], take: set[tuple[str, int]]
) -> tuple[Column, ...]:
    merged: StructType = visit_with_partner(
        StructType(tuple(new)), StructType(tuple(old)), _Merge(take)
    )
    return merged.fields


class _Merge(PartnerVisitor[Any]):
    """The old schema with the changes in ``take`` from the new one: the new schema walked
    beside the old, fields matched by id.

    What is not taken stays as it was: a field's name, nullability and metadata, a type
    that is not widened (a leaf, or a node whose partner is of another kind or whose
    element, key or value id differs). A field only in the new schema comes in only when
    its add is taken; one only in the old stays, after the fields that came before it,
    unless its drop is.
    """

    def __init__(self, take: set[tuple[str, int]]) -> None:
        self.take = take
        self.ids: list[int] = []

    def enter(self, field: Column, partner: Partner) -> None:
        self.ids.append(field.id)

    def leave(self, field: Column, partner: Partner) -> None:
        self.ids.pop()

    before_field = before_list_element = before_map_key = before_map_value = enter
    after_field = after_list_element = after_map_key = after_map_value = leave

    def schema(self, schema: TableSchema, partner: TableSchema | None, struct_result: Any) -> Any:
        return struct_result

    def struct(
        self, struct: StructType, partner: IcetideType | None, field_results: Sequence[Any]
    ) -> Any:
        if not isinstance(partner, StructType):
            return self._widened(partner, struct)
        result: list[Column] = [f for f in field_results if f is not None]
        present = {f.id for f in struct.fields}
        for index, field in enumerate(partner.fields):
            if field.id in present or ("drop", field.id) in self.take:
                continue
            earlier = {g.id for g in partner.fields[:index]}
            place = 0
            for k, g in enumerate(result):
                if g.id in earlier:
                    place = k + 1
            result.insert(place, field)
        return StructType(tuple(result))

    def field(self, field: Column, partner: Partner, field_result: Any) -> Any:
        if partner is None:
            return field if ("add", field.id) in self.take else None
        meta = ("metadata", field.id) in self.take
        return Column(
            field.id,
            field.name if ("rename", field.id) in self.take else partner.name,
            field_result,
            self._nullable(partner.nullable, field.nullable, field.id),
            field.doc if meta else partner.doc,
            field.default if meta else partner.default,
            field.tags if meta else partner.tags,
        )

    def list(self, list_type: ListType, partner: IcetideType | None, element_result: Any) -> Any:
        if not isinstance(partner, ListType) or partner.element_id != list_type.element_id:
            return self._widened(partner, list_type)
        nullable = self._nullable(
            partner.element_nullable, list_type.element_nullable, list_type.element_id
        )
        return ListType(partner.element_id, element_result, nullable)

    def map(
        self, map_type: MapType, partner: IcetideType | None, key_result: Any, value_result: Any
    ) -> Any:
        ids = (map_type.key_id, map_type.value_id)
        if not isinstance(partner, MapType) or (partner.key_id, partner.value_id) != ids:
            return self._widened(partner, map_type)
        return MapType(
            partner.key_id,
            key_result,
            partner.value_id,
            value_result,
            self._nullable(partner.value_nullable, map_type.value_nullable, map_type.value_id),
        )

    def primitive(self, primitive: IcetideType, partner: IcetideType | None) -> Any:
        return self._widened(partner, primitive)

    def _widened(self, old: IcetideType | None, new: IcetideType) -> IcetideType | None:
        return new if ("widen", self.ids[-1]) in self.take else old

    def _nullable(self, old: bool, new: bool, field_id: int) -> bool:
        taken = ("optional", field_id) in self.take or ("required", field_id) in self.take
        return new if taken else old


def _reid(schema: TableSchema, rewrite: dict[int, int]) -> TableSchema:
    """``schema`` with top-level or nested field ids replaced per ``rewrite``."""

    def fields(columns: Sequence[Column]) -> tuple[Column, ...]:
        return tuple(
            dataclasses.replace(c, id=rewrite.get(c.id, c.id), type=kind(c.type)) for c in columns
        )

    def kind(t: IcetideType) -> IcetideType:
        if isinstance(t, StructType):
            return StructType(fields(t.fields))
        return t

    columns = fields(schema.columns)
    return TableSchema(
        schema.table,
        columns,
        key_ids=tuple(rewrite.get(i, i) for i in schema.key_ids),
        version=schema.version,
        last_column_id=schema.last_column_id,
        sink=dataclasses.replace(
            schema.sink, logical={rewrite.get(i, i): h for i, h in schema.sink.logical.items()}
        ),
    )


# -- fills and phases --------------------------------------------------------------------------


def _fills(
    old: TableSchema,
    target: TableSchema,
    changes: Sequence[SchemaChange],
    decisions: Sequence[Decision],
) -> list[Fill]:
    applied = _applied_ids(decisions)
    fills: list[Fill] = []
    for change in changes:
        if change.id not in applied:
            continue
        decision = next(d for d in decisions if d.change == change.id)
        method = change.fill
        if change.kind == "ambiguous":
            method = "ledger" if decision.resolution == "drop_add" else None
        if method is None:
            continue
        path = change.dotted
        if method == "ledger":
            detail = (
                f"fill {path} from the values the ledger rescued while the running code did "
                "not know the column (events since the change)"
            )
        elif method == "initial_default":
            column = target.find(change.field_id) if change.field_id is not None else None
            value = default_json(column.default) if column is not None else None
            detail = (
                f"rows older than the change hold the default {json.dumps(value)}: set it as "
                f"{path}'s initial-default where the table format supports it (Iceberg v3), "
                "else write it into those rows by key"
            )
        elif method == "keyed_backfill":
            detail = (
                f"read {path} back from the source by primary key for rows older than the "
                "change, in key chunks"
            )
        else:
            detail = resnapshot_steps(target.table)
        fills.append(Fill(change.id, path, change.field_id, method, detail))
    # One re-snapshot covers every change that needs one.
    seen_resnapshot = False
    unique: list[Fill] = []
    for fill in fills:
        if fill.method == "resnapshot":
            if seen_resnapshot:
                continue
            seen_resnapshot = True
        unique.append(fill)
    return unique


def resnapshot_steps(table: str) -> str:
    """How ``table`` is re-snapshotted once this plan is applied (by the running stages,
    :mod:`icetide.bootstrap.resnapshot`)."""
    return (
        f"re-snapshot table {table} while the pipeline runs (docs/schema-evolution.md, "
        "'Re-snapshot'): apply this plan with `--no-ddl`; at its next batch the ledger "
        f"recreates {table}'s ledger table in the new layout, then the merge rebuilds the "
        "base from the source, one primary-key chunk per merge round (resumable per chunk, "
        "reconciled by the version-guarded merge); capture and the other tables keep "
        "flowing"
    )


def _phases(
    old: TableSchema,
    target: TableSchema,
    alter: AlterPlan | None,
    note: str | None,
    fills: Sequence[Fill],
    changes: Sequence[SchemaChange],
    decisions: Sequence[Decision],
) -> tuple[Phase, ...]:
    if target == old:
        return ()
    one: list[str] = []
    if alter is not None:
        one += [f"base:   {s}" for s in alter.base]
        one += [f"ledger: {s}" for s in alter.ledger]
    if note:
        one.append(note)
    one.append("dead-letter: nothing (its columns do not depend on the schema)")
    two = [
        f"write schema version {target.version} of {target.table} (schema file and history, "
        "audit record)",
        "the merge picks it up at its next batch boundary, then the ledger's projection; "
        "events the old code reads keep unknown fields in the ledger's rescued data",
    ]
    three = [f"{f.change}: {f.method}: {f.detail}" for f in fills]
    return (
        Phase(1, "schema divergence", tuple(one)),
        Phase(2, "code convergence", tuple(two)),
        Phase(3, "data convergence", tuple(three)),
    )


def _schema_json(schema: TableSchema) -> dict[str, Any]:
    data = schema_to_dict(schema)
    return json.loads(json.dumps(data, default=str))
