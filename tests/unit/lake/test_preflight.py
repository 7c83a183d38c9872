"""A catalog or object store that cannot be reached is one error naming the setting,
before Spark starts (no server runs here: nothing listens on the ports, or a plain HTTP
server that is no catalog answers; tests/integration/lakehouse has the real servers)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from icetide.cli import main
from icetide.devservers.ports import free_port

SECRET = "wJalrXUtnFEMI-not-a-real-secret"
KEY_ID = "AKIAEXAMPLEKEYID"


def pipeline_with(tmp_path: Path, catalog: dict[str, Any]) -> Path:
    """``icetide init``'s pipeline in ``tmp_path`` with ``catalog`` as its catalog."""
    assert main(["init", str(tmp_path), "--force"]) == 0
    path = tmp_path / "icetide.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["catalog"] = catalog
    path.write_text(yaml.safe_dump(doc))
    return path


def s3_properties(endpoint: str) -> dict[str, str]:
    return {
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "s3.endpoint": endpoint,
        "s3.path-style-access": "true",
        "s3.access-key-id": "${TEST_S3_KEY_ID}",
        "s3.secret-access-key": "${TEST_S3_SECRET}",
    }


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_S3_KEY_ID", KEY_ID)
    monkeypatch.setenv("TEST_S3_SECRET", SECRET)


@pytest.fixture
def not_a_catalog() -> Iterator[str]:
    """A plain HTTP server on loopback: it answers, but 404 to every catalog or S3 path."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def check(config: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["config", "check", "-c", str(config)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_rest_catalog_that_is_down_names_catalog_uri_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    config = pipeline_with(tmp_path, {"type": "rest", "uri": uri, "namespace": "cdc"})
    code, output = check(config, capsys)
    assert code == 2
    assert f"icetide: error: catalog.uri: the catalog at {uri} is not reachable: " in output
    assert "Connection refused" in output and "Traceback" not in output

    # Every command that starts Spark checks first: the same line, and no JVM.
    assert main(["merge", "--once", "-c", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"catalog.uri: the catalog at {uri} is not reachable" in err
    assert "starting Spark" not in err


def test_a_url_that_is_no_rest_catalog_is_told_apart_from_one_that_is_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], not_a_catalog: str
) -> None:
    config = pipeline_with(tmp_path, {"type": "rest", "uri": not_a_catalog})
    code, output = check(config, capsys)
    assert code == 2
    assert (
        f"catalog.uri: {not_a_catalog} does not answer as an Iceberg REST catalog "
        "(GET /v1/config: HTTP 501" in output
    )
    assert "the one before /v1/config" in output


def test_a_jdbc_catalog_whose_database_is_down_names_catalog_uri(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    config = pipeline_with(
        tmp_path,
        {"type": "jdbc", "uri": f"jdbc:postgresql://127.0.0.1:{port}/iceberg", "warehouse": "wh"},
    )
    code, output = check(config, capsys)
    assert code == 2
    assert (
        f"icetide: error: catalog.uri: the catalog database at 127.0.0.1:{port} is not "
        "reachable: Connection refused" in output
    )


def test_an_object_store_endpoint_nothing_listens_on_names_s3_endpoint_and_hides_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    config = pipeline_with(
        tmp_path,
        {
            "type": "jdbc",
            "uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}",
            "warehouse": "s3://warehouse/lake",
            "properties": s3_properties(endpoint),
        },
    )
    code, output = check(config, capsys)
    assert code == 2
    assert (
        "icetide: error: catalog.properties.s3.endpoint: the object store at "
        f"{endpoint} is not reachable: " in output
    )
    assert "Could not connect to server" in output and "Traceback" not in output
    assert SECRET not in output and KEY_ID not in output


def test_an_endpoint_that_is_no_s3_store_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], not_a_catalog: str
) -> None:
    config = pipeline_with(
        tmp_path,
        {
            "type": "jdbc",
            "uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}",
            "warehouse": "s3://warehouse/lake",
            "properties": s3_properties(not_a_catalog),
        },
    )
    code, output = check(config, capsys)
    assert code == 2
    assert (
        f"catalog.properties.s3.endpoint: {not_a_catalog} does not answer as an S3 object "
        "store" in output
    )


def test_a_local_hadoop_catalog_is_not_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = pipeline_with(tmp_path, {"type": "hadoop", "warehouse": str(tmp_path / "wh")})
    code, output = check(config, capsys)
    assert code == 0
    assert "check: the hadoop catalog 'lake' is ready" in output


def test_a_credential_written_in_the_file_is_warned_about_and_masked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_TOKEN", "from-the-environment-7c1")
    properties = {"token": "${TEST_TOKEN}", "credential": "client:literal-s3cr3t"}
    config = pipeline_with(
        tmp_path, {"type": "hadoop", "warehouse": str(tmp_path / "wh"), "properties": properties}
    )
    code, output = check(config, capsys)
    assert code == 0
    assert (
        "check: warning: catalog.properties.credential is written in the file: write it as "
        "${VAR}" in output
    )
    assert "catalog.properties.token" not in output
    assert "literal-s3cr3t" not in output and "from-the-environment-7c1" not in output


def test_a_state_location_on_a_store_nothing_listens_on_names_state_and_hides_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    config = pipeline_with(
        tmp_path,
        {
            "type": "hadoop",
            "warehouse": str(tmp_path / "wh"),
            "properties": s3_properties(endpoint),
        },
    )
    doc = yaml.safe_load(config.read_text())
    doc["state"] = "s3://state/shop"
    doc["transport"] = {"type": "kafka", "bootstrap_servers": "127.0.0.1:9", "topics": ["t"]}
    config.write_text(yaml.safe_dump(doc))
    code, output = check(config, capsys)
    assert code == 2, output
    assert (
        "icetide: error: state: cannot use the state location s3://state/shop: its object "
        f"store at {endpoint} is not reachable: " in output
    ), output
    assert "hint: start the object store, or correct catalog.properties.s3.endpoint" in output
    assert "Traceback" not in output
    assert SECRET not in output and KEY_ID not in output
