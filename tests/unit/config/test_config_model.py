"""The config models without files: helpers, immutability, secrets, durations, redacted()."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from icetide.config import Config, load_config
from icetide.config.loader import allowed_keys
from icetide.config.model import format_loc
from icetide.config.secrets import Secret
from icetide.config.types import format_duration, parse_duration
from icetide.errors import ConfigError


def config(**extra: Any) -> Config:
    data: dict[str, Any] = {
        "pipeline": "shop",
        "tables": [
            {"name": "customers", "source": "inventory.customers"},
            {"name": "orders"},
        ],
    }
    data.update(extra)
    return Config.model_validate(data, context={"config_dir": Path("/pipelines/shop")})


def test_paths_resolve_against_the_context_folder() -> None:
    c = config()
    assert c.config_dir == Path("/pipelines/shop")
    assert c.state_dir == Path("/pipelines/shop/.icetide")
    assert c.catalog.warehouse == "/pipelines/shop/warehouse"
    assert c.tables[1].schema_file == Path("/pipelines/shop/schemas/orders.yaml")


def test_without_context_paths_resolve_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    c = Config.model_validate({"pipeline": "p", "tables": [{"name": "a"}]})
    assert c.config_dir == tmp_path
    assert c.transport.path == tmp_path / "landing"


def test_config_is_frozen() -> None:
    c = config()
    with pytest.raises(ValidationError):
        c.pipeline = "other"
    with pytest.raises(ValidationError):
        c.tables[0].buckets = 3


def test_table_lookup_ignores_case_and_suggests() -> None:
    c = config()
    assert c.table("CUSTOMERS").name == "customers"
    with pytest.raises(ConfigError) as info:
        c.table("order")
    assert "no table 'order'" in info.value.message
    assert info.value.hint == "did you mean 'orders'?"
    with pytest.raises(ConfigError) as info:
        c.table("zzz")
    assert info.value.hint == "tables are customers, orders"


def test_table_for_source() -> None:
    c = config()
    found = c.table_for_source("Inventory.Customers")
    assert found is not None and found.name == "customers"
    assert c.table_for_source("orders") is c.table("orders")
    assert c.table_for_source("inventory.nope") is None


def test_app_name_and_qualified_names() -> None:
    assert config().app_name == "icetide-shop"
    assert config(spark={"app_name": "mine"}).app_name == "mine"
    assert config().tables[0].qualified("cdc") == "cdc.customers"
    assert config(dead_letter={"unrouted_table": "lost"}).dead_letter.unrouted == "lost_dlt"


def test_secret_hides_itself_but_is_its_value() -> None:
    secret = Secret("hunter2")
    assert secret == "hunter2"
    assert repr(secret) == "'***'"
    assert f"{secret!r}" == "'***'"
    assert "hunter2" not in repr([secret, {"k": secret}])
    assert str(secret) == "hunter2" and type(str(secret)) is str


def test_secrets_survive_validation_and_stay_out_of_pydantic_errors() -> None:
    c = config(catalog={"type": "rest", "uri": Secret("http://u:hunter2@h")})
    assert isinstance(c.catalog.uri, Secret)
    assert "hunter2" not in repr(c)
    with pytest.raises(ValidationError) as info:
        config(catalog={"name": Secret("hunter2 name")})
    assert "hunter2" not in str(info.value)


def test_choices_and_numbers_from_the_environment_are_plain_values() -> None:
    c = config(
        catalog={"type": Secret("rest"), "uri": "u"},
        spark={"shuffle_partitions": Secret("4")},
    )
    redacted = c.redacted()
    assert redacted["catalog"]["type"] == "rest"
    assert redacted["spark"]["shuffle_partitions"] == 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500ms", timedelta(milliseconds=500)),
        ("10s", timedelta(seconds=10)),
        ("10", timedelta(seconds=10)),
        (" 5m ", timedelta(minutes=5)),
        ("1.5h", timedelta(minutes=90)),
        ("7d", timedelta(days=7)),
        (30, timedelta(seconds=30)),
        (0.25, timedelta(milliseconds=250)),
    ],
)
def test_parse_duration(text: Any, expected: timedelta) -> None:
    assert parse_duration(text) == expected
    assert parse_duration(format_duration(expected)) == expected


@pytest.mark.parametrize("bad", ["", "5 minutes", "-1s", "0", 0, True, None, "1w"])
def test_parse_duration_rejects(bad: Any) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_format_loc() -> None:
    assert format_loc(()) == ""
    assert format_loc(("tables", 1, "bukets")) == "tables[1].bukets"
    assert format_loc(("catalog", "properties", "s3.endpoint")) == (
        'catalog.properties["s3.endpoint"]'
    )


def test_allowed_keys_follow_the_models() -> None:
    top = allowed_keys(())
    assert top is not None and "dead_letter" in top and "tables" in top
    table = allowed_keys(("tables", 3))
    assert table is not None and "schema" in table and "schema_file" not in table
    assert allowed_keys(("catalog", "properties")) is None
    assert allowed_keys(("nope",)) is None


def test_redacted_is_plain_yaml_that_loads_back(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "icetide.yaml").write_text(
        """\
pipeline: shop
catalog: {type: rest, uri: "http://rest:8181", properties: {io-impl: x.IO}}
spark: {extra_jars: [drivers/pg.jar], conf: {spark.sql.ansi.enabled: true}}
schedule: {stream_interval: 1500ms, merge_interval: 2h}
tables:
  - {name: customers, primary_key: [id], buckets: 4, mode: copy-on-write}
"""
    )
    original = load_config(source)
    shown = yaml.safe_dump(original.redacted(), sort_keys=False)
    assert "***" not in shown
    assert "stream_interval: 1500ms" in shown and "merge_interval: 2h" in shown

    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "icetide.yaml").write_text(shown)
    reloaded = load_config(copy)
    # Paths were written absolute, so the copy points at the same files.
    assert reloaded.redacted() == original.redacted()


KAFKA = {"type": "kafka", "bootstrap_servers": "k:9092", "topics": ["shop.inv.orders"]}


def test_a_state_location_on_s3_needs_a_transport_that_outlives_the_machine() -> None:
    assert config(state="s3://lake/state/shop", transport=KAFKA).state == "s3://lake/state/shop"
    assert config(state="shared/state").state == "/pipelines/shop/shared/state"
    with pytest.raises(ValidationError) as landing:
        config(state="s3://lake/state/shop")
    assert "transport.type: state: s3://lake/state/shop keeps capture's offsets off this " in (
        str(landing.value)
    )
    assert "use transport: {type: kafka, ...}, or a local state folder" in str(landing.value)
    with pytest.raises(ValidationError) as scheme:
        config(state="hdfs://nn/state", transport=KAFKA)
    assert "state: hdfs:// is not a state location: give s3://bucket/prefix" in str(scheme.value)
