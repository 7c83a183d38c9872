"""Change detection at runtime: the ledger's signals → a candidate schema → the
evolution plan → a new schema version, written where every stage picks it up.

The ledger stage calls :class:`Detector` with the schema-change signals of a batch
(:mod:`icetide.ledger.signals`: DDL text, PostgreSQL column lists, unknown fields in
events). For each table it reads the source catalog now
(:func:`~icetide.evolution.source_schema.read_catalog`) and maps its columns against the
schema file's (:func:`~icetide.evolution.source_schema.schema_from_catalog`: a declared
type the source type still fits, such as ``boolean`` for a ``TINYINT(1)``, is kept, so
it is no change; a source type it no longer fits is), takes the DDL texts as
evidence (:func:`~icetide.evolution.evidence.collect`: a rename keeps its id), and hands
both to the decision layer (:func:`~icetide.evolution.plan.build_plan` with the table's
policy). What the policy allows is applied with
:func:`~icetide.evolution.apply.apply_plan` (schema history, schema file, audit log; no
DDL: each stage ALTERs its own tables at its next batch boundary, see
docs/convergence.md), and the change is recorded on the ledger table (its source time and
position) so ``status`` can time the phases. What is held stays held with its reason;
events keep flowing and unknown fields stay in ``_rescued`` meanwhile. With
``evolution.enabled: false`` nothing is applied: the change is refused with the reason
``schema_evolution_disabled`` (the one the message-schema walk gives, so both paths
refuse alike), reported, and kept in :attr:`Detector.refused`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from icetide.config.model import Config
from icetide.config.sections import SourceConfig
from icetide.config.tables import TableConfig
from icetide.errors import ConfigError, SchemaError
from icetide.evolution.apply import apply_plan
from icetide.evolution.classify import candidate_schema
from icetide.evolution.evidence import Dialect, TableEvidence, collect
from icetide.evolution.per_statement import Step, statement_steps
from icetide.evolution.plan import EvolutionPlan, table_plan
from icetide.evolution.policy import EVOLUTION_DISABLED, Policy
from icetide.evolution.source_schema import Catalog, read_catalog, schema_from_catalog
from icetide.lake.alter import set_properties, table_properties
from icetide.ledger.signals import ChangeSignal
from icetide.schema.contract import phases as p
from icetide.schema.model import TableSchema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.pipeline import Pipeline


KEY_LOST = "key_change"
NO_KEY_HINT = (
    "while it is held, the table's events that lack its key wait in its dead-letter table "
    "(missing_key): give the source table a primary key again, or name the columns that "
    "identify a row in tables[].primary_key, then re-snapshot it (`icetide schema apply "
    "--approve key_change --no-ddl`) and replay them (`icetide dlt replay TABLE`)"
)

CatalogReader = Callable[[str], Catalog | None]
"""A table's source catalog now (``None``: the table is gone); the real one reads the
capturing source (:func:`~icetide.evolution.source_schema.read_catalog`)."""


@dataclass
class Detector:
    """Acts on the ledger's signals (its ``on_signals``): see the module doc."""

    spark: SparkSession
    pipeline: Pipeline
    catalog: CatalogReader | None = None
    held: dict[str, tuple[str, ...]] = field(default_factory=dict)
    refused: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Per table: (reason, text) of a change refused because evolution is disabled."""

    def __call__(self, signals: Sequence[ChangeSignal]) -> None:
        for table in sorted({s.table for s in signals}):
            self.detect(table, [s for s in signals if s.table == table])

    def _candidate(self, table: str) -> TableSchema | None:
        config = self.pipeline.config
        settings = config.table(table)
        if self.catalog is not None:
            found = self.catalog(table)
        else:
            try:
                found = read_catalog(capturing_source(config, settings), settings)
            except SchemaError:
                found = None  # the source table is gone: nothing to evolve to
        if found is None:
            return None
        return schema_from_catalog(settings, found, declared=self.pipeline.schema(table))

    def plan(self, table: str, signals: Sequence[ChangeSignal]) -> EvolutionPlan | None:
        """The evolution plan for what ``table``'s source shows now, all ``signals`` at
        once (None: unreadable)."""
        fresh = self._candidate(table)
        if fresh is None:
            return None
        return self._plan(table, Step(tuple(signals), self._evidence(table, signals), fresh, True))

    def _evidence(self, table: str, signals: Sequence[ChangeSignal]) -> TableEvidence:
        return collect([s.ddl for s in signals if s.ddl], self._dialect(table), _named(self, table))

    def _dialect(self, table: str) -> Dialect:
        source = capturing_source(self.pipeline.config, self.pipeline.config.table(table))
        return "postgres" if source.type == "postgres" else "mysql"

    def _plan(self, table: str, step: Step) -> EvolutionPlan:
        current = self.pipeline.schema(table)
        policy = Policy.from_config(self.pipeline.config.table(table).evolution)
        new = candidate_schema(current, step.source, step.evidence, sensitive=policy.sensitive)
        return table_plan(self.pipeline, table, current, new, step.evidence)

    def steps(self, table: str, signals: Sequence[ChangeSignal]) -> tuple[Step, ...]:
        """The versions ``signals`` make: one per DDL statement when they replay
        (:mod:`icetide.evolution.per_statement`), else one for all of them against the
        source's catalog now; ``()`` when the source table is gone."""
        fresh = self._candidate(table)
        if fresh is None:
            return ()
        current = self.pipeline.schema(table)
        pinned = bool(self.pipeline.config.table(table).primary_key)
        each = statement_steps(
            current, signals, fresh, self._dialect(table), _named(self, table), key_pinned=pinned
        )
        if each is not None:
            return each
        return (Step(tuple(signals), self._evidence(table, signals), fresh, True),)

    def detect(self, table: str, signals: Sequence[ChangeSignal]) -> TableSchema | None:
        """Look at ``table``'s source now; apply what the policy allows of its change, a
        version per DDL statement where the statements say the shape in between (see
        :mod:`icetide.evolution.per_statement`). Returns the newest version applied."""
        current = self.pipeline.schema(table)
        if all(s.kind == "unknown_fields" for s in signals):
            known = {c.name.casefold() for c in current.columns}
            if all(col.casefold() in known for s in signals for col in s.columns):
                return None  # already in the schema; the ledger projects them once acked
        signals = self._not_taken(table, signals)
        if not signals:
            return None
        try:
            steps = self.steps(table, signals)
            newest = None
            for i, step in enumerate(steps):
                plan = self._plan(table, step)
                if len(steps) > 1 and (plan.held or plan.refused or not plan.policy.auto_apply):
                    # A statement that does not apply whole (or a policy that applies
                    # nothing by itself): it and the ones after it are planned together
                    # against the catalog, as one change.
                    rest = [s for later in steps[i:] for s in later.signals]
                    whole = self.plan(table, rest)
                    return (whole and self._apply(table, whole, rest)) or newest
                newest = self._apply(table, plan, step.signals) or newest
            return newest
        except SchemaError as exc:
            # One table's source cannot be planned (no primary key any more, a key the
            # new columns lack): hold that table with the reason; the others flow on.
            self.held[table] = (f"{KEY_LOST}: {exc.message}",)
            self.pipeline.report(
                "evolution",
                f"schema {table}: held: {exc.message}; {NO_KEY_HINT}",
                table=table,
                held=[KEY_LOST],
            )
            return None

    def _not_taken(self, table: str, signals: Sequence[ChangeSignal]) -> list[ChangeSignal]:
        """``signals`` without the DDL statements already taken (a batch read again after
        a crash): see :data:`~icetide.schema.contract.phases.STATEMENTS_THROUGH`."""
        if not any(s.ddl and s.position is not None for s in signals):
            return list(signals)
        props = table_properties(self.spark, self.pipeline.refs(table).cdc)
        through = int(props.get(p.STATEMENTS_THROUGH) or -1)
        return [
            s for s in signals if not (s.ddl and s.position is not None and s.position <= through)
        ]

    def _apply(
        self, table: str, plan: EvolutionPlan, signals: Sequence[ChangeSignal]
    ) -> TableSchema | None:
        """Report what ``plan`` holds or refuses and apply what it allows, as a version
        starting at the first of ``signals``' positions; the new schema, or None."""
        if plan.held:
            reasons = tuple(f"{c.id}: {c.reason}" for c in plan.held)
            self.held[table] = reasons
            self.pipeline.report(
                "evolution",
                f"schema {table}: held until approved (`icetide schema apply --approve ID`): "
                + "; ".join(reasons),
                table=table,
                held=[c.id for c in plan.held],
            )
        if not plan.policy.enabled and plan.refused:
            ids = ", ".join(c.id for c in plan.refused)
            text = (
                f"table {table}: evolution.enabled is false, so the change detected at the "
                f"source is not applied (schema stays at version {plan.old.version}): {ids}"
            )
            self.refused[table] = (EVOLUTION_DISABLED, text)
            self.pipeline.report(
                "evolution",
                f"schema {table}: refused ({EVOLUTION_DISABLED}): {text}",
                table=table,
                refused=EVOLUTION_DISABLED,
                changes=[c.id for c in plan.refused],
            )
            return None
        self.refused.pop(table, None)
        placed = [s.position for s in signals if s.position is not None]
        taken = [s.position for s in signals if s.ddl and s.position is not None]
        if not plan.changed or not plan.applied or not plan.policy.auto_apply:
            return None
        what = "; ".join(s.ddl or f"{s.kind}: {', '.join(s.columns)}" for s in signals)
        result = apply_plan(
            plan,
            self.pipeline.schemas,
            run_ddl=None,
            by="icetide ledger (automatic)",
            reason=f"detected at the source: {what}"[:500],
        )
        if result.noop:
            return None
        new = self.pipeline.schema(table)
        dated = [s.source_ts_ms for s in signals if s.source_ts_ms is not None]
        props = {
            p.CHANGE_VERSION: str(new.version),
            p.DETECTED: str(int(time.time() * 1000)),
        }
        if dated:
            props[p.SOURCE_TS] = str(min(dated))
        if taken:
            props[p.STATEMENTS_THROUGH] = str(max(taken))
        if placed:
            props[p.CHANGE_POSITION] = str(min(placed))
            props[p.VERSION_POSITIONS] = p.with_version_position(
                table_properties(self.spark, self.pipeline.refs(table).cdc).get(
                    p.VERSION_POSITIONS
                ),
                new.version,
                min(placed),
            )
        set_properties(self.spark, self.pipeline.refs(table).cdc, props)
        self.pipeline.report(
            "evolution",
            f"schema {table}: version {new.version} applied automatically "
            f"({', '.join(c.id for c in plan.applied)})",
            table=table,
            version=new.version,
            changes=[c.id for c in plan.applied],
        )
        return new


def _named(detector: Detector, table: str) -> str:
    """The source table's own name (what its DDL statements name)."""
    return str(detector.pipeline.config.table(table).source).rsplit(".", 1)[-1]


def capturing_source(config: Config, table: TableConfig) -> SourceConfig:
    """The configured source that captures ``table``."""
    source = config.source_of(table.name)
    if source is not None:
        return source
    raise ConfigError(
        f"table {table.name!r}: no source in sources: captures it, so its catalog cannot be read",
        hint="list the table under tables: of its source in sources:",
    )
