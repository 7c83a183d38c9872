"""Capture lag for ``icetide status``: per source, how far the saved offset is behind the
end of the server's change log.

* MySQL/MariaDB: bytes from the saved ``file:pos`` to the end of the binlog, summed over
  the files of ``SHOW BINARY LOGS`` (the rest of the saved file, then every later file);
* PostgreSQL: bytes of WAL between the slot's ``confirmed_flush_lsn`` and
  ``pg_current_wal_insert_lsn()``, the WAL the server has produced that capture has not
  acknowledged yet (the insert position: with ``synchronous_commit = off`` the write
  position trails a committed transaction).

A status report must not fail because a source is down: a server that cannot be asked
gives ``lag_bytes = None`` and a ``reason``, and the saved offset is shown all the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from icetide.config import Config, SourceConfig
from icetide.errors import IcetideError
from icetide.sources.connect import connect_mysql, connect_postgres
from icetide.sources.errors import SourceUnavailableError

CONNECT_TIMEOUT = 5
"""Seconds a status report waits for a source before calling its lag unknown."""


@dataclass(frozen=True)
class CaptureLag:
    """One source's capture position against its server's current end of log."""

    source: str
    type: str
    saved_offset: str | None
    """The saved offset for people (``mysql-bin.000008:339``, ``0/16B3748``); ``None``
    when capture never saved one."""
    saved_at: str | None
    server_position: str | None
    """The end of the server's log now; ``None`` when unknown."""
    lag_bytes: int | None
    """``None`` when unknown; ``reason`` says why."""
    reason: str | None = None
    state: str = field(init=False)
    """``caught up``, ``behind`` or ``unknown`` (a field, so JSON output carries it)."""

    def __post_init__(self) -> None:
        if self.lag_bytes is None:
            state = "unknown"
        else:
            state = "caught up" if self.lag_bytes == 0 else "behind"
        object.__setattr__(self, "state", state)


def binlog_lag(saved_file: str, saved_pos: int, logs: Sequence[tuple[str, int]]) -> int | None:
    """Bytes from ``saved_file:saved_pos`` to the end of ``logs`` (``SHOW BINARY LOGS``:
    name and size, oldest first); ``None`` when the saved file is not among them.

    >>> logs = [("bin.000007", 1164605), ("bin.000008", 339)]
    >>> binlog_lag("bin.000008", 339, logs), binlog_lag("bin.000007", 1164561, logs)
    (0, 383)
    >>> binlog_lag("bin.000006", 4, logs) is None
    True
    """
    names = [name for name, _ in logs]
    if saved_file not in names:
        return None
    index = names.index(saved_file)
    rest = max(logs[index][1] - saved_pos, 0)
    return rest + sum(size for _, size in logs[index + 1 :])


def source_lag(config: Config, source: SourceConfig) -> CaptureLag:
    """The capture lag of ``source``; never raises for an unreachable server."""
    from icetide.capture.runner import offset_store

    empty = CaptureLag(str(source.name), source.type, None, None, None, None)
    try:
        saved = offset_store(config, source).read()
    except IcetideError as exc:
        return replace(empty, reason=exc.message)
    if saved is not None:
        empty = replace(empty, saved_offset=saved.position or None, saved_at=saved.saved_at)
    offset = saved.offset if saved is not None else None
    try:
        if source.type == "mysql":
            return _mysql_lag(source, empty, offset)
        return _postgres_lag(source, empty)
    except Exception as exc:  # noqa: BLE001 - any failure to ask the server means "unknown"
        where = f"{source.host}:{source.resolved_port}"
        text = exc.detail if isinstance(exc, SourceUnavailableError) else str(exc).strip()
        detail = text.splitlines()[0] if text else type(exc).__name__
        return replace(empty, reason=f"cannot ask the server at {where}: {detail}")


def _mysql_lag(source: SourceConfig, lag: CaptureLag, offset: dict[str, Any] | None) -> CaptureLag:
    with (
        connect_mysql(source, database=None, connect_timeout=CONNECT_TIMEOUT) as conn,
        conn.cursor() as cur,
    ):
        cur.execute("SHOW BINARY LOGS")
        logs = [(str(row[0]), int(row[1])) for row in cur.fetchall()]
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
    if row is None or not logs:
        return replace(lag, reason="the server writes no binary log")
    current_file, current_pos = str(row[0]), int(row[1])
    # The newest file's size in SHOW BINARY LOGS can trail the master position.
    logs = [(n, current_pos if n == current_file else size) for n, size in logs]
    lag = replace(lag, server_position=f"{current_file}:{current_pos}")
    file, pos = (offset or {}).get("file"), (offset or {}).get("pos")
    if offset is None:
        return replace(lag, reason="capture has saved no offset yet")
    if not isinstance(file, str) or not isinstance(pos, int):
        return replace(lag, reason="the saved offset is a GTID state without a binlog file")
    # Same notation as server_position (the saved text also carries the GTID state).
    lag = replace(lag, saved_offset=f"{file}:{pos}")
    found = binlog_lag(file, pos, logs)
    if found is None:
        return replace(lag, reason=f"{file} is no longer on the server (purged)")
    return replace(lag, lag_bytes=found)


def _postgres_lag(source: SourceConfig, lag: CaptureLag) -> CaptureLag:
    from icetide.capture.postgres.slot import slot_status
    from icetide.events.position import format_lsn

    conn = connect_postgres(source, connect_timeout=CONNECT_TIMEOUT)
    try:
        status = slot_status(conn, str(source.slot))
    finally:
        conn.close()
    if status is None:
        return replace(lag, reason=f"the server has no replication slot {source.slot!r}")
    lag = replace(lag, server_position=format_lsn(status.current_lsn))
    if status.confirmed_flush_lsn is None:
        return replace(lag, reason=f"slot {source.slot!r} has confirmed nothing yet")
    return replace(lag, lag_bytes=status.lag_bytes)


def capture_lags(config: Config) -> dict[str, CaptureLag]:
    """The capture lag of every configured source, by source name."""
    return {str(s.name): source_lag(config, s) for s in config.sources}


def capture_lag_by_table(config: Config) -> dict[str, CaptureLag]:
    """The capture lag of the source that captures each table, by table name; a table no
    source captures (events from an external Debezium) has no entry."""
    lags = capture_lags(config)
    return {t.name: lags[str(s.name)] for s in config.sources for t in config.source_tables(s)}


def render_capture_lags(lags: Iterable[CaptureLag | None]) -> str:
    """One line per source (each once), for the text status; empty without sources."""
    seen: dict[str, CaptureLag] = {}
    for lag in lags:
        if lag is not None:
            seen.setdefault(lag.source, lag)
    if not seen:
        return ""
    rows = [("source", "saved offset", "server position", "capture lag")]
    for lag in seen.values():
        if lag.lag_bytes is None:
            amount = f"unknown ({lag.reason or 'no reason given'})"
        else:
            amount = f"{lag.lag_bytes:,} bytes ({lag.state})"
        rows.append((lag.source, lag.saved_offset or "-", lag.server_position or "unknown", amount))
    # Columns as wide as their widest cell: offsets with a GTID are long.
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(3)]
    lines = [
        "".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + row[3] for row in rows
    ]
    return "\n".join(lines)
