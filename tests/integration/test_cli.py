"""The CLI in-process on the shared session: status reads the three tables of each table."""

from __future__ import annotations

import json

import pytest

from icetide.cli import main
from icetide.demo.workload import deliver, generate
from tests.integration.harness import Pipeline


def test_status_reports_events_lag_rows_and_dead_letters(
    pipeline: Pipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    workload = generate(41, 150, tables=["customers"])
    deliver(workload, pipeline.landing, seed=1, files=1, duplicate_rate=0.0)
    pipeline.land(['{"broken'])
    pipeline.stream()
    assert main(["status", "-c", str(pipeline.config_path), "--output", "json"]) == 0
    before = {t["table"]: t for t in json.loads(capsys.readouterr().out)}
    assert before["customers"]["ledger_events"] == 150
    assert before["customers"]["lag_events"] == 150
    assert before["customers"]["base_rows"] == 0
    pipeline.merge()
    assert main(["status", "-c", str(pipeline.config_path), "--output", "json"]) == 0
    after = {t["table"]: t for t in json.loads(capsys.readouterr().out)}
    assert after["customers"]["lag_events"] == 0
    assert after["customers"]["base_rows"] == len(workload.expected["customers"])
    assert main(["status", "-c", str(pipeline.config_path)]) == 0
    assert "customers" in capsys.readouterr().out
    # Only the tables the filter names are read; the generated changes were committed
    # in 2024, so the freshness is that old.
    config = ["-c", str(pipeline.config_path), "--output", "json"]
    assert main(["status", "--filter", "CUST", "--limit", "1", *config]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["table"] == "customers" and row["verdict"] == "ok"
    assert row["freshness_seconds"] > 86_400 and row["sla_seconds"] is None
