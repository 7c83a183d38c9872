"""Status page benchmark: how long ``icetide run``'s server takes to serve the page and
``/status.json`` for a pipeline of ``--tables`` tables.

A :class:`~icetide.observe.board.StatusBoard` is fed what the observer reports, an
hour of it (one observation per table a minute, on a clock the benchmark moves: the
board keeps one sample a minute per table however often it observes), with a mix of
verdicts (1 % failing, 1 % held, 10 % stale), dead letters and schema changes; the
supervisor's six tasks give the stage states. The same server and routes as ``icetide
run --metrics-port`` then answer, alternately, ``/``, ``/status.json`` (every table,
worst first), ``/status.json?filter=…`` (a few tables), ``/status.json?limit=50`` and,
after one more observation of every table, ``/status.json`` again; each ``--repeat``
times over HTTP on localhost. The medians and 90th percentiles are printed with the
body sizes, and what one observation costs the board (its row is made and encoded
then, not per request). With ``--browser`` (chromium and chromedriver on the PATH),
also the time headless Chrome takes from loading the page
to drawing every row. Never pass/fail.

    python bench/status_bench.py --tables 1000 --repeat 20
    python bench/status_bench.py --tables 1000 --repeat 10 --browser
"""

from __future__ import annotations

import argparse
import platform
import random
import shutil
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from icetide.observe.board import StatusBoard  # noqa: E402
from icetide.observe.metrics import Metrics, MetricsServer  # noqa: E402
from icetide.observe.page import add_routes  # noqa: E402
from icetide.progress import Reporter  # noqa: E402
from icetide.stopping import Stop  # noqa: E402
from icetide.supervisor import Supervisor, Task  # noqa: E402

TASKS = ("capture shop", "stream", "merge", "maintenance", "observe", "artifacts")


def build_board(tables: int, seed: int = 7) -> tuple[StatusBoard, Callable[[], None]]:
    """A board with an hour of observations of ``tables`` tables, and a function that
    observes every table once more (each row then made and encoded again)."""
    rng = random.Random(seed)
    clock = [time.time() - 3660.0]
    supervisor = Supervisor(Stop(), lambda *a, **f: None)
    for name in TASKS:
        supervisor.add(Task(name, lambda: None, 1.0))
    names = [
        f"shop_{i:04d}_{rng.choice(['orders', 'customers', 'items', 'events'])}"
        for i in range(tables)
    ]
    board = StatusBoard("bench", names, stages=supervisor.states, clock=lambda: clock[0])
    report = Reporter(board.sink).report
    base = {name: rng.uniform(1, 900) for name in names}
    sla = {name: 600.0 if rng.random() < 0.6 else None for name in names}
    for i, name in enumerate(names):
        if i % 100 == 1:
            report("merge", f"merge {name}: failed", table=name, failed="TableNotFound: x")
        if i % 100 == 2:
            report("evolution", f"schema {name}: held", table=name, held=["narrow:qty"])
        if i % 10 == 3:
            base[name] = rng.uniform(700, 40_000_000)  # stale

    def observe_all() -> None:
        clock[0] += 60.0
        for name in names:
            fresh = base[name] * rng.uniform(0.8, 1.2)
            report(
                "observe",
                "o",
                table=name,
                observed_at="2026-12-02T07:00:00+00:00",
                ledger_snapshot=rng.getrandbits(63),
                watermark=rng.getrandbits(63),
                lag_events=rng.choice([0, 0, 12, 4_512, 1_234_567]),
                newest_applied="2026-12-02T06:59:00+00:00",
                freshness_seconds=round(fresh, 3),
                sla_seconds=sla[name],
                breached=sla[name] is not None and fresh > sla[name],
                data_files=rng.randrange(1, 5000),
                delete_files=rng.randrange(0, 50),
                snapshots=rng.randrange(1, 200),
                dead_letters={"type_mismatch": 3} if rng.random() < 0.05 else {},
                schema_version=2,
                schema_phase="converged",
                schema_change_version=2,
                phase_seconds={"detected": 1.8, "schema": 6.2, "code": 9.0, "data": 12.4},
                convergence_breached=False,
            )

    for _ in range(60):
        observe_all()
    return board, observe_all


def timed_get(url: str) -> tuple[float, int]:
    """Seconds to fetch ``url`` completely, and its size."""
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as response:
        body = response.read()
    return time.perf_counter() - began, len(body)


def browser_render(url: str, rows: int, repeat: int) -> list[float]:
    """Seconds from navigation to every row drawn, in headless Chrome."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = str(shutil.which("chromium"))
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,900")
    service = Service(executable_path=str(shutil.which("chromedriver")))
    driver = webdriver.Chrome(service=service, options=options)
    count = "return document.querySelectorAll('#tables tbody tr').length"
    times = []
    try:
        for _ in range(repeat):
            began = time.perf_counter()
            driver.get(url)
            WebDriverWait(driver, 60, poll_frequency=0.01).until(
                lambda d: d.execute_script(count) == rows
            )
            times.append(time.perf_counter() - began)
    finally:
        driver.quit()
    return times


def describe(label: str, times: list[float], size: int) -> str:
    ms = sorted(t * 1000 for t in times)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return (
        f"{label:<34} median {statistics.median(ms):7.1f} ms   p90 {p90:7.1f} ms   "
        f"{size / 1024:8.1f} KiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--browser", action="store_true", help="also time headless Chrome")
    args = parser.parse_args()

    began = time.perf_counter()
    board, observe_all = build_board(args.tables)
    built = time.perf_counter() - began
    began = time.perf_counter()
    observe_all()
    per_record = (time.perf_counter() - began) / args.tables
    server = MetricsServer(Metrics(), 0)
    add_routes(server, board)
    server.start()
    root = f"http://127.0.0.1:{server.port}"
    paths = {
        "/ (the page)": "/",
        "/status.json (every table)": "/status.json",
        "/status.json?filter=0042 orders": "/status.json?filter=0042%20orders",
        "/status.json?limit=50": "/status.json?limit=50",
    }
    try:
        timed_get(root + "/status.json")  # warm up
        times: dict[str, list[float]] = {label: [] for label in paths}
        sizes: dict[str, int] = {}
        changed = "/status.json, every table changed"
        times[changed] = []
        for _ in range(args.repeat):  # alternately, so load spikes hit each alike
            for label, path in paths.items():
                seconds, sizes[label] = timed_get(root + path)
                times[label].append(seconds)
            observe_all()  # the observer's round: every row made again
            seconds, sizes[changed] = timed_get(root + "/status.json")
            times[changed].append(seconds)
        print(
            f"{args.tables} tables, {args.repeat} rounds; board built in {built:.1f} s; "
            f"{platform.python_version()} on {platform.machine()}\n"
            f"one observation on the board (its row made and encoded): "
            f"{per_record * 1e6:.0f} µs"
        )
        for label in times:
            print(describe(label, times[label], sizes[label]))
        if args.browser:
            rendered = browser_render(root + "/", args.tables, max(3, args.repeat // 4))
            print(describe("headless Chrome: load to all rows", rendered, sizes[next(iter(paths))]))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
