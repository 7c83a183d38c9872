"""The ``sources:`` section: which database each table is captured from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from icetide.config import Config, load_config
from icetide.errors import ConfigError


def config(sources: list[dict[str, Any]]) -> Config:
    return Config.model_validate(
        {
            "pipeline": "shop",
            "sources": sources,
            "tables": [
                {"name": "customers", "source": "inventory.customers"},
                {"name": "orders", "source": "public.orders"},
            ],
        },
        context={"config_dir": Path("/p")},
    )


def problems(sources: list[dict[str, Any]], tmp: Path) -> str:
    file = tmp / "icetide.yaml"
    data = {
        "pipeline": "shop",
        "sources": sources,
        "tables": [{"name": "customers", "source": "inventory.customers"}, {"name": "orders"}],
    }
    file.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_config(file)
    return str(info.value)


def test_a_lone_source_captures_every_table_with_default_ports() -> None:
    c = config([{"name": "inv", "type": "mysql", "password": "pw"}])
    source = c.source("INV")
    assert c.source_tables(source) == c.tables
    assert source.resolved_port == 3306
    assert source.offsets_file == "capture/inv.offset.json"
    pg = config([{"name": "pg", "type": "postgres", "database": "app", "port": 6543}]).sources[0]
    assert (pg.resolved_port, pg.slot, pg.publication) == (6543, "icetide", "icetide")


def test_several_sources_list_their_tables(tmp_path: Path) -> None:
    c = config(
        [
            {"name": "inv", "type": "mysql", "tables": ["customers"]},
            {"name": "app", "type": "postgres", "database": "app", "tables": ["orders"]},
        ]
    )
    assert [t.name for t in c.source_tables(c.source("app"))] == ["orders"]
    found = problems(
        [
            {"name": "inv", "type": "mysql", "tables": ["customer"]},
            {"name": "inv", "type": "postgres"},
        ],
        tmp_path,
    )
    assert (
        "sources[0].tables[0]: no table named 'customer' in tables (did you mean 'customers'?)"
        in found
    )
    assert "sources[1].name: duplicate source name (as sources[0])" in found
    assert "sources[1].database: required for a postgres source" in found
    assert "sources[1].tables: list the tables of each source when there are several" in found


def test_a_table_belongs_to_one_source_and_unknown_sources_are_named(tmp_path: Path) -> None:
    found = problems(
        [
            {"name": "a", "type": "mysql", "tables": ["customers"]},
            {"name": "b", "type": "mysql", "tables": ["customers"]},
        ],
        tmp_path,
    )
    assert "sources[1].tables[0]: already captured by sources[0]" in found
    with pytest.raises(ConfigError, match="no source 'x'"):
        config([{"name": "a", "type": "mysql"}]).source("x")
