"""Applying an evolution plan: phase 1's statements, the new schema version, the audit
record; once, in order, resumable.

:func:`apply_plan` runs under the table's lock (:class:`~icetide.evolution.queue.
EvolutionQueue`), in this order, each step recorded before the next so a crash at any
point resumes where it stopped:

1. phase 1 on the base and ledger tables with the audit properties: given
   ``commit_tables`` (the CLI), each table's version is one Iceberg commit, schema and
   properties together (:mod:`icetide.lake.schema_update`; with a catalog that commits
   several tables at once, both tables in one), and a rerun finds the tables at the
   version; else the ALTERs and property statements, each handed to ``run_ddl`` (tests
   may collect them), progress kept in ``evolution/<table>.applying.json`` on the
   pipeline's state location (:func:`~icetide.state.store.state_store`), so a rerun,
   on this machine or one that replaced it, skips the statements already run;
2. the new schema version: history, then schema file (:meth:`icetide.pipeline.
   SchemaStore.record`); running stages pick it up at their next batch boundary
   (phase 2);
3. the audit record, added to the table's log on the state location and its copy
   beside the schema file (:mod:`icetide.evolution.audit`).

Idempotent by version: when the table's history already holds the plan's target version
with the same content, applying is a no-op (after a crash, or when a second process
applies the same change); a plan made against another version than the table's current
one is refused (plan again). Held changes are applied only when approved (``approve``).
A statement that ran but whose completion was not recorded (the process died inside
``run_ddl``) runs again on resume; ``run_ddl`` may treat "already exists" as done.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icetide.errors import SchemaChangeError
from icetide.evolution import audit
from icetide.evolution.plan import EvolutionPlan
from icetide.evolution.queue import EvolutionQueue
from icetide.schema.quoting import literal
from icetide.state.store import StateFile, state_store

if TYPE_CHECKING:
    from icetide.config.model import Config
    from icetide.pipeline import SchemaStore


@dataclass(frozen=True)
class ApplyResult:
    """What :func:`apply_plan` did."""

    table: str
    from_version: int
    version: int
    applied: tuple[str, ...]
    held: tuple[str, ...]
    ddl: tuple[str, ...]
    """The statements run now (a resumed apply: only the rest)."""
    noop: bool
    record: audit.AuditRecord | None = None
    properties: dict[str, str] = field(default_factory=dict)
    committed: bool = False
    """Whether ``commit_tables`` took the tables there (``ddl``: its schema operations)."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form (``icetide schema apply --output json``)."""
        return {
            "table": self.table,
            "from_version": self.from_version,
            "version": self.version,
            "applied": list(self.applied),
            "held": list(self.held),
            "ddl": list(self.ddl),
            "noop": self.noop,
            "audit": json.loads(self.record.to_json()) if self.record else None,
        }

    def render(self) -> str:
        """One paragraph for a person."""
        if self.noop:
            head = (
                f"table {self.table}: schema version {self.version} already applied; nothing to do"
            )
        else:
            done = (
                f"one Iceberg commit per table ({len(self.ddl)} schema operation(s))"
                if self.committed
                else f"ran {len(self.ddl)} statement(s)"
            )
            head = (
                f"table {self.table}: schema version {self.from_version} → {self.version}: "
                f"applied {', '.join(self.applied) or 'nothing'}; {done}"
            )
        if self.held:
            head += f"\n  still held: {', '.join(self.held)} (approve with --approve ID)"
        return head


def apply_plan(
    plan: EvolutionPlan,
    store: SchemaStore,
    *,
    run_ddl: Callable[[str], None] | None = None,
    commit_tables: Callable[[EvolutionPlan, dict[str, str]], Sequence[str]] | None = None,
    approve: Sequence[str] = (),
    by: str | None = None,
    reason: str | None = None,
    state_dir: Path | None = None,
) -> ApplyResult:
    """Apply ``plan`` to its table (see module doc); ``approve`` names held changes to
    apply too (an ambiguous one as ``id=rename`` or ``id=drop_add``). ``run_ddl``
    ``None`` runs no statement (the tables are altered elsewhere). ``commit_tables``
    takes the tables to the version instead of ``run_ddl``, whenever the plan has it as
    schema updates (:attr:`EvolutionPlan.update`; a re-snapshot plan has none) and no
    statement of an earlier apply ran yet: called with the plan and the audit
    properties, it returns what it did, one line each. ``state_dir`` holds the lock
    files (default: the pipeline's ``<state_dir>/evolution``); the progress file is on
    the state location."""
    if approve:
        plan = plan.with_approvals(approve)
    table = plan.table
    config = store.config
    directory = state_dir or evolution_dir(config)
    queue = EvolutionQueue(directory)
    schema_file = config.resolved_path(config.table(table).schema_file)
    state = state_store(config)
    log, copy = audit.audit_file(state, table), audit.audit_path(schema_file)
    with queue.lock(table):
        history = store.history(table)
        current = history.current
        target = plan.target
        progress = state.file(f"evolution/{table}.applying.json")
        pending = _load(progress)
        already = any(v == target for v in history.versions) and target.version <= current.version
        if not plan.changed or (already and pending is None):
            return ApplyResult(
                table,
                current.version,
                current.version,
                (),
                tuple(c.id for c in plan.held),
                (),
                noop=True,
                record=audit.recorded(log, copy, target.version),
            )
        if pending is not None and pending.get("plan_hash") != plan.hash():
            raise SchemaChangeError(
                f"table {table}: an earlier apply of version {pending.get('version')} "
                f"(plan {pending.get('plan_hash')}) did not finish; this plan is "
                f"{plan.hash()}",
                hint=f"rerun that apply to finish it, or remove {progress.where} after "
                "checking the tables by hand",
            )
        if current != plan.old and not already:
            raise SchemaChangeError(
                f"table {table}: the plan was made against schema version {plan.old.version} "
                f"but the table is at version {current.version} now",
                hint="plan again (`icetide schema plan`): changes apply strictly in order",
            )
        if pending is None:
            record = audit.AuditRecord(
                table=table,
                version=target.version,
                from_version=plan.old.version,
                changes=tuple(_change_entry(plan, c.id) for c in plan.applied),
                held=tuple(c.id for c in plan.held),
                ddl=plan.ddl,
                at=audit.now_utc(),
                by=audit.who(by),
                reason=reason,
                plan_hash=plan.hash(),
            )
            pending = {
                "version": target.version,
                "plan_hash": plan.hash(),
                "done": 0,
                "record": json.loads(record.to_json()),
            }
            _save(progress, pending)
        record = audit.AuditRecord.from_json(json.dumps(pending["record"]))
        properties = audit.table_properties(record)
        statements = [*plan.ddl, *property_statements(plan, properties)]
        ran: list[str] = []
        committed = False
        if commit_tables is not None and plan.update is not None and not int(pending["done"]):
            ran, committed = list(commit_tables(plan, properties)), True
            pending["done"] = len(statements)
            _save(progress, pending)
        for index in range(int(pending["done"]), len(statements)):
            if run_ddl is not None:
                run_ddl(statements[index])
                ran.append(statements[index])
            pending["done"] = index + 1
            _save(progress, pending)
        store.record(table, target, key_change=plan.key_change)
        audit.append(log, copy, record)
        progress.delete()
    return ApplyResult(
        table,
        plan.old.version,
        target.version,
        tuple(c.id for c in plan.applied),
        tuple(c.id for c in plan.held),
        tuple(ran),
        noop=False,
        record=record,
        properties=properties,
        committed=committed,
    )


def evolution_dir(config: Config) -> Path:
    """Where the tables' evolution locks, queues and apply progress live."""
    return config.resolved_path(config.state_dir) / "evolution"


def property_statements(plan: EvolutionPlan, properties: dict[str, str]) -> list[str]:
    """The statements setting the audit properties on the base and ledger tables."""
    pairs = ", ".join(f"{literal(k)}={literal(v)}" for k, v in sorted(properties.items()))
    return [f"ALTER TABLE {t} SET TBLPROPERTIES ({pairs})" for t in (plan.base, plan.ledger)]


def _change_entry(plan: EvolutionPlan, change_id: str) -> dict[str, Any]:
    change = next(c for c in plan.changes if c.id == change_id)
    decision = plan.decision(change_id)
    entry: dict[str, Any] = {
        "id": change.id,
        "kind": change.kind,
        "classification": change.classification,
        "path": change.dotted,
        "field_id": change.field_id,
    }
    if decision.approved:
        entry["decision"] = decision.reason
    return entry


def _load(file: StateFile) -> dict[str, Any] | None:
    data = file.read()
    if data is None:
        return None
    found = json.loads(data.decode("utf-8"))
    return found if isinstance(found, dict) else None


def _save(file: StateFile, data: dict[str, Any]) -> None:
    file.write(json.dumps(data, sort_keys=True).encode())
