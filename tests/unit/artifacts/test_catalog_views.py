"""The statements that put the registry's views into a catalog that keeps Iceberg views."""

from __future__ import annotations

from icetide.artifacts.views.catalog import keeps_views, qualified_sql, view_statements
from icetide.artifacts.views.registry import ViewRecord
from icetide.schema.contract.names import TableName

TABLES = {
    "orders": TableName("lake", "shop", "orders"),
    "Users": TableName("lake", "shop", "Users"),
}


def view(name: str, sql: str, reads: tuple[str, ...], status: str = "ready") -> ViewRecord:
    return ViewRecord(name, sql, reads, status)  # type: ignore[arg-type]


def test_a_view_is_written_after_the_views_it_reads_and_pending_ones_are_left_out() -> None:
    views = [
        view("a_top", "SELECT * FROM m_mid", ("m_mid",)),
        view("m_mid", "SELECT id FROM z_low", ("z_low",)),
        view("z_low", "SELECT id FROM orders", ("orders",)),
        view("waiting", "SELECT * FROM later", ("later",), status="pending"),
    ]
    statements = view_statements(views, TABLES, "lake", "shop")
    assert [name.name for name, _ in statements] == ["z_low", "m_mid", "a_top"]
    assert statements[0][1] == (
        "CREATE OR REPLACE VIEW `lake`.`shop`.`z_low` AS SELECT id FROM `lake`.`shop`.`orders`"
    )
    assert statements[2][1].endswith("SELECT * FROM `lake`.`shop`.`m_mid`")


def test_names_match_without_case_and_qualified_or_cte_names_are_left_alone() -> None:
    sql = (
        "WITH orders AS (SELECT 1 AS id) "
        "SELECT u.id FROM users u JOIN other.orders o ON o.id = u.id JOIN orders c ON c.id = u.id"
    )
    assert qualified_sql("v", sql, TABLES) == (
        "WITH orders AS (SELECT 1 AS id) SELECT u.id FROM `lake`.`shop`.`Users` AS u "
        "JOIN other.orders AS o ON o.id = u.id JOIN orders AS c ON c.id = u.id"
    )


def test_only_rest_and_jdbc_catalogs_keep_views() -> None:
    assert keeps_views("rest") and keeps_views("jdbc")
    assert not keeps_views("hadoop") and not keeps_views("glue")
