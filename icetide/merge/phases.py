"""The merge's side of a schema change: which version it runs, phase 1 on the base
table, and its acknowledgement to the ledger (see docs/convergence.md).

The merge runs the schema version of the ledger table's *layout* (its table property,
read from the same load of the ledger as the batch's end snapshot, or before it, so
every ledger row it reads has that layout or an older one, read by field id). Before
the first MERGE at a new version it ALTERs the base to it and records
``icetide.merge.schema-version``: from then on the ledger may project the new columns'
values. The merge is the base table's only writer, so no ALTER races a MERGE.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icetide.lake.alter import (
    apply_version,
    int_property,
    kept_columns,
    set_properties,
    table_properties,
)
from icetide.lake.defaults import (
    add_with_initial_default,
    initial_default_columns,
    initial_default_supported,
)
from icetide.lake.tables import table_exists
from icetide.schema.contract import ledger as c
from icetide.schema.contract import phases as p
from icetide.schema.contract.alter import alter_plan
from icetide.schema.contract.builder import TableContract, TableSettings, column_path
from icetide.schema.contract.names import TableName
from icetide.schema.contract.update import version_update
from icetide.schema.diff import FieldChange
from icetide.schema.model import TableSchema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from icetide.pipeline import Pipeline


@dataclass(frozen=True)
class MergeVersion:
    """What one merge of one table runs: the contract, and the ledger's phase state read
    with its end snapshot (or before)."""

    contract: TableContract
    projected: int | None
    """The ledger's projection version (``icetide.ledger.projection-version``)."""
    change_position: int | None
    """The source position of the latest detected change (``icetide.evolution.position``)."""


def version_of(pipeline: Pipeline, table: str, version: int) -> TableSchema:
    """``table``'s schema ``version`` from the store's history (the current if unknown)."""
    current = pipeline.schema(table)
    if version >= current.version:
        return current
    history = pipeline.schemas.history(table)
    return next((s for s in history.versions if s.version == version), current)


def merge_version(spark: SparkSession, pipeline: Pipeline, table: str) -> MergeVersion:
    """The version this merge runs (call before reading the ledger's end snapshot);
    a load of the ledger of its own, for callers that do not load it anyway."""
    refs = pipeline.refs(table)
    props = table_properties(spark, refs.cdc) if table_exists(spark, refs.cdc) else {}
    return version_run(pipeline, table, props)


def version_run(pipeline: Pipeline, table: str, props: Mapping[str, str]) -> MergeVersion:
    """The version a merge runs, from the ledger's table properties ``props`` (empty:
    no ledger yet). Read from the same load of the ledger as the batch's end snapshot
    (as :class:`~icetide.merge.stage.MergeStage` does), or earlier: every snapshot that
    metadata holds was written in that layout or an older one."""
    current = pipeline.schema(table)
    version = p.ChangeState.read(props, {}).merge_runs(current.version)
    settings = pipeline.config.table(table)
    contract = TableContract(
        version_of(pipeline, table, version),
        TableSettings(settings.buckets, settings.mode, settings.format_version),
    )
    return MergeVersion(
        contract,
        int_property(props, p.PROJECTION_VERSION),
        int_property(props, p.CHANGE_POSITION),
    )


def switch_base(
    spark: SparkSession, pipeline: Pipeline, table: str, run: TableContract, loaded: Any = None
) -> None:
    """Phase 1 on the base, then the acknowledgement; a no-op when both are there.
    ``loaded``: the base's Iceberg table as the merge loaded it just before, its
    properties read from that load rather than from one more."""
    refs = pipeline.refs(table)
    props = table_properties(spark, refs.base, loaded)
    version = run.schema.version
    layout = int_property(props, c.SCHEMA_VERSION_PROPERTY)
    acked = int_property(props, p.MERGE_VERSION)
    update: dict[str, str] = {}
    if p.DATA_VERSION not in props:
        update[p.DATA_VERSION] = str(min(layout or version, version))
    if acked != version:
        update[p.MERGE_VERSION] = str(version)
    if layout is not None and layout < version:
        old = TableContract(version_of(pipeline, table, layout), run.settings)
        kept = kept_columns(spark, refs.base, [col.name for col in old.target.columns])
        drop = pipeline.drop_mode(table)
        ops = version_update(old, run, drop, kept).base
        update |= {c.SCHEMA_VERSION_PROPERTY: str(version), p.BASE_ALTERED: _now_ms()}

        def statements() -> list[str]:
            """The version as ALTERs: only to finish a change an older release began."""
            plan = alter_plan(old, run, refs.base, refs.cdc, drop, kept)
            statements = [s for s in plan.base if c.SCHEMA_VERSION_PROPERTY not in s]
            if run.settings.format_version >= 3:
                changes = plan.changes
                statements = _add_initial_defaults(spark, refs.base, changes, run, statements)
            return statements

        applied = apply_version(
            spark,
            refs.base,
            ops,
            version,
            update,
            statements=statements,
            columns=run.base_columns(),
        )
        pipeline.report(
            "merge",
            f"schema {table}: base table at version {version} (phase 1, "
            f"{applied.describe()}); the merge runs it from this batch",
            table=table,
            version=version,
            phase=1,
        )
        return
    set_properties(spark, refs.base, update)


def _add_initial_defaults(
    spark: SparkSession,
    base: TableName,
    changes: Sequence[FieldChange],
    run: TableContract,
    statements: list[str],
) -> list[str]:
    """On a format-v3 base, add each top-level column with a constant default through
    Iceberg's API with it as initial-default (:mod:`icetide.lake.defaults`), so old rows
    read it with no rewrite; the statements left for the others. A column the sink
    converts or retypes keeps the ALTER and the fill."""
    schema = run.schema
    converted = set(schema.sink.conversions) | set(schema.sink.types)
    for change in changes:
        if change.kind != "add" or len(change.path) != 1 or change.field_id in converted:
            continue
        column = run.target.find(change.field_id)
        if not initial_default_supported(column):
            continue
        added = add_with_initial_default(spark, base, column, change.after)
        if added or column.name in initial_default_columns(spark, base):
            prefix = f"ALTER TABLE {base} ADD COLUMN {column_path(column.name)} "
            statements = [s for s in statements if not s.startswith(prefix)]
    return statements


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def align_images(
    events: DataFrame, pipeline: Pipeline, table: str, schema: TableSchema
) -> DataFrame:
    """Ledger rows read in an older layout (a snapshot written before the ledger was
    ALTERed is read with its own schema) in ``schema``'s row images: a column the
    snapshot lacks is null, a renamed one is taken under its old name, a widened one cast."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType, _parse_datatype_json_value

    from icetide.lake.align import fit
    from icetide.schema.convert.spark import spark_json_type, sql_type
    from icetide.schema.quoting import qualified
    from icetide.schema.types import StructType as IcetideStruct

    history = pipeline.schemas.history(table)
    aligned = events
    for image in c.ROW_IMAGES:
        present = events.schema[image].dataType
        assert isinstance(present, StructType)
        names = set(present.fieldNames())
        if all(col.name in names for col in schema.columns) and len(names) == len(schema.columns):
            continue
        fields = []
        for col in schema.columns:
            old_names = [s.find(col.id).name for s in history.versions if col.id in s.field_ids()]
            found = next((n for n in [col.name, *reversed(old_names)] if n in names), None)
            if found is None:
                value = F.lit(None).cast(sql_type(col.type))
            elif isinstance(col.type, IcetideStruct):  # a nested change: field by field
                want = _parse_datatype_json_value(spark_json_type(col.type))
                value = fit(F.col(qualified(image, found)), present[found].dataType, want)
            else:
                value = F.col(qualified(image, found)).cast(sql_type(col.type))
            fields.append(value.alias(col.name))
        aligned = aligned.withColumn(image, F.when(F.col(image).isNotNull(), F.struct(*fields)))
    return aligned
