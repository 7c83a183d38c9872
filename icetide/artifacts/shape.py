"""What one artifact describes: a table or view at one version, with its names.

A :class:`Shape` is the common input of everything artifacts make (the Avro literal, the
generated package, the index entry), so tables and views go through the same code. The
names follow one rule, written once here:

* the Avro record is named after the source table (source casing) in the namespace of
  the source database; a view is named after itself in the pipeline's namespace;
* the package is ``icetide-schema-<ns>-<name>`` with ``<ns>`` that same namespace, and
  its import name is the same with ``_`` (``icetide_schema_shop_users``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from icetide.config.model import Config
from icetide.config.tables import TableConfig
from icetide.schema.contract.names import TableName
from icetide.schema.model import TableSchema
from icetide.schema.types import Column


@dataclass(frozen=True)
class Shape:
    """One version of a table's or a view's columns, with the names artifacts use."""

    kind: Literal["table", "view"]
    name: str
    """The icetide table name, or the view name."""
    record: str
    """The Avro record name: the source table as the source spells it, or the view."""
    namespace: str
    """Avro namespace and the ``<ns>`` of the package name."""
    columns: tuple[Column, ...]
    version: int
    """The schema version (tables) or the view's derived-schema version."""
    iceberg: tuple[str, str] | None = None
    """``(namespace, table)`` of the base table a table's reader reads."""
    sql: str | None = None
    relations: tuple[tuple[str, str, str], ...] = ()
    """A view's inputs, every level of them, each before what reads it: ``(name, "table",
    quoted base table)`` or ``(name, "view", its SQL)``; what a view's ``read()`` makes
    into temporary views before it runs ``sql``."""

    @property
    def package(self) -> str:
        """The distribution name, normalized (PEP 503).

        >>> Shape("table", "users", "Users", "shop", (), 1).package
        'icetide-schema-shop-users'
        """
        return normalize(f"icetide-schema-{self.namespace}-{self.name}")

    @property
    def module(self) -> str:
        """The import name of the generated package."""
        return self.package.replace("-", "_")

    @property
    def doc(self) -> str:
        """One line saying what the artifact describes."""
        if self.kind == "table":
            return (
                f"{self.namespace}.{self.record} (icetide table {self.name}, "
                f"schema version {self.version})"
            )
        return f"view {self.name} (version {self.version}): {self.sql}"


def normalize(name: str) -> str:
    """A distribution name the way indexes compare them (PEP 503).

    >>> normalize("icetide-schema-Shop_DB-Users")
    'icetide-schema-shop-db-users'
    """
    return re.sub(r"[-_.\s]+", "-", name).lower()


def source_names(config: Config, table: TableConfig) -> tuple[str, str]:
    """``(database, table)`` of a table's source, casing kept; the database is the
    pipeline's Iceberg namespace when the source names none."""
    parts = table.source.split(".")
    if len(parts) >= 2:
        return parts[-2], parts[-1]
    return config.catalog.namespace, parts[-1]


@dataclass(frozen=True)
class Naming:
    """How a pipeline names its artifacts: tables after their sources, views after
    themselves in the Iceberg namespace."""

    iceberg_namespace: str
    sources: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Table → ``(source database, source table)``; a table not listed uses the Iceberg
    namespace and its own name."""
    catalog: str = "lake"
    """The Spark catalog the base tables are read through (a view's ``read()``)."""

    @classmethod
    def from_config(cls, config: Config) -> Naming:
        return cls(
            config.catalog.namespace,
            {t.name: source_names(config, t) for t in config.tables},
            config.catalog.name,
        )

    def base_table(self, table: str) -> str:
        """The quoted ``catalog.namespace.table`` of a table's base table."""
        return TableName(self.catalog, self.iceberg_namespace, table).sql

    def table(self, schema: TableSchema) -> Shape:
        """The shape of one version of a table."""
        database, record = self.sources.get(schema.table, (self.iceberg_namespace, schema.table))
        return Shape(
            "table",
            schema.table,
            record,
            database,
            schema.columns,
            schema.version,
            iceberg=(self.iceberg_namespace, schema.table),
        )

    def view(
        self,
        name: str,
        sql: str,
        columns: tuple[Column, ...],
        version: int,
        relations: tuple[tuple[str, str, str], ...] = (),
    ) -> Shape:
        """The shape of one version of a view (``relations``: :attr:`Shape.relations`)."""
        return Shape(
            "view",
            name,
            name,
            self.iceberg_namespace,
            columns,
            version,
            sql=sql,
            relations=relations,
        )
