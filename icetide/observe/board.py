"""The status board ``icetide run`` serves: per table, what the page shows, as JSON.

A :class:`~icetide.progress.Reporter` sink like the metrics: it keeps the newest
observation of each table (``observe`` records, see :mod:`icetide.observe.freshness`),
an hour of freshness samples for the chart, the last maintenance and merge, and the
supervised stages' restarts. :func:`icetide.observe.page.render_page` draws it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from icetide.progress import Progress

WINDOW_SECONDS = 3600.0


class StatusBoard:
    """What the status page shows, updated from progress records."""

    def __init__(self, pipeline: str, tables: list[str], window: float = WINDOW_SECONDS) -> None:
        self.pipeline = pipeline
        self.window = window
        self._lock = threading.Lock()
        self.tables: dict[str, dict[str, Any]] = {t: {"table": t} for t in tables}
        self.history: dict[str, deque[tuple[float, float | None]]] = {t: deque() for t in tables}
        self.stages: dict[str, dict[str, Any]] = {}
        self.started = time.time()

    def sink(self, record: Progress) -> None:
        """Take one progress record (a Reporter sink)."""
        with self._lock:
            now = time.time()
            stage = self.stages.setdefault(record.stage, {"restarts": 0})
            stage["last_message"] = record.message
            stage["last_at"] = now
            table = self.tables.get(record.table or "")
            figures = dict(record.figures)
            if record.stage == "observe" and table is not None:
                table.update(figures)
                samples = self.history[table["table"]]
                samples.append((now, figures.get("freshness_seconds")))
                while samples and samples[0][0] < now - self.window:
                    samples.popleft()
            elif record.stage == "maintain" and table is not None and "outcome" in figures:
                table["last_maintenance"] = {"at": now, **figures}
            elif record.stage == "merge" and table is not None and "seconds" in figures:
                table["last_merge"] = {"at": now, **figures}
            elif record.stage == "run" and figures.get("restarted"):
                failed = self.stages.setdefault(str(figures["restarted"]), {"restarts": 0})
                failed["restarts"] += 1
                failed["last_error"] = figures.get("error")

    def snapshot(self) -> dict[str, Any]:
        """Everything the page shows, JSON-ready."""
        with self._lock:
            return {
                "pipeline": self.pipeline,
                "now": time.time(),
                "started": self.started,
                "tables": [
                    {**info, "history": [list(s) for s in self.history[name]]}
                    for name, info in self.tables.items()
                ],
                "stages": {k: dict(v) for k, v in self.stages.items()},
            }
