"""One table's schema version in one Iceberg commit, through Iceberg's Java API.

:func:`commit_version` opens a ``Transaction`` on the table, carries out the version's
``UpdateSchema`` operations (:mod:`icetide.schema.contract.update`: plain data, built
without a JVM) and then sets the table properties that record the version, and commits
it all at once: one new metadata file, so a reader sees the old schema or the new one,
never a rename without its widening, and "the property says N" holds exactly when "the
shape is N". A failure anywhere before the commit leaves the table as it was.

Spark's SQL cannot do that: each ``ALTER TABLE`` is its own commit. Types are written as
Spark SQL types (:func:`~icetide.schema.convert.spark.sql_type`) and converted by
Iceberg's own ``SparkSchemaUtil``, the conversion an ``ALTER TABLE`` goes through, so the
tables get the same Iceberg types as before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icetide.errors import SchemaError
from icetide.faults import crash_point
from icetide.lake.defaults import default_literal
from icetide.lake.tables import iceberg_table, string_map
from icetide.schema.contract.update import SchemaOp, TableUpdate
from icetide.schema.convert.spark import sql_type
from icetide.spark.jvm import jvm_class

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.schema.contract.names import TableName
    from icetide.schema.types import IcetideType

SCHEMA_IDS = "icetide.schema.iceberg-schema-ids"
"""A table property: ``{"<icetide schema version>": <Iceberg schema id>}``, JSON, each
entry written in the commit that made that version's schema current."""
BEFORE_COMMIT = "lake.schema_update.before_commit"
"""The crash point between a version's staged update and its commit."""


class UpdateRefused(SchemaError):
    """Iceberg refused an operation of the update before anything was committed."""


def read_schema_ids(text: str | None) -> dict[int, int]:
    """The :data:`SCHEMA_IDS` property as ``{version: schema id}`` (empty when absent or
    unreadable).

    >>> read_schema_ids('{"2": 1, "1": 0}')
    {1: 0, 2: 1}
    """
    try:
        data = json.loads(text or "{}")
        return {int(k): int(v) for k, v in sorted(data.items(), key=lambda kv: int(kv[0]))}
    except (ValueError, TypeError, AttributeError):
        return {}


def iceberg_type(ctype: IcetideType) -> Any:
    """The Iceberg type (a py4j proxy) an ``ALTER TABLE`` would give ``ctype``: its Spark
    SQL type, parsed by Spark and converted by Iceberg's ``SparkSchemaUtil``."""
    spark_type = jvm_class("org.apache.spark.sql.types.DataType").fromDDL(sql_type(ctype))
    converted = jvm_class("org.apache.iceberg.spark.SparkSchemaUtil").convert(spark_type)
    if converted.getClass().getName() == "org.apache.iceberg.Schema":
        return converted.asStruct()  # py4j picked convert(StructType), which makes a Schema
    return converted


def _call(pending: Any, op: SchemaOp) -> Any:
    """``op`` on the JVM's pending ``UpdateSchema``."""
    path = ".".join(op.path)
    if op.kind == "add":
        assert op.type is not None and op.name is not None
        kind = iceberg_type(op.type)
        literal = default_literal(op.default.value, op.type) if op.default else None
        if not op.path:
            if literal is not None:
                return pending.addColumn(op.name, kind, op.doc, literal)
            return pending.addColumn(op.name, kind)
        return pending.addColumn(path, op.name, kind)
    if op.kind == "rename":
        return pending.renameColumn(path, op.name)
    if op.kind == "widen":
        assert op.type is not None
        return pending.updateColumn(path, iceberg_type(op.type).asPrimitiveType())
    if op.kind == "doc":
        return pending.updateColumnDoc(path, op.doc)
    if op.kind == "delete":
        return pending.deleteColumn(path)
    if op.kind == "move_first":
        return pending.moveFirst(path)
    assert op.after is not None
    return pending.moveAfter(path, ".".join(op.after))


def stage(transaction: Any, update: TableUpdate) -> int:
    """Carry ``update`` out inside ``transaction`` (nothing is committed yet); the
    schema id the table will have. Raises :class:`UpdateRefused` when Iceberg refuses
    an operation."""
    refusals = _jvm_errors()
    for one in update.passes:
        pending = transaction.updateSchema()
        for op in one:
            try:
                pending = _call(pending, op)
            except refusals as exc:
                raise UpdateRefused(
                    f"table {transaction.tableName()}: Iceberg refused {op}: {_message(exc)}"
                ) from None
        try:
            pending.commit()  # into the transaction only
        except refusals as exc:
            raise UpdateRefused(
                f"table {transaction.tableName()}: Iceberg refused the schema update: "
                f"{_message(exc)}"
            ) from None
    return int(transaction.table().schema().schemaId())


def _jvm_errors() -> tuple[type[Exception], ...]:
    """What a refused JVM call raises: py4j's error, or PySpark's translation of it
    (PySpark converts the JVM's ``IllegalArgumentException`` on every py4j call)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException

    return (Py4JJavaError, CapturedException)


def _message(exc: Exception) -> str:
    java = getattr(exc, "java_exception", None)
    if java is not None:
        return str(java.getMessage())
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def commit_version(
    spark: SparkSession,
    table: TableName,
    update: TableUpdate,
    version: int,
    properties: Mapping[str, str],
) -> int:
    """Commit ``update`` and ``properties`` to ``table`` in one Iceberg commit, recording
    the Iceberg schema id of ``version`` in :data:`SCHEMA_IDS`; that schema id.

    Raises :class:`UpdateRefused` (nothing committed) when Iceberg refuses an operation.
    When another writer commits to the table meanwhile, Iceberg may refuse the commit
    (``CommitFailedException``): nothing is written either, and the stage takes the
    version again at its next batch boundary."""
    transaction = iceberg_table(spark, table).newTransaction()
    schema_id = _stage_version(transaction, TableVersion(table, update, version, properties))
    crash_point(BEFORE_COMMIT)
    transaction.commitTransaction()
    return schema_id


def _stage_version(transaction: Any, one: TableVersion) -> int:
    """The schema update, then the properties (with the version's schema id), staged in
    ``transaction``; the schema id."""
    schema_id = stage(transaction, one.update)
    start = string_map(transaction.startMetadata().properties())
    ids = read_schema_ids(start.get(SCHEMA_IDS))
    ids[one.version] = schema_id
    pending = transaction.updateProperties()
    for key, value in {**one.properties, SCHEMA_IDS: json.dumps(_keyed(ids))}.items():
        pending = pending.set(key, value)
    pending.commit()
    return schema_id


@dataclass(frozen=True)
class TableVersion:
    """One table's part of :func:`commit_together`."""

    table: TableName
    update: TableUpdate
    version: int
    properties: Mapping[str, str]


MULTI_TABLE_CATALOGS = ("org.apache.iceberg.rest.RESTCatalog",)
"""Iceberg catalogs whose ``commitTransaction(TableCommit...)`` commits several tables
at once (the REST catalog's ``POST /v1/transactions/commit``)."""


def commit_together(
    spark: SparkSession, tables: Sequence[TableVersion], version_property: str
) -> str:
    """Commit each table's version (as :func:`commit_version`) skipping a table whose
    ``version_property`` already names it (a rerun); with a catalog that commits
    several tables at once (:data:`MULTI_TABLE_CATALOGS`), all in one commit, else one
    after the other in the order given. How it went, for a person."""
    from py4j.java_collections import ListConverter
    from pyspark import SparkContext

    pending = []
    for one in tables:
        have = string_map(iceberg_table(spark, one.table).properties()).get(version_property)
        if have is None or not have.isdigit() or int(have) < one.version:
            pending.append(one)
    if not pending:
        return "every table at the version already"
    catalog = _iceberg_catalog(spark, pending[0].table)
    shared = all(t.table.catalog == pending[0].table.catalog for t in pending)
    if len(pending) == 1 or not shared or catalog.getClass().getName() not in MULTI_TABLE_CATALOGS:
        for one in pending:
            commit_version(spark, one.table, one.update, one.version, one.properties)
        return f"{len(pending)} table(s), one commit each, in order"
    commits = []
    for one in pending:
        transaction = iceberg_table(spark, one.table).newTransaction()
        _stage_version(transaction, one)
        identifier = _identifier(one.table)
        commits.append(
            jvm_class("org.apache.iceberg.catalog.TableCommit").create(
                identifier, transaction.startMetadata(), transaction.currentMetadata()
            )
        )
    crash_point(BEFORE_COMMIT)
    gateway = SparkContext._gateway
    assert gateway is not None
    catalog.commitTransaction(ListConverter().convert(commits, gateway._gateway_client))
    return f"{len(pending)} tables in one multi-table commit"


def _identifier(table: TableName) -> Any:
    """``table``'s Iceberg ``TableIdentifier`` (its namespace and name, as given)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    assert gateway is not None
    parts = gateway.new_array(jvm_class("java.lang.String"), 2)
    parts[0], parts[1] = table.namespace, table.name
    return jvm_class("org.apache.iceberg.catalog.TableIdentifier").of(parts)


def _iceberg_catalog(spark: SparkSession, table: TableName) -> Any:
    """The Iceberg ``Catalog`` behind Spark's catalog of ``table``."""
    manager = spark._jsparkSession.sessionState().catalogManager()
    return manager.catalog(table.catalog).icebergCatalog()


def _keyed(ids: Mapping[int, int]) -> dict[str, int]:
    return {str(k): ids[k] for k in sorted(ids)}
