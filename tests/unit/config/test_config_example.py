"""The example that ``icetide init`` writes: it loads, and its comments tell the truth."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from icetide.config import load_config, load_table_schemas, write_example
from icetide.config.example import EXAMPLE_CONFIG
from icetide.errors import ConfigError


def test_written_example_loads_with_the_documented_values(tmp_path: Path) -> None:
    written = write_example(tmp_path)
    assert written == [tmp_path / "icetide.yaml", tmp_path / "schemas" / "customers.yaml"]

    config = load_config(tmp_path)

    assert config.pipeline == "shop"
    assert config.config_dir == tmp_path
    assert config.state_dir == tmp_path / ".icetide"
    catalog = config.catalog
    assert (catalog.name, catalog.type, catalog.uri, catalog.namespace) == (
        "lake",
        "hadoop",
        None,
        "cdc",
    )
    assert catalog.warehouse == str(tmp_path / "warehouse")
    assert catalog.properties_plain() == {}
    spark = config.spark
    assert (spark.master, spark.iceberg_jar, spark.extra_jars) == ("local[*]", "auto", ())
    assert spark.shuffle_partitions == 8
    assert spark.conf_plain() == {}
    assert spark.app_name is None
    assert config.app_name == "icetide-shop"
    transport = config.transport
    assert transport.type == "files"
    assert transport.path == tmp_path / "landing"
    assert (transport.bootstrap_servers, transport.topics, transport.topic_pattern) == (
        None,
        (),
        None,
    )
    assert transport.starting_offsets == "earliest"
    assert transport.options_plain() == {}
    assert transport.max_files_per_trigger == 100
    assert config.schedule.stream_interval == timedelta(seconds=10)
    assert config.schedule.merge_interval == timedelta(seconds=60)
    assert config.merge.tombstone_retention == timedelta(days=7)
    assert config.dead_letter.suffix == "_dlt"
    assert config.dead_letter.unrouted_table == "icetide_unrouted"
    assert config.dead_letter.table_for("customers") == "customers_dlt"
    (table,) = config.tables
    assert table.name == "customers"
    assert table.source == "inventory.customers"
    assert table.schema_file == tmp_path / "schemas" / "customers.yaml"
    assert table.primary_key == ("id",)
    assert table.buckets == 16
    assert table.mode == "merge-on-read"

    schemas = load_table_schemas(config)
    assert list(schemas) == ["customers"]
    assert schemas["customers"].primary_key == ("id",)
    assert [c.name for c in schemas["customers"].columns][:2] == ["id", "email"]


def test_example_values_are_the_defaults(tmp_path: Path) -> None:
    """Every option the example sets equals what leaving it out gives."""
    write_example(tmp_path)
    example = load_config(tmp_path).redacted()
    (tmp_path / "icetide.yaml").write_text(
        "pipeline: shop\ntables: [{name: customers, source: inventory.customers}]\n"
    )
    minimal = load_config(tmp_path).redacted()
    # The one option the example sets that has no fixed default: it checks the schema.
    assert example["tables"][0].pop("primary_key") == ["id"]
    assert minimal["tables"][0].pop("primary_key") is None
    assert example == minimal


def _documented_defaults() -> list[tuple[str, str, str]]:
    """(key, value, documented default) for each option whose comment says ``Default: x``."""
    found = []
    comments: list[str] = []
    for line in EXAMPLE_CONFIG.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comments.append(stripped.lstrip("# "))
            continue
        match = re.fullmatch(r"(?:- )?(\w+): (.+)", stripped)
        defaults = re.findall(r"Default: (.+?)\.?$", " ".join(comments))
        if match and defaults:
            found.append((match.group(1), match.group(2), defaults[-1]))
        comments = []
    return found


def _same(value: str, default: str) -> bool:
    def parsed(text: str) -> Any:
        return yaml.safe_load(text)

    if default == "none":
        return parsed(value) is None
    return parsed(value) == parsed(default)


def test_each_documented_default_is_the_value_written() -> None:
    documented = _documented_defaults()
    # Descriptive defaults ("the name", "icetide-<pipeline>" …) are checked by the test
    # above; the rest must equal the value the example writes.
    literal = [(k, v, d) for k, v, d in documented if " " not in d and "<" not in d]
    assert len(literal) >= 20, documented
    wrong = [(k, v, d) for k, v, d in literal if not _same(v, d)]
    assert wrong == []


def test_example_mentions_config_show_for_secrets() -> None:
    assert "`icetide config show`" in EXAMPLE_CONFIG


def test_write_example_refuses_to_overwrite(tmp_path: Path) -> None:
    write_example(tmp_path)
    config_file = tmp_path / "icetide.yaml"
    config_file.write_text("pipeline: mine\n")

    with pytest.raises(ConfigError) as info:
        write_example(tmp_path)

    assert str(config_file) in info.value.message
    assert info.value.hint is not None and "--force" in info.value.hint
    assert config_file.read_text() == "pipeline: mine\n"


def test_write_example_writes_nothing_when_one_file_exists(tmp_path: Path) -> None:
    schema = tmp_path / "schemas" / "customers.yaml"
    schema.parent.mkdir()
    schema.write_text("mine\n")

    with pytest.raises(ConfigError):
        write_example(tmp_path)

    assert not (tmp_path / "icetide.yaml").exists()
    assert schema.read_text() == "mine\n"


def test_write_example_with_force_overwrites(tmp_path: Path) -> None:
    write_example(tmp_path)
    (tmp_path / "icetide.yaml").write_text("pipeline: mine\n")

    write_example(tmp_path, force=True)

    assert load_config(tmp_path).pipeline == "shop"
