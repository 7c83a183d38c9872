"""Prometheus metrics, fed by the one structured :class:`~icetide.progress.Reporter`.

Every stage already reports what it did as :class:`~icetide.progress.Progress` records
with figures; :meth:`Metrics.sink` is one more sink beside the stderr one, turning those
figures into metrics, so no stage calls the metrics itself. ``serve`` exposes them over
HTTP at ``/metrics`` (``--metrics-port`` of the long-running commands); ``icetide run``
serves its status page from the same server.

Records read (stage → figures):

* ``capture``: ``source``, ``events`` (the run's running total);
* ``ledger``: ``events`` {table: n}, ``dead_letters_by_table`` {table: {reason: n}};
* ``merge``: ``events``, ``seconds``, ``dead_letters`` (key changes it dead-letters);
* ``maintain``: ``outcome``, ``seconds``, ``<kind>_data_files`` … ;
* ``observe``: a :class:`~icetide.observe.freshness.TableHealth` as figures (freshness,
  lag, files, and the schema version and phase with the time to each phase);
* ``run``: ``restarted`` (a supervised stage restarted after failing).

>>> from icetide.progress import Reporter
>>> metrics = Metrics()
>>> Reporter(metrics.sink).report("merge", "m", table="t", events=5, seconds=0.5)
>>> metrics.value("icetide_events_merged_total", table="t")
5.0
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from icetide.observe.convergence import PHASES
from icetide.progress import Progress

_MERGE_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)


class Metrics:
    """The metrics of one command run, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.captured = Counter(
            "icetide_events_captured",
            "Change events captured from a source log",
            ["source"],
            registry=r,
        )
        self.ledgered = Counter(
            "icetide_events_ledgered", "Events appended to a table's ledger", ["table"], registry=r
        )
        self.dead_letters = Counter(
            "icetide_dead_letters",
            "Events dead-lettered, by table ('' when unrouted), stage and reason",
            ["table", "stage", "reason"],
            registry=r,
        )
        self.merged = Counter(
            "icetide_events_merged", "Ledger events merged into a base table", ["table"], registry=r
        )
        self.merge_seconds = Histogram(
            "icetide_merge_duration_seconds",
            "Duration of one table's merge",
            ["table"],
            buckets=_MERGE_BUCKETS,
            registry=r,
        )
        self.lag = Gauge(
            "icetide_lag_events", "Ledger events not merged yet", ["table"], registry=r
        )
        self.freshness = Gauge(
            "icetide_freshness_seconds",
            "Now minus the source commit time of the newest merged event",
            ["table"],
            registry=r,
        )
        self.sla = Gauge(
            "icetide_freshness_sla_seconds", "The table's freshness SLA", ["table"], registry=r
        )
        self.breached = Gauge(
            "icetide_freshness_sla_breached", "1 while the SLA is breached", ["table"], registry=r
        )
        self.watermark = Gauge(
            "icetide_merge_watermark_snapshot",
            "Ledger snapshot merged up to",
            ["table"],
            registry=r,
        )
        self.data_files = Gauge(
            "icetide_data_files",
            "Data files of the current snapshot",
            ["table", "kind"],
            registry=r,
        )
        self.delete_files = Gauge(
            "icetide_delete_files",
            "Delete files of the current snapshot",
            ["table", "kind"],
            registry=r,
        )
        self.snapshots = Gauge(
            "icetide_snapshots_retained", "Snapshots the table keeps", ["table", "kind"], registry=r
        )
        self.maintenance = Counter(
            "icetide_maintenance_runs",
            "Maintenance runs by outcome",
            ["table", "outcome"],
            registry=r,
        )
        self.maintenance_seconds = Gauge(
            "icetide_maintenance_last_seconds",
            "Duration of the last maintenance",
            ["table"],
            registry=r,
        )
        self.maintenance_time = Gauge(
            "icetide_maintenance_last_timestamp_seconds",
            "When the last maintenance ended (Unix time)",
            ["table"],
            registry=r,
        )
        self.schema_version = Gauge(
            "icetide_schema_version", "The table's current schema version", ["table"], registry=r
        )
        self.schema_phase = Gauge(
            "icetide_schema_phase",
            "1 for the phase the table's latest schema change is in (schema, code, data, "
            "converged), 0 for the others",
            ["table", "phase"],
            registry=r,
        )
        self.phase_seconds = Gauge(
            "icetide_schema_phase_seconds",
            "Seconds from the latest schema change at the source to the end of each phase "
            "(detected, schema, code, data)",
            ["table", "phase"],
            registry=r,
        )
        self.convergence_breached = Gauge(
            "icetide_schema_convergence_sla_breached",
            "1 while the latest schema change is taking longer than schedule.convergence_sla",
            ["table"],
            registry=r,
        )
        self.restarts = Counter(
            "icetide_stage_restarts",
            "Supervised stages restarted after failing",
            ["stage"],
            registry=r,
        )
        self._captured_seen: dict[str, float] = {}
        self._lock = threading.Lock()
        self._handlers: dict[str, Callable[[Progress], None]] = {
            "capture": self._capture,
            "ledger": self._ledger,
            "merge": self._merge,
            "maintain": self._maintain,
            "observe": self._observe,
            "run": self._run,
        }

    # -- the Reporter sink -------------------------------------------------------------
    def sink(self, record: Progress) -> None:
        """Take one progress record (a :class:`~icetide.progress.Reporter` sink)."""
        handler = self._handlers.get(record.stage)
        if handler is not None:
            with self._lock:
                handler(record)

    def _capture(self, record: Progress) -> None:
        source = str(record.figures.get("source", ""))
        total = _number(record.figures.get("events"))
        if total is None:
            return
        seen = self._captured_seen.get(source, 0.0)
        if total > seen:  # the figure is the run's running total
            self.captured.labels(source).inc(total - seen)
        self._captured_seen[source] = max(seen, total)

    def _ledger(self, record: Progress) -> None:
        events = record.figures.get("events")
        if isinstance(events, Mapping):
            for table, n in events.items():
                if n:
                    self.ledgered.labels(str(table)).inc(float(n))
        dead = record.figures.get("dead_letters_by_table")
        if isinstance(dead, Mapping):
            for table, reasons in dead.items():
                for reason, n in (reasons or {}).items():
                    self.dead_letters.labels(str(table), "ledger", str(reason)).inc(float(n))

    def _merge(self, record: Progress) -> None:
        table = record.table or ""
        figures = record.figures
        if "dead_letters" in figures:
            n = _number(figures["dead_letters"]) or 0.0
            self.dead_letters.labels(table, "merge", "unavailable_value_lost").inc(n)
            return
        events = _number(figures.get("events"))
        seconds = _number(figures.get("seconds"))
        if events is None or seconds is None:
            return
        self.merged.labels(table).inc(events)
        if events:
            self.merge_seconds.labels(table).observe(seconds)

    def _maintain(self, record: Progress) -> None:
        table = record.table or ""
        figures = record.figures
        outcome = figures.get("outcome")
        if outcome is None:
            return
        self.maintenance.labels(table, str(outcome)).inc()
        self.maintenance_seconds.labels(table).set(_number(figures.get("seconds")) or 0.0)
        self.maintenance_time.labels(table).set_to_current_time()
        for kind in ("base", "ledger", "dead_letter"):
            for suffix, gauge in (
                ("data_files", self.data_files),
                ("delete_files", self.delete_files),
                ("snapshots", self.snapshots),
            ):
                value = _number(figures.get(f"{kind}_{suffix}"))
                if value is not None:
                    gauge.labels(table, kind).set(value)

    def _observe(self, record: Progress) -> None:
        table = record.table or ""
        f = record.figures
        self.lag.labels(table).set(_number(f.get("lag_events")) or 0.0)
        freshness = _number(f.get("freshness_seconds"))
        if freshness is not None:
            self.freshness.labels(table).set(freshness)
        sla = _number(f.get("sla_seconds"))
        if sla is not None:
            self.sla.labels(table).set(sla)
            self.breached.labels(table).set(1.0 if f.get("breached") else 0.0)
        watermark = _number(f.get("watermark"))
        if watermark is not None:
            self.watermark.labels(table).set(watermark)
        for key, gauge in (
            ("data_files", self.data_files),
            ("delete_files", self.delete_files),
            ("snapshots", self.snapshots),
        ):
            value = _number(f.get(key))
            if value is not None:
                gauge.labels(table, "base").set(value)

        version = _number(f.get("schema_version"))
        if version is not None:
            self.schema_version.labels(table).set(version)
        phase = f.get("schema_phase")
        if phase in PHASES:
            for name in PHASES:
                self.schema_phase.labels(table, name).set(1.0 if name == phase else 0.0)
            self.convergence_breached.labels(table).set(
                1.0 if f.get("convergence_breached") else 0.0
            )
        took = f.get("phase_seconds")
        if isinstance(took, Mapping):
            for name, seconds in took.items():
                value = _number(seconds)
                if value is not None:
                    self.phase_seconds.labels(table, str(name)).set(value)

    def _run(self, record: Progress) -> None:
        stage = record.figures.get("restarted")
        if stage:
            self.restarts.labels(str(stage)).inc()

    # -- reading and serving -------------------------------------------------------------
    def value(self, name: str, **labels: str) -> float | None:
        """One sample's value (tests and the status page)."""
        return self.registry.get_sample_value(name, labels)

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


Route = Callable[[Mapping[str, str]], tuple[bytes, str]]
"""A page: its query parameters (the first value of each) → body and content type; a
ValueError is a bad request (400, its message the reason)."""


class MetricsServer:
    """A small HTTP server: ``/metrics``, plus any routes added (the status page)."""

    def __init__(self, metrics: Metrics, port: int, host: str = "127.0.0.1") -> None:
        self.routes: dict[str, Route] = {
            "/metrics": lambda query: (metrics.exposition(), CONTENT_TYPE_LATEST)
        }
        routes = self.routes

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server API)
                url = urlsplit(self.path)
                route = routes.get(url.path)
                if route is None:
                    self.send_error(404)
                    return
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                try:
                    body, content_type = route(query)
                except ValueError as exc:
                    self.send_error(400, str(exc))
                    return
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # requests are not progress

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="icetide-metrics", daemon=True
        )

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self.server.server_address[1])

    def start(self) -> MetricsServer:
        """Serve in a daemon thread."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        self.server.shutdown()
        self.server.server_close()
