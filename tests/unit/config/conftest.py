"""Helpers for the config tests: write a config file into a fresh folder, load it."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from icetide.config import Config, load_config
from icetide.errors import ConfigError


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The pipeline folder; the tests run from elsewhere so relative paths show up."""
    pipeline = tmp_path / "pipeline"
    pipeline.mkdir()
    return pipeline


@pytest.fixture(autouse=True)
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Work from a folder that is not the config's, so cwd-relative resolution fails."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


@pytest.fixture
def write(folder: Path) -> Callable[[str], Path]:
    """Write ``icetide.yaml`` (dedented) into the pipeline folder; returns its path."""

    def write(text: str) -> Path:
        file = folder / "icetide.yaml"
        file.write_text(textwrap.dedent(text))
        return file

    return write


@pytest.fixture
def load(write: Callable[[str], Path]) -> Callable[[str], Config]:
    """Write a config and load it."""
    return lambda text: load_config(write(text))


@pytest.fixture
def fail(write: Callable[[str], Path]) -> Callable[[str], ConfigError]:
    """Write a config, load it, and return the ConfigError it must raise."""

    def fail(text: str) -> ConfigError:
        file = write(text)
        with pytest.raises(ConfigError) as info:
            load_config(file)
        return info.value

    return fail
