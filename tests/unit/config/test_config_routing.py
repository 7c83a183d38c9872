"""Which table takes an event: ``db.table`` plus, when known, the Debezium server name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from icetide.config import Config, load_config
from icetide.errors import ConfigError
from icetide.ledger.stage import routes_of


def config(tables: list[dict[str, Any]], sources: list[dict[str, Any]] | None = None) -> Config:
    return Config.model_validate(
        {"pipeline": "p", "sources": sources or [], "tables": tables},
        context={"config_dir": Path("/p")},
    )


def problems(tables: list[dict[str, Any]], tmp: Path, sources: list[Any] | None = None) -> str:
    file = tmp / "icetide.yaml"
    file.write_text(yaml.safe_dump({"pipeline": "p", "sources": sources or [], "tables": tables}))
    with pytest.raises(ConfigError) as info:
        load_config(file)
    return str(info.value)


MYSQL = {"name": "shopdb", "type": "mysql"}
PG = {"name": "pgshop", "type": "postgres", "database": "shop"}


def test_a_three_part_source_routes_on_its_server() -> None:
    # Issue item 4: server.db.table passed validation but could never match an event.
    c = config(
        [
            {"name": "my_customers", "source": "shopdb.inventory.customers"},
            {"name": "pg_customers", "source": "pgshop.inventory.customers"},
        ]
    )
    table = c.table("pg_customers")
    assert (table.source, table.server) == ("inventory.customers", "pgshop")
    routes = routes_of(c)
    assert routes.table("pgshop", "inventory.customers") == "pg_customers"
    assert routes.table("SHOPDB", "Inventory.Customers") == "my_customers"
    assert routes.table("other", "inventory.customers") is None
    assert routes.table(None, "inventory.customers") is None
    assert c.table_for_source("inventory.customers", "pgshop") is table


def test_a_table_captured_by_a_configured_source_routes_on_its_name() -> None:
    c = config(
        [
            {"name": "my_customers", "source": "inventory.customers"},
            {"name": "pg_customers", "source": "inventory.customers"},
        ],
        [{**MYSQL, "tables": ["my_customers"]}, {**PG, "tables": ["pg_customers"]}],
    )
    assert c.table_server(c.table("my_customers")) == "shopdb"
    routes = routes_of(c)
    assert routes.table("pgshop", "inventory.customers") == "pg_customers"
    assert routes.table("shopdb", "inventory.customers") == "my_customers"
    # A lone source with no table list captures, and so names, every table.
    lone = config([{"name": "customers", "source": "inventory.customers"}], [MYSQL])
    assert routes_of(lone).table("pgshop", "inventory.customers") is None


def test_a_two_part_source_without_sources_takes_any_server() -> None:
    c = config([{"name": "customers", "source": "inventory.customers"}])
    assert c.table_server(c.table("customers")) is None
    assert routes_of(c).table("anything", "inventory.customers") == "customers"
    assert routes_of(c).table(None, "inventory.customers") == "customers"


def test_tables_that_could_both_take_an_event_are_refused_naming_both(tmp_path: Path) -> None:
    text = problems(
        [
            {"name": "customers", "source": "inventory.customers"},
            {"name": "pg_customers", "source": "pgshop.inventory.customers"},
        ],
        tmp_path,
    )
    assert "tables[1].source" in text
    assert "tables[0] (customers) and tables[1] (pg_customers)" in text
    assert "server.inventory.customers" in text  # the fix


def test_a_server_that_contradicts_the_capturing_source_is_refused(tmp_path: Path) -> None:
    text = problems(
        [{"name": "customers", "source": "pgshop.inventory.customers"}],
        tmp_path,
        [{**MYSQL, "tables": ["customers"]}],
    )
    assert "names server 'pgshop'" in text and "'shopdb'" in text


def test_server_given_twice_must_agree(tmp_path: Path) -> None:
    text = problems(
        [{"name": "customers", "source": "a.inventory.customers", "server": "b"}], tmp_path
    )
    assert "give the server once" in text
