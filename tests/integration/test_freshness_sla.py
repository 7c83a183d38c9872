"""Freshness against a table's SLA: `icetide status --check` measures it from the ledger
up to the merge watermark and exits 1 on a breach (in-process, on the shared session)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import yaml

from icetide.cli import main
from icetide.demo.workload import deliver, generate
from tests.integration.harness import Pipeline


def _set_sla(pipeline: Pipeline, sla: str) -> None:
    doc = yaml.safe_load(pipeline.config_path.read_text())
    [customers] = [t for t in doc["tables"] if t["name"] == "customers"]
    customers["freshness_sla"] = sla
    pipeline.config_path.write_text(yaml.safe_dump(doc))


def _source_ms(message: dict[str, object]) -> int:
    payload = message.get("payload", message)
    assert isinstance(payload, dict)
    source = payload["source"]
    assert isinstance(source, dict)
    return int(source["ts_ms"])  # type: ignore[call-overload]


def test_status_check_exits_1_on_a_freshness_breach_and_0_within_the_sla(
    pipeline: Pipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    workload = generate(43, 120, tables=["customers"])
    deliver(workload, pipeline.landing, seed=1, files=1, duplicate_rate=0.0)
    pipeline.stream()
    pipeline.merge()
    newest = max(_source_ms(e.message) for e in workload.events if e.table == "customers")

    # The generated changes were committed in 2024: an hour's SLA is long breached.
    _set_sla(pipeline, "1h")
    checked_at = datetime.now(UTC)
    code = main(["status", "--check", "-c", str(pipeline.config_path), "--output", "json"])
    out = capsys.readouterr()
    health = {h["table"]: h for h in json.loads(out.out)}
    assert code == 1, out.err
    customers = health["customers"]
    assert customers["breached"] is True and customers["sla_seconds"] == 3600
    expected = checked_at.timestamp() - newest / 1000
    assert abs(customers["freshness_seconds"] - expected) < 120, (customers, expected)
    assert customers["lag_events"] == 0
    assert "freshness SLA breached" in out.err and "customers" in out.err
    # Tables without an SLA never breach, whatever their freshness.
    assert health["products"]["breached"] is False

    _set_sla(pipeline, "100000d")
    assert main(["status", "--check", "-c", str(pipeline.config_path)]) == 0
    assert "freshness customers:" in capsys.readouterr().out
