"""Every Debezium example message in the fixtures, decoded and checked value by value.

The fixtures are written by the Debezium project and kept as they are in
``data/debezium_examples`` (PROVENANCE.md there says where each comes from).
``ICETIDE_FIXTURES`` may point at another copy (the folder or its parent).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from icetide.events.envelope import decode_message
from icetide.events.model import ChangeEvent, Decoded, Skipped, SourceTable
from icetide.events.position import Position

IN_REPOSITORY = Path(__file__).parent / "data" / "debezium_examples"


def fixtures_dir() -> Path:
    """``ICETIDE_FIXTURES`` (the folder or its parent), else the copy in the repository."""
    override = os.environ.get("ICETIDE_FIXTURES")
    if override:
        root = Path(override)
        return root / "debezium" if (root / "debezium").is_dir() else root
    return IN_REPOSITORY


FIXTURES = fixtures_dir()
FILES = sorted(FIXTURES.glob("*/*.json"))

CUSTOMERS_MYSQL = SourceTable(database="inventory", schema=None, table="customers")
CUSTOMERS_PG = SourceTable(database="postgres", schema="public", table="customers")
ANNE = {"id": 1004, "first_name": "Anne", "last_name": "Kretchmar", "email": "annek@noanswer.org"}


def decode(name: str) -> Decoded:
    folder = name.split("_", 1)[0]
    return decode_message((FIXTURES / folder / name).read_bytes())


def row_event(name: str) -> ChangeEvent:
    event = decode(name)
    assert isinstance(event, ChangeEvent), event
    return event


def skipped(name: str) -> Skipped:
    result = decode(name)
    assert isinstance(result, Skipped), result
    return result


def utc_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def binlog(offset: int) -> tuple[str, int, str]:
    """(kind, key, text) of ``mysql-bin.000003:offset:0``."""
    return ("binlog", (3 * 10**13 + offset) * 10**6, f"mysql-bin.000003:{offset}:0")


def where(position: Position | None) -> tuple[str, int, str] | None:
    return None if position is None else (position.kind, position.key, position.text)


# --- MySQL ---------------------------------------------------------------------------------


def check_mysql_c_serde_with_schema() -> None:
    e = row_event("mysql_c_serde_with_schema.json")
    assert (e.op, e.source, e.before, e.after) == ("c", CUSTOMERS_MYSQL, None, ANNE)
    assert where(e.position) == binlog(154)
    assert e.source_ts is None  # source.ts_ms is 0
    assert e.event_ts == datetime(2016, 6, 9, 16, 56, 51, 815000, tzinfo=UTC)
    assert (e.tx_id, e.unavailable, e.connector, e.snapshot) == (None, frozenset(), "mysql", False)
    assert e.after is not None and type(e.after["id"]) is int


def check_mysql_c_with_schema() -> None:
    e = row_event("mysql_c_with_schema.json")
    assert (e.op, e.source, e.before, e.after) == ("c", CUSTOMERS_MYSQL, None, ANNE)
    assert where(e.position) == binlog(154)
    assert e.source_ts is None
    assert e.event_ts == utc_ms(1465491411815)
    assert (e.tx_id, e.connector, e.snapshot) == (None, "mysql", False)


def check_mysql_d_doc() -> None:
    e = row_event("mysql_d_doc.json")
    assert (e.op, e.source, e.after) == ("d", CUSTOMERS_MYSQL, None)
    assert e.before == {**ANNE, "first_name": "Anne Marie"}
    assert where(e.position) == binlog(805)
    assert e.source_ts == datetime(2016, 6, 10, 18, 5, 2, 300000, tzinfo=UTC)
    assert e.event_ts == utc_ms(1465581902461)
    assert (e.tx_id, e.connector, e.snapshot) == (None, "mysql", False)


def check_mysql_key_customers_with_schema() -> None:
    s = skipped("mysql_key_customers_with_schema.json")
    assert (s.kind, s.detail) == ("key", {"key": {"id": 1001}})


def check_mysql_r_snapshot_engine_wasm_no_schema() -> None:
    e = row_event("mysql_r_snapshot_engine_wasm_no_schema.json")
    assert (e.op, e.source, e.before, e.after) == ("r", CUSTOMERS_MYSQL, None, ANNE)
    assert where(e.position) == binlog(797)
    assert e.source_ts == datetime(2024, 11, 11, 12, 18, 31, tzinfo=UTC)
    assert e.event_ts == utc_ms(1731327512006)
    assert (e.tx_id, e.connector, e.snapshot) == (None, "mysql", True)  # "true" as a string


def check_mysql_r_snapshot_tutorial_with_schema() -> None:
    e = row_event("mysql_r_snapshot_tutorial_with_schema.json")
    assert (e.op, e.source, e.before, e.after) == ("r", CUSTOMERS_MYSQL, None, ANNE)
    # No connector field in this old source block: file + pos still make it a binlog position.
    assert where(e.position) == binlog(154)
    assert e.source_ts is None  # ts_sec is 0
    assert e.event_ts == utc_ms(1486500577691)
    assert (e.tx_id, e.connector, e.snapshot) == (None, None, True)


def check_mysql_schemachange_key_doc() -> None:
    s = skipped("mysql_schemachange_key_doc.json")
    assert (s.kind, s.detail) == ("key", {"key": {"databaseName": "inventory"}})


def check_mysql_schemachange_value_doc() -> None:
    s = skipped("mysql_schemachange_value_doc.json")
    assert s.kind == "schema_change"
    assert s.detail["ddl"] == "ALTER TABLE customers ADD middle_name varchar(255) AFTER first_name"
    assert (s.detail["databaseName"], s.detail["schemaName"], s.detail["table"]) == (
        "inventory",
        None,
        "customers",
    )
    [change] = s.detail["tableChanges"]
    assert (change["type"], change["id"]) == ("ALTER", '"inventory"."customers"')
    assert [c["name"] for c in change["table"]["columns"]] == [
        "id",
        "first_name",
        "middle_name",
        "last_name",
        "email",
    ]
    assert where(s.detail["position"]) == binlog(570)
    assert s.detail["source_ts"] == utc_ms(1651535750218)


def check_mysql_t_truncate_doc() -> None:
    e = row_event("mysql_t_truncate_doc.json")
    assert (e.op, e.source, e.before, e.after) == ("t", CUSTOMERS_MYSQL, None, None)
    assert where(e.position) == binlog(484)
    assert e.source_ts == utc_ms(1465581029100)
    assert e.event_ts == utc_ms(1465581029523)
    assert (e.tx_id, e.unavailable, e.connector) == (None, frozenset(), "mysql")


def check_mysql_tombstone_tutorial() -> None:
    assert skipped("mysql_tombstone_tutorial.json") == Skipped("tombstone")


def check_mysql_transaction_begin() -> None:
    s = skipped("mysql_transaction_begin.json")
    assert s.kind == "transaction"
    assert s.detail["status"] == "BEGIN"
    assert s.detail["id"] == "0e4d5dcd-a33b-11ea-80f1-02010a22a99e:10"
    assert s.detail["event_count"] is None


def check_mysql_transaction_end() -> None:
    s = skipped("mysql_transaction_end.json")
    assert s.kind == "transaction"
    assert (s.detail["status"], s.detail["event_count"]) == ("END", 2)
    assert s.detail["id"] == "0e4d5dcd-a33b-11ea-80f1-02010a22a99e:10"
    assert [d["data_collection"] for d in s.detail["data_collections"]] == ["s1.a", "s2.a"]


def check_mysql_u_doc() -> None:
    e = row_event("mysql_u_doc.json")
    assert (e.op, e.source) == ("u", CUSTOMERS_MYSQL)
    assert e.before == ANNE
    assert e.after == {**ANNE, "first_name": "Anne Marie"}
    assert where(e.position) == binlog(484)
    assert e.source_ts == utc_ms(1465581029100)
    assert e.event_ts == utc_ms(1465581029523)
    assert (e.tx_id, e.connector, e.snapshot) == (None, "mysql", False)


def check_mysql_u_kubernetes_doc() -> None:
    e = row_event("mysql_u_kubernetes_doc.json")
    sally = {"id": 1001, "first_name": "Sally", "last_name": "Thomas"}
    assert (e.op, e.source) == ("u", CUSTOMERS_MYSQL)
    assert e.before == {**sally, "email": "sally.thomas@acme.com"}
    assert e.after == {**sally, "first_name": "Sally Marie", "email": "sally.thomas@acme.com"}
    assert where(e.position) == binlog(401)
    assert e.source_ts == datetime(2022, 3, 3, 9, 41, 7, tzinfo=UTC)
    assert e.event_ts == utc_ms(1646300467746)
    assert (e.tx_id, e.connector, e.snapshot) == (None, "mysql", False)  # "false" string


def check_mysql_u_serde_without_schema() -> None:
    e = row_event("mysql_u_serde_without_schema.json")
    assert (e.op, e.source) == ("u", CUSTOMERS_MYSQL)
    assert e.before == {**ANNE, "first_name": "Anne-Marie"}
    assert e.after == ANNE
    assert where(e.position) == binlog(154)
    assert e.source_ts is None
    assert e.event_ts == utc_ms(1465491411815)
    assert (e.tx_id, e.connector, e.snapshot) == (None, "mysql", False)


# --- PostgreSQL ----------------------------------------------------------------------------


def check_postgres_c_with_schema() -> None:
    e = row_event("postgres_c_with_schema.json")
    assert (e.op, e.source, e.before) == ("c", CUSTOMERS_PG, None)
    assert e.after == {**ANNE, "id": 1}
    assert where(e.position) == ("lsn", 24023128 * 10**6, "0/16E9058:0")
    assert e.source_ts == utc_ms(1559033904863)
    assert e.event_ts == utc_ms(1559033904863)
    assert (e.tx_id, e.connector, e.snapshot) == ("555", "postgresql", True)


def check_postgres_c_with_transaction_block_doc() -> None:
    e = row_event("postgres_c_with_transaction_block_doc.json")
    assert (e.op, e.source, e.position, e.before) == ("c", None, None, None)
    assert e.after == {"pk": "2", "aa": "1"}  # quoted in the doc; project_event types them
    assert e.event_ts == datetime(2020, 1, 30, 13, 28, 4, 335000, tzinfo=UTC)  # "158…" string
    assert (e.source_ts, e.tx_id, e.connector, e.snapshot) == (None, "571:53195832", None, False)


def check_postgres_m_message_real_no_schema() -> None:
    s = skipped("postgres_m_message_real_no_schema.json")
    assert s.kind == "message"
    assert s.detail["prefix"] == "test-prefix"
    content = json.loads(base64.b64decode(s.detail["content"]))
    assert content["item"] == "Debezium in Action"


def check_postgres_t_truncate_doc() -> None:
    e = row_event("postgres_t_truncate_doc.json")
    assert (e.op, e.source, e.before, e.after) == ("t", CUSTOMERS_PG, None, None)
    assert where(e.position) == ("lsn", 46523128 * 10**6, "0/2C5E2F8:0")
    assert e.source_ts == utc_ms(1559033904863)
    assert e.event_ts == utc_ms(1559033904961)
    assert (e.tx_id, e.connector, e.snapshot) == ("556", "postgresql", False)


def check_postgres_transaction_begin() -> None:
    s = skipped("postgres_transaction_begin.json")
    assert s.kind == "transaction"
    assert (s.detail["status"], s.detail["id"], s.detail["ts_ms"]) == (
        "BEGIN",
        "571:53195829",
        1486500577125,
    )


def check_postgres_u_replica_identity_default() -> None:
    e = row_event("postgres_u_replica_identity_default.json")
    assert (e.op, e.source) == ("u", CUSTOMERS_PG)
    assert e.before == {"id": 1}
    assert e.after == {**ANNE, "id": 1, "first_name": "Anne Marie"}
    assert where(e.position) == ("lsn", 24023128 * 10**6, "0/16E9058:0")
    assert e.event_ts == utc_ms(1465584025523)
    assert (e.tx_id, e.unavailable, e.snapshot) == ("556", frozenset(), False)


def check_postgres_u_toasted_unavailable_value_blog() -> None:
    e = row_event("postgres_u_toasted_unavailable_value_blog.json")
    assert (e.op, e.before) == ("u", None)
    assert e.source == SourceTable(database="sourcedb", schema="inventory", table="customers")
    assert e.after == {**ANNE, "first_name": "Dana"}
    assert "biography" not in (e.after or {})
    assert e.unavailable == frozenset({"biography"})
    assert where(e.position) == ("lsn", 34650016 * 10**6, "0/210B7A0:0")
    assert e.source_ts == utc_ms(1570448151151)
    assert e.event_ts == utc_ms(1570448151611)
    assert (e.tx_id, e.connector, e.snapshot) == ("627", "postgresql", False)


CHECKS: dict[str, Callable[[], None]] = {
    name.removeprefix("check_") + ".json": func
    for name, func in dict(globals()).items()
    if name.startswith("check_") and callable(func)
}


def test_fixture_folder_exists() -> None:
    assert FILES, f"no Debezium fixtures under {FIXTURES} (set ICETIDE_FIXTURES)"


def test_every_fixture_file_has_a_concrete_check() -> None:
    assert sorted(p.name for p in FILES) == sorted(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_fixture_values(name: str) -> None:
    CHECKS[name]()


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_fixture_decodes_without_error(path: Path) -> None:
    result = decode_message(path.read_text())
    assert isinstance(result, ChangeEvent | Skipped)
    assert decode_message(path.read_bytes()) == result
