"""MySQL/MariaDB binlog capture against a private MariaDB server.

Every decoded value is compared with what the database itself returns for a SELECT, by
replaying the captured events (decode_message → project_event) into a key → row model.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from icetide.capture.errors import PositionLostError, ServerSettingsError
from icetide.capture.mysql.history import DdlHistory
from icetide.capture.mysql.reader import BinlogOffset, BinlogReader, CaptureRecord
from icetide.devservers.mariadb import MariaDBServer
from icetide.errors import DecodeError
from icetide.events.envelope import decode_message
from icetide.events.model import ChangeEvent, Skipped
from icetide.events.position import Position, binlog_position
from icetide.events.project import ProjectedEvent, project_event
from icetide.schema.connector import CAPTURE, read_hints
from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema

pytestmark = [
    pytest.mark.timeout(300),
    # python-mysql-replication opens its own schema connection with pymysql's old "db" key.
    pytest.mark.filterwarnings("ignore:'db' is deprecated:DeprecationWarning"),
]

ALL_TYPES_DDL = """
CREATE TABLE {db}.all_types (
  id INT NOT NULL PRIMARY KEY,
  c_bool BOOL,
  c_tiny TINYINT, c_tiny_u TINYINT UNSIGNED,
  c_small SMALLINT, c_small_u SMALLINT UNSIGNED,
  c_medium MEDIUMINT, c_medium_u MEDIUMINT UNSIGNED,
  c_int INT, c_int_u INT UNSIGNED,
  c_big BIGINT, c_big_u BIGINT UNSIGNED,
  c_float FLOAT, c_double DOUBLE,
  c_dec DECIMAL(12,4), c_dec0 DECIMAL(20,0),
  c_date DATE, c_time TIME(6), c_time0 TIME,
  c_dt DATETIME, c_dt3 DATETIME(3), c_dt6 DATETIME(6),
  c_ts TIMESTAMP(6) NULL DEFAULT NULL, c_ts0 TIMESTAMP NULL DEFAULT NULL,
  c_year YEAR,
  c_bit1 BIT(1), c_bit BIT(10),
  c_enum ENUM('small','medium','large'), c_set SET('red','green','blue'),
  c_json JSON,
  c_char CHAR(5), c_varchar VARCHAR(100), c_text TEXT, c_mtext MEDIUMTEXT,
  c_binary BINARY(4), c_varbinary VARBINARY(16), c_blob BLOB, c_lblob LONGBLOB,
  c_notnull VARCHAR(10) NOT NULL DEFAULT 'x'
) DEFAULT CHARSET=utf8mb4
"""

# The icetide schema a user writes for that table (logical hints for schemaless JSON).
ALL_TYPES_SCHEMA = {
    "table": "all_types",
    "primary_key": ["id"],
    "columns": [
        {"id": 1, "name": "id", "type": "int", "nullable": False},
        {"id": 2, "name": "c_bool", "type": "boolean"},
        {"id": 3, "name": "c_tiny", "type": "int"},
        {"id": 4, "name": "c_tiny_u", "type": "int"},
        {"id": 5, "name": "c_small", "type": "int"},
        {"id": 6, "name": "c_small_u", "type": "int"},
        {"id": 7, "name": "c_medium", "type": "int"},
        {"id": 8, "name": "c_medium_u", "type": "int"},
        {"id": 9, "name": "c_int", "type": "int"},
        {"id": 10, "name": "c_int_u", "type": "long"},
        {"id": 11, "name": "c_big", "type": "long"},
        {"id": 12, "name": "c_big_u", "type": "decimal(20,0)"},
        {"id": 13, "name": "c_float", "type": "float"},
        {"id": 14, "name": "c_double", "type": "double"},
        {"id": 15, "name": "c_dec", "type": "decimal(12,4)"},
        {"id": 16, "name": "c_dec0", "type": "decimal(20,0)"},
        {"id": 17, "name": "c_date", "type": "date"},
        {"id": 18, "name": "c_time", "type": "time", "logical": "io.debezium.time.MicroTime"},
        {"id": 19, "name": "c_time0", "type": "time", "logical": "io.debezium.time.MicroTime"},
        {"id": 20, "name": "c_dt", "type": "timestamp", "logical": "io.debezium.time.Timestamp"},
        {"id": 21, "name": "c_dt3", "type": "timestamp", "logical": "io.debezium.time.Timestamp"},
        {
            "id": 22,
            "name": "c_dt6",
            "type": "timestamp",
            "logical": "io.debezium.time.MicroTimestamp",
        },
        {"id": 23, "name": "c_ts", "type": "timestamptz"},
        {"id": 24, "name": "c_ts0", "type": "timestamptz"},
        {"id": 25, "name": "c_year", "type": "int"},
        {"id": 26, "name": "c_bit1", "type": "boolean"},
        {"id": 27, "name": "c_bit", "type": "binary", "logical": "io.debezium.data.Bits"},
        {"id": 28, "name": "c_enum", "type": "string"},
        {"id": 29, "name": "c_set", "type": "string"},
        {"id": 30, "name": "c_json", "type": "json"},
        {"id": 31, "name": "c_char", "type": "string"},
        {"id": 32, "name": "c_varchar", "type": "string"},
        {"id": 33, "name": "c_text", "type": "string"},
        {"id": 34, "name": "c_mtext", "type": "string"},
        {"id": 35, "name": "c_binary", "type": "binary"},
        {"id": 36, "name": "c_varbinary", "type": "binary"},
        {"id": 37, "name": "c_blob", "type": "binary"},
        {"id": 38, "name": "c_lblob", "type": "binary"},
        {"id": 39, "name": "c_notnull", "type": "string", "nullable": False},
    ],
}

FULL_ROW: dict[str, Any] = {
    "id": 1,
    "c_bool": 1,
    "c_tiny": -128,
    "c_tiny_u": 255,
    "c_small": -32768,
    "c_small_u": 65535,
    "c_medium": -8388608,
    "c_medium_u": 16777215,
    "c_int": -2147483648,
    "c_int_u": 4294967295,
    "c_big": -9223372036854775808,
    "c_big_u": 18446744073709551615,
    "c_float": 1.1,
    "c_double": 2.718281828459045,
    "c_dec": Decimal("-12345678.1234"),
    "c_dec0": Decimal("99999999999999999999"),
    "c_date": date(1969, 7, 20),
    "c_time": "23:59:59.999999",
    "c_time0": "00:00:00",
    "c_dt": "1900-01-01 00:00:01",
    "c_dt3": "2024-02-29 10:11:12.345",
    "c_dt6": "1969-12-31 23:59:59.999999",
    "c_ts": "2038-01-19 03:14:07.499999",
    "c_ts0": "1970-01-01 00:00:01",
    "c_year": 2155,
    "c_bit1": 1,
    "c_bit": 513,
    "c_enum": "medium",
    "c_set": "blue,red",
    "c_json": '{"a": [1, 2.50, "x"], "b": null}',
    "c_char": "ab",
    "c_varchar": "héllo wörld ✓ 🎉",
    "c_text": "line1\nline2\ttab 'quote' \"dq\" \\ backslash",
    "c_mtext": "m" * 70_000,
    "c_binary": b"\x01\x02",
    "c_varbinary": b"\x00\xff\x00",
    "c_blob": bytes(range(256)),
    "c_lblob": os.urandom(100_000),
    "c_notnull": "nn",
}

# Bit columns are written with b'…' literals: an int parameter would be a string.
_BIT_COLUMNS = ("c_bit1", "c_bit")


@pytest.fixture(scope="module")
def server() -> Iterator[MariaDBServer]:
    """One private MariaDB (ROW binlog, full metadata) for the module."""
    with MariaDBServer() as started:
        yield started


def _execute(server: MariaDBServer, *statements: str | tuple[str, Any]) -> None:
    with server.connect() as conn, conn.cursor() as cur:
        for statement in statements:
            if isinstance(statement, tuple):
                cur.execute(*statement)
            else:
                cur.execute(statement)


def _insert(db: str, row: dict[str, Any]) -> tuple[str, list[Any]]:
    names = list(row)
    marks = [f"b'{row[n]:b}'" if n in _BIT_COLUMNS else "%s" for n in names]
    values = [row[n] for n in names if n not in _BIT_COLUMNS]
    return f"INSERT INTO {db}.all_types ({', '.join(names)}) VALUES ({', '.join(marks)})", values


def _master_position(server: MariaDBServer) -> BinlogOffset:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
    return BinlogOffset(str(file), int(pos))


def _select(server: MariaDBServer, db: str, table: str = "all_types") -> dict[Any, dict[str, Any]]:
    """The table as the database returns it (timestamps in UTC), keyed by id."""
    with server.connect(init_command="SET time_zone = '+00:00'") as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {db}.{table}")
        names = [d[0] for d in cur.description]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}


def _expected(row: dict[str, Any], schema: TableSchema) -> dict[str, Any]:
    """A SELECTed row in the types icetide's projection produces."""
    out: dict[str, Any] = {}
    for name, value in row.items():
        column = schema.by_name[name]
        kind = column.type.name
        if value is None:
            out[name] = None
        elif kind == "boolean":
            out[name] = bool(int.from_bytes(value, "big") if isinstance(value, bytes) else value)
        elif kind == "time":
            out[name] = (datetime.min + value).time()
        elif kind == "timestamptz":
            out[name] = value.replace(tzinfo=UTC)
        elif kind == "decimal":
            out[name] = Decimal(value)
        else:
            out[name] = value
    return out


def _read(
    server: MariaDBServer, tables: list[str], start: BinlogOffset, **kwargs: Any
) -> list[CaptureRecord]:
    with BinlogReader(server.connection_settings(), tables, start=start, **kwargs) as reader:
        return list(reader)


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
    """Apply projected events in order to a key → row model (what the merge maintains)."""
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
            model[key] = projected.after
    return model


def _assert_same(
    model: dict[Any, dict[str, Any]], rows: dict[Any, dict[str, Any]], schema: TableSchema
) -> None:
    assert sorted(model) == sorted(rows)
    for key, row in rows.items():
        expected = _expected(row, schema)
        for name, value in expected.items():
            got = model[key][name]
            assert got == value, f"row {key} column {name}: captured {got!r}, SELECT {value!r}"
            assert type(got) is type(value), (
                f"row {key} column {name}: {type(got)} vs {type(value)}"
            )


def test_every_column_type_matches_select(server: MariaDBServer) -> None:
    db = "types_db"
    schema = schema_from_dict(ALL_TYPES_SCHEMA)
    _execute(server, f"CREATE DATABASE {db}", ALL_TYPES_DDL.format(db=db))
    start = _master_position(server)

    sparse = {"id": 2, "c_set": "", "c_enum": None, "c_notnull": ""}
    local_tz = {
        **FULL_ROW,
        "id": 3,
        "c_ts": "2024-06-30 23:30:00.25",  # session time zone +05:30: 18:00:00.25 UTC
        "c_ts0": "2024-01-01 05:30:00",
        "c_float": -3.4e38,
        "c_double": -1.5e-300,
        "c_bit1": 0,
        "c_bit": 1023,
        "c_year": 1901,
        "c_time": "00:00:00.000001",
        "c_json": "[]",
        "c_lblob": b"",
        "c_varchar": "",
    }
    # One multi-row transaction with all three rows.
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute(*_insert(db, FULL_ROW))
        cur.execute(*_insert(db, sparse))
        cur.execute("SET time_zone = '+05:30'")
        cur.execute(*_insert(db, local_tz))
        cur.execute("COMMIT")
    after_inserts = _master_position(server)
    inserted = _select(server, db)

    # A transaction with an update, a primary-key update, a delete and an insert; then
    # single-statement changes, one of them touching several rows.
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute(
            f"UPDATE {db}.all_types SET c_varchar = 'upd', c_dec = 0.5, c_ts = NULL, "
            "c_set = 'green', c_bit = b'0000000001' WHERE id = 3"
        )
        cur.execute(f"UPDATE {db}.all_types SET id = 20 WHERE id = 2")
        cur.execute(f"DELETE FROM {db}.all_types WHERE id = 1")
        cur.execute(*_insert(db, {**FULL_ROW, "id": 4, "c_mtext": "short"}))
        cur.execute("COMMIT")
        cur.execute(f"UPDATE {db}.all_types SET c_int = c_int_u % 1000, c_json = '{{}}'")
        cur.execute(f"UPDATE {db}.all_types SET c_enum = 'large' WHERE id = 4")
    final = _select(server, db)

    records = _read(server, [f"{db}.all_types"], start)
    events = _events(records)
    assert [e.op for e in events] == ["c", "c", "c", "u", "d", "c", "d", "c", "u", "u", "u", "u"]

    # The inserts: one transaction of three statements, numbered in order.
    first = events[:3]
    assert {e.tx_id for e in first} == {records[0].value["transaction"]["id"]}
    assert [r.value["transaction"]["total_order"] for r in records[:3]] == [1, 2, 3]
    # Row n > 0 of a row event follows row n - 1 at the same offset (large rows get
    # row events of their own: binlog_row_event_max_size).
    sources = [
        (r.value["source"]["file"], r.value["source"]["pos"], r.value["source"]["row"])
        for r in records
    ]
    for previous, current in zip(sources, sources[1:], strict=False):
        if current[2] > 0:
            assert previous[:2] == current[:2] and previous[2] in (current[2], current[2] - 1)
    boundary = binlog_position(str(after_inserts.file), int(after_inserts.pos))
    before_boundary = [e for e in events if e.position and e.position < boundary]
    assert len(before_boundary) == 3
    _assert_same(_replay(before_boundary, schema), inserted, schema)

    # The primary-key update is a delete of the old key and a create of the new one.
    pk_delete, pk_create = events[4], events[5]
    assert (pk_delete.op, pk_delete.before and pk_delete.before["id"]) == ("d", 2)
    assert (pk_create.op, pk_create.after and pk_create.after["id"]) == ("c", 20)
    assert pk_delete.position == pk_create.position
    assert records[4].key == {"id": 2} and records[5].key == {"id": 20}

    # Everything, replayed, is the final SELECT; positions never go backwards.
    _assert_same(_replay(events, schema), final, schema)
    positions = [e.position for e in events]
    assert all(isinstance(p, Position) for p in positions)
    assert positions == sorted(positions)  # type: ignore[type-var]

    # The same capture with an inline Connect schema decodes to the same typed events.
    with_schema = _events(_read(server, [f"{db}.all_types"], start, include_schema=True))
    assert [_typed(e, schema) for e in with_schema] == [_typed(e, schema) for e in events]


def _typed(event: ChangeEvent, schema: TableSchema) -> ProjectedEvent:
    return project_event(event, schema, read_hints(schema, CAPTURE))


def test_truncate_ddl_and_schema_history(server: MariaDBServer, tmp_path: Path) -> None:
    db = "ddl_db"
    _execute(server, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT)")
    start = _master_position(server)
    _execute(
        server,
        f"INSERT INTO {db}.t VALUES (1, 10)",
        f"ALTER TABLE {db}.t ADD COLUMN note VARCHAR(20) NOT NULL DEFAULT 'n'",
        f"INSERT INTO {db}.t VALUES (2, 20, 'two')",
        f"TRUNCATE TABLE {db}.t",
        f"INSERT INTO {db}.t VALUES (3, 30, 'three')",
        # DDL on a table that is not captured leaves no trace.
        f"CREATE TABLE {db}.other (id INT PRIMARY KEY)",
    )
    history_path = tmp_path / "history.jsonl"
    records = _read(server, [f"{db}.t"], start, history=history_path)
    decoded = [decode_message(r.to_json()) for r in records]
    kinds = [d.op if isinstance(d, ChangeEvent) else d.kind for d in decoded]
    assert kinds == ["c", "schema_change", "c", "t", "c"]
    change = decoded[1]
    assert isinstance(change, Skipped) and "ADD COLUMN note" in str(change.detail["ddl"])
    assert isinstance(decoded[3], ChangeEvent) and decoded[3].source is not None
    assert decoded[3].source.qualified == f"{db}.t"
    after_add = decoded[2]
    assert isinstance(after_add, ChangeEvent) and after_add.after == {
        "id": 2,
        "a": 20,
        "note": "two",
    }

    history = DdlHistory(history_path)
    entries = list(history)
    assert [e.kind for e in entries] == ["columns", "ddl", "columns"]
    assert [c["name"] for c in entries[0].columns or ()] == ["id", "a"]
    assert entries[2].columns is not None
    assert entries[2].columns[-1] == {
        "name": "note",
        "type": "varchar(20)",
        "nullable": False,
        "primary": False,
    }
    ddl_key = entries[1].position_key
    assert [c["name"] for c in history.columns_at(db, "t", ddl_key) or ()] == ["id", "a"]
    assert len(history.columns_at(db, "t", entries[2].position_key) or ()) == 3

    # Reading the same log again (a restart) adds nothing to the history.
    _read(server, [f"{db}.t"], start, history=history_path)
    assert len(history_path.read_text().splitlines()) == 3


def test_rows_before_a_ddl_decode_with_their_own_columns_without_a_history(
    server: MariaDBServer,
) -> None:
    """A capture resumed from an offset before an ALTER, on a machine that has no schema
    history, decodes the older rows with the columns they were written with, not the
    table's current ones: row events carry values by position only, but the table map
    in front of each one carries the names (``binlog_row_metadata=FULL``)."""
    db = "resume_ddl_db"
    _execute(
        server,
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT, b VARCHAR(10))",
    )
    start = _master_position(server)
    _execute(
        server,
        f"INSERT INTO {db}.t VALUES (1, 10, 'one')",
        # The same number of columns, other names and types at the same places.
        f"ALTER TABLE {db}.t DROP COLUMN a, ADD COLUMN c VARCHAR(10) AFTER id",
        f"INSERT INTO {db}.t (id, c, b) VALUES (2, 'two', 'zwei')",
        f"UPDATE {db}.t SET b = 'eins' WHERE id = 1",
    )
    changes = _events(_read(server, [f"{db}.t"], start, history=None))
    assert [(c.op, c.after) for c in changes] == [
        ("c", {"id": 1, "a": 10, "b": "one"}),
        ("c", {"id": 2, "c": "two", "b": "zwei"}),
        ("u", {"id": 1, "c": None, "b": "eins"}),
    ]


def test_wrong_binlog_format_is_a_clear_error() -> None:
    with MariaDBServer(options={"binlog-format": "STATEMENT"}) as wrong:
        _execute(
            wrong,
            "SET GLOBAL binlog_row_image = 'MINIMAL'",
            "SET GLOBAL binlog_row_metadata = 'MINIMAL'",
        )
        with pytest.raises(ServerSettingsError) as err:
            BinlogReader(wrong.connection_settings(), ["shop.t"]).open()
    text = err.value.render()
    assert f"127.0.0.1:{wrong.port}" in text
    assert "binlog_format is STATEMENT; it must be ROW" in text
    assert "binlog_row_image is MINIMAL; it must be FULL" in text
    assert "binlog_row_metadata is MINIMAL; it must be FULL" in text
    assert err.value.fix == (
        "[mysqld]",
        "binlog_format = ROW",
        "binlog_row_image = FULL",
        "binlog_row_metadata = FULL",
    )
    assert "SET GLOBAL binlog_format = 'ROW'" in (err.value.hint or "")
    assert "Traceback" not in text


def test_binlog_off_is_a_clear_error() -> None:
    with MariaDBServer(options={"log-bin": None}) as off:
        with pytest.raises(ServerSettingsError) as err:
            BinlogReader(off.connection_settings(), ["shop.t"]).open()
    assert err.value.problems[0].startswith("log_bin is OFF; it must be ON")
    assert err.value.fix == ("[mysqld]", "log_bin = mysql-bin")
    assert "restart" in (err.value.hint or "")


def test_positions_order_across_binlog_rotation(server: MariaDBServer) -> None:
    db = "rotate_db"
    _execute(server, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v TEXT)")
    start = _master_position(server)
    # Rotate until the log crosses …000009 → …000010, writing rows on both sides; rows in
    # the newer file sit at smaller offsets than the long rows of the older one.
    next_id = 1
    while int(_master_position(server).file.rsplit(".", 1)[1]) < 11:  # type: ignore[union-attr]
        _execute(
            server,
            (f"INSERT INTO {db}.t VALUES (%s, %s)", (next_id, "x" * 3000)),
            (f"UPDATE {db}.t SET v = 'short' WHERE id = %s", (next_id,)),
            "FLUSH BINARY LOGS",
        )
        next_id += 1
    _execute(server, (f"DELETE FROM {db}.t WHERE id < %s", (next_id,)))

    records = _read(server, [f"{db}.t"], start)
    events = _events(records)
    assert len(events) == 3 * (next_id - 1)
    positions = [e.position for e in events if e.position is not None]
    assert len(positions) == len(events)
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    files = {int(p.text.split(":")[0].rsplit(".", 1)[1]) for p in positions}
    assert {9, 10} <= files
    nine = [p for p in positions if p.text.startswith("mysql-bin.000009:")]
    ten = [p for p in positions if p.text.startswith("mysql-bin.000010:")]
    assert max(nine) < min(ten)
    assert int(max(nine).text.split(":")[1]) > int(min(ten).text.split(":")[1])


def test_resume_from_offsets_and_gtid(server: MariaDBServer) -> None:
    db = "resume_db"
    _execute(server, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    start = _master_position(server)
    _execute(
        server,
        f"INSERT INTO {db}.t VALUES (1, 1), (2, 2)",
        f"UPDATE {db}.t SET v = v + 10",
        f"DELETE FROM {db}.t WHERE id = 1",
    )
    with BinlogReader(server.connection_settings(), [f"{db}.t"], start=start) as reader:
        records = list(reader)
        committed = reader.committed
    assert [r.value["op"] for r in records] == ["c", "c", "u", "u", "d"]
    # A multi-row statement is one row event: one offset, rows 0 and 1.
    (offset_a, row_a), (offset_b, row_b) = (r.position.text.rsplit(":", 1) for r in records[:2])
    assert offset_a == offset_b and (row_a, row_b) == ("0", "1")
    assert committed is not None and committed.gtid

    def texts(found: list[CaptureRecord]) -> list[tuple[str, str]]:
        return [(r.position.text, r.value["op"]) for r in found]

    # Resuming from a record's offset replays its whole transaction, nothing earlier.
    middle = records[3].resume
    assert middle == records[2].resume
    again = _read(server, [f"{db}.t"], middle)
    assert texts(again) == texts(records[2:])
    # The same place as a GTID state alone (no file) gives the same records.
    by_gtid = _read(server, [f"{db}.t"], BinlogOffset(gtid=middle.gtid))
    assert texts(by_gtid) == texts(records[2:])
    assert [r.value["after"] for r in by_gtid] == [r.value["after"] for r in again]

    # From the committed offset only what came later.
    assert _read(server, [f"{db}.t"], committed) == []
    _execute(server, f"INSERT INTO {db}.t VALUES (3, 3)")
    later = _read(server, [f"{db}.t"], committed)
    assert [(r.value["op"], r.key) for r in later] == [("c", {"id": 3})]


def test_a_purged_position_is_a_clear_error(server: MariaDBServer) -> None:
    with pytest.raises(PositionLostError) as err:
        _read(server, ["x.t"], BinlogOffset("mysql-bin.999999", 4))
    assert "mysql-bin.999999:4" in err.value.render() and "bootstrap" in err.value.render()


def test_time_values_outside_a_day_are_not_lost_silently(server: MariaDBServer) -> None:
    """MySQL TIME spans ±838:59:59; icetide's ``time`` is a time of day. The capture
    keeps the exact microseconds (Debezium MicroTime); projection refuses them with a
    ``type_mismatch`` (a dead letter), it never wraps them."""
    db = "time_db"
    _execute(
        server,
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, d TIME(6))",
    )
    start = _master_position(server)
    _execute(server, f"INSERT INTO {db}.t VALUES (1, '-838:59:59'), (2, '100:00:00.5')")
    records = _read(server, [f"{db}.t"], start)
    values = [r.value["after"]["d"] for r in records]
    assert values == [
        -(838 * 3600 + 59 * 60 + 59) * 1_000_000,
        int(timedelta(hours=100, microseconds=500_000) / timedelta(microseconds=1)),
    ]
    schema = schema_from_dict(
        {
            "table": "t",
            "primary_key": ["id"],
            "columns": [
                {"id": 1, "name": "id", "type": "int", "nullable": False},
                {"id": 2, "name": "d", "type": "time"},
            ],
        }
    )
    for event in _events(records):
        with pytest.raises(DecodeError) as err:
            project_event(event, schema, read_hints(schema, CAPTURE))
        assert err.value.reason == "type_mismatch"
