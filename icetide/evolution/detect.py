"""Change detection at runtime: the ledger's signals → a candidate schema → a new
schema version, written where every stage picks it up.

The ledger stage calls :class:`Detector` with the schema-change signals of a batch
(:mod:`icetide.ledger.signals`: DDL text, PostgreSQL column lists, unknown fields in
events). For each table it reads the source catalog now (:mod:`icetide.evolution.
catalog`), matches the candidate's columns to the schema file's by id
(:func:`propose`: same name keeps the id, a rename the DDL shows keeps the id, anything
else new gets a new id), and, when the change is allowed, writes the next version to the
schema file and records the change on the ledger table (its source time and position, so
``status`` can time the phases). A change it may not apply is held: reported with its
reason, the file left alone, events keep flowing (unknown fields stay in ``_rescued``).

What may be applied automatically here is the narrow, safe set (additions, widenings
``promote()`` accepts, renames with DDL evidence, drops as soft drops); the evolution
plan layer's classification and policy take over that decision where present.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from icetide.errors import SchemaChangeError
from icetide.evolution.catalog import catalog_schema
from icetide.ledger.signals import ChangeSignal
from icetide.schema.contract import phases as p
from icetide.schema.file import dump_schema_file
from icetide.schema.model import Column, SinkSettings, TableSchema
from icetide.schema.promote import promote
from icetide.spark.alter import set_properties

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.pipeline import Pipeline


@dataclass(frozen=True)
class Proposal:
    """The next schema version (None: nothing to apply) and why anything is held."""

    schema: TableSchema | None
    held: tuple[str, ...] = ()
    changes: tuple[str, ...] = ()


def ddl_renames(ddls: Sequence[str], dialect: str = "mysql") -> dict[str, str]:
    """Old name → new name of every column rename the DDL statements show.

    >>> ddl_renames(["ALTER TABLE t RENAME COLUMN a TO b", "ALTER TABLE t CHANGE c d INT"])
    {'a': 'b', 'c': 'd'}
    """
    renames: dict[str, str] = {}
    for ddl in ddls:
        try:
            statements = sqlglot.parse(ddl, read=dialect)
        except SqlglotError:
            continue
        for statement in statements:
            if not isinstance(statement, exp.Alter):
                continue
            for action in statement.args.get("actions") or []:
                if isinstance(action, exp.RenameColumn):
                    renames[action.this.name] = action.args["to"].name
                elif isinstance(action, exp.ModifyColumn) and action.args.get("rename_from"):
                    old = action.args["rename_from"].name
                    if old != action.this.name:
                        renames[old] = action.this.name
    return renames


def propose(
    current: TableSchema, candidate: TableSchema, renames: dict[str, str] | None = None
) -> Proposal:
    """The next version of ``current`` that has ``candidate``'s columns, ids matched."""
    renames = {k.casefold(): v for k, v in (renames or {}).items()}
    by_name = {c.name.casefold(): c for c in current.columns}
    for old, new in renames.items():
        if old in by_name and new.casefold() not in by_name:
            by_name[new.casefold()] = by_name.pop(old)
    next_id = current.last_column_id
    columns: list[Column] = []
    held: list[str] = []
    changes: list[str] = []
    logical = dict(current.sink.logical)
    kept: set[int] = set()
    for found in candidate.columns:
        old_column = by_name.get(found.name.casefold())
        hint = candidate.sink.logical.get(found.id)
        if old_column is None:
            next_id += 1
            column = Column(next_id, found.name, found.type, True, None, found.default, found.tags)
            changes.append(f"add {found.name} {found.type}")
        else:
            ctype = old_column.type
            if found.type != old_column.type:
                try:
                    ctype = promote(old_column.type, found.type)
                    changes.append(f"widen {found.name} {old_column.type} → {found.type}")
                except SchemaChangeError as exc:
                    held.append(f"column {found.name}: {exc.message}")
            if old_column.name != found.name:
                changes.append(f"rename {old_column.name} → {found.name}")
            column = Column(
                old_column.id,
                found.name,
                ctype,
                old_column.nullable if old_column.id in current.key_ids else True,
                old_column.doc,
                found.default,
                old_column.tags,
            )
            kept.add(old_column.id)
        if hint:
            logical[column.id] = hint
        columns.append(column)
    for gone in current.columns:
        if gone.id not in kept:
            if gone.id in current.key_ids:
                held.append(f"primary-key column {gone.name} left the source table")
            else:
                changes.append(f"drop {gone.name} (soft: the tables keep it)")
                logical.pop(gone.id, None)
    added = [c for c in columns if c.id > current.last_column_id]
    dropped = [c for c in current.columns if c.id not in kept and c.id not in current.key_ids]
    for gone in dropped:
        position = current.columns.index(gone)
        twin = next(
            (
                c
                for c in added
                if c.type == gone.type and position < len(columns) and columns[position] is c
            ),
            None,
        )
        if twin is not None:
            held.append(
                f"column {gone.name} left and {twin.name} of the same type appeared at the same "
                "position with no DDL showing a rename: ambiguous (rename, or drop and add?); "
                "decide in the schema file (keep id "
                f"{gone.id} for a rename) and run `icetide schema apply`"
            )
    candidate_key = {c.casefold() for c in candidate.primary_key}
    if candidate_key and candidate_key != {c.casefold() for c in current.primary_key}:
        held.append(
            f"the primary key changed from {list(current.primary_key)} to "
            f"{list(candidate.primary_key)}: re-snapshot the table (icetide bootstrap --replace)"
        )
    if held:
        return Proposal(None, tuple(held), tuple(changes))
    if not changes:
        return Proposal(None)
    schema = current.with_columns(columns, version=current.version + 1, sink=SinkSettings(logical))
    return Proposal(schema, (), tuple(changes))


CatalogReader = Callable[[str], TableSchema | None]


@dataclass
class Detector:
    """Acts on the ledger's signals (its ``on_signals``): see the module doc."""

    spark: SparkSession
    pipeline: Pipeline
    catalog: CatalogReader | None = None
    held: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __call__(self, signals: Sequence[ChangeSignal]) -> None:
        for table in sorted({s.table for s in signals}):
            self.detect(table, [s for s in signals if s.table == table])

    def _candidate(self, table: str) -> TableSchema | None:
        if self.catalog is not None:
            return self.catalog(table)
        return catalog_schema(self.pipeline.config, table)

    def detect(self, table: str, signals: Sequence[ChangeSignal]) -> TableSchema | None:
        """Look at ``table``'s source now; write its next schema version if it changed."""
        current = self.pipeline.schema(table)
        if all(s.kind == "unknown_fields" for s in signals):
            known = {c.name.casefold() for c in current.columns}
            if all(col.casefold() in known for s in signals for col in s.columns):
                return None  # already in the schema; the ledger projects them once acked
        candidate = self._candidate(table)
        if candidate is None:
            return None
        source = self.pipeline.config.table(table)
        dialect = "postgres" if _is_postgres(self.pipeline, source) else "mysql"
        renames = ddl_renames([s.ddl for s in signals if s.ddl], dialect)
        proposal = propose(current, candidate, renames)
        if proposal.held:
            self.held[table] = proposal.held
            self.pipeline.report(
                "evolution",
                f"schema {table}: change held: {'; '.join(proposal.held)}",
                table=table,
                held=list(proposal.held),
            )
            return None
        if proposal.schema is None:
            return None
        new = proposal.schema
        dump_schema_file(new, self.pipeline.config.table(table).schema_file)
        self.pipeline.schema(table)  # the store reads it now and keeps it in the history
        dated = [s for s in signals if s.source_ts_ms is not None]
        placed = [s for s in signals if s.position is not None]
        props = {
            p.CHANGE_VERSION: str(new.version),
            p.DETECTED: str(int(time.time() * 1000)),
        }
        if dated:
            props[p.SOURCE_TS] = str(min(s.source_ts_ms for s in dated if s.source_ts_ms))
        if placed:
            props[p.CHANGE_POSITION] = str(min(s.position for s in placed if s.position))
        set_properties(self.spark, self.pipeline.refs(table).cdc, props)
        self.pipeline.report(
            "evolution",
            f"schema {table}: version {new.version} ({'; '.join(proposal.changes)})",
            table=table,
            version=new.version,
            changes=list(proposal.changes),
        )
        return new


def _is_postgres(pipeline: Pipeline, table: object) -> bool:
    sources = [s for s in pipeline.config.sources if table in pipeline.config.source_tables(s)]
    return bool(sources) and sources[0].type == "postgres"
