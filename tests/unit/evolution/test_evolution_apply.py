"""apply_plan: the schema file, history and audit log it writes, the DDL it hands out,
idempotence by version, resuming after a crash, strict order, and approvals."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from icetide.config import load_config
from icetide.config.loader import load_schema_file
from icetide.errors import SchemaChangeError, SchemaError
from icetide.evolution import audit
from icetide.evolution.apply import apply_plan
from icetide.evolution.classify import candidate_schema
from icetide.evolution.evidence import collect
from icetide.evolution.plan import EvolutionPlan, build_plan
from icetide.evolution.policy import Policy
from icetide.evolution.queue import EvolutionQueue, QueuedChange
from icetide.pipeline import SchemaStore
from icetide.schema.file import schema_from_dict, schema_to_dict
from icetide.schema.history import SchemaHistory
from icetide.state.store import LocalStore

from .conftest import DDL


def plan_for(store: SchemaStore, folder: Path, new_text: str | None = None) -> EvolutionPlan:
    if new_text is not None:
        (folder / "new.yaml").write_text(new_text)
    old = store.current("customers")
    fresh = load_schema_file(folder / "new.yaml").renamed("customers")
    evidence = collect([DDL], "mysql", "customers")
    policy = Policy(sensitive=("ssn*",))
    return build_plan(
        old, candidate_schema(old, fresh, evidence, sensitive=policy.sensitive), evidence, policy
    )


def test_apply_writes_version_history_audit_and_runs_the_ddl_in_order(
    folder: Path, store: SchemaStore
) -> None:
    plan = plan_for(store, folder)
    ran: list[str] = []
    result = apply_plan(plan, store, run_ddl=ran.append, by="ana", reason="ticket 7")
    assert result.version == 2 and not result.noop
    assert result.held == ("sensitive:ssn",)
    # the phase-1 ALTERs first, in plan order, then the audit properties on both tables
    assert ran[: len(plan.ddl)] == list(plan.ddl)
    assert "RENAME COLUMN `email` TO `mail`" in ran[0]
    assert all("icetide.schema.audit" in s for s in ran[len(plan.ddl) :])
    assert len(ran) == len(plan.ddl) + 2
    schema = load_schema_file(folder / "schemas" / "customers.yaml")
    assert schema.version == 2
    assert [(c.id, c.name) for c in schema.columns] == [
        (1, "id"),
        (2, "mail"),
        (3, "amount"),
        (4, "note"),
    ]
    assert schema.columns[3].default is not None and schema.columns[3].default.value == "n/a"
    history = SchemaHistory.from_yaml(
        (folder / ".icetide" / "schemas" / "customers.history.yaml").read_text()
    )
    assert [v.version for v in history.versions] == [1, 2]
    records = audit.read_audit(folder / "schemas" / "customers.audit.jsonl")
    assert len(records) == 1
    record = records[0]
    assert (record.version, record.from_version, record.by, record.reason) == (
        2,
        1,
        "ana",
        "ticket 7",
    )
    assert [c["id"] for c in record.changes] == [
        "rename:mail",
        "widen:amount",
        "add_with_default:note",
    ]
    assert record.held == ("sensitive:ssn",) and record.plan_hash == plan.hash()
    props = audit.table_properties(record)
    assert props["icetide.schema.version"] == "2"
    assert json.loads(props["icetide.schema.audit"])["by"] == "ana"


def test_applying_the_same_plan_twice_is_a_no_op(folder: Path, store: SchemaStore) -> None:
    plan = plan_for(store, folder)
    apply_plan(plan, store, run_ddl=lambda s: None)
    ran: list[str] = []
    again = apply_plan(plan, store, run_ddl=ran.append)
    assert again.noop and ran == []
    # a second process, with its own store, sees the same
    other = SchemaStore(load_config(folder / "icetide.yaml"))
    assert apply_plan(plan, other, run_ddl=ran.append).noop and ran == []
    assert len(audit.read_audit(folder / "schemas" / "customers.audit.jsonl")) == 1


def test_a_crash_inside_the_ddl_resumes_where_it_stopped(folder: Path, store: SchemaStore) -> None:
    plan = plan_for(store, folder)
    ran: list[str] = []

    def crash_at_third(statement: str) -> None:
        if len(ran) == 2:
            raise RuntimeError("injected: process died")
        ran.append(statement)

    with pytest.raises(RuntimeError, match="injected"):
        apply_plan(plan, store, run_ddl=crash_at_third)
    assert load_schema_file(folder / "schemas" / "customers.yaml").version == 1
    rest: list[str] = []
    fresh_store = SchemaStore(load_config(folder / "icetide.yaml"))
    result = apply_plan(plan, fresh_store, run_ddl=rest.append)
    assert ran + rest == list(plan.ddl) + rest[len(plan.ddl) - 2 :]
    assert rest[0] == plan.ddl[2]  # nothing run twice
    assert result.version == 2
    assert len(audit.read_audit(folder / "schemas" / "customers.audit.jsonl")) == 1
    assert not (folder / ".icetide" / "evolution" / "customers.applying.json").exists()


def test_with_commit_tables_phase_1_is_one_call_and_no_statement(
    folder: Path, store: SchemaStore
) -> None:
    """``schema apply`` takes each table to the version in one commit: the plan's schema
    updates and the audit properties go to ``commit_tables`` once; no statement runs."""
    plan = plan_for(store, folder)
    calls: list[tuple[str, dict[str, str]]] = []
    ran: list[str] = []

    def commit(given: EvolutionPlan, properties: dict[str, str]) -> list[str]:
        assert given.update is not None
        calls.append((given.table, properties))
        return [str(op) for op in given.update.base.ops]

    result = apply_plan(plan, store, run_ddl=ran.append, commit_tables=commit)
    assert ran == [] and len(calls) == 1
    assert calls[0][1]["icetide.schema.version"] == "2"
    assert 'renameColumn("email", "mail")' in result.ddl
    assert "one Iceberg commit per table" in result.render()
    assert plan.update is not None
    assert 'updateColumn("amount", DECIMAL(12,2))' in [str(op) for op in plan.update.base.ops]
    assert load_schema_file(folder / "schemas" / "customers.yaml").version == 2


def test_commit_tables_failing_leaves_the_apply_to_finish_by_a_rerun(
    folder: Path, store: SchemaStore
) -> None:
    plan = plan_for(store, folder)

    def dies(_plan: EvolutionPlan, _properties: dict[str, str]) -> list[str]:
        raise RuntimeError("injected: process died before the commit")

    with pytest.raises(RuntimeError, match="injected"):
        apply_plan(plan, store, commit_tables=dies)
    assert load_schema_file(folder / "schemas" / "customers.yaml").version == 1
    calls: list[str] = []
    result = apply_plan(plan, store, commit_tables=lambda p, _: calls.append(p.table) or [])
    assert calls == ["customers"] and result.version == 2


def test_a_plan_made_against_an_older_version_is_refused(folder: Path, store: SchemaStore) -> None:
    first = plan_for(store, folder)
    stale = plan_for(
        store,
        folder,
        (folder / "new.yaml").read_text() + "  - {id: 6, name: extra, type: long}\n",
    )
    apply_plan(first, store)
    with pytest.raises(
        SchemaChangeError, match="made against schema version 1 but the table is at version 2"
    ):
        apply_plan(stale, store)


def test_held_changes_apply_only_when_approved(folder: Path, store: SchemaStore) -> None:
    apply_plan(plan_for(store, folder), store)
    plan = plan_for(store, folder)
    assert [c.id for c in plan.held] == ["sensitive:ssn"] and not plan.changed
    with pytest.raises(SchemaError, match="no such change"):
        apply_plan(plan, store, approve=["sensitive:sn"])
    result = apply_plan(plan, store, approve=["sensitive:ssn"], by="dpo")
    assert result.version == 3 and result.applied == ("sensitive:ssn",)
    column = load_schema_file(folder / "schemas" / "customers.yaml").by_name["ssn"]
    assert column.id == 5 and column.tags == frozenset({"sensitive"})
    assert (
        audit.read_audit(folder / "schemas" / "customers.audit.jsonl")[-1].changes[0]["decision"]
        == "approved"
    )


def test_an_approved_key_change_is_recorded_as_one(folder: Path, store: SchemaStore) -> None:
    old = store.current("customers")
    fresh = schema_from_dict(
        {
            "table": "customers",
            "primary_key": ["id", "email"],
            "columns": [
                {"id": 1, "name": "id", "type": "long"},
                {"id": 2, "name": "email", "type": "string"},
                {"id": 3, "name": "amount", "type": "decimal(10,2)"},
            ],
        }
    )
    plan = build_plan(old, candidate_schema(old, fresh))
    assert [c.id for c in plan.held] == ["key_change"] and not plan.changed
    result = apply_plan(plan, store, approve=["key_change"])
    history = SchemaHistory.from_yaml(
        (folder / ".icetide" / "schemas" / "customers.history.yaml").read_text()
    )
    assert history.current.primary_key == ("id", "email") and 2 in history.key_changes
    assert result.version == 2 and result.applied == ("key_change",)


def test_two_processes_applying_the_same_change_apply_it_once(folder: Path) -> None:
    plans = []
    stores = [SchemaStore(load_config(folder / "icetide.yaml")) for _ in range(2)]
    for store in stores:
        plans.append(plan_for(store, folder))
    ran: list[str] = []
    results = []
    gate = threading.Barrier(2)

    def run(i: int) -> None:
        gate.wait()
        results.append(apply_plan(plans[i], stores[i], run_ddl=ran.append))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.noop for r in results) == [False, True]
    assert len(ran) == len(plans[0].ddl) + 2
    assert len(audit.read_audit(folder / "schemas" / "customers.audit.jsonl")) == 1


def test_queued_changes_apply_in_order_and_end_like_sequential(
    folder: Path, store: SchemaStore
) -> None:
    """Two changes detected together: the queue applies them one after the other, each
    planned against the version the previous one left; the end state is the one applying
    them by hand in order gives."""
    first = load_schema_file(folder / "new.yaml")
    second_text = (folder / "new.yaml").read_text() + "  - {id: 9, name: phone, type: string}\n"
    (folder / "second.yaml").write_text(second_text)
    second = load_schema_file(folder / "second.yaml")
    queue = EvolutionQueue(folder / ".icetide" / "evolution")
    queue.enqueue("customers", schema_to_dict(first), ddl=(DDL,))
    queue.enqueue("customers", schema_to_dict(second))
    seen: list[int] = []

    def handle(entry: QueuedChange) -> None:
        old = store.current("customers")
        fresh = schema_from_dict(entry.schema).renamed("customers")
        evidence = collect(list(entry.ddl), "mysql", "customers")
        plan = build_plan(old, candidate_schema(old, fresh, evidence), evidence)
        seen.append(entry.seq)
        apply_plan(plan, store)

    assert queue.drain("customers", handle) == 2
    assert seen == [1, 2] and queue.pending("customers") == []
    final = store.current("customers")
    assert final.version == 3
    assert [c.name for c in final.columns] == ["id", "mail", "amount", "note", "ssn", "phone"]
    assert final.by_name["mail"].id == 2  # the rename of the first change kept the id


def test_the_audit_log_moves_to_the_state_location_and_its_copy_follows(tmp_path: Path) -> None:
    """A log kept only beside the schema file (before the state location held it) is
    where the state location's log starts; a copy that lacks records is written again."""
    state = LocalStore(tmp_path / "state")
    log, copy = audit.audit_file(state, "customers"), tmp_path / "schemas" / "c.audit.jsonl"

    def record(version: int) -> audit.AuditRecord:
        return audit.AuditRecord(
            "customers", version, version - 1, (), (), (), "t", "ana", None, "h"
        )

    copy.parent.mkdir()
    copy.write_text(record(2).to_json() + "\n")
    assert audit.append(log, copy, record(3)) and not audit.append(log, copy, record(3))
    assert [r.version for r in audit.parse_audit((log.read() or b"").decode(), "log")] == [2, 3]
    assert [r.version for r in audit.read_audit(copy)] == [2, 3]
    assert audit.recorded(log, copy, 2) == record(2)
    elsewhere = tmp_path / "new" / "c.audit.jsonl"
    assert audit.restore_copy(log, elsewhere) and not audit.restore_copy(log, elsewhere)
    assert elsewhere.read_text() == copy.read_text()
