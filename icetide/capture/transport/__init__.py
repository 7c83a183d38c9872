"""Where capture puts its records: landing files or Kafka topics, made durable on flush.

A :class:`Transport` takes every :class:`~icetide.capture.record.CaptureRecord` a reader
yields (:meth:`~Transport.send`), and makes all of them durable in one step
(:meth:`~Transport.flush`). Capture saves the reader's offset only after a flush returns,
so a record is never "consumed" before the ledger can read it::

    with open_transport(config, source) as transport:
        for item in reader:
            if isinstance(item, CaptureRecord):
                transport.send(item)
            if isinstance(item, Heartbeat) or transport.should_flush():
                transport.flush()            # everything sent is durable now
                offsets.save(reader.committed)
                reader.acknowledge(reader.committed)

:meth:`~Transport.should_flush` says when the buffered records are big enough
(``transport.roll_bytes``) or old enough (``transport.roll_interval``). A failed flush
raises a :class:`~icetide.capture.errors.CaptureError` and the transport stays failed:
every later call raises the same error, so no later flush can succeed over records that
were lost. Close it and start capture again from the saved offset.

Transports: :class:`~icetide.capture.transport.files.FilesTransport` (newline-delimited
JSON files in the landing folder) and
:class:`~icetide.capture.transport.kafka.KafkaTransport` (one topic per table).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self

from icetide.capture.record import CaptureRecord

if TYPE_CHECKING:
    from icetide.config.model import Config
    from icetide.config.sections import SourceConfig

Clock = Callable[[], float]


class Transport(Protocol):
    """A destination for capture records that makes them durable on :meth:`flush`."""

    def send(self, record: CaptureRecord) -> None:
        """Buffer ``record``; it is durable only once :meth:`flush` returns."""
        ...

    def should_flush(self) -> bool:
        """The buffered records reached the roll size or the roll age."""
        ...

    def flush(self) -> None:
        """Make every record sent so far durable; with nothing buffered, do nothing.

        Raises :class:`~icetide.capture.errors.CaptureError` when that cannot be done.
        """
        ...

    def close(self) -> None:
        """Release the transport; records sent after the last flush are dropped."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...


class Roll:
    """When buffered records are due to be made durable: by size or by age.

    The age counts from the first record buffered since the last flush, so a quiet
    source does not flush empty batches and a trickle is durable within ``max_age``.

    >>> now = [0.0]
    >>> roll = Roll(max_bytes=100, max_age=5.0, clock=lambda: now[0])
    >>> roll.add(60); roll.due
    False
    >>> now[0] = 5.0; roll.due
    True
    >>> roll.reset(); roll.add(100); roll.due
    True
    """

    def __init__(self, *, max_bytes: int, max_age: float, clock: Clock = time.monotonic) -> None:
        if max_bytes < 1 or max_age <= 0:
            raise ValueError("max_bytes and max_age must be positive")
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.clock = clock
        self.bytes = 0
        self.records = 0
        self._first_at: float | None = None

    def add(self, size: int) -> None:
        """Count one buffered record of ``size`` bytes."""
        if self._first_at is None:
            self._first_at = self.clock()
        self.bytes += size
        self.records += 1

    @property
    def due(self) -> bool:
        """Big enough or old enough to flush."""
        if self._first_at is None:
            return False
        return self.bytes >= self.max_bytes or self.clock() - self._first_at >= self.max_age

    def reset(self) -> None:
        """Nothing is buffered any more."""
        self.bytes = 0
        self.records = 0
        self._first_at = None


def open_transport(config: Config, source: SourceConfig) -> Transport:
    """The transport ``config.transport`` describes, for capture of ``source``.

    ``files`` writes into ``transport.path``; ``kafka`` produces to
    ``<source.name>.<db>.<table>`` topics on ``transport.bootstrap_servers``.
    """
    settings = config.transport
    if settings.type == "kafka":
        from icetide.capture.transport.kafka import KafkaTransport

        return KafkaTransport.from_config(config, source)
    from icetide.capture.transport.encode import encoder_for
    from icetide.capture.transport.files import FilesTransport

    return FilesTransport(
        config.resolved_path(settings.path),
        str(source.name),
        roll_bytes=settings.roll_bytes,
        roll_interval=settings.roll_interval.total_seconds(),
        encoder=encoder_for(settings),
    )
