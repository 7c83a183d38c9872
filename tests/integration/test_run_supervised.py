"""``icetide run`` as people run it, with a MariaDB source: capture (a child process),
stream, merge and the observer supervised in one process, its metrics scraped over HTTP,
stopped by SIGTERM with a merge under way (held there by faults.py's pause, so the signal
cannot miss it) and restarted after a column was added at the source; the restarted run
converges the change (its phases in the metrics and on the status page, read in a real
headless browser) and publishes the table's new package version; the mirror is verified
against the source."""

from __future__ import annotations

import json
import signal
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from icetide.artifacts.index import LocalIndex
from icetide.artifacts.workspace import index_folder, publish_all
from icetide.bootstrap.run import Bootstrap
from icetide.config import load_config
from icetide.config.loader import load_table_schemas
from icetide.demo.live import start_shop
from icetide.devservers.mariadb import MariaDBServer
from icetide.observe.verify import render_verdicts, run_verify
from tests.integration.browser import CHROMEDRIVER, CHROMIUM, chrome
from tests.integration.events import mysql
from tests.integration.harness import Pipeline
from tests.integration.test_cli_process import child, free_port, wait_until


@pytest.fixture
def server() -> Iterator[MariaDBServer]:
    with MariaDBServer() as started:
        yield started


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``: (name, sorted labels) → value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def execute(server: MariaDBServer, *statements: str) -> None:
    with server.connect() as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
        conn.commit()


def read_page(port: int, table: str) -> dict[str, str]:
    """The figures of ``table`` as the headless browser renders them: each element's
    exact value (``data-value``), and the text people read under ``<field>.text``."""
    from selenium.webdriver.support.ui import WebDriverWait

    # The page redraws its rows every few seconds, so elements found one call apart can
    # be gone by the next (a stale element). One script reads every figure in one go: the
    # redraw after each fetch is synchronous, so the script sees one whole rendering.
    snapshot = """
        const table = arguments[0], figures = {};
        const found = document.querySelectorAll('[data-table="' + table + '"][data-field]');
        if (!found.length) return null;
        for (const e of found) {
          let key = e.dataset.field;
          if (e.dataset.reason) key += "." + e.dataset.reason;
          if (e.dataset.phase) key += "." + e.dataset.phase;
          if (e.dataset.value !== undefined) figures[key] = e.dataset.value;
          figures[key + ".text"] = e.innerText;
        }
        const points = document.querySelector('[data-table="' + table + '"] polyline');
        const drawn = points ? (points.getAttribute("points") || "").trim() : "";
        figures.chart_points = String(drawn ? drawn.split(/\\s+/).length : 0);
        return figures;
    """
    with chrome() as driver:
        driver.get(f"http://127.0.0.1:{port}/")

        def rendered(d: Any) -> dict[str, str] | None:
            figures = d.execute_script(snapshot, table)
            if not figures or figures.get("freshness_seconds") in (None, ""):
                return None
            return {str(k): str(v) for k, v in figures.items()}

        figures: dict[str, str] = WebDriverWait(driver, 60, poll_frequency=0.2).until(rendered)
        return figures


def progress(lines: list[str], stage: str) -> list[dict[str, Any]]:
    """The JSON progress records of one stage (``--progress json``)."""
    records = []
    for line in lines:
        if line.startswith("{") and f'"stage": "{stage}"' in line:
            records.append(json.loads(line))
    return records


@pytest.mark.long
def test_run_supervised_metrics_page_sigterm_restart_and_verify(
    tmp_path: Path, warehouse: Path, server: MariaDBServer, spark: SparkSession
) -> None:
    assert CHROMIUM and CHROMEDRIVER, "chromium and chromedriver missing: run scripts/install.sh"
    start_shop(server, seed=5)
    p = Pipeline.live(
        tmp_path,
        warehouse,
        "run_supervised",
        server,
        spark,
        schedule={"stream_interval": "1s", "merge_interval": "1s"},
        # Maintenance beside the merges, on its schedule: each run packs and expires every
        # table, so a short interval kept the machine busy with little to pack.
        maintenance={"interval": "15s"},
    )
    doc = yaml.safe_load(p.config_path.read_text())
    [customers] = [t for t in doc["tables"] if t["name"] == "customers"]
    customers["freshness_sla"] = "1h"
    p.config_path.write_text(yaml.safe_dump(doc))
    p = Pipeline(p.root, p.config_path, load_config(p.config_path), p.schemas, spark)
    source = p.config.sources[0]
    Bootstrap(spark, p.pipeline, source, chunk_rows=5_000).run()

    # 30 new customers (30 events), and a landing file of two bad events: one broken
    # line (unrouted) and a customer whose id is not a number (its table's dead letters).
    inserted_at = datetime.now(UTC)
    execute(
        server,
        *(
            f"INSERT INTO shop.customers (id, name, email, balance, vip, updated_at) VALUES "
            f"({100000 + i}, 'c{i}', 'c{i}@x', {i}.25, {i % 2}, NOW(6))"
            for i in range(30)
        ),
    )
    bad = mysql("c", 4, after={"id": "four", "name": "x"}, table="customers")
    bad = bad.replace('"name": "srv"', f'"name": "{source.name}"')
    p.land(['{"before": null, "after": {"id": 3', bad], name="manual-000001.json")

    gate = tmp_path / "gate"  # faults.py's pause: hold the next merge of customers
    gate.mkdir()
    port = free_port()
    args = ["run", "-c", str(p.config_path), "--metrics-port", str(port)]
    # Each observation runs a few Spark jobs per table: every 3 s, not every second.
    args += ["--observe-interval", "3", "--progress", "json"]
    with child(args, {"ICETIDE_PAUSE": f"merge.before_commit:{gate}"}) as run:
        run.wait_for_line(r"status page: ")

        def merged(n: int) -> bool:
            s = scrape(port)
            return sample(s, "icetide_events_merged_total", table="customers") >= n

        wait_until(lambda: merged(30), "30 customer events merged")
        wait_until(
            lambda: sample(scrape(port), "icetide_freshness_seconds", table="customers") > 0,
            "a freshness observation",
        )
        s = scrape(port)
        assert sample(s, "icetide_events_captured_total", source=str(source.name)) == 30
        assert sample(s, "icetide_events_ledgered_total", table="customers") == 30
        assert sample(s, "icetide_events_merged_total", table="customers") == 30
        ledger_dead = {"stage": "ledger"}
        assert (
            sample(
                s, "icetide_dead_letters_total", table="", reason="malformed_json", **ledger_dead
            )
            == 1
        )
        assert (
            sample(
                s,
                "icetide_dead_letters_total",
                table="customers",
                reason="type_mismatch",
                **ledger_dead,
            )
            == 1
        )
        assert sample(s, "icetide_freshness_sla_seconds", table="customers") == 3600
        assert sample(s, "icetide_freshness_sla_breached", table="customers") == 0
        assert sample(s, "icetide_schema_phase", table="customers", phase="converged") == 1
        assert sample(s, "icetide_schema_version", table="customers") == 1

        # More changes. The merge that takes them is held just before its commit (the
        # pause armed here), so the SIGTERM lands while it is under way; it is let go
        # once the run has taken the signal, and must finish, and no merge after it.
        (gate / "armed").touch()
        execute(
            server,
            "UPDATE shop.customers SET balance = balance + 1 WHERE id < 100010",
            "DELETE FROM shop.customers WHERE id >= 100025",
        )
        wait_until(lambda: (gate / "paused").exists(), "a merge of the changes under way")
        run.proc.send_signal(signal.SIGTERM)
        run.wait_for_line(r"run: stopping on SIGTERM")
        signalled = len(run.lines)
        (gate / "paused").unlink()
        assert run.finish() == 0, run.output
        assert "icetide run stopped by SIGTERM" in run.output, run.output
        assert "Traceback" not in run.output, run.output
        assert run.group() == [], "processes outlived icetide run:\n" + "\n".join(run.group())
        after = [r for r in progress(run.lines[signalled:], "merge") if "seconds" in r]
        assert [(r["table"], r["events"] > 0) for r in after] == [("customers", True)], after

    # Changed while stopped, a column added at the source among them: the restarted run
    # catches up, converges the schema change (its phases on the page and in the
    # metrics) and publishes the table's new package version (artifacts.refresh: auto;
    # the index had version 1 of every table).
    publish_all(p.pipeline)
    index = LocalIndex(index_folder(p.config))
    package = "icetide-schema-shop-customers"
    assert [e.version for e in index.versions(package)] == ["1.0.0"]
    execute(
        server,
        "ALTER TABLE shop.customers ADD COLUMN note VARCHAR(16) NULL",
        "UPDATE shop.customers SET name = CONCAT(name, '!'), note = 'n' WHERE id % 3 = 0",
    )
    port = free_port()
    args = ["run", "-c", str(p.config_path), "--metrics-port", str(port)]
    args += ["--observe-interval", "3"]
    with child(args) as again:
        again.wait_for_line(r"status page: ")

        def converged() -> bool:
            s = scrape(port)
            return (
                sample(s, "icetide_events_captured_total", source=str(source.name)) > 0
                and s.get(("icetide_lag_events", (("table", "customers"),))) == 0
                and sample(s, "icetide_schema_version", table="customers") == 2
                and sample(s, "icetide_schema_phase", table="customers", phase="converged") == 1
                and sample(s, "icetide_maintenance_runs_total", table="customers", outcome="ok")
                >= 1
                and "1.1.0" in [e.version for e in index.versions(package)]
            )

        try:
            wait_until(converged, "the restarted run to converge customers and publish 1.1.0")
        except AssertionError as exc:
            s = scrape(port)
            figures = {k: v for k, v in s.items() if "customers" in str(k) or "restart" in k[0]}
            raise AssertionError(f"{exc}\n{figures}\n" + "\n".join(again.lines[-40:])) from None
        s = scrape(port)
        took = {
            phase: sample(s, "icetide_schema_phase_seconds", table="customers", phase=phase)
            for phase in ("detected", "schema", "code", "data")
        }
        assert 0 < took["schema"] <= took["code"] <= took["data"], took
        assert sample(s, "icetide_schema_phase", table="customers", phase="data") == 0
        assert sample(s, "icetide_schema_phase", table="orders", phase="converged") == 1

        page = read_page(port, "customers")
        seconds_since = (datetime.now(UTC) - inserted_at).total_seconds()
        assert 0 <= float(page["freshness_seconds"]) <= seconds_since + 2, page
        assert page["dead_letters.type_mismatch"] == "1", page
        assert page["sla"] == "ok" and float(page["sla_seconds"]) == 3600, page
        assert page["sla_seconds.text"] == "SLA 1 h" and page["verdict"] == "ok", page
        assert int(page["chart_points"]) >= 1, page
        assert page["last_maintenance"].startswith("ok at "), page
        assert page["schema_version"] == "2" and page["schema_phase"] == "converged", page
        assert float(page["phase_seconds.data"]) == pytest.approx(took["data"], abs=0.06), page
        # The note column was the only change: the demo's TINYINT(1) vip, declared boolean,
        # and its NOT NULL name are no changes, so nothing waits for an approval.
        assert not [line for line in again.lines if "held until approved" in line], again.output
        again.proc.send_signal(signal.SIGTERM)
        assert again.finish() == 0, again.output
    stages = Pipeline(p.root, p.config_path, p.config, load_table_schemas(p.config), spark)
    assert [c.name for c in stages.pipeline.schema("customers").columns][-1] == "note"
    verdicts = run_verify(stages.pipeline, spark)
    assert all(v.matches for v in verdicts), render_verdicts(verdicts)


def test_a_merge_rounds_tick_while_the_stream_first_starts_waits_for_the_ledger_tables(
    pipeline: Pipeline, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``icetide run`` on a new pipeline: the merge thread's round ends with the stream's
    tick (schema phases on the ledger tables) while the stream thread is still creating
    those tables. The tick must wait for them, not fail the merge round."""
    from icetide.cli.run import Stream
    from icetide.ledger.stage import LedgerStage

    stream = Stream(spark, pipeline.pipeline)
    create = LedgerStage.ensure_tables

    def create_with_a_tick_between(self: LedgerStage) -> None:
        stream.tick()  # the merge thread's, before any ledger table exists
        create(self)

    monkeypatch.setattr(LedgerStage, "ensure_tables", create_with_a_tick_between)
    stream.start()
    try:
        assert stream.ledger is not None and stream.query is not None
        assert stream.query.isActive
        stream.tick()  # and once started, the tick acts on the tables
    finally:
        stream.close()


def test_the_stream_has_started_once_its_first_trigger_ends_even_with_nothing_to_read(
    pipeline: Pipeline, spark: SparkSession
) -> None:
    """``icetide run``'s merge holds the tables with no events until the stream's first
    trigger has ended (cli/run.py, TablesDue's ``ready``). On a pipeline with nothing
    landed that trigger finds nothing: it must count, or no base would be created until
    the first event."""
    from icetide.cli.run import Stream

    stream = Stream(spark, pipeline.pipeline)
    assert not stream.started()
    stream.start()
    try:
        query = stream.query
        assert query is not None
        query.processAllAvailable()  # returns once a trigger has found nothing
        wait_until(stream.started, "the first trigger's progress (reported just after)")
        assert query.isActive and query.lastProgress["numInputRows"] == 0
    finally:
        stream.close()


def test_a_merge_rounds_tick_does_not_wait_for_a_micro_batch_under_way(
    pipeline: Pipeline, spark: SparkSession
) -> None:
    """The merge thread ticks the ledger after every round. A micro-batch under way takes
    the same schema steps itself, so the tick returns at once instead of holding the next
    merge round until the batch is stored (a whole batch's time, seconds, on a busy
    pipeline); with no batch under way it runs."""
    import threading

    from icetide.ledger.stage import LedgerStage

    stage = LedgerStage(spark, pipeline.pipeline)
    stage.ensure_tables()
    inside, release = threading.Event(), threading.Event()

    def a_long_batch(batch: object, batch_id: int) -> None:
        inside.set()
        release.wait(timeout=120)

    stage._process_batch = a_long_batch  # type: ignore[method-assign]
    batch = threading.Thread(target=stage.process_batch, args=(None, 0), daemon=True)
    batch.start()
    assert inside.wait(timeout=60)
    ticked: list[bool] = []
    tick = threading.Thread(target=lambda: ticked.append(stage.tick()), daemon=True)
    tick.start()
    tick.join(timeout=20)
    waited = tick.is_alive()
    release.set()
    batch.join(timeout=60)
    tick.join(timeout=60)
    assert not waited, "the tick waited for the micro-batch to end"
    assert ticked == [False]
    assert stage.tick() is True  # no batch under way: the tick runs
