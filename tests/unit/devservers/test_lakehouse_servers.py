"""The object store's and the REST catalog's settings, and their missing-install errors
(no server is started here: tests/integration/lakehouse starts them)."""

from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from icetide.devservers import objectstore, rest_catalog
from icetide.devservers.errors import LocalServerError
from icetide.devservers.objectstore import COMPONENTS, S3Endpoint, server_arguments
from icetide.devservers.rest_catalog import server_classpath, server_environment, server_pom

STORE = S3Endpoint("http://127.0.0.1:9000", "key", "not-to-be-shown")


def _as_the_server_reads_it(env: dict[str, str]) -> dict[str, str]:
    """What ``RCKUtils.environmentCatalogConfig`` (Iceberg 1.10) makes of ``CATALOG_*``."""
    return {
        name.removeprefix("CATALOG_").replace("__", "-").replace("_", ".").lower(): value
        for name, value in env.items()
        if name.startswith("CATALOG_")
    }


def test_the_rest_catalog_reads_back_the_properties_it_is_given() -> None:
    env = server_environment(STORE, "s3://warehouse/rest", Path("/srv/catalog.db"), 8181)
    assert _as_the_server_reads_it(env) == {
        "catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        "uri": "jdbc:sqlite:/srv/catalog.db",
        "jdbc.user": "user",
        "jdbc.password": "password",
        "jdbc.strict-mode": "true",
        "jdbc.schema-version": "V1",
        "warehouse": "s3://warehouse/rest",
        "rest.port": "8181",
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.path-style-access": "true",
        "s3.access-key-id": "key",
        "s3.secret-access-key": "not-to-be-shown",
        "client.region": "us-east-1",
    }


def test_the_object_store_listens_on_loopback_only_on_the_ports_it_was_given() -> None:
    ports = {c: 20000 + i for i, c in enumerate(COMPONENTS)}
    grpc = {c: 21000 + i for i, c in enumerate(COMPONENTS)}
    args = server_arguments(Path("/srv/store"), ports, grpc)
    flags = dict(a.lstrip("-").split("=", 1) for a in args[1:] if "=" in a)
    assert args[0] == "mini"
    assert flags["ip"] == flags["ip.bind"] == "127.0.0.1"
    assert flags["dir"] == "/srv/store/data"
    for component in COMPONENTS:
        assert flags[f"{component}.port"] == str(ports[component])
        assert flags[f"{component}.port.grpc"] == str(grpc[component])
    # Nothing else listens (on a fixed port) and nothing reports home.
    for fixed in ("s3.port.iceberg", "s3.port.lance", "admin.port.legacy"):
        assert flags[fixed] == "0"
    assert flags["webdav"] == flags["admin.ui"] == flags["master.telemetry"] == "false"


def test_the_s3_secret_never_shows_in_a_repr() -> None:
    assert "not-to-be-shown" not in repr(STORE)
    assert "not-to-be-shown" not in str(STORE)


def test_the_server_pom_names_the_fixture_jars_by_classifier() -> None:
    namespace = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ElementTree.fromstring(server_pom())
    found = {
        (
            d.findtext("m:artifactId", namespaces=namespace),
            d.findtext("m:classifier", "", namespace),
        )
        for d in root.iterfind("m:dependencies/m:dependency", namespace)
    }
    assert ("iceberg-open-api", "test-fixtures") in found  # RESTCatalogServer
    assert ("iceberg-core", "tests") in found  # the servlet and adapter it runs
    assert ("iceberg-core", "") in found and ("sqlite-jdbc", "") in found


def test_missing_servers_say_how_to_install_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(LocalServerError) as caught:
        server_classpath(tmp_path)
    assert "icetide jars fetch --dev" in (caught.value.hint or "")
    assert re.search(
        r"iceberg-open-api:\S+, org\.apache\.iceberg:iceberg-aws-bundle", str(caught.value)
    )

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("GOPATH", str(tmp_path / "go"))
    with pytest.raises(LocalServerError) as caught:
        objectstore.weed_program()
    assert "scripts/install.sh --tests" in (caught.value.hint or "")
    assert rest_catalog.ICEBERG_SERVER_VERSION.startswith("1.10.")
