"""The metrics adapter turns progress records into Prometheus samples; served over HTTP."""

from __future__ import annotations

import urllib.request

from icetide.observe.board import StatusBoard
from icetide.observe.convergence import PHASES
from icetide.observe.metrics import Metrics, MetricsServer
from icetide.progress import Reporter


def test_progress_records_become_metrics_and_are_served() -> None:
    metrics = Metrics()
    board = StatusBoard("p", ["orders"])
    reporter = Reporter(metrics.sink, board.sink)
    reporter.report("capture", "c", source="shop", events=10)
    reporter.report("capture", "c", source="shop", events=25)  # a running total
    reporter.report(
        "ledger",
        "l",
        events={"orders": 20, "items": 0},
        dead_letters_by_table={"orders": {"type_mismatch": 2}, "": {"malformed_json": 1}},
    )
    reporter.report("merge", "m", table="orders", events=20, seconds=1.5)
    reporter.report("merge", "m", table="orders", events=0, seconds=0.1)
    reporter.report("maintain", "x", table="orders", outcome="ok", seconds=3.0, base_data_files=4)
    reporter.report(
        "observe",
        "o",
        table="orders",
        lag_events=7,
        freshness_seconds=12.5,
        sla_seconds=10.0,
        breached=True,
        data_files=4,
        delete_files=0,
        snapshots=9,
        dead_letters={"type_mismatch": 2},
        schema_version=3,
        schema_phase="data",
        phase_seconds={"detected": 0.5, "schema": 2.0, "code": 4.25, "data": None},
        convergence_breached=False,
    )
    reporter.report("run", "r", restarted="merge", error="x")
    v = metrics.value
    assert v("icetide_events_captured_total", source="shop") == 25
    assert v("icetide_events_ledgered_total", table="orders") == 20
    assert v("icetide_events_ledgered_total", table="items") is None
    reason = {"stage": "ledger", "reason": "type_mismatch"}
    assert v("icetide_dead_letters_total", table="orders", **reason) == 2
    assert v("icetide_dead_letters_total", table="", stage="ledger", reason="malformed_json") == 1
    assert v("icetide_events_merged_total", table="orders") == 20
    assert v("icetide_merge_duration_seconds_count", table="orders") == 1
    assert v("icetide_maintenance_runs_total", table="orders", outcome="ok") == 1
    assert v("icetide_data_files", table="orders", kind="base") == 4
    assert v("icetide_lag_events", table="orders") == 7
    assert v("icetide_freshness_seconds", table="orders") == 12.5
    assert v("icetide_freshness_sla_breached", table="orders") == 1
    assert v("icetide_stage_restarts_total", stage="merge") == 1
    assert v("icetide_schema_version", table="orders") == 3
    phases = {p: v("icetide_schema_phase", table="orders", phase=p) for p in PHASES}
    assert phases == {"schema": 0, "code": 0, "data": 1, "converged": 0}
    assert v("icetide_schema_phase_seconds", table="orders", phase="code") == 4.25
    assert v("icetide_schema_phase_seconds", table="orders", phase="data") is None
    assert v("icetide_schema_convergence_sla_breached", table="orders") == 0
    snapshot = board.snapshot()
    [orders] = snapshot["tables"]
    assert orders["lag_events"] == 7 and orders["last_maintenance"]["outcome"] == "ok"
    stages = {s["name"]: s for s in snapshot["stages"]}
    assert len(orders["history"]) == 1 and stages["merge"]["restarts"] == 1

    server = MetricsServer(metrics, 0).start()
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    finally:
        server.stop()
    assert 'icetide_events_merged_total{table="orders"} 20.0' in text
