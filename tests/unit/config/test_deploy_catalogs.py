"""docs/deploy.md's ``catalog:`` examples load, and become the Spark catalog settings
their text promises, secrets read from the environment and masked when printed.

The lakehouse tests run the same blocks on real catalogs; this checks, without a JVM,
that the page keeps one example per catalog kind and that each still loads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from icetide.config import Config
from icetide.config.secrets import Scrubber, secret_values
from icetide.spark.session import spark_conf
from tests.deploy_examples import documented_catalogs

ENV = {
    "ICETIDE_CATALOG_URI": "jdbc:postgresql://catalog-db:5432/iceberg",
    "ICETIDE_CATALOG_USER": "iceberg",
    "ICETIDE_CATALOG_PASSWORD": "pg-secret-1",
    "ICETIDE_S3_ENDPOINT": "http://store:8333",
    "ICETIDE_S3_ACCESS_KEY": "AKIAEXAMPLE",
    "ICETIDE_S3_SECRET_KEY": "s3-secret-1",
}


def _catalog_conf(
    load: Callable[[str], Config], catalog: dict[str, Any]
) -> tuple[dict[str, str], set[str]]:
    """The ``spark.sql.catalog.lake*`` settings (keys after that prefix) of a pipeline
    with ``catalog``, and the config's secret values."""
    config = load(
        yaml.safe_dump({"pipeline": "shop", "catalog": catalog, "tables": [{"name": "items"}]})
    )
    prefix = "spark.sql.catalog.lake"
    conf = {
        k.removeprefix(prefix): v
        for k, v in spark_conf(config).items()
        if k == prefix or k.startswith(prefix + ".")
    }
    return conf, secret_values(config)


def test_every_catalog_kind_the_tests_run_is_documented() -> None:
    assert sorted(documented_catalogs()) == ["hadoop", "jdbc", "rest"]


@pytest.mark.parametrize("kind", ["rest", "jdbc"])
def test_a_catalog_on_s3_reaches_spark_with_its_file_io_and_secrets_from_the_environment(
    kind: str, load: Callable[[str], Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    conf, secrets = _catalog_conf(load, documented_catalogs()[kind])
    assert conf[""] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf[".type"] == kind and conf[".uri"] == ENV["ICETIDE_CATALOG_URI"]
    assert conf[".cache-enabled"] == "false"
    assert conf[".io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert conf[".s3.endpoint"] == ENV["ICETIDE_S3_ENDPOINT"]
    assert conf[".s3.secret-access-key"] == ENV["ICETIDE_S3_SECRET_KEY"]
    assert ENV["ICETIDE_S3_SECRET_KEY"] in secrets and ENV["ICETIDE_S3_ACCESS_KEY"] in secrets
    if kind == "jdbc":
        assert conf[".warehouse"].startswith("s3://")
        assert conf[".jdbc.password"] == ENV["ICETIDE_CATALOG_PASSWORD"]
        assert ENV["ICETIDE_CATALOG_PASSWORD"] in secrets
    scrub = Scrubber()
    scrub.add(secrets)
    assert "s3-secret-1" not in scrub(f"cannot reach the store with {conf}")


def test_the_local_catalog_keeps_its_tables_beside_the_config(
    load: Callable[[str], Config], folder: Any
) -> None:
    conf, _ = _catalog_conf(load, documented_catalogs()["hadoop"])
    assert conf[".type"] == "hadoop"
    assert conf[".warehouse"] == str(folder / "warehouse")
