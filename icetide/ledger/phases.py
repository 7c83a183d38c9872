"""The ledger's side of a schema change: phase 1 on the ledger and dead-letter tables,
and which columns get values (phase 2's handshake with the merge).

At each batch boundary, per table (see docs/convergence.md):

1. the schema store's version ``N`` (the schema file, read again when it changed) is
   compared with the ledger table's layout version (table property); if it is newer, the
   ledger is ALTERed to ``N`` (new columns nullable) and the dead-letter table marked,
   before anything is written with the new layout;
2. values are projected onto the columns of the version the merge has acknowledged
   (the base table's ``icetide.merge.schema-version``); a column the merge cannot apply
   yet stays null in the ledger row and its value is kept in ``_rescued``. When the
   acknowledgement reaches ``N``, the ledger projects every column and records the switch
   (``icetide.ledger.projection-version``) before writing the first row with them.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from icetide.errors import SchemaError
from icetide.lake.alter import (
    apply_version,
    int_property,
    kept_columns,
    set_properties,
    table_properties,
)
from icetide.lake.tables import (
    current_snapshot_id,
    iceberg_table_if_exists,
    rename_table,
    table_exists,
)
from icetide.ledger.decode import Era, Projection
from icetide.schema.connector import ConnectorSettings, read_hints
from icetide.schema.contract import ledger as c
from icetide.schema.contract import phases as p
from icetide.schema.contract.alter import alter_plan
from icetide.schema.contract.builder import TableContract
from icetide.schema.contract.names import TableName
from icetide.schema.contract.update import version_update
from icetide.schema.model import TableSchema
from icetide.schema.quoting import quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.pipeline import Pipeline
    from icetide.schema.history import SchemaHistory


def now_ms() -> str:
    """The wall clock in epoch milliseconds, as a property value."""
    return str(int(time.time() * 1000))


def _version(pipeline: Pipeline, table: str, version: int) -> TableSchema:
    history = pipeline.schemas.history(table)
    return next((s for s in history.versions if s.version == version), history.versions[0])


def _without_version_property(statements: tuple[str, ...]) -> list[str]:
    return [s for s in statements if c.SCHEMA_VERSION_PROPERTY not in s]


def alter_ledger(spark: SparkSession, pipeline: Pipeline, table: str, ledger: Any = None) -> bool:
    """Phase 1 for the ledger and dead-letter tables of ``table``; whether it changed
    them (a ledger loaded before is then out of date). ``ledger``: the ledger's Iceberg
    table, when the caller has it as of now.

    A no-op when the ledger's layout property already names the current version, so a
    re-run (after a crash, or from a second process) changes nothing.
    """
    schema = pipeline.schema(table)
    refs = pipeline.refs(table)
    props = table_properties(spark, refs.cdc, ledger)
    layout = int_property(props, c.SCHEMA_VERSION_PROPERTY)
    if layout is None or layout >= schema.version:
        return False
    old = TableContract(_version(pipeline, table, layout))
    new = TableContract(schema)
    drop = pipeline.drop_mode(table)
    try:
        kept = kept_columns(spark, refs.cdc, [col.name for col in old.target.columns], c.AFTER)
        update = version_update(old, new, drop, kept).ledger
    except SchemaError as exc:
        _recreate_ledger(spark, pipeline, table, new, props, exc)
        return True

    def statements() -> list[str]:
        """The version as ALTERs: only to finish a change an older release began."""
        plan = alter_plan(old, new, refs.base, refs.cdc, drop, kept)
        return _without_version_property(plan.ledger)

    # The dead-letter table first: once the ledger's property names the version, a
    # rerun has nothing left to do here.
    set_properties(spark, refs.dead_letters, {c.SCHEMA_VERSION_PROPERTY: str(schema.version)})
    applied = apply_version(
        spark,
        refs.cdc,
        update,
        schema.version,
        {c.SCHEMA_VERSION_PROPERTY: str(schema.version), p.LEDGER_ALTERED: now_ms()},
        statements=statements,
        columns=new.ledger_columns(),
    )
    pipeline.report(
        "ledger",
        f"schema {table}: ledger and dead-letter tables at version {schema.version} "
        f"(phase 1, {applied.describe()})",
        table=table,
        version=schema.version,
        phase=1,
    )
    return True


def _recreate_ledger(
    spark: SparkSession,
    pipeline: Pipeline,
    table: str,
    new: TableContract,
    props: dict[str, str],
    why: SchemaError,
) -> None:
    """Phase 1 of a version no ALTER expresses (an approved key change, narrowing or
    type-category change): the ledger in its old layout is retired as a generation,
    ``<t>_cdc_g<N>`` (every event it holds kept, queryable with its schema version;
    :func:`retire_ledger`), a new ``<t>_cdc`` is created in the new layout, and the merge
    re-snapshots the base from the source (:mod:`icetide.bootstrap.resnapshot`). The
    latest change's properties (when and where it happened) move over, for ``icetide
    status``; an approved version that no detection recorded is recorded here, timed
    from now. Only maintenance retention, as configured, ever removes ledger data."""
    refs = pipeline.refs(table)
    version = new.schema.version
    kept = {k: v for k, v in props.items() if k.startswith(p.EVOLUTION_PREFIX)}
    if int_property(props, p.CHANGE_VERSION) != version:
        # An approved change (``schema apply``) has no detection record: its phases are
        # timed from the moment the ledger took it.
        kept = {p.CHANGE_VERSION: str(version), p.DETECTED: now_ms()}
    generation = retire_ledger(spark, refs.cdc)
    spark.sql(new.ledger_ddl(refs.cdc))
    set_properties(spark, refs.dead_letters, {c.SCHEMA_VERSION_PROPERTY: str(version)})
    now = now_ms()  # the new table projects every column of the version from its first row
    switched = {p.PROJECTION_VERSION: str(version), p.LEDGER_SWITCHED: now}
    set_properties(spark, refs.cdc, {**kept, p.LEDGER_ALTERED: now, **switched})
    pipeline.report(
        "ledger",
        f"schema {table}: no ALTER takes the ledger to version {version} ({why.message}); "
        f"its events so far kept as {generation.name}, a new ledger in the new layout, the "
        "merge re-snapshots the base (phase 1)",
        table=table,
        version=version,
        phase=1,
    )


GENERATION = "{name}_g{number}"
"""A retired ledger generation's name."""
RETIRED_FROM = "icetide.ledger.retired-from-snapshot"
"""A copied generation's property: the ledger snapshot it holds (a crash-safe marker)."""


def generations(spark: SparkSession, ledger: TableName) -> list[TableName]:
    """The retired generations of ``ledger``, oldest first."""
    pattern = re.compile(re.escape(ledger.name) + r"_g(\d+)$", re.IGNORECASE)
    namespace = f"{quote(ledger.catalog)}.{quote(ledger.namespace)}"
    found = []
    for row in spark.sql(f"SHOW TABLES IN {namespace}").collect():
        match = pattern.match(str(row.tableName))
        if match:
            name = TableName(ledger.catalog, ledger.namespace, str(row.tableName))
            found.append((int(match.group(1)), name))
    return [name for _, name in sorted(found)]


def retire_ledger(spark: SparkSession, ledger: TableName) -> TableName:
    """Keep ``ledger``'s events as its next generation, then free its name.

    A catalog that renames tables (REST, JDBC, Hive) renames it; the Hadoop catalog does
    not, so there it is copied in one atomic Iceberg commit (marked with the snapshot it
    copied) and dropped after. A crash after the copy and before the drop is mended by
    the next run: the newest generation holds the ledger's current snapshot, so the drop
    is all that is left. A ledger that no longer exists has nothing to keep."""
    kept = generations(spark, ledger)
    name = GENERATION.format(name=ledger.name, number=len(kept) + 1)
    target = TableName(ledger.catalog, ledger.namespace, name)
    if not table_exists(spark, ledger):
        return kept[-1] if kept else target
    snapshot = str(current_snapshot_id(spark, ledger))
    if kept and table_properties(spark, kept[-1]).get(RETIRED_FROM) == snapshot:
        target = kept[-1]  # copied before a crash: only the drop is left
    else:
        try:
            rename_table(spark, ledger, target)
            return target
        except Exception:  # noqa: BLE001 - the Hadoop catalog cannot rename: copy, drop
            (
                spark.table(ledger.sql)
                .writeTo(target.sql)
                .using("iceberg")
                .tableProperty(RETIRED_FROM, snapshot)
                .create()
            )
    spark.sql(f"DROP TABLE IF EXISTS {ledger} PURGE")
    return target


def projection(
    spark: SparkSession, pipeline: Pipeline, table: str, *, record: bool = True, ledger: Any = None
) -> Projection:
    """How this batch projects ``table``'s events (after :func:`alter_ledger`).

    With ``record`` false, a switch to the version the merge acknowledged (phase 2) is
    only returned (:attr:`Projection.switch_to`), for the batch to record with
    :func:`record_projection` once its rows are appended: the merge fills the version's
    columns (phase 3) as soon as it reads the switch, from the ledger rows it sees then,
    and those must include the batch's rows written before the change (an insert that
    predates a column with a default is filled, not left NULL). ``ledger``: the ledger's
    Iceberg table, when the caller has it as of now."""
    schema = pipeline.schema(table)
    refs = pipeline.refs(table)
    ledger_props = table_properties(spark, refs.cdc, ledger)
    base = iceberg_table_if_exists(spark, refs.base)  # one load answers both
    base_props = {} if base is None else table_properties(spark, refs.base, base)
    state = p.ChangeState.read(ledger_props, base_props)
    projected = state.projecting(schema.version)
    if state.projected is None:
        # A ledger from before this handshake: it projected its creation version.
        set_properties(spark, refs.cdc, {p.PROJECTION_VERSION: str(projected)})
    target = state.ledger_projects(schema.version)
    if target > projected and record:
        record_projection(spark, pipeline, table, target)
    positions = p.read_version_positions(ledger_props.get(p.VERSION_POSITIONS))
    plan = build_projection(pipeline, table, schema, target, positions)
    if target > projected and not record:
        plan = dataclasses.replace(plan, switch_to=target)
    return plan


def record_projection(spark: SparkSession, pipeline: Pipeline, table: str, version: int) -> None:
    """Phase 2 recorded: the ledger projects ``version``'s columns from now on."""
    set_properties(
        spark,
        pipeline.refs(table).cdc,
        {p.PROJECTION_VERSION: str(version), p.LEDGER_SWITCHED: now_ms()},
    )
    pipeline.report(
        "ledger",
        f"schema {table}: the merge runs version {version}; the ledger projects its "
        f"columns from now on (phase 2)",
        table=table,
        version=version,
        phase=2,
    )


def build_projection(
    pipeline: Pipeline,
    table: str,
    layout: TableSchema,
    values_version: int,
    positions: Mapping[int, int] | None = None,
) -> Projection:
    """The projection writing ``layout`` rows with values for ``values_version``'s
    columns only (by id), and old names of renamed columns mapped to current ones.

    Columns a soft drop keeps in the ledger are not projected: the append fills them
    (and soft-dropped nested fields) with NULL (:func:`icetide.lake.align.align_to`)."""
    history = pipeline.schemas.history(table)
    aliases: dict[str, str] = {}
    for older in history.versions:
        for column in older.columns:
            current = next((x for x in layout.columns if x.id == column.id), None)
            if current is not None and current.name != column.name:
                aliases.setdefault(column.name, current.name)
    for column in layout.columns:
        aliases.pop(column.name, None)  # a current name always means itself
    values = None
    if values_version < layout.version:
        known = _version(pipeline, table, values_version).field_ids()
        values = layout.with_columns(
            [col for col in layout.columns if col.id in known], version=values_version
        )
    connector = pipeline.config.connector(table)
    hints = read_hints(layout, connector)
    return Projection(layout, values, aliases, hints, _eras(history, layout, positions, connector))


def _eras(
    history: SchemaHistory,
    layout: TableSchema,
    positions: Mapping[int, int] | None,
    connector: ConnectorSettings,
) -> tuple[Era, ...]:
    """The earlier versions an event may still be written under, each until the source
    position the next version started at (recorded when the change was detected)."""
    eras = []
    versions = [v for v in history.versions if v.version <= layout.version]
    for earlier, later in zip(versions, versions[1:], strict=False):
        until = (positions or {}).get(later.version)
        if until is None:
            continue
        current = {c.id: c.name for c in layout.columns}
        names = {
            c.name: current[c.id]
            for c in earlier.columns
            if c.id in current and current[c.id] != c.name
        }
        # Dropped since (perhaps with another column added under the name): not the
        # values of any current column, nor unknown fields to rescue.
        dropped = frozenset(c.name for c in earlier.columns if c.id not in current)
        eras.append(Era(until, names, read_hints(earlier, connector), dropped))
    return tuple(sorted(eras, key=lambda e: e.until))
