"""CLI commands that need no Spark: init, config show, help and error rendering."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from icetide.cli import main


def test_init_then_config_show_prints_the_effective_config_without_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["init", str(tmp_path)]) == 0
    config = tmp_path / "icetide.yaml"
    text = config.read_text().replace("properties: {}", "properties: {token: '${TOKEN}'}", 1)
    config.write_text(text)
    monkeypatch.setenv("TOKEN", "s3cr3t-value")
    capsys.readouterr()
    assert main(["config", "show", "-c", str(config)]) == 0
    out = capsys.readouterr().out
    shown = yaml.safe_load(out)
    assert shown["pipeline"] == "shop"
    assert shown["tables"][0]["buckets"] == 16
    assert shown["catalog"]["properties"]["token"] == "***"
    assert "s3cr3t-value" not in out


def test_a_bad_config_exits_2_naming_the_path_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", str(tmp_path)]) == 0
    config = tmp_path / "icetide.yaml"
    config.write_text(config.read_text().replace("    buckets: 16", "    bukets: 16"))
    assert main(["stream", "--once", "-c", str(config)]) == 2
    err = capsys.readouterr().err
    assert "tables[0].bukets" in err and "did you mean 'buckets'" in err


def test_init_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path)]) == 0
    assert main(["init", str(tmp_path)]) == 2
    assert "--force" in capsys.readouterr().err
