"""The status board: tables worst first with a verdict and why, humanized figures, a
filter and a limit, every supervised stage listed with its state, a bounded chart
history, and ``/status.json`` served with its query."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from icetide.observe.board import CHART_POINTS, StatusBoard
from icetide.observe.metrics import Metrics, MetricsServer
from icetide.observe.page import add_routes
from icetide.progress import Reporter
from icetide.stopping import Stop
from icetide.supervisor import Supervisor, Task


class Clock:
    def __init__(self) -> None:
        self.now = 1_796_000_000.0

    def __call__(self) -> float:
        return self.now


def observe(report: Any, table: str, freshness: float | None, **figures: Any) -> None:
    base = {
        "lag_events": 0,
        "sla_seconds": None,
        "breached": False,
        "data_files": 1,
        "delete_files": 0,
        "snapshots": 1,
        "dead_letters": {},
        "schema_version": 1,
        "schema_phase": "converged",
    }
    report("observe", "o", table=table, freshness_seconds=freshness, **{**base, **figures})


def order(board: StatusBoard, **query: Any) -> list[tuple[str, str]]:
    return [(t["table"], t["verdict"]) for t in board.snapshot(**query)["tables"]]


def test_tables_come_worst_first_with_their_verdict_and_why() -> None:
    clock = Clock()
    names = ["fresh", "stale", "failing", "held", "late_change", "old", "silent", "never"]
    board = StatusBoard("p", names, clock=clock)
    report = Reporter(board.sink).report
    observe(report, "fresh", 2.0, sla_seconds=60.0)
    observe(report, "stale", 7200.0, sla_seconds=600.0, breached=True)
    observe(report, "failing", 1.0)
    report("merge", "merge failing: failed", table="failing", failed="TableNotFound: base")
    observe(report, "held", 3.0)
    report("evolution", "schema held: held", table="held", held=["narrow:qty"])
    observe(report, "late_change", 4.0, convergence_breached=True, schema_phase="data")
    observe(report, "old", 5000.0)
    observe(report, "never", None)  # observed, never merged
    assert order(board) == [
        ("late_change", "held"),
        ("held", "held"),
        ("failing", "failing"),
        ("stale", "stale"),
        ("never", "ok"),
        ("old", "ok"),
        ("fresh", "ok"),
        ("silent", "unknown"),
    ]
    rows = {t["table"]: t for t in board.snapshot()["tables"]}
    assert rows["failing"]["why"] == "merge failed: TableNotFound: base"
    assert rows["held"]["why"] == "schema change held: ['narrow:qty']"
    assert rows["late_change"]["why"] == "schema change over its convergence SLA"
    assert rows["fresh"]["why"] is None
    assert rows["stale"]["text"]["freshness"] == "2 h" and rows["stale"]["text"]["sla"] == "10 min"
    assert rows["never"]["text"]["freshness"] == "never merged"
    assert rows["silent"]["text"]["freshness"] == "-"
    counts = board.snapshot()["counts"]
    assert counts == {
        "tables": 8,
        "matching": 8,
        "shown": 8,
        "failing": 1,
        "held": 2,
        "stale": 1,
        "ok": 3,
        "unknown": 1,
    }

    # A good merge clears the failure; a newer schema version clears the hold.
    report("merge", "merge failing: 3 events", table="failing", events=3, seconds=0.5)
    observe(report, "held", 3.0, schema_version=2)
    rows = {t["table"]: t for t in board.snapshot()["tables"]}
    assert rows["failing"]["verdict"] == "ok" and rows["failing"]["why"] is None
    assert rows["held"]["verdict"] == "ok"
    report("maintain", "m", table="old", outcome="failed", error="CommitFailedException: x")
    assert order(board)[0] == ("old", "failing")
    report("maintain", "m", table="old", outcome="ok", seconds=1.0)
    assert dict(order(board))["old"] == "ok"


def test_figures_are_humanized_with_the_raw_values_beside_them() -> None:
    board = StatusBoard("p", ["orders"], clock=Clock())
    report = Reporter(board.sink).report
    observe(
        report,
        "orders",
        32_167.4,
        lag_events=1_234_567,
        ledger_snapshot=8327164253829462847,
        watermark=1234,
        data_files=15_000,
        dead_letters={"type_mismatch": 12_000, "malformed_json": 3},
        phase_seconds={"detected": 1.84, "schema": 65.0, "code": None},
    )
    report("merge", "m", table="orders", events=25_000, seconds=2.0)
    [row] = board.snapshot()["tables"]
    assert row["freshness_seconds"] == 32_167.4 and row["lag_events"] == 1_234_567
    assert row["text"] == {
        "freshness": "8 h 56 min",
        "sla": "-",
        "lag_events": "1.2 M",
        "ledger_snapshot": "8327…2847",
        "watermark": "1234",
        "ledger_snapshot_id": "8327164253829462847",
        "watermark_id": "1234",
        "dead_letters": "12.0 k",
        "dead_letters_by_reason": {"type_mismatch": "12.0 k", "malformed_json": "3"},
        "phase_seconds": {"detected": "1.8 s", "schema": "1 min 5 s"},
        "data_files": "15.0 k",
        "delete_files": "0",
        "snapshots": "1",
        "last_maintenance": "-",
        "last_merge": "25.0 k events at 00:53:20",
    }


def test_filter_and_limit_and_the_json_is_the_snapshot() -> None:
    names = [f"shop_{i:03d}_{'orders' if i % 2 else 'items'}" for i in range(100)]
    board = StatusBoard("p", names, clock=Clock())
    report = Reporter(board.sink).report
    for i, name in enumerate(names):
        observe(report, name, float(i))
    snapshot = board.snapshot("ORDERS 09", limit=3)
    assert [t["table"] for t in snapshot["tables"]] == [
        "shop_099_orders",
        "shop_097_orders",
        "shop_095_orders",
    ]
    assert snapshot["counts"]["matching"] == 6 and snapshot["counts"]["shown"] == 3
    assert snapshot["counts"]["tables"] == 100
    assert json.loads(board.encoded("ORDERS 09", limit=3)) == json.loads(json.dumps(snapshot))


def test_the_chart_keeps_an_hour_at_one_sample_a_minute_and_the_newest() -> None:
    clock = Clock()
    board = StatusBoard("p", ["t"], clock=clock)
    report = Reporter(board.sink).report
    for second in range(0, 2 * 3600, 5):  # two hours, observed every five seconds
        clock.now += 5.0
        observe(report, "t", float(second))
    [row] = board.snapshot()["tables"]
    history = row["history"]
    assert CHART_POINTS <= len(history) <= CHART_POINTS + 2
    assert history[-1] == [int(clock.now), 7195]  # the newest observation, as it came
    assert clock.now - history[0][0] <= 3600  # nothing older than the window
    gaps = [b[0] - a[0] for a, b in zip(history, history[1:], strict=False)]
    assert min(gaps[:-1]) >= 3600 / CHART_POINTS


def test_every_supervised_stage_is_listed_with_its_state_before_it_reports() -> None:
    supervisor = Supervisor(Stop(), lambda *a, **f: None)
    for name in ("capture shop", "stream", "merge"):
        supervisor.add(Task(name, lambda: None, 1.0))
    board = StatusBoard("p", ["orders"], stages=supervisor.states)
    report = Reporter(board.sink).report
    report("merge", "merge orders: 3 events", table="orders", events=3, seconds=0.1)
    report("capture", "capture shop: 10 events", source="shop", events=10)
    stages = {s["name"]: s for s in board.snapshot()["stages"]}
    assert list(stages) == ["capture shop", "stream", "merge"]  # the ledger never reported
    assert stages["stream"]["state"] == "idle" and "last_message" not in stages["stream"]
    assert stages["stream"]["text"].startswith("idle for ")
    assert stages["merge"]["last_message"] == "merge orders: 3 events"
    assert stages["capture shop"]["last_message"] == "capture shop: 10 events"
    report("ledger", "batch 1: 2 events", events={"orders": 2})
    stages = {s["name"]: s for s in board.snapshot()["stages"]}
    assert stages["stream"]["last_message"] == "batch 1: 2 events"


def test_status_json_takes_a_filter_and_a_limit_and_refuses_a_bad_limit() -> None:
    board = StatusBoard("p", ["orders", "order_items", "customers"])
    server = MetricsServer(Metrics(), 0)
    add_routes(server, board)
    server.start()
    root = f"http://127.0.0.1:{server.port}"
    try:
        with urllib.request.urlopen(root + "/status.json?filter=order&limit=1") as response:
            body = json.loads(response.read())
        with urllib.request.urlopen(root + "/") as response:
            page = response.read().decode()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(root + "/status.json?limit=many")
    finally:
        server.stop()
    assert [t["table"] for t in body["tables"]] == ["order_items"]
    assert body["counts"]["matching"] == 2
    assert refused.value.code == 400
    assert 'id="filter"' in page
