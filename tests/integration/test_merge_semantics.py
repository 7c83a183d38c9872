"""Targeted merge cases: each one breaks a naive ``MERGE`` of the latest event per key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.integration.events import SCHEMAS, SOURCES, TOAST, mysql, postgres
from tests.integration.harness import Pipeline


@pytest.fixture
def shop(
    tmp_path: Path, warehouse: Path, spark: SparkSession, request: pytest.FixtureRequest
) -> Pipeline:
    namespace = "sem_" + request.node.name.split("[")[0].removeprefix("test_")[:40]
    return Pipeline.custom(tmp_path, warehouse, namespace, SCHEMAS, SOURCES, spark)


def values(pipeline: Pipeline, table: str) -> list[dict[str, Any]]:
    columns = [c.name for c in pipeline.schemas[table].columns]
    return [{k: r[k] for k in columns} for r in pipeline.base(table)]


def step(pipeline: Pipeline, *lines: str) -> None:
    pipeline.land(list(lines))
    pipeline.stream()
    pipeline.merge()


def test_a_late_older_insert_does_not_resurrect_a_deleted_row(shop: Pipeline) -> None:
    step(
        shop,
        mysql("c", 100, after={"id": 1, "name": "a", "qty": 1}),
        mysql("d", 200, before={"id": 1, "name": "a", "qty": 1}),
    )
    assert values(shop, "items") == []
    step(shop, mysql("c", 150, after={"id": 1, "name": "late", "qty": 9}))
    assert values(shop, "items") == []
    step(shop, mysql("c", 300, after={"id": 1, "name": "again", "qty": 2}))
    assert values(shop, "items") == [{"id": 1, "name": "again", "qty": 2}]


def test_an_older_update_never_overwrites_a_newer_row(shop: Pipeline) -> None:
    step(
        shop,
        mysql("c", 100, after={"id": 1, "name": "a", "qty": 1}),
        mysql(
            "u",
            300,
            before={"id": 1, "name": "a", "qty": 1},
            after={"id": 1, "name": "new", "qty": 3},
        ),
    )
    step(
        shop,
        mysql(
            "u",
            200,
            before={"id": 1, "name": "a", "qty": 1},
            after={"id": 1, "name": "stale", "qty": 2},
        ),
    )
    [row] = shop.base("items")
    assert (row["name"], row["qty"], int(row["_icetide_position"])) == (
        "new",
        3,
        (3 * 10**13 + 300) * 10**6,
    )
    # The stale update changed no row, yet the watermark moved past it: the next merge
    # has nothing to read again.
    [again] = [r for r in shop.merge() if r.table == "items"]
    assert again.events == 0


def test_binlog_positions_order_by_file_number_then_offset_not_as_text(shop: Pipeline) -> None:
    step(
        shop,
        mysql("c", 4, after={"id": 1, "name": "in 10", "qty": 10}, file="mysql-bin.000010"),
        mysql("c", 999_999, after={"id": 1, "name": "in 9", "qty": 9}, file="mysql-bin.000009"),
        # Two rows of one binlog event share the offset and differ by row number.
        mysql("c", 120, after={"id": 2, "name": "row 1", "qty": 1}, row=1, file="mysql-bin.000010"),
        mysql(
            "u",
            120,
            before={"id": 2},
            after={"id": 2, "name": "row 0", "qty": 0},
            row=0,
            file="mysql-bin.000010",
        ),
    )
    assert values(shop, "items") == [
        {"id": 1, "name": "in 10", "qty": 10},
        {"id": 2, "name": "row 1", "qty": 1},
    ]


def test_an_update_that_changes_the_key_moves_the_row(shop: Pipeline) -> None:
    step(
        shop,
        mysql("c", 100, after={"id": 1, "name": "a", "qty": 1}),
        mysql("c", 110, after={"id": 5, "name": "other", "qty": 5}),
    )
    step(
        shop,
        mysql(
            "u",
            200,
            before={"id": 1, "name": "a", "qty": 1},
            after={"id": 2, "name": "a", "qty": 1},
        ),
    )
    assert [r["id"] for r in values(shop, "items")] == [2, 5]
    # A late update of the old key, older than the key change, must not bring it back.
    step(
        shop,
        mysql(
            "u",
            150,
            before={"id": 1, "name": "a", "qty": 1},
            after={"id": 1, "name": "late", "qty": 7},
        ),
    )
    assert [r["id"] for r in values(shop, "items")] == [2, 5]


def test_unchanged_toast_values_keep_the_stored_value(shop: Pipeline) -> None:
    body = "x" * 5000
    step(shop, postgres("c", 0xFFFF_FF00, after={"id": 1, "title": "t1", "body": body}))
    # Across merges: the update says the body is unchanged.
    step(shop, postgres("u", 0x1_0000_0100, after={"id": 1, "title": "t2", "body": TOAST}))
    assert values(shop, "docs") == [{"id": 1, "title": "t2", "body": body}]
    # Within one batch: insert then an unchanged-TOAST update, and an update that does
    # change the body after one that does not.
    step(
        shop,
        postgres("c", 0x1_0000_0200, after={"id": 2, "title": "a", "body": "first"}),
        postgres("u", 0x1_0000_0300, after={"id": 2, "title": "b", "body": TOAST}),
        postgres("u", 0x1_0000_0400, after={"id": 1, "title": "t3", "body": TOAST}),
        postgres("u", 0x1_0000_0500, after={"id": 1, "title": "t4", "body": "changed"}),
    )
    assert values(shop, "docs") == [
        {"id": 1, "title": "t4", "body": "changed"},
        {"id": 2, "title": "b", "body": "first"},
    ]


def test_truncate_empties_the_table_and_drops_older_late_events(shop: Pipeline) -> None:
    step(
        shop,
        mysql("c", 100, after={"id": 1, "name": "a", "qty": 1}),
        mysql("c", 110, after={"id": 2, "name": "b", "qty": 2}),
    )
    step(shop, mysql("t", 200), mysql("c", 300, after={"id": 3, "name": "c", "qty": 3}))
    assert [r["id"] for r in values(shop, "items")] == [3]
    step(shop, mysql("c", 150, after={"id": 4, "name": "late", "qty": 4}))
    assert [r["id"] for r in values(shop, "items")] == [3]


def test_ledger_rows_carry_typed_positions_images_and_metadata(shop: Pipeline) -> None:
    shop.land(
        [
            mysql(
                "u",
                4242,
                before={"id": 7, "name": "old", "qty": 1},
                after={"id": 7, "name": "new", "qty": 2},
                file="mysql-bin.000012",
                row=3,
                wrap=True,
            ),
            postgres("c", 0x1_0000_0010, after={"id": 1, "title": "t", "body": "b"}, tx_id=991),
        ],
        name="events-000001.json",
    )
    shop.stream()
    [item] = shop.rows(shop.refs("items").cdc)
    assert item["id"] == 7 and item["_op"] == "u"
    assert item["_after"] == {"id": 7, "name": "new", "qty": 2}
    assert item["_before"] == {"id": 7, "name": "old", "qty": 1}
    assert int(item["_position"]) == (12 * 10**13 + 4242) * 10**6 + 3
    assert "mysql-bin.000012" in item["_position_text"]
    assert item["_message_id"] == "events-000001.json:1"
    assert item["_source_ts"] is not None and item["_ingested_at"] is not None
    [doc] = shop.rows(shop.refs("docs").cdc)
    assert int(doc["_position"]) == 0x1_0000_0010 * 10**6
    assert doc["_tx_id"] == "991"
    assert doc["_message_id"] == "events-000001.json:2"
    spec = shop.session.sql(f"SELECT * FROM {shop.refs('items').cdc}.partitions").columns
    assert "partition" in spec
