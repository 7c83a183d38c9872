"""Every registry version, in order, once: the steps from a table's latest applied source
version to the one a message carries.

When a message carries schema version N and the table has applied versions up to M < N,
:func:`apply_versions` fetches every version M+1..N (:class:`~icetide.events.registry.
SchemaVersions`), and for each in ascending order:

1. checks it against the earlier versions under the subject's compatibility mode
   (:mod:`icetide.schema.compatibility`); an incompatible version stops the walk with
   reason ``schema_incompatible`` (its messages, and later versions', go to the
   dead-letter table; the table stays at the last good version);
2. converts it to the schema model, keeping every field's id by its path
   (:func:`~icetide.schema.convert.avro.from_avro_schema`);
3. plans it with the evolution layer's diff and policy (``build_plan``; no second set
   of rules); a held change stops the walk with reason ``unsupported_schema_change``;
4. hands the plan to ``apply_one`` (the runtime: ``apply_plan`` with ``spark.sql``, one
   Iceberg commit per version), then ``record`` s the mapping source version → table
   schema version as the table property ``icetide.schema.mapping``.

A crash between 4's two steps is safe: ``apply_plan`` is idempotent by version, so the
rerun applies nothing and records the mapping. A version already in the mapping is never
applied again, so a restart, a second process or a replayed batch applies nothing twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from icetide.events.registry import SchemaVersions, SubjectVersion
from icetide.events.wire import AVRO
from icetide.evolution.plan import EvolutionPlan, build_plan
from icetide.evolution.policy import EVOLUTION_DISABLED, Policy
from icetide.schema.compatibility import DEFAULT_MODE, check
from icetide.schema.contract.names import TableName
from icetide.schema.convert import ids_from
from icetide.schema.convert.avro import from_avro_schema, known_ids
from icetide.schema.model import TableSchema

MAPPING_PROPERTY = "icetide.schema.mapping"
"""Table property: JSON ``{"<source version>": <table schema version>, ...}``."""
SCHEMA_INCOMPATIBLE = "schema_incompatible"
UNSUPPORTED_SCHEMA_CHANGE = "unsupported_schema_change"


def read_mapping(text: str | None) -> dict[int, int]:
    """The mapping property's value as ``{source version: table schema version}``.

    >>> read_mapping('{"2": 2, "1": 1}')
    {1: 1, 2: 2}
    """
    if not text:
        return {}
    return {int(k): int(v) for k, v in sorted(json.loads(text).items(), key=lambda i: int(i[0]))}


def render_mapping(mapping: Mapping[int, int]) -> str:
    """The property value of ``mapping`` (keys ascending).

    >>> render_mapping({2: 3, 1: 1})
    '{"1": 1, "2": 3}'
    """
    return json.dumps({str(k): mapping[k] for k in sorted(mapping)})


@dataclass(frozen=True)
class Rejected:
    """The version the walk stopped at, and why (a dead-letter reason code and text)."""

    version: int
    reason: str
    detail: str


@dataclass
class Walk:
    """What :func:`apply_versions` did."""

    applied: list[tuple[int, int]] = field(default_factory=list)
    """(source version, table schema version) applied now, in order."""
    skipped: list[int] = field(default_factory=list)
    """Source versions already in the mapping (applied before: nothing done)."""
    rejected: Rejected | None = None


def row_record(schema: dict[str, Any]) -> dict[str, Any]:
    """The row record of a subject's schema: a Debezium envelope's ``before``/``after``
    record, or the schema itself when it is the row.

    >>> row = {"type": "record", "name": "Value", "fields": []}
    >>> env = {"type": "record", "name": "Envelope", "fields": [
    ...     {"name": "before", "type": ["null", row]}, {"name": "after", "type": ["null", "Value"]},
    ...     {"name": "op", "type": "string"}]}
    >>> row_record(env) is row
    True
    """
    names = {f.get("name") for f in schema.get("fields", [])}
    if not {"after", "op"} <= names:
        return schema
    for item in schema["fields"]:
        if item["name"] in ("before", "after"):
            branches = item["type"] if isinstance(item["type"], list) else [item["type"]]
            for branch in branches:
                if isinstance(branch, dict) and branch.get("type") == "record":
                    return branch
    return schema


def model_of(version: SubjectVersion, current: TableSchema) -> TableSchema:
    """The table's schema at ``version``: ids kept by path from ``current``, new fields
    numbered above its ``last_column_id``, version one higher. Avro only for now
    (JSON Schema and Protobuf arrive converted to Avro)."""
    if version.schema.format != AVRO:
        raise ValueError(f"version {version.version} is {version.schema.format}, not Avro")
    columns = from_avro_schema(
        row_record(json.loads(version.schema.text)),
        ids_from(current.last_column_id + 1),
        known_ids(current.columns),
    )
    return current.with_columns(columns, version=current.version + 1)


def apply_versions(
    subject: str,
    up_to: int,
    source: SchemaVersions,
    current: Callable[[], TableSchema],
    mapping: Callable[[], dict[int, int]],
    apply_one: Callable[[EvolutionPlan], int],
    record: Callable[[dict[int, int]], None],
    *,
    mode: str = DEFAULT_MODE,
    policy: Policy | None = None,
    base: TableName | None = None,
    ledger: TableName | None = None,
) -> Walk:
    """Apply every version of ``subject`` up to ``up_to`` not yet in the mapping, in
    ascending order, one ``apply_one`` (one table commit) each (see module doc).

    ``current`` and ``mapping`` are read again before each version, so a second process
    that applied some versions meanwhile is seen. ``apply_one`` returns the table's
    schema version after applying the plan. ``base``/``ledger`` name the tables the
    ALTERs are written for (see ``build_plan``).
    """
    walk = Walk()
    versions = source.versions(subject, up_to)
    for index, version in enumerate(versions):
        done = mapping()
        if version.version in done:
            walk.skipped.append(version.version)
            continue
        history = [v.schema.text for v in versions[:index]]
        verdict = check(version.schema.text, history, mode)
        if not verdict.compatible:
            walk.rejected = Rejected(version.version, SCHEMA_INCOMPATIBLE, verdict.reason)
            return walk
        table = current()
        target = model_of(version, table)
        plan = build_plan(table, target, policy=policy, base=base, ledger=ledger)
        if plan.held:
            detail = "; ".join(f"{c.id}: {c.kind}" for c in plan.held)
            walk.rejected = Rejected(version.version, UNSUPPORTED_SCHEMA_CHANGE, detail)
            return walk
        rejected = [c for c in plan.refused if plan.decision(c.id).action == "reject"]
        if rejected:  # evolution.enabled false, or the policy freezes the change
            disabled = not plan.policy.enabled
            detail = ("evolution.enabled is false; " if disabled else "the policy freezes ") + (
                ", ".join(c.id for c in rejected)
            )
            reason = EVOLUTION_DISABLED if disabled else UNSUPPORTED_SCHEMA_CHANGE
            walk.rejected = Rejected(version.version, reason, detail)
            return walk
        table_version = apply_one(plan) if plan.changed else table.version
        done = {**mapping(), version.version: table_version}
        record(done)
        walk.applied.append((version.version, table_version))
    return walk
