"""The broker's settings and the missing-jars error (no broker is started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from icetide.devservers.errors import LocalServerError
from tests.devservers.kafka import broker_jars, cluster_id, server_properties


def test_server_properties_bind_loopback_only_and_persist_every_message(tmp_path: Path) -> None:
    text = server_properties(tmp_path, 9092, 9093)
    settings = dict(line.split("=", 1) for line in text.splitlines())
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert settings["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert settings["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert settings["process.roles"] == "broker,controller"
    assert settings["log.dirs"] == str(tmp_path / "logs")
    assert settings["log.flush.interval.messages"] == "1"
    assert settings["offsets.topic.replication.factor"] == "1"


def test_cluster_id_is_22_url_safe_characters() -> None:
    ids = {cluster_id() for _ in range(5)}
    assert len(ids) == 5
    for value in ids:
        assert len(value) == 22 and "=" not in value and "+" not in value and "/" not in value


def test_missing_broker_jars_say_how_to_fetch_them(tmp_path: Path) -> None:
    with pytest.raises(LocalServerError) as caught:
        broker_jars(tmp_path)
    assert "kafka_2.13" in str(caught.value)
    assert "icetide jars fetch --dev" in (caught.value.hint or "")
