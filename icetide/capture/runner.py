"""Run capture for one source: read its log, hand records to the transport, save offsets.

The order of a checkpoint is what makes capture lose nothing: the transport makes every
record sent so far durable (:meth:`Transport.flush`), *then* the reader's committed
offset is saved, *then* the server is told it may free the log before it. A crash
anywhere in between replays from the previous saved offset — at-least-once, and the
merge's version guard makes the duplicates harmless.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from icetide.capture.errors import CaptureError
from icetide.capture.offsets import OffsetStore
from icetide.capture.record import CaptureRecord, ChangeReader, Heartbeat
from icetide.capture.transport import open_transport
from icetide.config.model import Config
from icetide.config.sections import SourceConfig
from icetide.faults import crash_point
from icetide.progress import Reporter
from icetide.sources.connect import mysql_settings, postgres_dsn
from icetide.state.store import state_store


@dataclass
class CaptureProgress:
    """What one capture run did, for progress lines and tests."""

    source: str
    records: int = 0
    checkpoints: int = 0
    offset: str = ""
    started: float = field(default_factory=time.monotonic)

    @property
    def rate(self) -> float:
        """Records per second since the start."""
        return self.records / max(time.monotonic() - self.started, 1e-9)


def offset_store(config: Config, source: SourceConfig) -> OffsetStore:
    """The durable offset of ``source`` in the pipeline's state location (``state:``, an
    object store a replaced machine finds it on; else ``state_dir``)."""
    file = state_store(config).file(source.offsets_file)
    return OffsetStore(file, source=str(source.name), source_type=source.type)


def open_reader(
    config: Config, source: SourceConfig, start: dict[str, Any] | None, *, follow: bool
) -> ChangeReader:
    """The change reader of ``source`` positioned at ``start`` (a saved offset).

    ``follow`` keeps reading as the log grows (with heartbeats when it is quiet);
    otherwise the reader stops at the current end of the log.
    """
    tables = [str(t.source) for t in config.source_tables(source)]
    heartbeat = source.heartbeat.total_seconds() if follow else None
    state = config.resolved_path(config.state_dir) / "capture"
    state.mkdir(parents=True, exist_ok=True)
    with_schema = config.transport.format != "json"  # the registry formats need it
    if source.type == "mysql":
        from icetide.capture.mysql.reader import BinlogOffset, BinlogReader

        return BinlogReader(
            mysql_settings(source),
            tables,
            start=BinlogOffset.from_dict(start) if start else None,
            name=str(source.name),
            server_id=source.server_id,
            blocking=follow,
            heartbeat_seconds=heartbeat,
            history=state / f"{source.name}.history.jsonl",
            include_schema=with_schema,
        )
    from icetide.capture.postgres.offset import LsnOffset
    from icetide.capture.postgres.reader import PgOutputReader

    return PgOutputReader(
        postgres_dsn(source),
        tables,
        start=LsnOffset.from_dict(start) if start else None,
        name=str(source.name),
        slot=str(source.slot),
        publication=str(source.publication),
        blocking=follow,
        heartbeat_seconds=heartbeat,
        include_schema=with_schema,
    )


def run_capture(
    config: Config,
    source: SourceConfig,
    *,
    follow: bool,
    from_now: bool = False,
    reporter: Reporter | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> CaptureProgress:
    """Capture ``source`` from its saved offset until the log ends (or for ever).

    Without a saved offset capture refuses to start, because the rows already in the
    tables would never reach the mirror; ``from_now`` starts at the log's current end
    instead, for tables that are empty or bootstrapped some other way.
    """
    report = (reporter or Reporter(lambda _: None)).report
    store = offset_store(config, source)
    saved = store.load()
    if saved is None and not from_now:
        raise CaptureError(
            f"source {source.name!r} has no saved offset ({store.path})",
            hint="run `icetide bootstrap` first: it copies the tables and records where "
            "capture starts; or pass --from-now to capture only changes made from now on",
        )
    progress = CaptureProgress(str(source.name))
    reader = open_reader(config, source, saved, follow=follow)
    last: dict[str, Any] | None = saved

    def checkpoint(transport: Any) -> None:
        nonlocal last
        transport.flush()
        crash_point("capture.after_flush")
        committed = reader.committed or getattr(reader, "start_offset", None)
        if committed is None or committed.to_dict() == last:
            return
        store.save(committed.to_dict(), position=committed.text)
        last = committed.to_dict()
        reader.acknowledge(committed)
        progress.checkpoints += 1
        progress.offset = committed.text
        report(
            "capture",
            f"capture {source.name}: {progress.records:,} events, at {committed.text} "
            f"({progress.rate:,.0f}/s)",
            source=str(source.name),
            events=progress.records,
            offset=committed.text,
        )

    reader.open()
    try:
        with open_transport(config, source) as transport:
            if saved is None:
                checkpoint(transport)  # --from-now: remember the start even if nothing comes
            for item in reader:
                if isinstance(item, CaptureRecord):
                    transport.send(item)
                    progress.records += 1
                if isinstance(item, Heartbeat) or transport.should_flush():
                    checkpoint(transport)
                if should_stop():
                    break
            checkpoint(transport)
    finally:
        reader.close()
    return progress
