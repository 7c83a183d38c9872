"""``icetide dlt replay`` after an approved fix: the replayed records enter the ledger once
and leave the dead-letter table; a replay killed half-way and rerun gives the same result.
The unrouted dead letters are replayed with ``--unrouted`` (``--to TABLE`` routes a row
event whose source names no configured table); naming that table is refused with how.

The table's schema first says ``name`` is required, so events with a NULL name are dead
letters (``null_in_required``); the fix is the allowed change required → optional,
applied through the evolution layer; then the dead letters are replayed.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession

from icetide.cli import main
from icetide.evolution.apply import apply_plan
from icetide.evolution.plan import build_plan
from icetide.ledger import replay as replay_module
from icetide.ledger.replay import replay, replay_unrouted, show
from icetide.pipeline import SchemaStore
from icetide.schema.contract import ledger as c
from icetide.schema.file import schema_from_dict
from tests.integration.harness import Pipeline, killed_at, run_sql

ITEMS = {
    "table": "items",
    "primary_key": ["id"],
    "columns": [
        {"id": 1, "name": "id", "type": "int", "nullable": False},
        {"id": 2, "name": "name", "type": "string", "nullable": False},
        {"id": 3, "name": "qty", "type": "long"},
    ],
}


def event(key: int, name: str | None, pos: int, db: str = "inv") -> str:
    return json.dumps(
        {
            "before": None,
            "after": {"id": key, "name": name, "qty": key * 10},
            "source": {"name": "shop", "db": db, "table": "items", "file": "b.1", "pos": pos},
            "op": "c",
            "ts_ms": pos,
        }
    )


def test_replay_after_a_fix_moves_exactly_the_replayed_records_once(
    tmp_path: Any, warehouse: Any, spark: SparkSession, capsys: Any
) -> None:
    pipe = Pipeline.custom(
        tmp_path,
        warehouse,
        "dltreplay1",
        {"items": schema_from_dict(ITEMS)},
        {"items": "inv.items"},
        spark,
    )
    pipe.land(
        [
            *(event(1, "a", 1), event(2, None, 2), event(3, None, 3), "{not json"),
            *(event(4, "d", 4), event(6, "f", 6, db="inv_old")),  # a database no table names
        ]
    )
    pipe.stream()
    pipe.merge()
    refs = pipe.refs("items")
    dead = {r["message_id"]: r["reason"] for r in pipe.dead_letters(refs.dead_letters.sql)}
    assert dead == {
        "events-000001.json:2": "null_in_required",
        "events-000001.json:3": "null_in_required",
    }
    summary = show(spark, refs.dead_letters.sql, "items")
    assert summary.counts == {"null_in_required": 2} and summary.codes == {"type_conversion": 2}
    assert main(["dlt", "show", "--output", "json", "-c", str(pipe.config_path)]) == 0
    shown = {s["table"]: s for s in json.loads(capsys.readouterr().out)}
    assert shown["items"]["by_code"] == {"type_conversion": 2}
    unrouted = pipe.config.dead_letter.unrouted_table
    assert shown[unrouted]["by_code"] == {"parse": 1, "routing": 1}
    # The unrouted table is not replayed by name: the refusal says how.
    assert main(["dlt", "replay", unrouted, "-c", str(pipe.config_path)]) != 0
    assert "--unrouted" in capsys.readouterr().err

    # Before the fix a replay changes nothing: the records still fail, for the same reason.
    before = replay(spark, pipe.pipeline, "items")
    assert before.applied == [] and set(before.still_failing.values()) == {"null_in_required"}

    # The fix: name becomes optional (an allowed change), through the evolution layer.
    store = SchemaStore(pipe.config)
    old = store.current("items")
    new = old.with_columns(
        [
            col if col.name != "name" else type(col)(col.id, col.name, col.type, True)
            for col in old.columns
        ],
        version=old.version + 1,
    )
    plan = build_plan(old, new, base=refs.base, ledger=refs.cdc)
    apply_plan(plan, store, run_ddl=run_sql(spark))
    pipe.schemas = store.all()

    # A replay killed right after its ledger append (in this process: only the projected
    # records' cache is released on the way up, which a kill loses too)...
    with killed_at(replay_module, "dlt.replay.after_ledger_append"):
        replay(spark, pipe.pipeline, "items")
    assert len(pipe.rows(refs.dead_letters.sql)) == 2  # appended to the ledger, not yet removed
    # ...and rerun: nothing appended twice, both removed from the dead-letter table.
    again = replay(spark, pipe.pipeline, "items")
    assert again.applied == ["events-000001.json:2", "events-000001.json:3"]
    assert again.already == again.applied
    assert pipe.rows(refs.dead_letters.sql) == []
    ids = [r[c.MESSAGE_ID] for r in pipe.rows(refs.cdc.sql, order=c.MESSAGE_ID)]
    assert ids == [f"events-000001.json:{n}" for n in (1, 2, 3, 5)]
    assert replay(spark, pipe.pipeline, "items").replayed == 0  # nothing left

    # The unrouted ones: without --to nothing routes; with it the row event of a database
    # no table names goes to items, the unreadable one stays.
    unrouted_dlt = pipe.refs(unrouted).dead_letters.sql
    assert replay_unrouted(spark, pipe.pipeline).applied == []
    moved = replay_unrouted(spark, pipe.pipeline, to="items")
    assert moved.applied == ["events-000001.json:6"]
    assert moved.still_failing == {"events-000001.json:4": "malformed_json"}
    assert [r["message_id"] for r in pipe.rows(unrouted_dlt)] == ["events-000001.json:4"]

    pipe.merge()
    assert [(r["id"], r["name"], r["qty"]) for r in pipe.base("items")] == [
        (1, "a", 10),
        (2, None, 20),
        (3, None, 30),
        (4, "d", 40),
        (6, "f", 60),
    ]
