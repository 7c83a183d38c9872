"""Onboarding: each configured table's schema file written from its source's catalog, and
its ledger, base and dead-letter tables created from it.

For every table a database source captures (``sources:`` in the config), the source's
catalog is read (``information_schema`` for MySQL/MariaDB, ``pg_catalog`` for
PostgreSQL: :mod:`icetide.evolution.source_schema`, the reader ``schema plan`` uses too)
and becomes the table's first schema (ids 1..n in column order, defaults, the source's
primary key or the config's ``primary_key``).

A schema file that exists is never overwritten silently: it is compared with the catalog
and reported ``unchanged`` or ``differs`` (with the differences by column). ``force``
refreshes it: columns keep their ids by name, new columns take ids above
``last_column_id``, the version goes up, and the sink config of the columns that remain
is kept. The Iceberg tables are then created from the file in use, through the one
table-contract builder (``CREATE TABLE IF NOT EXISTS``: running onboarding again
changes nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from icetide.config.loader import load_schema_file
from icetide.config.model import Config
from icetide.config.sections import SourceConfig
from icetide.config.tables import TableConfig
from icetide.errors import ConfigError
from icetide.evolution.source_schema import KeylessTable, read_source_schema
from icetide.lake.tables import TableRefs
from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.convert import ids_from
from icetide.schema.diff import diff
from icetide.schema.file import dump_schema_file
from icetide.schema.infer import numbered
from icetide.schema.model import SinkSettings, TableSchema
from icetide.schema.types import IcetideType

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

WRITTEN, UNCHANGED, DIFFERS, REFRESHED = (
    "written",
    "exists, unchanged",
    "exists, differs",
    ("refreshed"),
)
"""What happened to a schema file (``would be …`` in a dry run)."""


@dataclass
class TableAction:
    """One Iceberg table of an onboarded table and what onboarding did to it."""

    kind: str
    """``ledger``, ``base`` or ``dead-letter``."""
    name: str
    action: str
    """``created``, ``exists`` or, in a dry run, ``would create`` / ``exists``."""


@dataclass
class Onboarded:
    """What onboarding did for one configured table."""

    table: str
    source: str
    schema_file: str
    file: str
    """:data:`WRITTEN`, :data:`UNCHANGED`, :data:`DIFFERS` or :data:`REFRESHED`."""
    columns: list[str] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    tables: list[TableAction] = field(default_factory=list)
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``icetide onboard --output json``)."""
        return asdict(self)


def source_of(config: Config, table: TableConfig) -> SourceConfig:
    """The configured database source that captures ``table``."""
    source = config.source_of(table.name)
    if source is not None:
        return source
    if not config.sources:
        hint = "add a sources: section with the source database's connection"
    else:
        names = ", ".join(str(s.name) for s in config.sources)
        hint = f"list {table.name} under the tables: of one of the sources ({names})"
    raise ConfigError(
        f"table {table.name}: no database source captures it, so there is no catalog to "
        "read its schema from",
        hint=hint,
    )


def catalog_schema(
    config: Config, table: TableConfig, declared: TableSchema | None = None
) -> TableSchema:
    """``table``'s schema as its source's catalog describes it now (the one catalog
    reader, :func:`icetide.evolution.source_schema.read_source_schema`, defaults
    included; the types of ``declared``, an existing schema file, kept where they still
    fit the source types); a table without a primary key is refused with the fix."""
    source = source_of(config, table)
    try:
        schema = read_source_schema(source, table, declared)
    except KeylessTable:
        raise ConfigError(
            f"table {table.name}: {table.source} has no primary key in source {source.name!r}",
            hint="give the table a primary key at the source, or name the columns that "
            "identify a row in the config's tables[].primary_key",
        ) from None
    return schema


def refreshed(existing: TableSchema, catalog: TableSchema) -> TableSchema:
    """The catalog's schema with ``existing``'s ids (matched by column name), its sink
    config for the columns that remain, and the next version when anything changed."""
    known = {c.name: c for c in existing.columns}
    next_id = existing.last_column_id

    def take() -> int:
        nonlocal next_id
        next_id += 1
        return next_id

    def typed(now: IcetideType, was: IcetideType | None) -> IcetideType:
        # A nested type (a PostgreSQL array's list) keeps its ids when its shape did not
        # change; otherwise what it holds takes new ids, like a new column.
        if was is not None and numbered(now, ids_from(1)) == numbered(was, ids_from(1)):
            return was
        return numbered(now, take)

    columns = []
    for column in catalog.columns:
        if column.name in known:
            # What only the file knows (tags such as sensitive, docs) stays.
            was = known[column.name]
            columns.append(
                replace(
                    column, id=was.id, type=typed(column.type, was.type), doc=was.doc, tags=was.tags
                )
            )
        else:
            columns.append(replace(column, id=take(), type=typed(column.type, None)))
    kept = {c.id for c in columns}
    old, new = existing.sink, catalog.sink
    by_name = {c.name: c.id for c in columns}
    logical = {by_name[c.name]: new.logical[c.id] for c in catalog.columns if c.id in new.logical}
    sink = SinkSettings(
        logical,
        {i: v for i, v in old.names.items() if i in kept},
        {i: v for i, v in old.types.items() if i in kept},
        {i: v for i, v in old.conversions.items() if i in kept},
    )
    key = [by_name[c.name] for c in catalog.key_columns]
    candidate = TableSchema(
        existing.table or catalog.table,
        columns,
        key_ids=key,
        version=existing.version,
        last_column_id=max(existing.last_column_id, next_id),
        sink=sink,
    )
    if candidate == existing:
        return existing
    return TableSchema(
        candidate.table,
        candidate.columns,
        key_ids=candidate.key_ids,
        version=existing.version + 1,
        last_column_id=candidate.last_column_id,
        sink=sink,
    )


def differences(existing: TableSchema, catalog: TableSchema) -> list[str]:
    """What the catalog has that the schema file does not, by column, in words."""
    refreshed_schema = refreshed(existing, catalog)
    found = []
    for change in diff(existing, refreshed_schema):
        if change.kind == "doc":
            continue
        detail: str = "type" if change.kind == "widen" else change.kind
        if change.old_type is not None and change.new_type is not None:
            detail += f" {change.old_type} -> {change.new_type}"
        elif change.new_type is not None:
            detail += f" {change.new_type}"
        found.append(f"{change.dotted}: {detail}")
    if existing.key_ids != refreshed_schema.key_ids:
        found.append(
            f"primary key: {list(existing.primary_key)} -> {list(refreshed_schema.primary_key)}"
        )
    return found


def onboard(
    config: Config,
    tables: Sequence[str] = (),
    *,
    force: bool = False,
    dry_run: bool = False,
    files_only: bool = False,
    spark: Callable[[], SparkSession] | None = None,
) -> list[Onboarded]:
    """Onboard ``tables`` (every configured table when empty): schema files, then the
    Iceberg tables (not with ``files_only``: to add a sink config before the tables are
    made from it). ``spark`` starts (or returns) the session; it is not called in a dry
    run, which reads the catalogs and says what it would do."""
    chosen = [config.table(name) for name in tables] if tables else list(config.tables)
    results: list[Onboarded] = []
    schemas: dict[str, TableSchema] = {}
    for table in chosen:
        result, schema = _schema_file(config, table, force, dry_run)
        results.append(result)
        schemas[table.name] = schema
    if files_only:
        return results
    if dry_run:
        for result in results:
            result.tables = [
                TableAction(kind, name, "would create if missing")
                for kind, name in _table_names(config, result.table)
            ]
        return results
    if spark is None:
        raise ValueError("onboard needs a SparkSession factory unless dry_run")
    session = spark()
    for result in results:
        result.tables = _create_tables(session, config, config.table(result.table), schemas)
    return results


def _schema_file(
    config: Config, table: TableConfig, force: bool, dry_run: bool
) -> tuple[Onboarded, TableSchema]:
    source = source_of(config, table)
    path = table.schema_file
    existing: TableSchema | None = None
    if path.is_file():
        existing = load_schema_file(path, f"schema of table {table.name}")
        if not existing.table:
            existing = existing.renamed(table.name)
    catalog = catalog_schema(config, table, existing)
    described = f"{source.name} ({source.type}) {table.source}"
    result = Onboarded(table.name, described, str(path), WRITTEN, dry_run=dry_run)
    if existing is not None:
        result.differences = differences(existing, catalog)
        if not result.differences:
            result.file, schema = UNCHANGED, existing
        elif force:
            result.file, schema = REFRESHED, refreshed(existing, catalog)
            if not dry_run:
                dump_schema_file(schema, path)
        else:
            result.file, schema = DIFFERS, existing
    else:
        schema = catalog
        if not dry_run:
            dump_schema_file(schema, path)
    if dry_run and result.file in (WRITTEN, REFRESHED):
        result.file = f"would be {result.file}"
    result.columns = [f"{c.name} {c.type}" for c in schema.columns]
    result.primary_key = list(schema.primary_key)
    return result, schema


def _table_names(config: Config, table: str) -> list[tuple[str, str]]:
    refs = TableRefs.of(config, table)
    return [
        ("ledger", refs.cdc.dotted),
        ("base", refs.base.dotted),
        ("dead-letter", refs.dead_letters.dotted),
    ]


def _create_tables(
    spark: SparkSession, config: Config, table: TableConfig, schemas: dict[str, TableSchema]
) -> list[TableAction]:
    """The ledger, base and dead-letter tables, each created when missing."""
    from icetide.lake.tables import ensure_namespace, table_exists

    refs = TableRefs.of(config, table.name)
    contract = TableContract(
        schemas[table.name], TableSettings(table.buckets, table.mode, table.format_version)
    )
    ensure_namespace(spark, config.catalog.name, config.catalog.namespace)
    statements = {
        "ledger": (refs.cdc, [contract.ledger_ddl(refs.cdc)]),
        "base": (
            refs.base,
            [contract.base_ddl(refs.base), contract.identifier_fields_sql(refs.base)],
        ),
        "dead-letter": (refs.dead_letters, [TableContract.dead_letter_ddl(refs.dead_letters)]),
    }
    actions = []
    for kind, (name, sql) in statements.items():
        if table_exists(spark, name):
            actions.append(TableAction(kind, name.dotted, "exists"))
            continue
        for statement in sql:
            spark.sql(statement)
        actions.append(TableAction(kind, name.dotted, "created"))
    return actions


def render(results: Sequence[Onboarded]) -> str:
    """The text report of ``icetide onboard``."""
    lines = []
    for r in results:
        lines.append(f"{r.table} (from {r.source})")
        lines.append(f"  schema file {r.schema_file}: {r.file}")
        lines.append(f"    key {', '.join(r.primary_key)}; columns {', '.join(r.columns)}")
        for difference in r.differences:
            lines.append(f"    differs: {difference}")
        if r.file == DIFFERS:
            lines.append(
                "    the file is kept; `icetide onboard --force` refreshes it from the "
                "catalog (ids kept by name)"
            )
        for t in r.tables:
            lines.append(f"  {t.kind} table {t.name}: {t.action}")
    return "\n".join(lines)
