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

from typing import TYPE_CHECKING

from icetide.capture.transport.base import Clock, Roll, Transport

if TYPE_CHECKING:
    from icetide.config.model import Config
    from icetide.config.sections import SourceConfig

__all__ = ["Clock", "Roll", "Transport", "open_transport"]


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


def check_capture_free(config: Config, source: SourceConfig) -> None:
    """Refuse, with the terminal error capture itself would give, when another process
    already captures ``source`` into the ``files`` transport's landing folder (Kafka
    topics take any number of producers: nothing to check)."""
    if config.transport.type == "kafka":
        return
    from icetide.capture.transport.files import check_landing_free

    check_landing_free(config.resolved_path(config.transport.path), str(source.name))
