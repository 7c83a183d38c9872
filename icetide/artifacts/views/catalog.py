"""Views as real Iceberg views, in the catalogs that keep views.

icetide's view registry (:mod:`icetide.artifacts.views.registry`) is where a view is
defined and its schema derived, on every catalog. Where the catalog implements Iceberg's
``ViewCatalog`` (Iceberg 1.10: the REST and JDBC catalogs; not the Hadoop catalog), each
ready view is also created there, so any engine that reads the catalog (Spark SQL, Trino,
PyIceberg's REST client) sees it. The view's SQL names the pipeline's tables and views
by their bare names; in the catalog it must stand on its own, so every such name becomes
the fully qualified, quoted identifier of the table or view it means. This module only
decides the statements; :func:`icetide.artifacts.workspace.sync_catalog_views` runs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp

from icetide.artifacts.views.derive import DIALECT, parse
from icetide.artifacts.views.registry import ViewRecord
from icetide.schema.contract.names import TableName

VIEW_CATALOGS = frozenset({"rest", "jdbc"})
"""Catalog types whose Iceberg catalog keeps views (the Hadoop catalog does not)."""


def keeps_views(catalog_type: str) -> bool:
    """Whether a catalog of ``catalog_type`` holds Iceberg views."""
    return catalog_type in VIEW_CATALOGS


def qualified_sql(name: str, sql: str, targets: Mapping[str, TableName]) -> str:
    """``sql`` with every relation that names a table or view of ``targets`` (matched
    without regard to case, CTE names left alone) replaced by its qualified identifier.

    >>> t = {"users": TableName("lake", "cdc", "users")}
    >>> qualified_sql("v", "WITH u AS (SELECT * FROM Users) SELECT id FROM u", t)
    'WITH u AS (SELECT * FROM `lake`.`cdc`.`users`) SELECT id FROM u'
    """
    query = parse(name, sql)
    ctes = {c.alias_or_name.casefold() for c in query.find_all(exp.CTE)}
    by_fold = {k.casefold(): v for k, v in targets.items()}
    for table in list(query.find_all(exp.Table)):
        folded = table.name.casefold()
        target = by_fold.get(folded)
        if target is None or folded in ctes or table.args.get("db"):
            continue
        table.set("this", exp.to_identifier(target.name, quoted=True))
        table.set("db", exp.to_identifier(target.namespace, quoted=True))
        table.set("catalog", exp.to_identifier(target.catalog, quoted=True))
    return query.sql(dialect=DIALECT)


def view_statements(
    views: Sequence[ViewRecord], tables: Mapping[str, TableName], catalog: str, namespace: str
) -> list[tuple[TableName, str]]:
    """``CREATE OR REPLACE VIEW`` of every ready view (with the view's name), each after
    the views it reads.

    A pending or failed view is left out (its inputs are not all there, or its SQL does
    not derive): the catalog keeps whatever it had of it."""
    ready = {v.name.casefold(): v for v in views if v.status == "ready"}
    names = {k: TableName(catalog, namespace, v.name) for k, v in ready.items()}
    targets = {**tables, **{v.name: names[k] for k, v in ready.items()}}
    ordered: list[ViewRecord] = []
    placed: set[str] = set()

    def place(key: str) -> None:
        if key in placed:
            return
        placed.add(key)
        for read in ready[key].dependencies:
            if read.casefold() in ready:
                place(read.casefold())
        ordered.append(ready[key])

    for key in sorted(ready):
        place(key)
    statements = []
    for v in ordered:
        name = names[v.name.casefold()]
        sql = qualified_sql(v.name, v.sql, targets)
        statements.append((name, f"CREATE OR REPLACE VIEW {name.sql} AS {sql}"))
    return statements
