"""The status page with a thousand tables, read in a real headless Chrome at 1,400 pixels:
worst first, the filter, humanized cells with their exact values, no scrolling sideways,
and every supervised stage listed with its state, the one that never reported too.

No Spark: the page is fed as ``icetide run`` feeds it, by progress records into its
board, from the same server and routes, and the stages' states come from a real
supervisor running real (idle, busy, failing) tasks. A screenshot is kept beside the
test's files (its path is printed); docs/images/status-1000.png is one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from icetide.observe.board import StatusBoard
from icetide.observe.metrics import Metrics, MetricsServer
from icetide.observe.page import add_routes
from icetide.progress import Reporter
from icetide.stopping import Stop, Stopped
from icetide.supervisor import Supervisor, Task
from tests.integration.browser import chrome

DOMAINS = ("orders", "customers", "items", "payments", "shipments")
SNAPSHOT = 8327164253829462847


def names() -> list[str]:
    return [f"shop_{i:04d}_{DOMAINS[i % len(DOMAINS)]}" for i in range(1000)]


def feed(board: StatusBoard, hour_ago: list[float]) -> None:
    """What the observer, merge and evolution report of a thousand tables: most fresh,
    a few stale beyond their SLA, one failing merge, one schema change held; the last
    hour of a few of them (``hour_ago``: the board's clock, moved by a minute a time)."""
    report = Reporter(board.sink).report
    for minute in range(1, 60):
        hour_ago[0] = (minute - 60) * 60.0
        for i, name in enumerate(names()[:120:10]):
            fresh = 6_000.0 + 40 * minute if i in (1, 2) else 30 + (i * 37 + minute * 11) % 500
            report("observe", "o", table=name, freshness_seconds=fresh)
    hour_ago[0] = 0.0
    for i, name in enumerate(names()):
        freshness = 5.0 + (i * 7919) % 600  # ok, in no order of the names
        sla = 900.0 if i % 4 == 0 else None
        if name in ("shop_0010_orders", "shop_0500_orders", "shop_0020_orders"):
            freshness, sla = {"shop_0010_orders": 32_167_462.0}.get(name, 7_200.0 + i), 900.0
        report(
            "observe",
            "o",
            table=name,
            ledger_snapshot=SNAPSHOT + i,
            watermark=SNAPSHOT,
            lag_events=1_234_567 if i == 42 else i,
            freshness_seconds=freshness,
            sla_seconds=sla,
            breached=sla is not None and freshness > sla,
            data_files=i * 17,
            delete_files=0,
            snapshots=3,
            dead_letters={"type_mismatch": 12_345} if i == 7 else {},
            schema_version=1,
            schema_phase="converged",
            phase_seconds={},
        )
    report("merge", "merge shop_0997: failed", table="shop_0997_items", failed="Boom: disk full")
    report("evolution", "held", table="shop_0003_payments", held=["narrow:amount"])
    report("merge", "merge shop_0001: 3 events", table="shop_0001_customers", events=3, seconds=1)


@pytest.fixture
def supervised() -> Iterator[Supervisor]:
    """A real supervisor: ``stream`` idle (its round returned, never reported), ``merge``
    running (its round held until the test ends), ``capture shop`` backing off."""
    stop, release, busy, failed = Stop(), threading.Event(), threading.Event(), threading.Event()

    def merge_round() -> None:
        busy.set()
        release.wait(timeout=300)

    def capture() -> None:
        failed.set()
        raise RuntimeError("capture exited with code 1")

    supervisor = Supervisor(stop, lambda *a, **f: None, first_backoff=600.0, max_backoff=600.0)
    supervisor.add(Task("capture shop", capture, 1.0))
    ran = threading.Event()
    supervisor.add(Task("stream", ran.set, 3600.0))
    supervisor.add(Task("merge", merge_round, 1.0))

    def run() -> None:
        try:
            supervisor.run()
        except Stopped:
            pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert busy.wait(timeout=60) and failed.wait(timeout=60) and ran.wait(timeout=60)
    deadline = time.monotonic() + 60  # idle once its round has returned
    while supervisor.states()[1]["state"] != "idle" and time.monotonic() < deadline:
        release.wait(timeout=0.01)
    try:
        yield supervisor
    finally:
        stop.request("test")
        release.set()
        thread.join(timeout=60)


ROWS = """
    return Array.from(document.querySelectorAll('#tables tbody tr')).map(tr => {
      const cell = f => tr.querySelector('[data-field="' + f + '"]');
      return [tr.dataset.table, tr.dataset.verdict, cell('freshness_seconds').innerText,
              cell('freshness_seconds').dataset.value ?? null];
    });
"""
STAGES = """
    return Array.from(document.querySelectorAll('#stages tbody tr')).map(tr => {
      const f = n => tr.querySelector('[data-field="' + n + '"]');
      const state = f('state');
      return [tr.dataset.stage, state.dataset.value, state.innerText, f('last').innerText];
    });
"""
POINTS = """
    const chart = document.querySelector('[data-table="' + arguments[0] + '"] polyline');
    return chart.getAttribute('points').trim().split(/\\s+/).length;
"""
CELL = """
    const e = document.querySelector('[data-table="' + arguments[0] + '"][data-field="'
      + arguments[1] + '"]');
    return e ? [e.innerText, e.dataset.value ?? null, e.title] : null;
"""


def test_a_thousand_tables_worst_first_filtered_humanized_in_1400_pixels(
    tmp_path: Path, supervised: Supervisor
) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    hour_ago = [0.0]
    board = StatusBoard(
        "shop", names(), stages=supervised.states, clock=lambda: time.time() + hour_ago[0]
    )
    feed(board, hour_ago)
    server = MetricsServer(Metrics(), 0)
    add_routes(server, board)
    server.start()
    try:
        with chrome(1400, 900) as driver:
            driver.get(f"http://127.0.0.1:{server.port}/")
            wait = WebDriverWait(driver, 120, poll_frequency=0.2)
            # Cheap checks while waiting; the rows are read once drawn.
            wait.until(lambda d: d.execute_script("return document.body.dataset.rendered"))
            rows: list[list[Any]] = driver.execute_script(ROWS)
            assert driver.execute_script("return window.innerWidth") >= 1380

            # Worst first: failing and held, then stale beyond the SLA (oldest first),
            # then the oldest freshness; the whole order is the server's.
            assert len(rows) == 1000
            assert [r[:2] for r in rows[:5]] == [
                ["shop_0997_items", "failing"],  # one tier: the older freshness (448 s) first
                ["shop_0003_payments", "held"],  # 362 s
                ["shop_0010_orders", "stale"],
                ["shop_0500_orders", "stale"],
                ["shop_0020_orders", "stale"],
            ]
            ages = [float(r[3]) for r in rows[5:]]
            assert ages == sorted(ages, reverse=True)
            assert {r[1] for r in rows[5:]} == {"ok"}

            # Humanized cells, the exact value kept beside them.
            assert rows[2][2:] == ["372 d 7 h", "32167462"]
            assert driver.execute_script(CELL, "shop_0042_items", "lag_events")[:2] == [
                "1.2 M",
                "1234567",
            ]
            snapshot = driver.execute_script(CELL, "shop_0001_customers", "ledger_snapshot")
            assert snapshot == ["8327…2848", str(SNAPSHOT + 1), str(SNAPSHOT + 1)]
            dead = driver.execute_script(CELL, "shop_0007_items", "dead_letters_total")
            assert dead[:2] == ["12.3 k", "12345"]
            why = driver.execute_script(CELL, "shop_0997_items", "why")
            assert why[0] == "merge failed: Boom: disk full"

            # An hour of freshness, a point a minute, in the chart.
            assert driver.execute_script(POINTS, "shop_0010_orders") == 60
            assert driver.execute_script(POINTS, "shop_0001_customers") == 1

            # Nothing to scroll sideways at 1,400 pixels, a thousand rows and all.
            overflow = "const e = document.documentElement; return e.scrollWidth - e.clientWidth"
            assert driver.execute_script(overflow) <= 0

            # Every stage listed with its state; the stream never reported anything.
            stages = {s[0]: s for s in driver.execute_script(STAGES)}
            assert list(stages) == ["capture shop", "stream", "merge"]
            assert stages["stream"][1] == "idle" and stages["stream"][2].startswith("idle for")
            assert stages["stream"][3] == ""
            assert stages["merge"][1] == "running"
            assert stages["capture shop"][1] == "backing off"
            assert stages["capture shop"][2].startswith("backing off, restart in")
            assert stages["capture shop"][3] == "RuntimeError: capture exited with code 1"

            shot = tmp_path / "status-1000.png"
            driver.save_screenshot(str(shot))
            print(f"status page screenshot: {shot}")

            # The filter: words of the name, any case; the server's answer, worst first.
            box = driver.find_element("id", "filter")
            box.send_keys("ORDERS 00")
            expected = [n for n in names() if "orders" in n and "00" in n]
            shown = f"{len(expected)} of 1,000 match"
            count = "return document.getElementById('shown').textContent"
            wait.until(lambda d: d.execute_script(count) == shown)
            filtered = driver.execute_script(ROWS)
            assert sorted(r[0] for r in filtered) == sorted(expected)
            assert filtered[0][:2] == ["shop_0010_orders", "stale"]
            assert driver.current_url.endswith("?filter=ORDERS%2000")
            driver.save_screenshot(str(tmp_path / "status-1000-filtered.png"))
    finally:
        server.stop()
    assert shot.stat().st_size > 10_000
