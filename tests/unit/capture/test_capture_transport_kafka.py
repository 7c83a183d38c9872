"""The Kafka transport over the real Kafka protocol, against librdkafka's mock cluster.

No Kafka broker is installable here, so the "cluster" is librdkafka's built-in mock
(``test.mock.num.brokers``): three in-process brokers that speak the wire protocol, with
idempotent produce, ``acks=all`` and fetch. The producer under test and the consumer that
reads back are ordinary clients connecting to its bootstrap address. Seconds, no JVM.
"""

from __future__ import annotations

import gc
import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from icetide.capture.errors import CaptureError
from icetide.capture.offsets import OffsetStore
from icetide.capture.record import CaptureRecord
from icetide.capture.transport import Transport, open_transport
from icetide.capture.transport.kafka import (
    KafkaDeliveryError,
    KafkaRecordError,
    KafkaTransport,
    producer_settings,
)
from icetide.config.model import Config
from icetide.errors import ConfigError, Terminal, Transient
from icetide.events.position import Position

ck = pytest.importorskip("confluent_kafka")


class MockCluster:
    """librdkafka's mock cluster, owned by an idle producer; gone when that one closes."""

    def __init__(self, brokers: int = 3) -> None:
        self._owner = ck.Producer({"test.mock.num.brokers": brokers, "log_level": 0})
        metadata = self._owner.list_topics(timeout=10)
        assert len(metadata.brokers) == brokers
        hosts = sorted(metadata.brokers.values(), key=lambda b: b.id)
        self.bootstrap = ",".join(f"{b.host}:{b.port}" for b in hosts)

    def stop(self) -> None:
        """Take every broker down at once."""
        if self._owner is not None:
            self._owner = None
            gc.collect()


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    mock = MockCluster()
    yield mock
    mock.stop()


@dataclass(frozen=True)
class _Offset:
    at: int

    @property
    def text(self) -> str:
        return f"log:{self.at}"

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at}


def record(
    table: str, key: dict[str, Any] | None, version: int, at: int, kind: str = "change"
) -> CaptureRecord:
    value = {
        "before": None,
        "after": {**(key or {}), "version": version, "note": "naïve ☃"},
        "source": {"name": "shop", "db": "shop", "table": table},
        "op": "u" if key else "t",
        "ts_ms": at,
    }
    return CaptureRecord(
        kind,  # type: ignore[arg-type]
        "shop",
        table,
        key,
        value,
        Position(at, "binlog", f"pos {at}"),
        _Offset(at),
    )


@dataclass(frozen=True)
class Message:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes


def partition_count(bootstrap: str, topic: str) -> int:
    """How many partitions ``topic`` has (the mock cluster auto-creates topics)."""
    client = ck.Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    return len(client.list_topics(topic, timeout=10).topics[topic].partitions)


def read_back(bootstrap: str, topics: list[str], count: int) -> list[Message]:
    """Every message of ``topics`` from the beginning (no consumer group involved)."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "icetide-test",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        metadata = consumer.list_topics(timeout=10)
        consumer.assign(
            [
                ck.TopicPartition(topic, partition, ck.OFFSET_BEGINNING)
                for topic in topics
                for partition in metadata.topics[topic].partitions
            ]
        )
        out: list[Message] = []
        idle = 0
        while len(out) < count and idle < 20:
            message = consumer.poll(0.5)
            if message is None:
                idle += 1
                continue
            assert message.error() is None, message.error()
            out.append(
                Message(
                    message.topic(),
                    message.partition(),
                    message.offset(),
                    message.key(),
                    message.value(),
                )
            )
        # Nothing beyond what was produced either.
        extra = consumer.poll(1.0)
        assert extra is None or extra.error() is not None
        return out
    finally:
        consumer.close()


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The Java client's default partition for ``key`` (``Utils.murmur2``)."""
    m, r = 0x5BD1E995, 24
    length = len(key)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(key[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = key[length - length % 4 :]
    if tail:
        for i, byte in reversed(list(enumerate(tail))):
            h ^= byte << (8 * i)
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def kafka_config(tmp_path: Path, bootstrap: str, **transport: Any) -> Config:
    return Config.model_validate(
        {
            "pipeline": "p",
            "transport": {
                "type": "kafka",
                "bootstrap_servers": bootstrap,
                "topic_pattern": r"shop\.shop\..*",
                **transport,
            },
            "sources": [{"name": "shop", "type": "mysql"}],
            "tables": [
                {"name": "customers", "source": "shop.customers"},
                {"name": "orders", "source": "shop.orders"},
            ],
        },
        context={"config_dir": tmp_path},
    )


def test_a_consumer_reads_back_exactly_what_was_sent(cluster: MockCluster, tmp_path: Path) -> None:
    config = kafka_config(tmp_path, cluster.bootstrap)
    records: list[CaptureRecord] = []
    at = 0
    for version in range(4):  # interleaved updates: per-key order is what matters
        for row in range(1, 9):
            at += 1
            records.append(record("customers", {"id": row}, version, at))
            at += 1
            records.append(record("orders", {"id": row, "line": version % 2}, version, at))
    records.append(record("customers", None, 0, at + 1))  # a truncate: no key
    with open_transport(config, config.sources[0]) as transport:
        assert isinstance(transport, KafkaTransport)
        for item in records:
            transport.send(item)
        transport.flush()
    topics = ["shop.shop.customers", "shop.shop.orders"]
    got = read_back(cluster.bootstrap, topics, len(records))

    assert len(got) == len(records)
    expected = defaultdict(list)
    for item in records:
        raw_key = item.key_json()
        expected[(f"shop.shop.{item.table}", raw_key)].append(item.to_json())
    actual = defaultdict(list)
    partitions = defaultdict(set)
    for message in sorted(got, key=lambda m: (m.topic, m.partition, m.offset)):
        key = None if message.key is None else message.key.decode()
        actual[(message.topic, key)].append(message.value.decode())
        partitions[(message.topic, key)].add(message.partition)
    assert actual == expected  # same keys, same values, same order per key
    counts = {topic: partition_count(cluster.bootstrap, topic) for topic in topics}
    for (topic, key), used in partitions.items():
        if key is not None:
            assert used == {murmur2_partition(key.encode(), counts[topic])}
    assert sum(len(p) for p in partitions.values()) > 2  # keys spread over partitions


def test_schema_changes_go_to_the_source_topic(cluster: MockCluster) -> None:
    ddl = record("customers", None, 0, 5, kind="schema_change")
    settings = producer_settings(cluster.bootstrap, "test")
    with KafkaTransport(settings, "shop") as transport:
        transport.send(ddl)
        transport.flush()
    (message,) = read_back(cluster.bootstrap, ["shop"], 1)
    assert json.loads(message.key or b"") == {"databaseName": "shop"}
    assert message.value.decode() == ddl.to_json()


def test_a_lost_delivery_fails_the_flush_and_no_offset_is_saved(
    cluster: MockCluster, tmp_path: Path
) -> None:
    store = OffsetStore(tmp_path / "shop.offset.json")
    config = kafka_config(tmp_path, cluster.bootstrap, producer={"message.timeout.ms": 1500})
    transport: Transport = open_transport(config, config.sources[0])

    def checkpoint(at: int) -> None:  # what the capture runner does
        transport.flush()
        store.save({"at": at}, position=f"log:{at}")

    with transport:
        transport.send(record("customers", {"id": 1}, 0, 1))
        checkpoint(1)
        assert store.load() == {"at": 1}

        cluster.stop()  # every broker goes away
        transport.send(record("customers", {"id": 1}, 1, 2))
        with pytest.raises(KafkaDeliveryError) as info:
            checkpoint(2)
        assert isinstance(info.value, Transient)
        assert "did not acknowledge 1 of 1 messages" in info.value.message
        assert "Message timed out" in info.value.message
        assert store.load() == {"at": 1}  # the offset never passes a lost message

        # The transport stays failed: no later flush can succeed over the lost message.
        with pytest.raises(KafkaDeliveryError):
            checkpoint(3)
        with pytest.raises(KafkaDeliveryError):
            transport.send(record("customers", {"id": 2}, 0, 3))
    assert store.load() == {"at": 1}


def test_a_record_too_large_is_terminal(cluster: MockCluster) -> None:
    settings = producer_settings(cluster.bootstrap, "test", {"message.max.bytes": "2000"})
    big = record("customers", {"id": 1}, 0, 1)
    big = CaptureRecord(
        big.kind, big.db, big.table, big.key, {**big.value, "pad": "x" * 5000},
        big.position, big.resume,
    )  # fmt: skip
    with KafkaTransport(settings, "shop") as transport:
        with pytest.raises(KafkaRecordError, match=r"shop\.customers at pos 1") as info:
            transport.send(big)
        assert isinstance(info.value, Terminal)
        assert info.value.hint and "message.max.bytes" in info.value.hint


def test_a_topic_the_ledger_does_not_read_is_refused(cluster: MockCluster) -> None:
    settings = producer_settings(cluster.bootstrap, "test")
    with KafkaTransport(settings, "shop", topics=["shop.shop.customers"]) as transport:
        transport.send(record("customers", {"id": 1}, 0, 1))
        with pytest.raises(ConfigError, match="'shop.shop.orders', which the ledger does not"):
            transport.send(record("orders", {"id": 1}, 0, 2))
        transport.send(record("customers", None, 0, 3, kind="schema_change"))  # not the ledger's
        transport.flush()


def test_producer_settings_keep_the_guarantees() -> None:
    settings = producer_settings("b:9092", "icetide", {"acks": "-1", "linger.ms": "5"})
    assert settings["acks"] == "all" and settings["enable.idempotence"] == "true"
    assert settings["linger.ms"] == "5" and settings["partitioner"] == "murmur2_random"
    assert settings["bootstrap.servers"] == "b:9092"
    for key, value in [("acks", "1"), ("enable.idempotence", "false"), ("bootstrap.servers", "x")]:
        with pytest.raises(ConfigError) as info:
            producer_settings("b:9092", "icetide", {key: value})
        assert info.value.path == f'transport.producer["{key}"]'


def test_a_closed_transport_refuses_records(cluster: MockCluster) -> None:
    transport = KafkaTransport(producer_settings(cluster.bootstrap, "test"), "shop")
    transport.close()
    with pytest.raises(CaptureError, match="closed"):
        transport.send(record("customers", {"id": 1}, 0, 1))
