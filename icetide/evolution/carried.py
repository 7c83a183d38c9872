"""Schemas carried by the messages themselves, walked by the running ledger stage.

The ledger stage hands this module (its ``on_versions``), before it projects a batch, the
schemas the batch's row events were written with that it has not taken yet
(:class:`~icetide.ledger.signals.CarriedSchema`):

* a **registry schema id**: the subject's versions up to the one it names are walked in
  ascending order by :func:`~icetide.evolution.registry_walk.apply_versions` (compatibility
  checked against the history, each version planned with ``build_plan`` and applied with
  ``apply_plan``, its own schema version, the mapping ``icetide.schema.mapping`` recorded
  on the ledger table after each). A message of an older version than the table's is
  simply read with its writer schema: nothing to apply.
* an **inline Debezium schema** (JsonConverter with ``schemas.enable``): these carry no
  version number, so an old message still in flight cannot be told from a column drop by
  its schema alone. The table therefore takes from them only what they add: new fields
  (nested ones too, optional), widenings (``int32`` → ``int64``, ``float32`` →
  ``float64``, decimal precision up, enum symbols added) and required → optional. A field
  the schema lacks is not a drop (drops come from the DDL); a type-category change (a
  struct becoming a string) is planned and held.

What is applied goes through the same path as a change detected from DDL
(``apply_plan`` with no statements: each stage ALTERs its own tables at its batch
boundary, phases 1-3 of docs/convergence.md), so the ledger ALTERs its table before the
first row of the new version is written, and no restart is needed.

What is refused comes back to the stage as a dead-letter reason per schema key:
``schema_incompatible`` (the compatibility mode refuses the version),
``unsupported_schema_change`` (the plan holds a change), ``schema_evolution_disabled``
(``evolution.enabled: false`` and the version differs from the table),
``unknown_schema_version`` (a schema id that is not a version of the subject). The text
names the table, the subject and version (or the inline schema key) and why; other
tables and other versions keep flowing. A refusal is asked again at the next batch, so
messages flow again once the change is approved or the registry fixed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from icetide.errors import SchemaChangeError, SchemaError
from icetide.events.registry import AvroVersions, registry_for
from icetide.evolution.apply import apply_plan
from icetide.evolution.plan import EvolutionPlan, table_plan
from icetide.evolution.policy import EVOLUTION_DISABLED, Policy
from icetide.evolution.registry_walk import (
    MAPPING_PROPERTY,
    UNSUPPORTED_SCHEMA_CHANGE,
    apply_versions,
    read_mapping,
    render_mapping,
)
from icetide.faults import crash_point
from icetide.lake.alter import set_properties, table_properties
from icetide.ledger.signals import CarriedSchema, Refusal
from icetide.schema.contract import phases as p
from icetide.schema.convert import NextId, ids_from
from icetide.schema.convert.connect import PRECISION, icetide_type
from icetide.schema.model import TableSchema
from icetide.schema.promote import promote
from icetide.schema.types import Column, IcetideType, JsonType, ListType, MapType, StructType

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.pipeline import Pipeline

UNKNOWN_VERSION = "unknown_schema_version"
UNREADABLE_SCHEMA = "unreadable_schema"
"""Dead-letter reason of a message whose inline Connect schema icetide cannot read."""
_NESTED = (StructType, ListType, MapType)


@dataclass
class VersionWalker:
    """The ledger stage's ``on_versions``: see the module doc."""

    spark: SparkSession
    pipeline: Pipeline
    refused: dict[str, dict[str, Refusal]] = field(default_factory=dict)
    """The latest refusals per table (for ``status`` and tests)."""

    def __call__(self, carried: Sequence[CarriedSchema]) -> dict[str, dict[str, Refusal]]:
        out: dict[str, dict[str, Refusal]] = {}
        for table in sorted({c.table for c in carried}):
            mine = [c for c in carried if c.table == table]
            registry = [c for c in mine if c.subject is not None and c.schema_id is not None]
            refused: dict[str, Refusal] = {}
            for subject in sorted({c.subject for c in registry if c.subject}):
                ids = {c.schema_id: c.key for c in registry if c.subject == subject}
                refused |= self.walk_subject(table, subject, ids)  # type: ignore[arg-type]
            for schema in sorted(mine, key=lambda c: c.first):
                if schema.text is not None:
                    refused |= self.take_inline(table, schema.key, json.loads(schema.text))
            self.refused[table] = refused
            out[table] = refused
        return out

    # -- registry versions -------------------------------------------------------------
    def walk_subject(self, table: str, subject: str, ids: Mapping[int, str]) -> dict[str, Refusal]:
        """Walk ``subject`` up to the newest version among ``ids`` (schema id → key)."""
        config = self.pipeline.config
        registry = config.transport.registry
        assert registry is not None  # registry keys exist only with a registry
        source = AvroVersions(registry_for(registry.url))
        versions = source.versions(subject)
        number = {v.schema_id: v.version for v in versions}
        refused: dict[str, Refusal] = {}
        for schema_id, key in ids.items():
            if schema_id not in number:
                refused[key] = (
                    UNKNOWN_VERSION,
                    f"table {table}: schema id {schema_id} is not a version of registry "
                    f"subject {subject!r}; register it under that subject (TopicNameStrategy)",
                )
        seen = [number[i] for i in ids if i in number]
        if not seen:
            return refused
        refs = self.pipeline.refs(table)
        settings = config.table(table).evolution
        store = self.pipeline.schemas

        def mapping() -> dict[int, int]:
            return read_mapping(table_properties(self.spark, refs.cdc).get(MAPPING_PROPERTY))

        def record(done: dict[int, int]) -> None:
            set_properties(self.spark, refs.cdc, {MAPPING_PROPERTY: render_mapping(done)})

        def apply_one(plan: EvolutionPlan) -> int:
            version = next(v for v in versions if v.version not in mapping()).version
            return self._apply(plan, f"registry subject {subject!r} version {version}")

        walk = apply_versions(
            subject,
            max(seen),
            source,
            lambda: store.current(table),
            mapping,
            apply_one,
            record,
            mode=registry.compatibility,
            policy=Policy.from_config(settings),
            base=refs.base,
            ledger=refs.cdc,
        )
        if walk.rejected is None:
            return refused
        stopped, reason = walk.rejected.version, walk.rejected.reason
        detail = walk.rejected.detail
        for schema_id, key in ids.items():
            if number.get(schema_id, 0) >= stopped:
                refused[key] = (
                    reason,
                    f"table {table}: registry subject {subject!r} version {stopped} not "
                    f"applied: {detail}"[:500],
                )
        self.pipeline.report(
            "evolution",
            f"schema {table}: subject {subject} version {stopped} refused ({reason}): {detail}",
            table=table,
            refused=reason,
        )
        return refused

    # -- inline Debezium schemas -------------------------------------------------------
    def take_inline(self, table: str, key: str, row: Mapping[str, Any]) -> dict[str, Refusal]:
        """Apply what the inline row struct ``row`` adds to ``table``'s schema.

        The schema is part of the messages, so one icetide cannot read (a type no
        converter writes, a malformed struct) refuses those messages only: they become
        dead letters with reason :data:`UNREADABLE_SCHEMA`, and the stage goes on."""
        current = self.pipeline.schema(table)
        where = f"table {table}: inline schema {key}"
        try:
            candidate = inline_candidate(current, row)
        except Exception as exc:  # the message's content, never the stage's failure
            return {key: (UNREADABLE_SCHEMA, unreadable(where, exc, table))}
        if candidate is None:
            return {}
        settings = self.pipeline.config.table(table).evolution
        if not settings.enabled:
            return {
                key: (
                    EVOLUTION_DISABLED,
                    f"{where} differs from schema version {current.version} and "
                    "evolution.enabled is false",
                )
            }
        plan = table_plan(self.pipeline, table, current, candidate)
        if plan.held:
            held = "; ".join(f"{c.id}: {c.reason}" for c in plan.held)
            self.pipeline.report(
                "evolution", f"schema {table}: {key} held: {held}", table=table, held=held
            )
            return {key: (UNSUPPORTED_SCHEMA_CHANGE, f"{where} held: {held}"[:500])}
        if plan.changed:
            self._apply(plan, f"inline Debezium schema {key}")
        return {}

    def _apply(self, plan: EvolutionPlan, what: str) -> int:
        """Apply one version like a change detected from DDL; its table version."""
        table = plan.table
        result = apply_plan(
            plan,
            self.pipeline.schemas,
            run_ddl=None,
            by="icetide ledger (automatic)",
            reason=f"carried by the messages: {what}",
        )
        crash_point("evolution.between_versions")  # applied, the next version not yet
        if not result.noop:
            set_properties(
                self.spark,
                self.pipeline.refs(table).cdc,
                {
                    p.CHANGE_VERSION: str(result.version),
                    p.DETECTED: str(int(time.time() * 1000)),
                },
            )
            self.pipeline.report(
                "evolution",
                f"schema {table}: version {result.version} applied automatically from "
                f"{what} ({', '.join(result.applied)})",
                table=table,
                version=result.version,
            )
        return result.version


def unreadable(where: str, exc: Exception, table: str) -> str:
    """The dead-letter text of an inline schema that cannot be read: what, and what to do.

    >>> from icetide.errors import SchemaError
    >>> text = unreadable("table t: inline schema inline:1", SchemaError("bad", hint="x"), "t")
    >>> text.split("; ")[0]
    'table t: inline schema inline:1 cannot be read: bad (x)'
    """
    hint = getattr(exc, "hint", None)
    what = f"{exc}" if isinstance(exc, SchemaError) else f"{type(exc).__name__}: {exc}"
    text = f"{where} cannot be read: {what}" + (f" ({hint})" if hint else "")
    return (
        f"{text}; its messages wait in the dead-letter table: "
        f"`icetide dlt replay {table} --reason {UNREADABLE_SCHEMA}` once it can"
    )[:500]


def inline_candidate(current: TableSchema, row: Mapping[str, Any]) -> TableSchema | None:
    """``current`` with what the inline Connect row struct ``row`` adds (see module
    doc), one version up; None when it adds nothing.

    >>> from icetide.schema.file import schema_from_dict
    >>> t = schema_from_dict({"table": "t", "primary_key": ["id"], "columns": [
    ...     {"id": 1, "name": "id", "type": "int", "nullable": False},
    ...     {"id": 2, "name": "a", "type": {"struct": [
    ...         {"id": 3, "name": "city", "type": "string"}]}}]})
    >>> row = {"type": "struct", "fields": [{"field": "id", "type": "int64"},
    ...     {"field": "a", "type": "struct", "optional": True, "fields": [
    ...         {"field": "city", "type": "string", "optional": True},
    ...         {"field": "zip", "type": "string", "optional": True}]}]}
    >>> new = inline_candidate(t, row)
    >>> new.version, str(new.by_name["id"].type), str(new.by_name["a"].type)
    (2, 'long', 'struct<city: string, zip: string>')
    >>> inline_candidate(new, row) is None
    True
    """
    next_id = ids_from(current.last_column_id + 1)
    keys = set(current.key_ids)
    merged = _merge_fields(current.columns, row.get("fields") or (), next_id, keys)
    if merged == current.columns:
        return None
    return current.with_columns(merged, version=current.version + 1)


def _merge_fields(
    have: tuple[Column, ...], fields: Sequence[Any], next_id: NextId, keys: set[int]
) -> tuple[Column, ...]:
    out = list(have)
    index = {c.name: i for i, c in enumerate(have)}
    for item in fields:
        if not isinstance(item, Mapping) or not isinstance(item.get("field"), str):
            continue
        name = item["field"]
        at = index.get(name)
        if at is None:
            column_id = next_id()
            ctype, _ = icetide_type(item, next_id)
            out.append(Column(column_id, name, ctype, True))  # added columns are optional
            index[name] = len(out) - 1
            continue
        column = out[at]
        ctype = _merge_type(column.type, item, next_id)
        nullable = column.nullable or (bool(item.get("optional")) and column.id not in keys)
        if ctype != column.type or nullable != column.nullable:
            out[at] = Column(
                column.id, column.name, ctype, nullable, column.doc, column.default, column.tags
            )
    return tuple(out)


def _merge_type(have: IcetideType, item: Mapping[str, Any], next_id: NextId) -> IcetideType:
    probe, _ = icetide_type(item, ids_from(1))
    if isinstance(have, JsonType) or isinstance(probe, JsonType):
        return have  # JSON text either way: nothing to learn from the inline form
    if isinstance(have, StructType) and isinstance(probe, StructType):
        return StructType(_merge_fields(have.fields, item.get("fields") or (), next_id, set()))
    if isinstance(have, _NESTED) or isinstance(probe, _NESTED):
        if type(have) is type(probe):
            return have  # a list or map of the same shape: element changes are not taken
        ctype, _ = icetide_type(item, next_id)  # a category change: planned, then held
        return ctype
    precise = PRECISION in (item.get("parameters") or {})
    if probe == have or (probe.name == "decimal" and not precise):
        return have  # without its precision, a Connect decimal says nothing about widening
    try:
        return promote(have, probe)
    except SchemaChangeError:  # not a widening (an old, narrower message): keep the type
        return have
