"""The status board ``icetide run`` serves: per table, what the page shows, as JSON.

A :class:`~icetide.progress.Reporter` sink like the metrics: it keeps the newest
observation of each table (``observe`` records, see :mod:`icetide.observe.freshness`),
an hour of freshness samples for the chart, the last maintenance and merge, a failed
merge or maintenance and a schema change held for approval; and, from the supervisor,
every supervised stage with its state, listed before it has reported anything.
:meth:`StatusBoard.snapshot` orders the tables worst first and humanizes their figures
(:mod:`icetide.observe.display`), so the page only draws;
:func:`icetide.observe.page.render_page` is that page.

The snapshot's fields (``/status.json``, also docs/operations.md):

* ``pipeline``, ``now`` (Unix time), ``started``;
* ``counts``: ``tables`` (all), ``matching`` (the filter), ``shown`` (after the limit),
  and one count per verdict (``failing``, ``held``, ``stale``, ``ok``, ``unknown``);
* ``tables``: worst first, each with the raw figures of its last observation
  (``freshness_seconds``, ``sla_seconds``, ``breached``, ``lag_events``,
  ``ledger_snapshot``, ``watermark``, files, ``dead_letters``, schema version and
  phase …), ``verdict``, ``why`` (the failure or hold, else None), ``last_merge``,
  ``last_maintenance``, ``history`` ([Unix time, freshness] in whole seconds, one a minute
  over the last hour)
  and ``text``: the same figures for people;
* ``stages``: each supervised stage: ``name``, ``state`` (``idle``, ``running``,
  ``backing off``, ``failed``, ``stopped``), ``since``, ``restarts``, ``last_error``,
  ``retry_at``, ``last_message``, ``last_at`` and ``text``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from icetide.observe import display
from icetide.progress import Progress

WINDOW_SECONDS = 3600.0
CHART_POINTS = 60
"""Samples kept per table for the chart: one per ``window / CHART_POINTS`` at most (a
minute), so a thousand tables observed every second still send a small ``status.json``."""

STAGE_TASKS: Mapping[str, str] = {"ledger": "stream", "maintain": "maintenance"}
"""Progress stage → the ``icetide run`` task that reports it, where the names differ
(``capture`` records go to ``capture <source>``)."""

StageStates = Callable[[], list[dict[str, Any]]]


def task_of(record: Progress) -> str:
    """The supervised task a progress record comes from.

    >>> task_of(Progress("capture", "c", figures={"source": "shop"}))
    'capture shop'
    >>> task_of(Progress("ledger", "l")), task_of(Progress("merge", "m"))
    ('stream', 'merge')
    """
    if record.stage == "capture" and record.figures.get("source"):
        return f"capture {record.figures['source']}"
    return STAGE_TASKS.get(record.stage, record.stage)


class StatusBoard:
    """What the status page shows, updated from progress records.

    ``stages``: the supervisor's :meth:`~icetide.supervisor.Supervisor.states`; without
    it, the stages listed are the ones that reported. ``clock``: Unix time now (a
    benchmark builds an hour of history in a moment).
    """

    def __init__(
        self,
        pipeline: str,
        tables: list[str],
        window: float = WINDOW_SECONDS,
        stages: StageStates | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.pipeline = pipeline
        self.clock = clock
        self.window = window
        self.stage_states = stages
        self._lock = threading.Lock()
        self.tables: dict[str, dict[str, Any]] = {t: {"table": t} for t in tables}
        self.history: dict[str, deque[list[int | None]]] = {t: deque() for t in tables}
        """Per table: [Unix time, freshness], whole seconds, as ``status.json`` sends them
        (made once per sample, not once per request)."""
        self.stages: dict[str, dict[str, Any]] = {}
        self.started = clock()
        self._rows: dict[str, tuple[dict[str, Any], str]] = {}
        """Per table: its row and the row as JSON text, made again by each record that
        changes the table (by the stage reporting it, not by each request)."""
        for name in tables:
            self._remake(name)

    def sink(self, record: Progress) -> None:
        """Take one progress record (a Reporter sink)."""
        now = self.clock()
        with self._lock:
            stage = self.stages.setdefault(task_of(record), {"restarts": 0})
            stage["last_message"] = record.message
            stage["last_at"] = now
            table = self.tables.get(record.table or "")
            figures = dict(record.figures)
            if table is not None:
                self._table_record(record.stage, table, figures, now)
                self._remake(table["table"])
            elif record.stage == "run" and figures.get("restarted"):
                failed = self.stages.setdefault(str(figures["restarted"]), {"restarts": 0})
                failed["restarts"] += 1
                failed["last_error"] = figures.get("error")

    def _table_record(
        self, stage: str, table: dict[str, Any], figures: dict[str, Any], now: float
    ) -> None:
        failures: dict[str, str] = table.setdefault("failures", {})
        if stage == "observe":
            table.update(figures)
            table["observed"] = True
            held = table.get("held")
            version = figures.get("schema_version")
            if held and isinstance(version, int) and version > (held.get("version") or 0):
                table.pop("held")  # a newer version was applied since
            self._sample(table["table"], now, figures.get("freshness_seconds"))
        elif stage == "maintain" and "outcome" in figures:
            table["last_maintenance"] = {"at": now, **figures}
            if figures["outcome"] == "failed":
                failures["maintenance"] = str(figures.get("error") or "maintenance failed")
            else:
                failures.pop("maintenance", None)
        elif stage == "merge" and "failed" in figures:
            failures["merge"] = str(figures["failed"])
        elif stage == "merge" and "seconds" in figures:
            table["last_merge"] = {"at": now, **figures}
            failures.pop("merge", None)
        elif stage == "evolution":
            reason = figures.get("held") or figures.get("refused")
            if reason:
                table["held"] = {"reason": str(reason), "version": table.get("schema_version")}
            else:
                table.pop("held", None)  # a version applied

    def _sample(self, name: str, now: float, value: float | None) -> None:
        samples = self.history[name]
        step = self.window / CHART_POINTS
        point = [int(now), None if value is None else round(value)]
        if len(samples) >= 2 and (samples[-1][0] or 0) - (samples[-2][0] or 0) < step:
            samples[-1] = point  # the newest stays current; the others one step apart
        else:
            samples.append(point)
        while samples and (samples[0][0] or 0) < now - self.window:
            samples.popleft()

    def snapshot(self, pattern: str | None = None, limit: int | None = None) -> dict[str, Any]:
        """Everything the page shows, JSON-ready: the tables matching ``pattern``
        (:func:`~icetide.observe.display.matches`) worst first, at most ``limit``. The
        rows are shared with the board's cache: read them, do not change them."""
        head, shown = self._view(pattern, limit)
        return {**head, "tables": [row for row, _ in shown]}

    def encoded(self, pattern: str | None = None, limit: int | None = None) -> bytes:
        """:meth:`snapshot` as JSON. Each table's row was encoded when it last changed,
        not once per request: a thousand tables cost a sort and a join."""
        head, shown = self._view(pattern, limit)
        empty: list[str] = []
        text = _json({**head, "tables": empty})
        assert text.endswith('"tables":[]}')
        return (text[:-2] + ",".join(encoded for _, encoded in shown) + "]}").encode()

    def _remake(self, name: str) -> None:
        """Make table ``name``'s row again (with the lock held)."""
        row = {**self.tables[name], "history": list(self.history[name])}
        _judge(row)
        row["text"] = _table_text(row)
        self._rows[name] = (row, _json(row))

    def _view(
        self, pattern: str | None, limit: int | None
    ) -> tuple[dict[str, Any], list[tuple[dict[str, Any], str]]]:
        with self._lock:
            now = self.clock()
            rows = list(self._rows.values())
            reported = {k: dict(v) for k, v in self.stages.items()}
        counts = dict.fromkeys(display.VERDICTS, 0)
        for row, _ in rows:
            counts[row["verdict"]] += 1
        shown, matching = display.select(
            rows,
            lambda r: str(r[0]["table"]),
            lambda r: _rank(r[0]),
            pattern,
            limit,
        )
        numbers: dict[str, int] = {"tables": len(rows), "matching": matching, "shown": len(shown)}
        head: dict[str, Any] = {
            "pipeline": self.pipeline,
            "now": now,
            "started": self.started,
            "counts": {**numbers, **counts},
            "stages": self._stage_rows(reported, now),
        }
        return head, shown

    def _stage_rows(self, reported: dict[str, dict[str, Any]], now: float) -> list[dict[str, Any]]:
        if self.stage_states is None:
            states = [{"name": k, "state": None, **v} for k, v in reported.items() if k != "run"]
        else:
            states = []
            for state in self.stage_states():
                seen = reported.get(state["name"], {})
                keep = ("last_message", "last_at")
                states.append({**state, **{k: seen[k] for k in keep if k in seen}})
        for state in states:
            state["text"] = _stage_text(state, now)
        return states


def _rank(row: dict[str, Any]) -> tuple[int, float, str]:
    return display.rank_key(row["table"], row["verdict"], row.get("freshness_seconds"))


def _judge(row: dict[str, Any]) -> None:
    """Add a table row's ``verdict`` and ``why`` (:func:`~icetide.observe.display.verdict`)."""
    failures = row.pop("failures", None) or {}
    held = row.get("held")
    convergence_late = bool(row.get("convergence_breached"))
    state = display.verdict(
        failing=bool(failures),
        held=bool(held) or convergence_late,
        breached=bool(row.get("breached")),
        observed=bool(row.pop("observed", False)),
    )
    if failures:
        why: str | None = "; ".join(f"{stage} failed: {e}" for stage, e in failures.items())
    elif held:
        why = f"schema change held: {held['reason']}"
    elif convergence_late:
        why = "schema change over its convergence SLA"
    else:
        why = None
    row.update(verdict=state, why=why)


def _json(value: Any) -> str:
    # A fresh tree of plain values: no cycle to check for (twice as fast for the charts).
    return json.dumps(value, default=str, separators=(",", ":"), check_circular=False)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _clock(at: float) -> str:
    """A Unix time as the UTC time of day (the page says "UTC" once).

    >>> _clock(1796195930.7)
    '07:18:50'
    """
    return time.strftime("%H:%M:%S", time.gmtime(at))


def _table_text(row: dict[str, Any]) -> dict[str, Any]:
    fresh = row.get("freshness_seconds")
    sla = row.get("sla_seconds")
    dead = row.get("dead_letters") or {}
    took = row.get("phase_seconds") or {}
    maintenance = row.get("last_maintenance")
    return {
        "freshness": (
            "never merged"
            if fresh is None and row["verdict"] != "unknown"
            else display.duration(fresh)
        ),
        "sla": display.duration(sla) if sla else "-",
        "lag_events": display.count(row.get("lag_events")),
        "ledger_snapshot": display.short_id(row.get("ledger_snapshot")),
        "watermark": display.short_id(row.get("watermark")),
        # Whole, as text: a browser reads JSON numbers as doubles, exact to 2**53 only.
        "ledger_snapshot_id": _text(row.get("ledger_snapshot")),
        "watermark_id": _text(row.get("watermark")),
        "dead_letters": display.count(sum(int(n) for n in dead.values())) if dead else "0",
        "dead_letters_by_reason": {k: display.count(n) for k, n in dead.items()},
        "phase_seconds": {k: display.duration(v) for k, v in took.items() if v is not None},
        "data_files": display.count(row.get("data_files")),
        "delete_files": display.count(row.get("delete_files")),
        "snapshots": display.count(row.get("snapshots")),
        "last_maintenance": (
            f"{maintenance['outcome']} at {_clock(maintenance['at'])}" if maintenance else "-"
        ),
        "last_merge": (
            f"{display.count(row['last_merge'].get('events'))} events at "
            f"{_clock(row['last_merge']['at'])}"
            if row.get("last_merge")
            else "-"
        ),
    }


def _stage_text(state: dict[str, Any], now: float) -> str:
    """``idle for 12 s``, ``running for 3 s``, ``backing off, restart in 8 s``, ``failed``."""
    name = state.get("state")
    if name is None:
        return display.ago(now - state["last_at"]) if state.get("last_at") else "-"
    since = state.get("since")
    text = f"{name} for {display.duration(now - since)}" if since else str(name)
    if name == "backing off" and state.get("retry_at"):
        text = f"backing off, restart in {display.duration(max(0.0, state['retry_at'] - now))}"
    return text
