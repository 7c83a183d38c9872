"""Primary-key changes that leave unchanged TOAST values out (PostgreSQL, REPLICA IDENTITY
DEFAULT): the new key inherits them from the old key, within a batch, across batches and
along chains; when no value exists anywhere the change is dead-lettered, never NULLed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.merge import stage as merge_stage
from icetide.schema.contract.ledger import UNAVAILABLE_VALUE_LOST
from tests.integration.events import SCHEMAS, SOURCES, TOAST, postgres
from tests.integration.harness import Pipeline, killed_at


@pytest.fixture
def shop(
    tmp_path: Path, warehouse: Path, spark: SparkSession, request: pytest.FixtureRequest
) -> Pipeline:
    namespace = "keytoast_" + request.node.name.removeprefix("test_")[:40]
    return Pipeline.custom(tmp_path, warehouse, namespace, SCHEMAS, SOURCES, spark)


def body(n: int) -> str:
    return f"body {n} " + "x" * 3000


def insert(lsn: int, key: int, title: str) -> str:
    return postgres("c", lsn, after={"id": key, "title": title, "body": body(key)})


def key_change(lsn: int, old: int, new: int, title: str) -> list[str]:
    """What capture and Debezium send for ``UPDATE docs SET id = new WHERE id = old`` under
    REPLICA IDENTITY DEFAULT: a delete of the old key (key only) and a create of the new
    one without the unchanged TOASTed body, both at one LSN."""
    return [
        postgres("d", lsn, before={"id": old}),
        postgres("c", lsn, after={"id": new, "title": title, "body": TOAST}),
    ]


def docs(pipeline: Pipeline) -> dict[int, tuple[str, str]]:
    return {r["id"]: (r["title"], r["body"]) for r in pipeline.base("docs")}


def step(pipeline: Pipeline, *lines: str) -> None:
    pipeline.land(list(lines))
    pipeline.stream()
    pipeline.merge()


def test_a_new_key_inherits_unchanged_toast_values_or_the_change_is_dead_lettered_once(
    shop: Pipeline,
) -> None:
    """Every case in three merges (each a stream and merge round costs seconds): in one
    batch, across batches, chains, the update form, a delete and create merged apart,
    and values found nowhere, the last merge killed after its dead letters and rerun."""
    step(
        shop,
        insert(0x100, 1, "one"),
        *key_change(0x200, 1, 2, "one"),  # the old row only in this batch
        insert(0x300, 3, "three"),
        insert(0x310, 5, "five"),
        insert(0x320, 10, "ten"),
        insert(0x330, 22, "twenty-two"),
        insert(0x340, 24, "twenty-four"),
    )
    assert docs(shop) == {
        2: ("one", body(1)),
        3: ("three", body(3)),
        5: ("five", body(5)),
        10: ("ten", body(10)),
        22: ("twenty-two", body(22)),
        24: ("twenty-four", body(24)),
    }
    moved_apart = [*key_change(0xA00, 22, 23, "twenty-two"), *key_change(0xA10, 24, 25, "new")]
    step(
        shop,
        *key_change(0x400, 3, 4, "three"),  # the old row only in the mirror
        # A chain, the middle key's other columns changed in between.
        *key_change(0x500, 5, 6, "five"),
        postgres("u", 0x510, after={"id": 6, "title": "six", "body": TOAST}),
        *key_change(0x520, 6, 7, "six"),
        # A chain whose middle key changed the body itself.
        *key_change(0x600, 10, 11, "ten"),
        postgres("u", 0x610, after={"id": 11, "title": "ten", "body": "changed"}),
        *key_change(0x620, 11, 12, "ten"),
        # The other form: one update whose before image has the old key.
        postgres("u", 0x800, before={"id": 2}, after={"id": 8, "title": "one", "body": TOAST}),
        # The old row exists nowhere: dead-lettered, not inserted with a NULL body.
        *key_change(0x900, 30, 31, "lost"),
        postgres("u", 0x910, before={"id": 32}, after={"id": 33, "title": "lost", "body": TOAST}),
        # Deletes whose creates come in the next merge: 22's row is in the mirror's
        # previous snapshot, 24's body changed in this batch, 34 never existed.
        postgres("u", 0x9F0, after={"id": 24, "title": "twenty-four", "body": "new body"}),
        moved_apart[0],
        moved_apart[2],
        postgres("d", 0xA20, before={"id": 34}),
    )
    assert docs(shop) == {
        4: ("three", body(3)),
        7: ("six", body(5)),
        8: ("one", body(1)),
        12: ("ten", "changed"),
    }
    shop.land(
        [
            moved_apart[1],
            moved_apart[3],
            postgres("c", 0xA20, after={"id": 35, "title": "lost", "body": TOAST}),
        ]
    )
    shop.stream()
    # Killed in this process (a child with its own JVM cost most of this test): only the
    # dead-letter cache is released on the way up, which a kill loses too.
    with killed_at(merge_stage, "merge.after_dead_letters"):
        shop.merge()
    assert 23 not in docs(shop)  # the MERGE never committed
    shop.merge()
    assert docs(shop) == {
        4: ("three", body(3)),
        7: ("six", body(5)),
        8: ("one", body(1)),
        12: ("ten", "changed"),
        23: ("twenty-two", body(22)),
        25: ("new", "new body"),
    }

    letters = shop.dead_letters(shop.refs("docs").dead_letters)
    dead = {json.loads(r["payload"])["after"]["id"]: r for r in letters}
    assert sorted(dead) == [31, 33, 35]
    assert len(letters) == len(dead), letters  # once each, the killed merge's too
    assert {r["reason"] for r in dead.values()} == {UNAVAILABLE_VALUE_LOST}
    assert '{"id":32}' in dead[33]["error"] and '{"id":33}' in dead[33]["error"]
    assert '{"id":34}' in dead[35]["error"]
    lost = dead[31]
    assert lost["source_table"] == "docs"
    assert '{"id":30}' in lost["error"] and '{"id":31}' in lost["error"]
    assert "columns body were unchanged TOAST values" in lost["error"]
    payload = json.loads(lost["payload"])
    assert payload["old_key"] == {"id": 30} and payload["unavailable"] == ["body"]
    assert payload["after"] == {"id": 31, "title": "lost", "body": None}
    assert any("dead-lettered" in line for line in shop.logs), shop.logs
