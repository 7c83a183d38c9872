"""PostgreSQL logical-replication capture against a private PostgreSQL server.

Every decoded value is compared with what the database itself returns for a SELECT, by
replaying the captured events (decode_message → project_event) into a key → row model,
the way the merge maintains the mirror.
"""

from __future__ import annotations

import io
import json
import math
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg2
import pytest

from icetide.capture.errors import (
    CaptureError,
    PositionLostError,
    ServerSettingsError,
)
from icetide.capture.postgres.offset import LsnOffset
from icetide.capture.postgres.reader import PgOutputReader
from icetide.capture.postgres.slot import slot_lag, slot_status
from icetide.capture.postgres.snapshot import exported_snapshot, import_snapshot
from icetide.capture.record import CaptureRecord, Heartbeat
from icetide.events.envelope import decode_message
from icetide.events.model import UNAVAILABLE, ChangeEvent, Skipped
from icetide.events.position import lsn_position
from icetide.events.project import ProjectedEvent, dump_json, project_event
from icetide.schema.connector import CAPTURE, read_hints
from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema
from icetide.sources.postgres_types import infer_table_schema
from tests.devservers.postgres import PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DB = "shop"

ALL_TYPES_DDL = """
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE TABLE all_types (
  id integer PRIMARY KEY,
  c_bool boolean,
  c_int2 smallint, c_int4 integer, c_int8 bigint,
  c_float4 real, c_float8 double precision,
  c_num numeric(12,4), c_num0 numeric(38,0), c_numx numeric,
  c_text text, c_varchar varchar(20), c_char char(5),
  c_bytea bytea,
  c_date date, c_time time, c_time3 time(3), c_timetz timetz,
  c_ts timestamp, c_ts3 timestamp(3), c_tstz timestamptz,
  c_interval interval,
  c_uuid uuid, c_json json, c_jsonb jsonb,
  c_mood mood, c_posint posint,
  c_int_arr integer[], c_text_arr text[], c_int_2d integer[][], c_float_arr float8[],
  c_inet inet,
  c_notnull text NOT NULL DEFAULT 'x'
)
"""

INNER_INTS = {"list": {"element_id": 37, "element": "int"}}
# The icetide schema a user writes for that table (logical hints for schemaless JSON);
# the reader's own inference must agree with it.
ALL_TYPES_SCHEMA = {
    "table": "all_types",
    "primary_key": ["id"],
    "columns": [
        {"id": 1, "name": "id", "type": "int", "nullable": False},
        {"id": 2, "name": "c_bool", "type": "boolean"},
        {"id": 3, "name": "c_int2", "type": "int"},
        {"id": 4, "name": "c_int4", "type": "int"},
        {"id": 5, "name": "c_int8", "type": "long"},
        {"id": 6, "name": "c_float4", "type": "float"},
        {"id": 7, "name": "c_float8", "type": "double"},
        {"id": 8, "name": "c_num", "type": "decimal(12,4)"},
        {"id": 9, "name": "c_num0", "type": "decimal(38,0)"},
        {
            "id": 10,
            "name": "c_numx",
            "type": "string",
            "logical": "io.debezium.data.VariableScaleDecimal",
        },
        {"id": 11, "name": "c_text", "type": "string"},
        {"id": 12, "name": "c_varchar", "type": "string"},
        {"id": 13, "name": "c_char", "type": "string"},
        {"id": 14, "name": "c_bytea", "type": "binary"},
        {"id": 15, "name": "c_date", "type": "date", "logical": "io.debezium.time.Date"},
        {"id": 16, "name": "c_time", "type": "time", "logical": "io.debezium.time.MicroTime"},
        {"id": 17, "name": "c_time3", "type": "time", "logical": "io.debezium.time.Time"},
        {"id": 18, "name": "c_timetz", "type": "time", "logical": "io.debezium.time.ZonedTime"},
        {
            "id": 19,
            "name": "c_ts",
            "type": "timestamp",
            "logical": "io.debezium.time.MicroTimestamp",
        },
        {
            "id": 20,
            "name": "c_ts3",
            "type": "timestamp",
            "logical": "io.debezium.time.Timestamp",
        },
        {
            "id": 21,
            "name": "c_tstz",
            "type": "timestamptz",
            "logical": "io.debezium.time.ZonedTimestamp",
        },
        {
            "id": 22,
            "name": "c_interval",
            "type": "long",
            "logical": "io.debezium.time.MicroDuration",
        },
        {"id": 23, "name": "c_uuid", "type": "uuid"},
        {"id": 24, "name": "c_json", "type": "json"},
        {"id": 25, "name": "c_jsonb", "type": "json"},
        {"id": 26, "name": "c_mood", "type": "string"},
        {"id": 27, "name": "c_posint", "type": "int"},
        # Arrays: lists of their element (ids after the columns'), int[][] two deep.
        {"id": 28, "name": "c_int_arr", "type": {"list": {"element_id": 34, "element": "int"}}},
        {
            "id": 29,
            "name": "c_text_arr",
            "type": {"list": {"element_id": 35, "element": "string"}},
        },
        {
            "id": 30,
            "name": "c_int_2d",
            "type": {
                "list": {
                    "element_id": 36,
                    "element": {"list": {"element_id": 37, "element": "int"}},
                }
            },
        },
        {
            "id": 31,
            "name": "c_float_arr",
            "type": {"list": {"element_id": 38, "element": "double"}},
        },
        {"id": 32, "name": "c_inet", "type": "string"},
        {"id": 33, "name": "c_notnull", "type": "string", "nullable": False},
    ],
}

FULL_ROW: dict[str, Any] = {
    "id": 1,
    "c_bool": True,
    "c_int2": -32768,
    "c_int4": 2147483647,
    "c_int8": -9223372036854775808,
    "c_float4": 1.1,
    "c_float8": 2.718281828459045,
    "c_num": Decimal("-12345678.1234"),
    "c_num0": Decimal("9" * 38),
    "c_numx": Decimal("-0.000000000000000000000000000000000000000001"),
    "c_text": "line1\nline2\ttab 'quote' \"dq\" \\ backslash, héllo wörld ✓ 🎉",
    "c_varchar": "héllo ✓",
    "c_char": "ab",
    "c_bytea": bytes(range(256)),
    "c_date": "1969-07-20",
    "c_time": "23:59:59.999999",
    "c_time3": "00:00:00.001",
    "c_timetz": "12:34:56.789+05:30",
    "c_ts": "1969-12-31 23:59:59.999999",
    "c_ts3": "2024-02-29 10:11:12.345",
    "c_tstz": "2038-01-19 03:14:07.499999+00",
    "c_interval": "1 day 02:03:04.5",
    "c_uuid": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    "c_json": '{"a": [1, 2.50, "x"], "b": null}',
    "c_jsonb": '{"k": "välue", "n": 1.50}',
    "c_mood": "happy",
    "c_posint": 7,
    "c_int_arr": [1, None, -3],
    "c_text_arr": ["a,b", 'c "d"', None, "NULL", "", "ü"],
    "c_int_2d": [[1, 2], [3, 4]],
    "c_float_arr": [1.5, -0.25],
    "c_inet": "192.168.0.1/24",
    "c_notnull": "nn",
}

EXTREMES: dict[str, Any] = {
    **FULL_ROW,
    "id": 3,
    "c_bool": False,
    "c_int2": 32767,
    "c_int4": -2147483648,
    "c_int8": 9223372036854775807,
    "c_float4": -3.4e38,
    "c_float8": -1.5e-300,
    "c_num": Decimal("99999999.9999"),
    "c_num0": Decimal("-" + "9" * 38),
    "c_numx": Decimal("123456789012345678901234567890123456789012345.678901"),
    "c_text": "x" * 70_000,  # compressible: stays inline after compression
    "c_varchar": "",
    "c_char": "abcde",
    "c_bytea": b"",
    "c_date": "0001-01-01",
    "c_time": "00:00:00",
    "c_time3": "12:00:00.5",
    "c_timetz": "23:30:00-01",
    "c_ts": "9999-12-31 23:59:59.999999",
    "c_ts3": "1900-01-01 00:00:01",
    "c_tstz": "2024-06-30 23:30:00.25+05:30",
    "c_interval": "-1 days +02:00:00.000001",
    "c_json": "[]",
    "c_jsonb": "{}",
    "c_mood": "sad",
    "c_int_arr": [],
    "c_text_arr": [],
    "c_int_2d": [[-1]],
    "c_float_arr": [1e308],
    "c_inet": "::1",
}


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    """One private PostgreSQL (wal_level=logical) with database ``shop`` for the module."""
    with PostgresServer() as started:
        started.create_database(DB)
        yield started


def _execute(server: PostgresServer, *statements: str | tuple[str, Any], tz: str = "UTC") -> None:
    """Run ``statements`` in one transaction (session time zone ``tz``)."""
    conn = server.connect(DB, autocommit=False)
    try:
        with conn.cursor() as cur:
            cur.execute("SET TIME ZONE %s", (tz,))
            for statement in statements:
                if isinstance(statement, tuple):
                    cur.execute(*statement)
                else:
                    cur.execute(statement)
        conn.commit()
    finally:
        conn.close()


def _insert(table: str, row: dict[str, Any]) -> tuple[str, list[Any]]:
    names = list(row)
    marks = []
    values = []
    for name in names:
        value = row[name]
        if name.endswith("_arr") or name == "c_int_2d":
            kind = {"c_int_arr": "int[]", "c_text_arr": "text[]", "c_float_arr": "float8[]"}
            marks.append(f"%s::{kind.get(name, 'int[]')}")
        else:
            marks.append("%s")
        values.append(value)
    return f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join(marks)})", values


def _read(
    server: PostgresServer,
    tables: list[str],
    *,
    ack: bool = True,
    rows_only: bool = True,
    **kwargs: Any,
) -> list[CaptureRecord]:
    """The row changes the slot holds now; acknowledged (as after a durable transport
    flush) unless ``ack`` is false, so the next read starts after it.

    Unless ``rows_only`` is false, schema-change records (one ahead of each table's
    first change in a session) are left out: most tests here are about row values.
    """
    kwargs.setdefault("slot", "types_slot")
    kwargs.setdefault("publication", "types_pub")
    with PgOutputReader(server.dsn(DB), tables, **kwargs) as reader:
        records = [
            r
            for r in reader
            if isinstance(r, CaptureRecord) and not (rows_only and r.kind == "schema_change")
        ]
        if ack and reader.committed is not None:
            reader.acknowledge(reader.committed)
            _wait_confirmed(server, reader.slot, reader.committed.lsn)
        return records


def _confirmed(server: PostgresServer, slot: str) -> int:
    conn = server.connect(DB)
    try:
        status = slot_status(conn, slot)
    finally:
        conn.close()
    assert status is not None and status.confirmed_flush_lsn is not None
    return status.confirmed_flush_lsn


def _wait_confirmed(server: PostgresServer, slot: str, lsn: int, timeout: float = 10.0) -> None:
    """Feedback is asynchronous: wait until the server has applied it to the slot."""
    deadline = time.monotonic() + timeout
    while _confirmed(server, slot) < lsn:
        assert time.monotonic() < deadline, f"slot {slot} never confirmed {lsn}"
        time.sleep(0.05)


def _events(records: list[CaptureRecord]) -> list[ChangeEvent]:
    events = []
    for record in records:
        decoded = decode_message(record.to_json())
        if isinstance(decoded, ChangeEvent):
            events.append(decoded)
    return events


def _replay(
    events: list[ChangeEvent], schema: TableSchema, model: dict[Any, dict[str, Any]] | None = None
) -> dict[Any, dict[str, Any]]:
    """Apply projected events in order to a key → row model (what the merge maintains):
    an unavailable (unchanged-TOAST) column keeps the stored value."""
    model = {} if model is None else model
    for event in events:
        projected = project_event(event, schema, read_hints(schema, CAPTURE))
        (key,) = projected.key.values() if projected.key else (None,)
        if projected.op == "d":
            model.pop(key, None)
        elif projected.op == "t":
            model.clear()
        else:
            assert projected.after is not None
            row = dict(projected.after)
            for name in projected.unavailable:
                row[name] = model[key][name]
            model[key] = row
    return model


def _select(server: PostgresServer, table: str = "all_types") -> dict[Any, dict[str, Any]]:
    """The table as the database returns it, keyed by id (json as its text)."""
    conn = server.connect(DB)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table}")
            names = [d[0] for d in cur.description]
            rows = {row[0]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}
            if "c_json" in names:
                # json as text (psycopg2 parses it), numeric without a precision as text,
                # and an interval's months apart (psycopg2 counts a month as 30 days).
                cur.execute(
                    "SELECT id, c_json::text, c_jsonb::text, c_numx::text, "
                    "extract(year FROM c_interval)::int * 12 "
                    "+ extract(month FROM c_interval)::int, "
                    "c_interval - (extract(year FROM c_interval) * 12 "
                    "+ extract(month FROM c_interval)) * interval '1 month' "
                    f"FROM {table}"
                )
                for key, as_json, as_jsonb, numx, months, rest in cur.fetchall():
                    rows[key].update(c_json=as_json, c_jsonb=as_jsonb, c_numx=numx)
                    rows[key]["c_interval"] = None if months is None else (months, rest)
            return rows
    finally:
        conn.close()


_MONTH_MICROS = 2_629_800_000_000


def _expected(row: dict[str, Any], schema: TableSchema) -> dict[str, Any]:
    """A SELECTed row in the types icetide's projection produces."""
    out: dict[str, Any] = {}
    for name, value in row.items():
        kind = schema.by_name[name].type.name
        if value is None:
            out[name] = None
        elif name == "c_interval":
            months, rest = value
            out[name] = months * _MONTH_MICROS + rest // timedelta(microseconds=1)
        elif name == "c_timetz":  # a time of day in UTC, without the offset
            moment = datetime.combine(datetime(2000, 1, 1), value) - value.utcoffset()
            out[name] = moment.time()
        elif kind == "timestamptz":
            out[name] = value.astimezone(UTC)
        elif kind == "binary":
            out[name] = bytes(value)
        elif kind == "json" and not isinstance(value, str):
            out[name] = dump_json(value)
        else:
            out[name] = value
    return out


def _same(got: Any, want: Any, kind: str) -> bool:
    if isinstance(got, float) and isinstance(want, float) and math.isnan(got):
        return math.isnan(want)
    return bool(got == want) and type(got) is type(want)


def _assert_same(
    model: dict[Any, dict[str, Any]], rows: dict[Any, dict[str, Any]], schema: TableSchema
) -> None:
    assert sorted(model) == sorted(rows)
    for key, row in rows.items():
        for name, want in _expected(row, schema).items():
            got = model[key][name]
            assert _same(got, want, schema.by_name[name].type.name), (
                f"row {key} column {name}: captured {got!r} ({type(got).__name__}), "
                f"SELECT {want!r} ({type(want).__name__})"
            )


def _typed(event: ChangeEvent, schema: TableSchema) -> ProjectedEvent:
    return project_event(event, schema, read_hints(schema, CAPTURE))


def test_every_column_type_matches_select(server: PostgresServer) -> None:
    _execute(server, ALL_TYPES_DDL)
    schema = schema_from_dict(ALL_TYPES_SCHEMA)
    tables = ["public.all_types"]
    # The slot starts now: everything below is captured.
    assert _read(server, tables) == []

    sparse = {"id": 2, "c_notnull": "", "c_float8": float("nan"), "c_float4": float("inf")}
    # One multi-row transaction; the third row written in session time zone +05:30.
    conn = server.connect(DB, autocommit=False)
    with conn.cursor() as cur:
        cur.execute(*_insert("all_types", FULL_ROW))
        cur.execute(*_insert("all_types", sparse))
        cur.execute("SET TIME ZONE 'Asia/Kolkata'")
        cur.execute(*_insert("all_types", {**EXTREMES, "c_tstz": "2024-06-30 23:30:00.25"}))
    conn.commit()
    conn.close()
    inserted = _select(server)
    first = _read(server, tables)
    assert [r.value["op"] for r in first] == ["c", "c", "c"]
    assert len({r.value["transaction"]["id"] for r in first}) == 1
    assert [r.value["transaction"]["total_order"] for r in first] == [1, 2, 3]
    _assert_same(_replay(_events(first), schema), inserted, schema)

    # An update, a primary-key update, a delete and an insert in one transaction; then a
    # statement touching every row.
    _execute(
        server,
        "UPDATE all_types SET c_varchar = 'upd', c_num = 0.5, c_tstz = NULL, "
        "c_int_arr = '{9}', c_mood = 'ok' WHERE id = 3",
        "UPDATE all_types SET id = 20 WHERE id = 2",
        "DELETE FROM all_types WHERE id = 1",
        _insert("all_types", {**FULL_ROW, "id": 4, "c_text": "short"}),
    )
    _execute(server, "UPDATE all_types SET c_int4 = c_int4 / 2, c_jsonb = '{\"z\": 1}'")
    final = _select(server)
    second = _read(server, tables)
    events = _events(second)
    assert [e.op for e in events] == ["u", "d", "c", "d", "c", "u", "u", "u"]
    model = _replay(_events(first) + events, schema)
    _assert_same(model, final, schema)

    # The primary-key update: a delete of the old key and a create of the new one, at one
    # LSN, numbered 0 and 1 by the reader.
    pk_delete, pk_create = second[1], second[2]
    assert (pk_delete.key, pk_create.key) == ({"id": 2}, {"id": 20})
    assert pk_delete.value["source"]["lsn"] == pk_create.value["source"]["lsn"]
    assert pk_delete.position < pk_create.position
    assert pk_create.position.key - pk_delete.position.key == 1
    positions = [r.position for r in first + second]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)

    # Not acknowledged, the same changes come again (at-least-once): once with an inline
    # Connect schema, once without; both decode to the same typed events. The reader's own
    # idea of the table agrees with the hand-written schema.
    _execute(server, "UPDATE all_types SET c_bool = NOT c_bool, c_text_arr = '{ä,NULL}'")
    with_schema = _read(server, tables, include_schema=True, ack=False)
    with PgOutputReader(server.dsn(DB), tables, slot="types_slot", publication="types_pub") as r:
        plain = [x for x in r if isinstance(x, CaptureRecord) and x.kind != "schema_change"]
        columns = r.columns("public", "all_types")
    assert len(plain) == 3 and [x.position for x in with_schema] == [x.position for x in plain]
    assert set(json.loads(with_schema[0].to_json())) == {"schema", "payload"}
    assert [_typed(e, schema) for e in _events(with_schema)] == [
        _typed(e, schema) for e in _events(plain)
    ]
    assert columns is not None
    assert infer_table_schema("all_types", columns) == schema


def _records(server: PostgresServer, tables: list[str], slot: str, **kwargs: Any) -> list[Any]:
    return _read(server, tables, slot=slot, publication=f"{slot}_pub", **kwargs)


def test_replica_identity_default_full_and_unchanged_toast(server: PostgresServer) -> None:
    big = os.urandom(20_000).hex()  # incompressible: stored out of line (TOAST)
    _execute(
        server,
        "CREATE TABLE rid_default (id int PRIMARY KEY, v text, big text, blob bytea)",
        "CREATE TABLE rid_full (id int PRIMARY KEY, v text, big text, blob bytea)",
        "ALTER TABLE rid_full REPLICA IDENTITY FULL",
    )
    tables = ["public.rid_default", "public.rid_full"]
    assert _records(server, tables, "rid") == []
    blob = os.urandom(20_000)
    for table in ("rid_default", "rid_full"):
        _execute(
            server,
            (f"INSERT INTO {table} VALUES (1, 'a', %s, %s), (2, 'b', 'small', NULL)", [big, blob]),
        )
        _execute(server, f"UPDATE {table} SET v = 'a2' WHERE id = 1")  # big, blob untouched
        _execute(server, f"DELETE FROM {table} WHERE id = 2")
    records = _records(server, tables, "rid")
    by_table: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_table.setdefault(record.table, []).append(record.value)

    ins, ins2, upd, dele = by_table["rid_default"]
    assert [m["op"] for m in (ins, ins2, upd, dele)] == ["c", "c", "u", "d"]
    assert upd["before"] is None  # DEFAULT: no old row for an update that keeps the key
    assert upd["after"]["v"] == "a2"
    assert upd["after"]["big"] == UNAVAILABLE  # unchanged TOAST: Debezium's placeholder
    decoded = decode_message(json.dumps(upd))
    assert isinstance(decoded, ChangeEvent) and decoded.unavailable == {"big", "blob"}
    assert dele["before"] == {"id": 2}  # DEFAULT: the key only

    ins, ins2, upd, dele = by_table["rid_full"]
    assert upd["before"]["v"] == "a" and upd["before"]["big"] == big
    assert upd["after"]["big"] == big  # FULL: the old row holds it, so no placeholder
    assert dele["before"] == {"id": 2, "v": "b", "big": "small", "blob": None}

    # Replayed with the merge's rule (an unavailable column keeps the stored value), both
    # tables equal what SELECT returns.
    schema = schema_from_dict(
        {
            "table": "t",
            "primary_key": ["id"],
            "columns": [
                {"id": 1, "name": "id", "type": "int", "nullable": False},
                {"id": 2, "name": "v", "type": "string"},
                {"id": 3, "name": "big", "type": "string"},
                {"id": 4, "name": "blob", "type": "binary"},
            ],
        }
    )
    for table in ("rid_default", "rid_full"):
        events = _events([r for r in records if r.table == table])
        rows = _select(server, table)
        _assert_same(_replay(events, schema), rows, schema)


def test_truncate_schema_change_and_multi_row_transactions(server: PostgresServer) -> None:
    _execute(
        server,
        "CREATE TABLE tr_a (id int PRIMARY KEY, v text)",
        "CREATE TABLE tr_b (id int PRIMARY KEY, v text)",
    )
    tables = ["public.tr_a", "public.tr_b"]
    assert _records(server, tables, "tr") == []
    _execute(
        server,
        "INSERT INTO tr_a SELECT g, 'a' || g FROM generate_series(1, 50) g",
        "INSERT INTO tr_b VALUES (1, 'b')",
        "UPDATE tr_a SET v = 'x' WHERE id <= 10",
    )
    # COPY writes one WAL record for many rows: several changes at one LSN.
    conn = server.connect(DB)
    with conn.cursor() as cur:
        cur.copy_expert("COPY tr_b FROM STDIN", io.StringIO("2\tc\n3\td\n4\te\n"))
    conn.close()
    _execute(server, "TRUNCATE tr_a, tr_b")
    _execute(server, "ALTER TABLE tr_a ADD COLUMN extra numeric(5,1)")
    _execute(server, "INSERT INTO tr_a VALUES (7, 'after', 1.5)")
    records = _records(server, tables, "tr", rows_only=False)
    # A table's first Relation message in a session is a schema-change record too (the
    # session cannot tell whether the table changed before it): one per table, ahead of
    # its first change; the ALTER below makes the third.
    changes = [i for i, r in enumerate(records) if r.kind == "schema_change"]
    assert [records[i].table for i in changes] == ["tr_a", "tr_b", "tr_a"]
    assert records[changes[0] + 1].table == "tr_a" and records[changes[1] + 1].table == "tr_b"
    records = [r for i, r in enumerate(records) if i not in changes[:2]]
    kinds = [(r.kind, r.table, r.value.get("op")) for r in records]
    assert kinds[:50] == [("change", "tr_a", "c")] * 50
    assert kinds[50] == ("change", "tr_b", "c")
    assert kinds[51:61] == [("change", "tr_a", "u")] * 10
    assert kinds[61:64] == [("change", "tr_b", "c")] * 3
    # One transaction: numbered 1..61, per table too.
    tx = [r.value["transaction"] for r in records[:61]]
    assert len({t["id"] for t in tx}) == 1
    assert [t["total_order"] for t in tx] == list(range(1, 62))
    assert [t["data_collection_order"] for t in tx[:50]] == list(range(1, 51))

    copied = records[61:64]
    lsns = {r.value["source"]["lsn"] for r in copied}
    positions = [r.position for r in copied]
    assert positions == sorted(positions) and len(set(positions)) == 3
    assert len(lsns) == 1  # COPY: one multi-insert WAL record; the reader numbers its rows
    assert [p.key % 10**6 for p in positions] == [0, 1, 2]

    truncates = records[64:66]
    assert [(r.table, r.value["op"], r.key) for r in truncates] == [
        ("tr_a", "t", None),
        ("tr_b", "t", None),
    ]
    assert truncates[0].value["source"]["lsn"] == truncates[1].value["source"]["lsn"]
    assert truncates[0].position < truncates[1].position
    assert all(isinstance(decode_message(r.to_json()), ChangeEvent) for r in truncates)

    change, insert = records[66:68]
    assert change.kind == "schema_change" and change.table == "tr_a"
    skipped = decode_message(change.to_json())
    assert isinstance(skipped, Skipped) and skipped.kind == "schema_change"
    columns = change.value["tableChanges"][0]["table"]["columns"]
    assert [c["name"] for c in columns] == ["id", "v", "extra"]
    assert columns[2]["typeExpression"] == "numeric(5,1)"
    assert insert.value["after"] == {"id": 7, "v": "after", "extra": "1.5"}
    assert change.position < insert.position
    assert len(records) == 68
    all_positions = [r.position for r in records]
    assert all_positions == sorted(all_positions)


def test_resume_acknowledge_and_slot_lag(server: PostgresServer) -> None:
    _execute(server, "CREATE TABLE res (id int PRIMARY KEY, v int)")
    tables = ["public.res"]
    slot = "res"
    assert _records(server, tables, slot) == []
    confirmed_at_start = _confirmed(server, slot)
    _execute(server, "INSERT INTO res VALUES (1, 1)")
    _execute(server, "INSERT INTO res VALUES (2, 2)", "INSERT INTO res VALUES (3, 3)")

    # Read without acknowledging: the slot does not move.
    with PgOutputReader(server.dsn(DB), tables, slot=slot, publication="res_pub") as reader:
        got = [r for r in reader if isinstance(r, CaptureRecord) and r.kind != "schema_change"]
        committed = reader.committed
    assert [r.key for r in got] == [{"id": 1}, {"id": 2}, {"id": 3}]
    assert committed is not None and committed.lsn > confirmed_at_start
    assert _confirmed(server, slot) == confirmed_at_start
    conn = server.connect(DB)
    assert slot_lag(conn, slot) > 0
    conn.close()
    # Each record's resume offset replays its own transaction.
    resumes = [r.resume for r in got]
    assert all(isinstance(r, LsnOffset) for r in resumes)
    assert resumes[0] < resumes[1] == resumes[2]  # type: ignore[operator]

    # Restart from the committed offset: nothing already passed comes again, even though
    # the slot (never acknowledged) still holds it; the next change does come.
    _execute(server, "INSERT INTO res VALUES (4, 4)")
    with PgOutputReader(
        server.dsn(DB), tables, slot=slot, publication="res_pub", start=committed
    ) as reader:
        again = [r for r in reader if isinstance(r, CaptureRecord) and r.kind != "schema_change"]
        assert [r.key for r in again] == [{"id": 4}]
        assert reader.start_offset == committed
        # The transport made them durable: acknowledge, and the slot moves there.
        assert reader.committed is not None
        reader.acknowledge(reader.committed)
        _wait_confirmed(server, slot, reader.committed.lsn)
        last = reader.committed

    # A crash before acknowledging loses nothing: restarting from an older offset (the
    # resume offset of record 2) replays from there, minus what the slot confirmed.
    _execute(server, "UPDATE res SET v = 40 WHERE id = 4")
    with PgOutputReader(
        server.dsn(DB),
        tables,
        slot=slot,
        publication="res_pub",
        start=resumes[1],  # type: ignore[arg-type]
    ) as reader:
        replay = [r for r in reader if isinstance(r, CaptureRecord) and r.kind != "schema_change"]
        assert reader.start_offset == LsnOffset(_confirmed(server, slot)) >= last
    assert [(r.value["op"], r.key) for r in replay] == [("u", {"id": 4})]
    # Acknowledging after the reader closed still moves the slot (no stream needed).
    assert reader.committed is not None and reader.committed > last
    reader.acknowledge(reader.committed)
    assert _confirmed(server, slot) == reader.committed.lsn
    conn = server.connect(DB)
    status = slot_status(conn, slot)
    conn.close()
    assert status is not None and status.to_dict()["slot"] == slot
    assert status.lag_bytes >= 0 and status.retained_bytes >= status.lag_bytes


def test_a_dropped_slot_is_a_lost_position(server: PostgresServer) -> None:
    _execute(server, "CREATE TABLE lost (id int PRIMARY KEY)")
    tables = ["public.lost"]
    with PgOutputReader(server.dsn(DB), tables, slot="lost", publication="lost_pub") as reader:
        list(reader)
        offset = reader.committed or reader.start_offset
    assert offset is not None
    server.drop_slot("lost", DB)  # the reader's walsender may still be ending
    with pytest.raises(PositionLostError) as err:
        PgOutputReader(
            server.dsn(DB), tables, slot="lost", publication="lost_pub", start=offset
        ).open()
    assert err.value.position == offset.text
    assert "bootstrap" in err.value.render()


def test_heartbeats_while_the_log_is_quiet(server: PostgresServer) -> None:
    _execute(server, "CREATE TABLE hb (id int PRIMARY KEY)")
    reader = PgOutputReader(
        server.dsn(DB),
        ["public.hb"],
        slot="hb",
        publication="hb_pub",
        blocking=True,
        heartbeat_seconds=0.2,
    )
    with reader:
        stream = iter(reader)
        started = time.monotonic()
        assert isinstance(next(stream), Heartbeat)
        assert time.monotonic() - started < 5
        _execute(server, "INSERT INTO hb VALUES (1)")
        item = next(stream)
        # Heartbeats, and the schema-change record ahead of the table's first change.
        while isinstance(item, Heartbeat) or item.kind == "schema_change":
            item = next(stream)
        assert isinstance(item, CaptureRecord) and item.key == {"id": 1}
        assert isinstance(next(stream), Heartbeat)  # quiet again
        assert reader.committed is not None


def test_positions_increase_across_a_wal_switch_and_the_32_bit_boundary() -> None:
    # The WAL starts at 0/FF000000: one switch crosses 0/FFFFFFFF → 1/0.
    with PostgresServer(wal_start="0000000100000000000000FF") as own:
        own.create_database(DB)
        _execute(own, "CREATE TABLE sw (id int PRIMARY KEY)")
        tables = ["public.sw"]
        assert _read(own, tables, slot="sw", publication="sw_pub") == []
        _execute(own, "INSERT INTO sw VALUES (1)")
        own.execute("SELECT pg_switch_wal()", DB)
        _execute(own, "INSERT INTO sw VALUES (2)")
        own.execute("SELECT pg_switch_wal()", DB)
        _execute(own, "INSERT INTO sw VALUES (3)")
        records = _read(own, tables, slot="sw", publication="sw_pub")
    lsns = [r.value["source"]["lsn"] for r in records]
    assert [r.key for r in records] == [{"id": 1}, {"id": 2}, {"id": 3}]
    assert lsns[0] < 2**32 <= lsns[1] < lsns[2]  # numbers, across the boundary
    events = _events(records)
    decoded = [e.position for e in events]
    assert decoded == [lsn_position(n) for n in lsns]
    assert decoded == sorted(decoded)  # type: ignore[type-var]
    assert [r.position for r in records] == sorted(r.position for r in records)
    assert records[1].position.text.startswith("1/")


def test_exported_snapshot_hands_off_exactly(server: PostgresServer) -> None:
    _execute(server, "CREATE TABLE boot (id int PRIMARY KEY, v text)")
    _execute(server, "INSERT INTO boot SELECT g, 'before' FROM generate_series(1, 5) g")
    tables = ["public.boot"]
    with exported_snapshot(
        server.dsn(DB), slot="boot", publication="boot_pub", tables=tables
    ) as point:
        # Written after the consistent point: not in the copy, in the stream.
        _execute(
            server, "INSERT INTO boot VALUES (6, 'after')", "UPDATE boot SET v = 'x' WHERE id = 1"
        )
        copy = server.connect(DB, autocommit=False)
        import_snapshot(copy, point.snapshot)
        with copy.cursor() as cur:
            cur.execute("SELECT id, v FROM boot ORDER BY id")
            snapshot_rows = cur.fetchall()
        copy.rollback()
        copy.close()
    assert snapshot_rows == [(i, "before") for i in range(1, 6)]
    records = _read(server, tables, slot="boot", publication="boot_pub", start=point.offset)
    assert [(r.value["op"], r.key) for r in records] == [("c", {"id": 6}), ("u", {"id": 1})]
    assert all(r.value["source"]["lsn"] >= point.lsn for r in records)
    # The slot exists now: a second export is refused with the way out.
    with pytest.raises(CaptureError) as err:
        with exported_snapshot(server.dsn(DB), slot="boot", publication="boot_pub", tables=tables):
            pass
    assert "pg_drop_replication_slot('boot')" in err.value.render()


def test_wrong_server_settings_are_a_clear_error() -> None:
    with PostgresServer(settings={"wal_level": "replica"}) as wrong:
        wrong.create_database(DB)
        _execute(wrong, "CREATE TABLE w (id int PRIMARY KEY)")
        with pytest.raises(ServerSettingsError) as err:
            PgOutputReader(wrong.dsn(DB), ["public.w"]).open()
    error = err.value
    assert len(error.problems) == 1 and "wal_level is replica" in error.problems[0]
    assert "wal_level = logical" in error.fix
    assert "ALTER SYSTEM SET wal_level = logical;" in error.fix
    text = error.render()
    assert "restart" in text and "Traceback" not in text


def test_users_and_tables_that_cannot_be_captured(server: PostgresServer) -> None:
    _execute(
        server,
        "CREATE TABLE nokey (v text)",
        "CREATE ROLE plain LOGIN",
        "GRANT SELECT ON nokey TO plain",
    )
    with pytest.raises(ServerSettingsError) as err:
        PgOutputReader(server.dsn(DB), ["public.nokey"], slot="nk", publication="nk_pub").open()
    assert err.value.fix == ("ALTER TABLE public.nokey REPLICA IDENTITY FULL;",)
    dsn = psycopg2.extensions.make_dsn(server.dsn(DB), user="plain")
    with pytest.raises(ServerSettingsError) as err:
        PgOutputReader(dsn, ["public.nokey"], slot="nk", publication="nk_pub").open()
    assert err.value.fix == ("ALTER ROLE plain WITH REPLICATION;",)
    with pytest.raises(CaptureError) as missing:
        PgOutputReader(server.dsn(DB), ["public.nope"], slot="nk", publication="nk_pub").open()
    assert "public.nope" in missing.value.render()


def test_a_partitioned_table_is_captured_by_its_own_name(server: PostgresServer) -> None:
    _execute(
        server,
        "CREATE TABLE parted (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)",
        "CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (0) TO (100)",
        "CREATE TABLE parted_high PARTITION OF parted FOR VALUES FROM (100) TO (200)",
    )
    tables = ["public.parted"]
    assert _records(server, tables, "part") == []
    _execute(server, "INSERT INTO parted VALUES (1, 'low'), (150, 'high')")
    _execute(server, "UPDATE parted SET id = 160 WHERE id = 1")  # moves to another partition
    records = _records(server, tables, "part")
    assert {r.table for r in records} == {"parted"}
    assert [(r.value["op"], r.key) for r in records][:2] == [("c", {"id": 1}), ("c", {"id": 150})]
    schema = schema_from_dict(
        {
            "table": "parted",
            "primary_key": ["id"],
            "columns": [
                {"id": 1, "name": "id", "type": "int", "nullable": False},
                {"id": 2, "name": "v", "type": "string"},
            ],
        }
    )
    rows = {k: {"id": k, "v": v["v"]} for k, v in _select(server, "parted").items()}
    _assert_same(_replay(_events(records), schema), rows, schema)
    # A publication that sends partitions under their own names is refused, with the fix.
    _execute(server, "CREATE PUBLICATION leafy FOR TABLE parted")
    with pytest.raises(ServerSettingsError) as err:
        PgOutputReader(server.dsn(DB), tables, slot="leafy", publication="leafy").open()
    assert err.value.fix == ('ALTER PUBLICATION "leafy" SET (publish_via_partition_root = true);',)
