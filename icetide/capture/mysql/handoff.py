"""The MySQL/MariaDB side of a bootstrap's hand-off to capture: the low watermark.

A bootstrap records the binlog position *before* it reads any row and makes it
capture's start offset; rows it copies are stamped with that position. Every change
after it has a larger position and carries the whole row (binlog ``FULL`` image), so the
merge's version guard lets it replace whatever the copy read (see
:mod:`icetide.bootstrap`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icetide.capture.errors import CaptureError
from icetide.config.sections import SourceConfig
from icetide.events.position import Position, binlog_position
from icetide.sources.connect import connect_mysql


@dataclass(frozen=True)
class Watermark:
    """The low watermark: capture's start offset and the position rows are stamped with."""

    offset: dict[str, Any]
    position: Position


def mysql_watermark(source: SourceConfig) -> Watermark:
    """The binlog position now: MariaDB's consistent-snapshot position, else the master's.

    ``binlog_snapshot_file``/``_position`` (MariaDB) are taken atomically with a
    consistent snapshot; MySQL's ``SHOW MASTER STATUS`` is read before any row, which is
    all the low-watermark argument needs.
    """
    conn = connect_mysql(source, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
            status = {str(k): str(v) for k, v in cur.fetchall()}
            file, pos = status.get("Binlog_snapshot_file"), status.get("Binlog_snapshot_position")
            if not file:
                cur.execute("SHOW MASTER STATUS")
                row = cur.fetchone()
                if row is None:
                    raise CaptureError(
                        f"source {source.name!r} has no binary log",
                        hint="enable log_bin (see `icetide capture`'s settings check)",
                    )
                file, pos = str(row[0]), str(row[1])
            cur.execute("COMMIT")
    finally:
        conn.close()
    offset = {"file": file, "pos": int(str(pos)), "gtid": None}
    return Watermark(offset, binlog_position(str(file), int(str(pos)), 0))
