"""Capture into Kafka: one topic per table, keyed by primary key, as Debezium does.

Each change record becomes one message on ``<source>.<db>.<table>`` (characters Kafka
does not allow in topic names become ``_``, as in Debezium) with the primary key as JSON
for the key (``{"id":1}``; no key for truncates and tables without one) and the envelope
JSON for the value. Schema-change records go to Debezium's schema-change topic
``<source>``, keyed by ``{"databaseName": db}``; the ledger does not need to read it.

Durability: the producer is idempotent with ``acks=all`` (no duplicates from retries,
order kept per partition), and :meth:`KafkaTransport.flush` waits until every message
sent is acknowledged by all in-sync replicas. If any delivery failed it raises a
:class:`~icetide.capture.errors.CaptureError` (transient) and stays failed, so capture
never saves an offset past a lost message; the next run replays from the saved offset.

Keys are partitioned with ``murmur2_random`` — the Java client's partitioner — so a key
lands on the partition Debezium or any Java producer would pick, and one key's changes
stay in order on one partition.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from icetide.capture.errors import CaptureError
from icetide.capture.record import CaptureRecord
from icetide.capture.transport.base import Clock, Roll
from icetide.capture.transport.encode import ValueEncoder, encoder_for
from icetide.errors import ConfigError, Terminal, Transient

if TYPE_CHECKING:
    from icetide.config.model import Config
    from icetide.config.sections import SourceConfig

FIXED = {"enable.idempotence": "true", "acks": "all"}
"""Producer settings capture's guarantees rest on; ``transport.producer`` cannot change them."""

DEFAULTS = {"partitioner": "murmur2_random"}
"""Producer settings ``transport.producer`` may change."""

_LIBRDKAFKA_MESSAGE_TIMEOUT_MS = 300_000
_TOPIC_CHAR = re.compile(r"[^A-Za-z0-9._-]")
_MAX_TOPIC = 249


class KafkaDeliveryError(CaptureError, Transient):
    """Kafka did not acknowledge every message sent since the last flush."""


class KafkaRecordError(CaptureError, Terminal):
    """Kafka refuses a record for good (too large, invalid topic)."""


def topic_name(*parts: str) -> str:
    """Debezium's topic name: the parts joined by ``.``, other characters made ``_``.

    >>> topic_name("shop", "sales", "order lines")
    'shop.sales.order_lines'
    """
    return ".".join(_TOPIC_CHAR.sub("_", part) for part in parts)


def producer_settings(
    bootstrap_servers: str, client_id: str, options: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The librdkafka producer config: defaults, then ``options``, then :data:`FIXED`.

    Raises ``ConfigError`` when ``options`` would weaken the guarantees (acks,
    idempotence) or repeat ``bootstrap.servers``.

    >>> producer_settings("k:9092", "icetide-shop", {"linger.ms": "50"})["acks"]
    'all'
    """
    options = dict(options or {})
    for key, wanted in FIXED.items():
        given = options.pop(key, None)
        allowed = {wanted, "-1"} if key == "acks" else {wanted}
        if given is not None and str(given).lower() not in allowed:
            raise ConfigError(
                f"must be {wanted}: capture saves offsets only after every message is "
                "acknowledged by all in-sync replicas, exactly once",
                path=f'transport.producer["{key}"]',
                hint=f"remove {key} from transport.producer",
            )
    if "bootstrap.servers" in options:
        raise ConfigError(
            "the brokers are set by transport.bootstrap_servers",
            path='transport.producer["bootstrap.servers"]',
            hint="remove it from transport.producer",
        )
    return {
        **DEFAULTS,
        "client.id": client_id,
        **options,
        "bootstrap.servers": bootstrap_servers,
        **FIXED,
    }


class KafkaTransport:
    """Capture records as Kafka messages; :meth:`flush` waits for every acknowledgement.

    ``settings`` is the librdkafka producer config (see :func:`producer_settings`).
    ``topics`` / ``topic_pattern`` are what the ledger subscribes to: when given, a change
    record for a topic outside them is refused (``ConfigError``) instead of being written
    where nothing reads it.
    """

    def __init__(
        self,
        settings: Mapping[str, Any],
        source: str,
        *,
        roll_bytes: int = 16 * 2**20,
        roll_interval: float = 5.0,
        topics: Sequence[str] = (),
        topic_pattern: str | None = None,
        clock: Clock = time.monotonic,
        encoder: ValueEncoder | None = None,
    ) -> None:
        try:
            from confluent_kafka import Producer
        except ImportError as error:  # pragma: no cover - depends on the install
            raise CaptureError(
                "the kafka transport needs the confluent-kafka package",
                hint="pip install 'icetide[capture]'",
            ) from error
        self.source = source
        self._encoder = encoder or ValueEncoder()
        self._roll = Roll(max_bytes=roll_bytes, max_age=roll_interval, clock=clock)
        timeout_ms = settings.get("message.timeout.ms", settings.get("delivery.timeout.ms"))
        self._flush_timeout = int(timeout_ms or _LIBRDKAFKA_MESSAGE_TIMEOUT_MS) / 1000 + 10
        self._subscribed = set(topics)
        self._pattern = _compile(topic_pattern)
        self._checked: dict[str, bool] = {}
        self._failed: CaptureError | None = None
        self._closed = False
        self._lost = 0
        self._first_loss: str | None = None
        self._fatal: str | None = None
        self._last_error: str | None = None
        try:
            self._producer = Producer({**settings, "error_cb": self._on_error})
        except Exception as error:  # KafkaException or ValueError for a bad property
            raise ConfigError(
                f"cannot create the Kafka producer: {error}", path="transport.producer"
            ) from error

    @classmethod
    def from_config(cls, config: Config, source: SourceConfig) -> KafkaTransport:
        """The transport ``config.transport`` describes, for ``source``."""
        transport = config.transport
        settings = producer_settings(
            str(transport.bootstrap_servers or ""),
            f"icetide-capture-{config.pipeline}-{source.name}",
            transport.producer_plain(),
        )
        return cls(
            settings,
            str(source.name),
            roll_bytes=transport.roll_bytes,
            roll_interval=transport.roll_interval.total_seconds(),
            topics=[str(t) for t in transport.topics],
            topic_pattern=str(transport.topic_pattern) if transport.topic_pattern else None,
            encoder=encoder_for(transport),
        )

    # -- Transport ---------------------------------------------------------------------

    def send(self, record: CaptureRecord) -> None:
        """Produce ``record`` to its table's topic (asynchronously; see :meth:`flush`)."""
        self._check_usable()
        if record.kind == "schema_change":
            topic = topic_name(self.source)
            key: bytes | None = _json_key({"databaseName": record.db})
        else:
            topic = topic_name(self.source, record.db, record.table)
            self._check_subscribed(topic, record)
            text = record.key_json()
            key = None if text is None else text.encode("utf-8")
        value = self._encoder.encode(record, topic)
        self._produce(topic, key, value, record)
        self._roll.add(len(value) + len(key or b""))

    def should_flush(self) -> bool:
        """Unacknowledged messages reached ``roll_bytes``, or the oldest ``roll_interval``."""
        return self._failed is None and self._roll.due

    def flush(self) -> None:
        """Wait until Kafka acknowledged every message sent; raise if any was not."""
        self._check_usable()
        sent = self._roll.records
        if sent == 0:
            return
        remaining = self._producer.flush(self._flush_timeout)
        if self._fatal is not None:
            raise self._fail(f"the Kafka producer failed: {self._fatal}")
        if self._lost or remaining:
            details = [f"first: {self._first_loss}"] if self._first_loss else []
            if remaining:
                details.append(f"{remaining} still unanswered after {self._flush_timeout:.0f}s")
            if self._last_error:
                details.append(f"last client error: {self._last_error}")
            raise self._fail(
                f"Kafka did not acknowledge {self._lost + remaining} of {sent} messages of "
                f"source {self.source!r} ({'; '.join(details)})"
            )
        self._roll.reset()
        self._last_error = None

    def close(self) -> None:
        """Drop messages not yet acknowledged (they will be replayed) and stop the client."""
        if self._closed:
            return
        self._closed = True
        # Unacknowledged messages were never covered by a saved offset: capture replays
        # them, so waiting out their delivery timeout here would only delay the exit.
        self._producer.purge()
        self._producer.flush(0)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------

    def _produce(self, topic: str, key: bytes | None, value: bytes, record: CaptureRecord) -> None:
        from confluent_kafka import KafkaError, KafkaException

        deadline = time.monotonic() + self._flush_timeout
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, on_delivery=self._delivered)
                break
            except BufferError:
                # The client's queue is full: let it deliver some, then try again.
                if time.monotonic() > deadline:
                    raise self._fail(
                        f"the Kafka producer queue stayed full for {self._flush_timeout:.0f}s"
                    ) from None
                self._producer.poll(0.1)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                code = error.code() if isinstance(error, KafkaError) else None
                where = f"{record.qualified} at {record.position.text} (topic {topic})"
                if code == KafkaError.MSG_SIZE_TOO_LARGE:
                    self._failed = KafkaRecordError(
                        f"the change of {where} is {len(value):,} bytes, more than Kafka "
                        f"accepts: {error}",
                        hint="raise message.max.bytes in transport.producer and the "
                        "topic's max.message.bytes on the brokers, then start capture again",
                    )
                    raise self._failed from exc
                raise self._fail(f"cannot produce the change of {where}: {exc}") from exc
        self._producer.poll(0)

    def _delivered(self, error: Any, message: Any) -> None:
        """Delivery report callback, run by librdkafka from poll()/flush()."""
        if error is None:
            return
        self._lost += 1
        if self._first_loss is None:
            key = message.key()
            shown = key.decode("utf-8", "replace") if isinstance(key, bytes) else "(no key)"
            self._first_loss = f"topic {message.topic()} key {shown}: {error.str()}"

    def _on_error(self, error: Any) -> None:
        """Client-level error callback: fatal errors end the producer, others are news."""
        if error.fatal():
            self._fatal = error.str()
        self._last_error = error.str()

    def _check_subscribed(self, topic: str, record: CaptureRecord) -> None:
        if len(topic) > _MAX_TOPIC:
            raise KafkaRecordError(
                f"topic name for {record.qualified} is longer than {_MAX_TOPIC} characters",
                hint="use a shorter source name",
            )
        if not self._subscribed and self._pattern is None:
            return
        read = self._checked.get(topic)
        if read is None:
            read = topic in self._subscribed or bool(
                self._pattern is not None and self._pattern.fullmatch(topic)
            )
            self._checked[topic] = read
        if not read:
            raise ConfigError(
                f"capture of {record.qualified} writes topic {topic!r}, which the ledger "
                "does not read",
                path="transport.topic_pattern" if self._pattern else "transport.topics",
                hint=f"add {topic!r} to transport.topics, or use a topic_pattern that matches it",
            )

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise self._failed
        if self._closed:
            raise CaptureError(f"the Kafka transport of {self.source!r} is closed")

    def _fail(self, message: str) -> CaptureError:
        self._failed = KafkaDeliveryError(
            message,
            hint="capture stops without saving its offset; once Kafka is reachable, start "
            "capture again: it resumes from the last saved offset",
        )
        return self._failed


def _json_key(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _compile(pattern: str | None) -> re.Pattern[str] | None:
    """The ledger's topic regex (Java syntax), when Python reads it the same way."""
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error:
        return None
