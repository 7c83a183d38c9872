"""``icetide demo --lakehouse`` without servers: what it needs is checked before anything
starts, and its config carries the store's key only as ``${VAR}`` references
(tests/integration/lakehouse/test_demo_lakehouse.py runs the demo on real servers)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml

from icetide.cli import main
from icetide.config import load_config
from icetide.demo.lakehouse import ACCESS_KEY_ENV, SECRET_KEY_ENV, Lakehouse
from icetide.demo.live import write_live_pipeline
from icetide.devservers.mariadb import MariaDBServer
from icetide.devservers.objectstore import S3Endpoint
from icetide.spark.jars import ICEBERG_AWS_BUNDLE, JARS_DIR_ENV, Coordinate
from icetide.spark.session import spark_conf

SECRET = "0123456789abcdef-store-secret"
LAKEHOUSE = Lakehouse(
    "http://127.0.0.1:8181",
    S3Endpoint("http://127.0.0.1:8333", "icetideAKID42", SECRET),
    "s3://warehouse/demo",
)


def test_without_weed_the_lakehouse_demo_says_how_to_get_it_and_starts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("GOPATH", str(tmp_path / "go"))
    workdir = tmp_path / "demo"
    assert main(["demo", "--lakehouse", "--workdir", str(workdir)]) == 2
    err = capsys.readouterr().err
    assert "icetide: error: the object store server `weed` is not installed" in err
    assert "scripts/install.sh --tests" in err and "go build" in err
    assert "Traceback" not in err
    assert "MariaDB" not in err and not workdir.exists()


def test_keep_running_needs_the_lakehouse(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--keep-running"]) == 2
    assert "hint: add --lakehouse" in capsys.readouterr().err


def test_the_lakehouse_config_names_the_store_key_only_by_its_environment_variables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fetched AWS SDK bundle, as `icetide jars fetch --dev` lays it out.
    bundle = tmp_path / "jars" / Coordinate.parse(ICEBERG_AWS_BUNDLE).folder
    bundle.mkdir(parents=True)
    (bundle / "bundle-1.10.1.jar").write_bytes(b"")
    (bundle / ".complete").write_text("")
    monkeypatch.setenv(JARS_DIR_ENV, str(tmp_path / "jars"))
    for name in (ACCESS_KEY_ENV, SECRET_KEY_ENV):
        monkeypatch.delenv(name, raising=False)  # restored after the test
    server = MariaDBServer()  # not started: the config needs its port and user only
    try:
        path = write_live_pipeline(tmp_path, server, lakehouse=LAKEHOUSE, catalog="lake")
    finally:
        server.stop()
    text = path.read_text()
    assert SECRET not in text and "icetideAKID42" not in text
    written = yaml.safe_load(text)
    catalog = written["catalog"]
    assert (catalog["type"], catalog["uri"]) == ("rest", "http://127.0.0.1:8181")
    assert catalog["warehouse"] == "s3://warehouse/demo"
    assert catalog["properties"]["s3.secret-access-key"] == "${" + SECRET_KEY_ENV + "}"
    assert catalog["properties"]["s3.endpoint"] == "http://127.0.0.1:8333"
    assert "extra_jars" not in written["spark"]  # S3FileIO brings the bundle by default

    LAKEHOUSE.export_keys()
    config = load_config(path)
    jars = spark_conf(config)["spark.jars"].split(",")
    assert str(bundle / "bundle-1.10.1.jar") in jars
    assert config.catalog.properties_plain()["s3.secret-access-key"] == SECRET
    assert main(["config", "show", "-c", str(path)]) == 0
    out = capsys.readouterr().out
    assert yaml.safe_load(out)["catalog"]["properties"]["s3.secret-access-key"] == "***"
    assert SECRET not in out and "icetideAKID42" not in out

    env_file = LAKEHOUSE.write_env_file(tmp_path)
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert f"{SECRET_KEY_ENV}={SECRET}" in env_file.read_text().splitlines()
    snippet = "\n".join(LAKEHOUSE.pyiceberg_lines("lake", "shop.orders"))
    assert SECRET not in snippet and f"os.environ[{SECRET_KEY_ENV!r}]" in snippet
    compile(snippet, "snippet", "exec")  # the printed lines are Python


def test_keep_running_holds_until_a_stop_is_requested(capsys: pytest.CaptureFixture[str]) -> None:
    from icetide.cli import context
    from icetide.cli.demo import _hold
    from icetide.stopping import Stop

    before = context.state.stop
    context.state.stop = Stop()
    context.state.stop.request("SIGINT")  # as Ctrl-C would, before the wait
    try:
        _hold("http://127.0.0.1:8181")
    finally:
        context.state.stop = before
    assert "keep running; Ctrl-C stops them" in capsys.readouterr().err
