"""Where a pipeline's artifacts live, and the refresher wired to them.

* the package index: ``<state_dir>/artifacts/index`` (a folder of wheels; served by
  ``icetide artifacts serve``), unless a command is given another folder;
* the view registry: ``views/`` beside the schema files (the folder of the first table's
  schema file), so views are reviewed and versioned with them;
* each table's Avro schema: ``<table>.avsc`` beside its schema file.

This is also the hook for the evolution path: after it records an applied schema
version, :func:`on_table_changed` publishes it and refreshes every view above it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from icetide.artifacts.index import LocalIndex
from icetide.artifacts.publish import Publisher
from icetide.artifacts.refresh import Refresher, RefreshReport, TableChanged
from icetide.artifacts.shape import Naming
from icetide.artifacts.views.registry import ViewRegistry
from icetide.config.model import Config
from icetide.pipeline import Pipeline
from icetide.schema.history import SchemaHistory

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def index_folder(config: Config) -> Path:
    """The default local index of a pipeline."""
    return config.resolved_path(config.state_dir) / "artifacts" / "index"


def views_folder(config: Config) -> Path:
    """The view registry's folder: ``views/`` beside the schema files."""
    return config.resolved_path(config.tables[0].schema_file).parent / "views"


def avsc_path(config: Config, table: str) -> Path:
    """``<table>.avsc`` beside the table's schema file."""
    return config.resolved_path(config.table(table).schema_file).parent / f"{table}.avsc"


def refresher(pipeline: Pipeline, *, publish: bool = True, index: Path | None = None) -> Refresher:
    """A :class:`Refresher` over the pipeline's schema histories, view registry and index
    (``publish=False``: derive and record only, build nothing)."""
    config = pipeline.config
    names = {t.name.casefold(): t.name for t in config.tables}

    def histories(table: str) -> SchemaHistory | None:
        name = names.get(table.casefold())
        return pipeline.schemas.history(name) if name is not None else None

    publisher = Publisher(LocalIndex(index or index_folder(config))) if publish else None
    return Refresher(
        ViewRegistry(views_folder(config)),
        histories,
        Naming.from_config(config),
        publisher=publisher,
        avsc_path=lambda t: avsc_path(config, t),
    )


def known_versions(pipeline: Pipeline) -> dict[str, int]:
    """Table → the schema version the artifacts last refreshed it to (tables they never
    heard of are absent)."""
    return ViewRegistry(views_folder(pipeline.config)).tables()


def publish_all(pipeline: Pipeline, *, index: Path | None = None) -> RefreshReport:
    """``icetide artifacts publish --all``: every table and view, only what changed."""
    return refresher(pipeline, index=index).snapshot([t.name for t in pipeline.config.tables])


def on_table_changed(
    pipeline: Pipeline, table: str, version: int, spark: SparkSession | None = None
) -> RefreshReport:
    """The evolution path's hook: ``table`` now has schema ``version`` (recorded in its
    history); publish it and refresh its dependents. With ``spark``, the base table's
    ``avro.schema.literal`` is set to that version's Avro schema too."""
    r = refresher(pipeline)
    report = r.refresh(TableChanged(table, version))
    if spark is not None:
        from icetide.artifacts.properties import set_avro_literal
        from icetide.lake.tables import TableRefs

        schema = pipeline.schemas.history(table).get(version)
        set_avro_literal(spark, TableRefs.of(pipeline.config, table).base, r.naming.table(schema))
        sync_catalog_views(pipeline, spark)
    return report


def sync_catalog_views(pipeline: Pipeline, spark: SparkSession) -> list[str]:
    """Create or replace every ready view of the registry as an Iceberg view in the
    pipeline's catalog, when that catalog keeps views (REST, JDBC); the names of the
    views written, in the order written (none on the Hadoop catalog)."""
    from icetide.artifacts.views.catalog import keeps_views, view_statements
    from icetide.lake.tables import TableRefs

    config = pipeline.config
    if not keeps_views(config.catalog.type):
        return []
    views = ViewRegistry(views_folder(config)).all()
    tables = {t.name: TableRefs.of(config, t.name).base for t in config.tables}
    statements = view_statements(views, tables, config.catalog.name, config.catalog.namespace)
    for _, statement in statements:
        spark.sql(statement)
    return [name.name for name, _ in statements]
