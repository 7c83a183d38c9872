"""The ledger stage against hostile input (issue 12, items 4–9 and 15): one pipeline,
a stream run over a crafted landing file, a second run after the file was broken into,
then each item checked on its own against the ledger and dead-letter tables.

A second test pushes a seeded file of a few hundred mutated and random lines through the
real stage and accounts for every line exactly once.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from icetide.config import load_config, load_table_schemas
from icetide.ledger.decode import DEAD, ROW, SKIP, classify_one, project_one
from icetide.ledger.source import split_lines
from icetide.ledger.stage import routes_of
from icetide.observe.status import PipelineStatus, pipeline_status, render_status, status_dicts
from icetide.schema.file import dump_schema_file, schema_from_dict
from tests.integration.events import ITEMS, mysql
from tests.integration.harness import Pipeline
from tests.ledger_lines import ITEMS as JSON_ITEMS
from tests.ledger_lines import seeded_lines

CUSTOMERS = schema_from_dict(
    {
        "table": "customers",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {"id": 2, "name": "name", "type": "string"},
        ],
    }
)
FILE1 = "events-000001.json"


def customer(server: str, connector: str, key: int, name: str) -> str:
    """An insert into ``inventory.customers`` from ``server`` (MySQL db or PG schema)."""
    source: dict[str, Any] = {"connector": connector, "name": server, "table": "customers"}
    if connector == "mysql":
        source.update(db="inventory", file="mysql-bin.000001", pos=100 + key)
    else:
        source.update(db="shop", schema="inventory", lsn=1000 + key, txId=7)
    return json.dumps({"op": "c", "before": None, "after": {"id": key, "name": name},
        "source": source})  # fmt: skip


def write_config(root: Path, warehouse: Path, namespace: str) -> Path:
    schemas = {"items": ITEMS, "my_customers": CUSTOMERS, "pg_customers": CUSTOMERS}
    for name, schema in schemas.items():
        dump_schema_file(schema.renamed(name), root / "schemas" / f"{name}.yaml")
    doc = {
        "pipeline": "hardening",
        "state_dir": "./state",
        "catalog": {"name": "lake", "warehouse": str(warehouse), "namespace": namespace},
        "spark": {"master": "local[2]", "shuffle_partitions": 4},
        "tables": [
            {"name": "items", "source": "shop.items", "buckets": 2},
            {"name": "my_customers", "source": "srv.inventory.customers", "buckets": 2},
            {"name": "pg_customers", "source": "pg.inventory.customers", "buckets": 2},
        ],
    }
    path = root / "icetide.yaml"
    path.write_text(json.dumps(doc))
    return path


LINES: list[bytes] = [
    b"\xef\xbb\xbf" + mysql("c", 100, after={"id": 1, "name": "bom", "qty": 1}).encode(),  # 1
    b"   ",  # 2 whitespace only
    b"\t\r",  # 3 whitespace only
    mysql("c", 101, after={"id": 9, "name": "caf\u00e9", "qty": 1})
    .replace("\\u00e9", "@")
    .encode()
    .replace(b"@", b"\xe9"),  # 4 invalid UTF-8 (a Latin-1 é)
    b"[" * 10_000,  # 5 nested too deep
    mysql("c", 102, after={"id": 2, "name": "extra", "qty": 1, "loyalty": "gold"}).encode(),
    customer("srv", "mysql", 10, "from mysql").encode(),  # 7
    customer("pg", "postgresql", 20, "from postgres").encode(),  # 8
    customer("other", "mysql", 30, "from nowhere").encode(),  # 9 no table takes it
    b'{"before": null, "after": {"id": 3',  # 10 malformed
    mysql("c", 103, after={"id": 3, "name": "after the bad ones", "qty": 1}).encode(),  # 11
]


@pytest.fixture(scope="module")
def run(
    tmp_path_factory: pytest.TempPathFactory, warehouse: Path, spark: SparkSession
) -> Iterator[tuple[Pipeline, PipelineStatus]]:
    root = tmp_path_factory.mktemp("hardening")
    path = write_config(root, warehouse, "hardening")
    config = load_config(path)
    pipe = Pipeline(root, path, config, load_table_schemas(config), spark)
    pipe.landing.mkdir(parents=True)
    first = pipe.landing / FILE1
    tmp = root / "tmp1"
    tmp.write_bytes(b"\n".join(LINES) + b"\n")
    tmp.rename(first)
    pipe.stream()

    # Against the contract: append to a file already read; leave files the source skips.
    with first.open("ab") as out:
        out.write(mysql("c", 104, after={"id": 4, "name": "never read", "qty": 1}).encode())
    (pipe.landing / "_later.json").write_text(mysql("c", 105, after={"id": 5}) + "\n")
    (pipe.landing / "sub").mkdir()
    (pipe.landing / "sub" / "x.json").write_text(mysql("c", 106, after={"id": 6}) + "\n")
    pipe.stream()  # no new file, so no batch: the run's start looks at the folder
    yield pipe, pipeline_status(spark, config)


def dead(pipe: Pipeline, table: str) -> dict[str, dict[str, Any]]:
    rows = pipe.rows(pipe.refs(table).dead_letters)
    return {r["message_id"]: r for r in rows}


def ledger(pipe: Pipeline, table: str) -> dict[int, dict[str, Any]]:
    """Ledger rows by key (one event per key here)."""
    return {r["id"]: r for r in pipe.rows(pipe.refs(table).cdc)}


def summary(pipe: Pipeline) -> str:
    return next(line for line in pipe.logs if line.startswith("ledger batch 0"))


def test_item4_events_route_on_the_server_name(run: tuple[Pipeline, PipelineStatus]) -> None:
    pipe, _ = run
    assert [r["_after"]["name"] for r in ledger(pipe, "my_customers").values()] == ["from mysql"]
    assert [r["_after"]["name"] for r in ledger(pipe, "pg_customers").values()] == ["from postgres"]
    unrouted = dead(pipe, pipe.config.dead_letter.unrouted_table)
    assert unrouted[f"{FILE1}:9"]["reason"] == "unknown_table"
    assert "'other'" in unrouted[f"{FILE1}:9"]["error"]


def test_item5_invalid_utf8_is_dead_lettered_with_its_exact_bytes(
    run: tuple[Pipeline, PipelineStatus],
) -> None:
    pipe, _ = run
    letter = dead(pipe, "items")[f"{FILE1}:4"]
    assert letter["reason"] == "invalid_utf8"
    assert base64.b64decode(letter["payload_b64"]) == LINES[3]
    assert 9 not in ledger(pipe, "items")


def test_item6_deep_nesting_is_one_dead_letter_and_the_rest_of_the_file_applies(
    run: tuple[Pipeline, PipelineStatus],
) -> None:
    pipe, _ = run
    letter = dead(pipe, pipe.config.dead_letter.unrouted_table)[f"{FILE1}:5"]
    assert letter["reason"] == "malformed_json"
    assert base64.b64decode(letter["payload_b64"]) == LINES[4]
    assert sorted(ledger(pipe, "items")) == [1, 2, 3]


def test_item7_a_bom_and_blank_lines_are_what_ndjson_users_expect(
    run: tuple[Pipeline, PipelineStatus],
) -> None:
    pipe, _ = run
    assert ledger(pipe, "items")[1]["_after"]["name"] == "bom"
    assert "tombstone" not in summary(pipe)
    ids = {r["_message_id"] for r in ledger(pipe, "items").values()}
    assert ids == {f"{FILE1}:1", f"{FILE1}:6", f"{FILE1}:11"}


def test_item8_a_changed_file_is_warned_and_counted_skipped_names_logged_once(
    run: tuple[Pipeline, PipelineStatus],
) -> None:
    pipe, status = run
    warnings = [line for line in pipe.logs if "changed after it was read" in line]
    assert len(warnings) == 1 and FILE1 in warnings[0]
    assert status.notes is not None
    assert [c.file for c in status.notes.changed_files] == [FILE1]
    assert status_dicts(status)[0]["landing_changed_files"] == [FILE1]
    assert f"1 landing file(s) changed after they were read, changes never read: {FILE1}" in (
        render_status(status)
    )
    skipped = [line for line in pipe.logs if line.startswith("landing: ")]
    assert sorted(line.split()[1] for line in skipped) == ["_later.json", "sub"]


def test_item9_columns_not_in_the_schema_are_counted_logged_and_shown(
    run: tuple[Pipeline, PipelineStatus],
) -> None:
    pipe, status = run
    assert "items: columns not in the schema, kept in _rescued: loyalty 1" in summary(pipe)
    items = next(r for r in status.tables if r.table == "items")
    assert items.extra_columns == {"loyalty": 1}
    assert "items: event columns not in the schema, kept in _rescued: loyalty (1 events)" in (
        render_status(status)
    )


def test_item15_summary_names_sample_ids_and_status_counts_unrouted(
    run: tuple[Pipeline, PipelineStatus],
) -> None:
    pipe, status = run
    line = summary(pipe)
    assert "[message_id]" not in line
    assert f"malformed_json 2 [{FILE1}:" in line and f"{FILE1}:10" in line
    assert f"unknown_table 1 [{FILE1}:9]" in line
    assert status.notes is not None and status.notes.unrouted_dead_letters == 3
    assert status_dicts(status)[0]["unrouted_dead_letters"] == 3
    assert "unrouted dead letters: 3" in render_status(status)


def test_a_seeded_file_of_hostile_lines_is_accounted_for_exactly_once(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    pipe = Pipeline.custom(
        tmp_path, warehouse, "hostile", {"items": JSON_ITEMS}, {"items": "shop.items"}, spark
    )
    lines = seeded_lines(seed=12, count=300)
    content = b"\n".join(raw for raw, _ in lines) + b"\n"
    pipe.landing.mkdir(parents=True)
    (tmp_path / "hostile.json").write_bytes(content)
    (tmp_path / "hostile.json").rename(pipe.landing / "hostile.json")

    # What the pure Python path decides for each message is what the stage must do.
    routes, expected = routes_of(pipe.config), {}
    for message_id, raw in split_lines("hostile.json", content):
        table, status, reason, _ = classify_one(raw, routes)
        if status == ROW:
            row = project_one(raw, JSON_ITEMS)
            status, reason = row["_status"], row.get("_reason", "")
        expected[message_id] = (status, reason, table)
    valid_keys = {n + 1 for n, (_, valid) in enumerate(lines) if valid}  # keys are line order + 1

    pipe.stream()
    pipe.merge()

    ledger = [r["_message_id"] for r in pipe.rows(pipe.refs("items").cdc)]
    items_dlt = pipe.rows(pipe.refs("items").dead_letters)
    unrouted = pipe.rows(pipe.refs(pipe.config.dead_letter.unrouted_table).dead_letters)
    letters = [r["message_id"] for r in items_dlt + unrouted]
    assert len(ledger) == len(set(ledger)) and len(letters) == len(set(letters))
    assert not set(ledger) & set(letters)
    assert set(ledger) == {m for m, (s, _, _) in expected.items() if s == ROW}
    assert set(letters) == {m for m, (s, _, _) in expected.items() if s == DEAD}
    for row in items_dlt + unrouted:
        assert row["reason"] == expected[row["message_id"]][1]
        number = int(row["message_id"].rsplit(":", 1)[1])
        assert base64.b64decode(row["payload_b64"]) == content.split(b"\n")[number - 1]
    skipped = sum(1 for s, _, _ in expected.values() if s == SKIP)
    assert len(ledger) + len(letters) + skipped == len(expected)
    assert valid_keys <= {r["id"] for r in pipe.base("items")}
    assert len(valid_keys) > 40
