"""Bad events land in dead-letter tables with a distinct reason; they never stop the stream."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.integration.events import SCHEMAS, SOURCES, mysql
from tests.integration.harness import Pipeline


@pytest.fixture
def shop(tmp_path: Path, warehouse: Path, spark: SparkSession) -> Pipeline:
    return Pipeline.custom(tmp_path, warehouse, "dead_letters", SCHEMAS, SOURCES, spark)


def test_each_kind_of_bad_event_gets_its_own_reason_and_good_events_flow(shop: Pipeline) -> None:
    good = mysql("c", 100, after={"id": 1, "name": "ok", "qty": 1})
    missing_op = json.loads(mysql("c", 101, after={"id": 2, "name": "x", "qty": 1}))
    del missing_op["op"]
    lines = [
        '{"before": null, "after": {"id": 3',  # 1 malformed
        json.dumps(missing_op),  # 2
        mysql("x", 102, after={"id": 4, "name": "x", "qty": 1}),  # 3 unknown op
        mysql("c", 103, after={"id": "four", "name": "x", "qty": 1}),  # 4 wrong type
        mysql("c", 104, after={"id": 5, "name": "x", "qty": 1}, table="nope"),  # 5 unmapped
        "null",  # 6 tombstone
        good,  # 7
    ]
    shop.land(lines, name="events-000001.json")
    shop.stream()
    shop.merge()

    assert [r["name"] for r in shop.base("items")] == ["ok"]
    items = shop.dead_letters(shop.refs("items").dead_letters)
    unrouted = shop.dead_letters(shop.refs(shop.config.dead_letter.unrouted_table).dead_letters)
    reasons = {r["message_id"]: r["reason"] for r in items + unrouted}
    assert reasons == {
        "events-000001.json:1": "malformed_json",
        "events-000001.json:2": "missing_op",
        "events-000001.json:3": "unknown_op",
        "events-000001.json:4": "type_mismatch",
        "events-000001.json:5": "unknown_table",
    }
    assert {r["message_id"] for r in items} == {
        "events-000001.json:2",
        "events-000001.json:3",
        "events-000001.json:4",
    }
    for row in items + unrouted:
        number = int(row["message_id"].rsplit(":", 1)[1])
        assert row["payload"] == lines[number - 1]
        assert row["error"]
    summary = next(line for line in shop.logs if line.startswith("ledger batch 0"))
    assert "items 1" in summary and "skipped tombstone 1" in summary
    assert "type_mismatch 1 [events-000001.json:4]" in summary

    # A rerun over the same files adds nothing anywhere: the checkpoint holds.
    shop.stream()
    assert len(shop.dead_letters(shop.refs("items").dead_letters)) == 3
    assert shop.session.table(shop.refs("items").cdc.sql).count() == 1


def test_the_merge_is_woken_by_a_batch_that_stored_rows_not_by_dead_letters_only(
    shop: Pipeline,
) -> None:
    """``icetide run``'s wake reads the ledger's real report: its ``events`` figures."""
    import threading

    from icetide.cli.run import wakes_on_stored_rows
    from icetide.ledger.stage import LedgerStage
    from icetide.pipeline import Pipeline as StagePipeline
    from icetide.progress import Reporter

    wake = threading.Event()
    stage = LedgerStage(
        shop.session,
        StagePipeline(shop.config, shop.schemas, Reporter(wakes_on_stored_rows(wake))),
    )
    shop.land(['{"before": null, "after": {"id": 3', "null"], name="events-000001.json")
    stage.start(once=True).awaitTermination()
    assert shop.dead_letters(shop.refs(shop.config.dead_letter.unrouted_table).dead_letters)
    assert not wake.is_set()
    shop.land([mysql("c", 100, after={"id": 1, "name": "ok", "qty": 1})])
    stage.start(once=True).awaitTermination()
    assert wake.is_set()
