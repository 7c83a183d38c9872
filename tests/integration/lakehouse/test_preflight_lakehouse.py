"""The preflight on the real servers: a refused key, a missing bucket and an endpoint
that is another service are each one error naming the setting to fix, and the store's
key and the catalog's token are in no output of a check (the lakehouse demo's test
greps a whole run's output).

``icetide config check`` runs the same check every Spark command runs first; it needs no
JVM, so these cost the servers' first use only (tests/unit/lake/test_preflight.py covers
what needs no server: a catalog or store that is down, a URL that is no catalog).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from icetide.cli import main
from icetide.devservers.objectstore import ObjectStoreServer
from icetide.devservers.rest_catalog import RestCatalogServer
from icetide.spark.jars import S3_FILE_IO

TOKEN = "tok-" + uuid.uuid4().hex


def s3_properties(endpoint: str) -> dict[str, str]:
    return {
        "io-impl": S3_FILE_IO,
        "s3.endpoint": endpoint,
        "s3.path-style-access": "true",
        "s3.access-key-id": "${TEST_S3_KEY_ID}",
        "s3.secret-access-key": "${TEST_S3_SECRET}",
        "client.region": "us-east-1",
    }


def pipeline_with(tmp_path: Path, catalog: dict[str, Any]) -> Path:
    """``icetide init``'s pipeline in ``tmp_path`` with ``catalog`` as its catalog."""
    assert main(["init", str(tmp_path), "--force"]) == 0
    path = tmp_path / "icetide.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["catalog"] = catalog
    doc["spark"]["master"] = "local[2]"
    path.write_text(yaml.safe_dump(doc))
    return path


def on_the_store(tmp_path: Path, store: ObjectStoreServer, warehouse: str) -> Path:
    """A JDBC catalog in a SQLite file (no server) whose warehouse is on ``store``."""
    return pipeline_with(
        tmp_path,
        {
            "type": "jdbc",
            "uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}",
            "warehouse": warehouse,
            "properties": s3_properties(store.url),
        },
    )


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch, object_store: ObjectStoreServer) -> tuple[str, str]:
    """The store's real key in the environment the configs name."""
    key = object_store.endpoint
    monkeypatch.setenv("TEST_S3_KEY_ID", key.access_key)
    monkeypatch.setenv("TEST_S3_SECRET", key.secret_key)
    monkeypatch.setenv("TEST_CATALOG_TOKEN", TOKEN)
    return key.access_key, key.secret_key


def check(config: Path, capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["config", "check", "-c", str(config)])
    captured = capfd.readouterr()
    return code, captured.out + captured.err


def test_a_key_the_store_refuses_names_the_secret_setting_and_shows_no_key(
    tmp_path: Path,
    object_store: ObjectStoreServer,
    keys: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    config = on_the_store(tmp_path, object_store, "s3://warehouse/preflight")
    code, output = check(config, capfd)
    assert code == 0, output
    assert f"check: bucket 'warehouse' on the object store at {object_store.url} is readable" in (
        output
    )

    wrong = "not-" + keys[1]
    monkeypatch.setenv("TEST_S3_SECRET", wrong)
    code, output = check(config, capfd)
    assert code == 2
    assert (
        "icetide: error: catalog.properties.s3.secret-access-key: the object store at "
        f"{object_store.url} refused the key *** for bucket 'warehouse' (access denied)"
    ) in output
    assert "Traceback" not in output
    assert keys[0] not in output and wrong not in output and keys[1] not in output


def test_a_missing_bucket_names_the_warehouse(
    tmp_path: Path,
    object_store: ObjectStoreServer,
    keys: tuple[str, str],
    capfd: pytest.CaptureFixture[str],
) -> None:
    config = on_the_store(tmp_path, object_store, "s3://no-such-bucket/lake")
    code, output = check(config, capfd)
    assert code == 2
    assert (
        "icetide: error: catalog.warehouse: bucket 'no-such-bucket' of the warehouse "
        f"s3://no-such-bucket/lake does not exist on the object store at {object_store.url}"
    ) in output
    assert "hint: create the bucket 'no-such-bucket'" in output


def test_an_endpoint_that_is_another_service_is_no_s3_store(
    tmp_path: Path,
    object_store: ObjectStoreServer,
    rest_catalog: RestCatalogServer,
    keys: tuple[str, str],
    capfd: pytest.CaptureFixture[str],
) -> None:
    config = on_the_store(tmp_path, object_store, "s3://warehouse/lake")
    text = config.read_text().replace(object_store.url, rest_catalog.url)
    config.write_text(text)
    code, output = check(config, capfd)
    assert code == 2
    assert (
        f"icetide: error: catalog.properties.s3.endpoint: {rest_catalog.url} does not answer "
        "as an S3 object store"
    ) in output


def test_keys_and_token_are_in_no_output_of_a_check(
    tmp_path: Path,
    object_store: ObjectStoreServer,
    rest_catalog: RestCatalogServer,
    keys: tuple[str, str],
    capfd: pytest.CaptureFixture[str],
) -> None:
    properties = s3_properties(object_store.url) | {"token": "${TEST_CATALOG_TOKEN}"}
    config = pipeline_with(
        tmp_path,
        {
            "type": "rest",
            "uri": rest_catalog.url,
            "warehouse": rest_catalog.warehouse,
            "namespace": "masked",
            "properties": properties,
        },
    )
    capfd.readouterr()
    outputs = []
    for argv in (["config", "show"], ["config", "check"]):
        code = main([*argv, "-c", str(config)])
        captured = capfd.readouterr()
        outputs.append(captured.out + captured.err)
        assert code == 0, outputs[-1]
    shown, checked = outputs
    assert yaml.safe_load(shown)["catalog"]["properties"]["token"] == "***"
    assert f"check: the REST catalog at {rest_catalog.url} answers" in checked
    assert "check: bucket 'warehouse' on the object store" in checked
    for secret in (*keys, TOKEN):
        assert all(secret not in output for output in outputs)
