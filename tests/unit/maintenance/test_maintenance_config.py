"""The maintenance: block and freshness_sla: defaults, sizes, errors naming the YAML path."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from icetide.config import load_config
from icetide.errors import ConfigError


def _load(tmp_path: Path, extra: dict[str, Any], table: dict[str, Any] | None = None) -> Any:
    (tmp_path / "schemas").mkdir(exist_ok=True)
    (tmp_path / "schemas" / "t.yaml").write_text(
        "table: t\nversion: 1\nprimary_key: [id]\ncolumns:\n"
        "  - {id: 1, name: id, type: long, nullable: false}\n"
    )
    doc = {"pipeline": "p", "tables": [{"name": "t", **(table or {})}], **extra}
    path = tmp_path / "icetide.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_config(path)


def test_defaults_and_sizes(tmp_path: Path) -> None:
    config = _load(tmp_path, {})
    m = config.maintenance
    assert m.target_file_size == 128 * 2**20 and m.interval == timedelta(hours=1)
    assert m.snapshots.keep_last == 10 and m.orphan_age == timedelta(days=3)
    assert config.tables[0].freshness_sla is None
    config = _load(
        tmp_path,
        {"maintenance": {"target_file_size": "8MiB", "snapshots": {"max_age": "2h"}}},
        {"freshness_sla": "5m"},
    )
    assert config.maintenance.target_file_size == 8 * 2**20
    assert config.maintenance.snapshots.max_age == timedelta(hours=2)
    assert config.tables[0].freshness_sla == timedelta(minutes=5)


@pytest.mark.parametrize(
    ("extra", "path", "words"),
    [
        ({"maintenance": {"orphan_age": "23h"}}, "maintenance.orphan_age", "at least 24h"),
        ({"maintenance": {"target_file_size": "big"}}, "maintenance.target_file_size", "size"),
        ({"maintenance": {"snapshots": {"keep_last": 0}}}, "maintenance.snapshots.keep_last", ""),
        ({"maintenance": {"intervl": "1h"}}, "maintenance.intervl", "interval"),
    ],
)
def test_bad_values_name_their_yaml_path(
    tmp_path: Path, extra: dict[str, Any], path: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, extra)
    text = caught.value.render()
    assert path in text and words in text
