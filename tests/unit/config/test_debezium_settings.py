"""``debezium:``: the connector settings a schemaless message is read by, declared once
(pipeline, source, table), and the documented example config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icetide.config import load_config
from icetide.config.model import Config
from icetide.errors import ConfigError
from icetide.schema.connector import CAPTURE, ConnectorSettings

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "debezium" / "icetide.yaml"


def _config(tmp_path: Path, **doc: Any) -> Config:
    return Config.model_validate({"pipeline": "p", **doc}, context={"config_dir": tmp_path})


def test_the_documented_example_loads_and_reads_each_table_its_connectors_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MARIADB_PASSWORD", "x")
    monkeypatch.setenv("POSTGRES_PASSWORD", "y")
    config = load_config(EXAMPLE)
    assert config.connector("customers") == ConnectorSettings("precise", None)
    assert config.connector("pg_orders") == ConnectorSettings("precise", "adaptive")
    assert not any(s.captured_by_icetide for s in config.sources)
    assert config.table_server(config.table("customers")) == "shopdb"


def test_a_table_over_its_source_over_the_pipeline_over_the_defaults(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        debezium={"decimal_handling_mode": "string"},
        sources=[
            {
                "name": "a",
                "type": "postgres",
                "database": "d",
                "tables": ["t1", "t2"],
                "debezium": {"time_precision_mode": "connect"},
            },
            {"name": "own", "type": "mysql", "tables": ["t3"]},
        ],
        tables=[
            {"name": "t1", "source": "public.t1", "debezium": {"decimal_handling_mode": "double"}},
            {"name": "t2", "source": "public.t2"},
            {"name": "t3", "source": "shop.t3"},
            {"name": "t4", "source": "shop.t4"},
        ],
    )
    assert config.connector("t1") == ConnectorSettings("double", "connect")
    assert config.connector("t2") == ConnectorSettings("string", "connect")
    assert config.connector("t3") == CAPTURE  # icetide's capture writes it
    assert config.connector("t4") == ConnectorSettings("string", None)


def test_a_table_icetide_captures_takes_no_debezium_settings(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"tables\[0\]\.debezium: the table is captured by icetide"
    ):
        _config(
            tmp_path,
            sources=[{"name": "own", "type": "mysql"}],
            tables=[
                {"name": "t", "source": "s.t", "debezium": {"decimal_handling_mode": "string"}}
            ],
        )


def test_adaptive_times_on_a_mysql_source_are_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="adaptive_time_microseconds"):
        _config(
            tmp_path,
            sources=[
                {"name": "m", "type": "mysql", "debezium": {"time_precision_mode": "adaptive"}}
            ],
            tables=[{"name": "t", "source": "s.t"}],
        )


def test_an_unknown_mode_names_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="precise"):
        _config(
            tmp_path,
            debezium={"decimal_handling_mode": "exact"},
            tables=[{"name": "t", "source": "s.t"}],
        )


def test_capture_refuses_a_source_debezium_captures(tmp_path: Path) -> None:
    from icetide.cli.capture import chosen_sources

    config = _config(
        tmp_path,
        sources=[{"name": "dbz", "type": "mysql", "debezium": {}}],
        tables=[{"name": "t", "source": "s.t"}],
    )
    with pytest.raises(ConfigError, match="captured by Debezium"):
        chosen_sources(config, None)
    with pytest.raises(ConfigError, match="external Debezium connector"):
        chosen_sources(config, "dbz")
