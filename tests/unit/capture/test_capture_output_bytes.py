"""The exact bytes capture writes for mixed-type rows, from the source's own bytes.

A change to the per-event path (converters, image building, the ``source`` block, the
envelope, the JSON encoder) may make capture faster; it may not change one output byte,
since the ledger, Kafka consumers and landing files already on disk read these. Each test
feeds a reader the protocol bytes a server sends — pgoutput messages, binlog packets
recorded from MariaDB 10.11 — through the reader's own message handling, and pins the
records' JSON text, keys and positions. No server runs: the PostgreSQL table's layout is
given as its Relation message and catalog would give it, the binlog's control connection
answers only what the library asks of it (the server's kind and character set).
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from pymysql.protocol import MysqlPacket
from pymysqlreplication.event import (
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from icetide import __version__
from icetide.capture.mysql import reader as reader_module
from icetide.capture.mysql.reader import BinlogOffset, BinlogReader
from icetide.capture.postgres.offset import LsnOffset
from icetide.capture.postgres.reader import PgOutputReader
from icetide.capture.postgres.reader import _Relation as PgRelation
from icetide.capture.postgres.settings import ServerInfo as PgServerInfo
from icetide.capture.record import CaptureRecord
from icetide.sources.postgres_types import ColumnInfo as PgColumn
from icetide.sources.postgres_types import builtin_type, value_converter

NOW = 1_700_000_000.123


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: NOW)


def pinned(text: str) -> str:
    return text.replace("VERSION", __version__)


# --- PostgreSQL: pgoutput messages -------------------------------------------------------------

PG_OID = 16390
PG_TYPES = (
    ("id", 20, -1),  # bigint, the key
    ("n", 23, -1),  # integer
    ("amount", 1700, ((12 << 16) | 2) + 4),  # numeric(12,2)
    ("note", 25, -1),  # text
    ("flag", 16, -1),  # boolean
    ("ratio", 701, -1),  # double precision
    ("raw", 17, -1),  # bytea
    ("day", 1082, -1),  # date
    ("at", 1114, 6),  # timestamp(6)
    ("at3", 1114, 3),  # timestamp(3): milliseconds
    ("atz", 1184, -1),  # timestamptz
    ("clock", 1083, 3),  # time(3): milliseconds
    ("span", 1186, -1),  # interval
    ("uid", 2950, -1),  # uuid
    ("doc", 3802, -1),  # jsonb
    ("nums", 1007, -1),  # integer[]
    ("big", 25, -1),  # text, TOASTed
)


def pg_columns() -> tuple[PgColumn, ...]:
    columns = []
    for name, oid, typmod in PG_TYPES:
        kind = builtin_type(oid)
        assert kind is not None
        key = name == "id"
        columns.append(
            PgColumn(name, kind, typmod, identity=key, primary=key, nullable=not key, dims=0)
        )
    return tuple(columns)


def tuple_data(values: list[str | None | bool]) -> bytes:
    """A pgoutput TupleData: ``None`` is NULL, ``False`` an unchanged TOAST value."""
    out = struct.pack(">H", len(values))
    for value in values:
        if value is None:
            out += b"n"
        elif value is False:
            out += b"u"
        else:
            raw = str(value).encode()
            out += b"t" + struct.pack(">I", len(raw)) + raw
    return out


ROW_OLD: list[str | None | bool] = [
    "7", "-2147483648", "-1234567890.05", 'tab\tquote" é ✓', "t", "-1.5e-07", "\\x00ff10",
    "2024-02-29", "1969-12-31 23:59:59.999999", "2024-02-29 10:11:12.345",
    "2024-01-01 10:00:00.25+05:30", "12:34:56.789", "P1Y-2M3DT4H5M6.5S",
    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", '{"k": [1, 2.50, null]}', "{1,NULL,-3}",
    "x" * 40,
]  # fmt: skip
ROW_NEW: list[str | None | bool] = [
    "7", None, "0.00", "", "f", "NaN", None, "0001-01-01 BC", "2024-01-01 00:00:00",
    None, "infinity", "24:00:00", "PT0S", None, "[]", "{}", False,
]  # fmt: skip


def pg_messages() -> list[tuple[bytes, int]]:
    """A transaction of an update (``REPLICA IDENTITY FULL``: the old row, and an unchanged
    TOAST value the old row holds), an insert, a key-changing update, a delete, then an
    insert and an update with every value sent (no NULL, nothing left out) and no old
    tuple (as ``REPLICA IDENTITY DEFAULT`` sends an update that keeps the key)."""
    begin = b"B" + struct.pack(">QqI", 0x16B4000, 762_434_000_250_000, 771)
    head = struct.pack(">I", PG_OID)
    update = b"U" + head + b"O" + tuple_data(ROW_OLD) + b"N" + tuple_data(ROW_NEW)
    inserted = [*ROW_NEW[:16], "y"]
    inserted[0] = "8"
    insert = b"I" + head + b"N" + tuple_data(inserted)
    moved = ["9", *inserted[1:]]
    key_change = b"U" + head + b"O" + tuple_data(inserted) + b"N" + tuple_data(moved)
    delete = b"D" + head + b"K" + tuple_data(["9", *[None] * 16])
    full = ["10", *ROW_OLD[1:]]
    full_insert = b"I" + head + b"N" + tuple_data(full)
    full_update = b"U" + head + b"N" + tuple_data([*full[:3], "ünïcode", *full[4:]])
    commit = b"C" + struct.pack(">BQQq", 0, 0x16B4000, 0x16B4030, 762_434_000_250_000)
    return [
        (begin, 0),
        (update, 0x16B3748),
        (insert, 0x16B3800),
        (key_change, 0x16B3900),
        (delete, 0x16B3A00),
        (full_insert, 0x16B3B00),
        (full_update, 0x16B3C00),
        (commit, 0),
    ]


def pg_records() -> list[CaptureRecord]:
    reader = PgOutputReader("host=db port=5432 dbname=shop", ["public.mixed"], name="srv")
    reader.info = PgServerInfo("15.0", 150000, "shop", "u", {})
    columns = pg_columns()
    reader._relations[PG_OID] = PgRelation(
        PG_OID, "public", "mixed", "f", columns,
        tuple((c.name, value_converter(c)) for c in columns), ("id",), (0,),
    )  # fmt: skip
    reader._last_commit = 0x16B3700
    records = []
    for data, lsn in pg_messages():
        records.extend(r for r in reader._handle(data, lsn) if isinstance(r, CaptureRecord))
    assert reader.committed == LsnOffset(0x16B4030)
    return records


def pg_source(lsn: int) -> str:
    return (
        '"source":{"version":"VERSION","connector":"postgresql","name":"srv",'
        '"ts_ms":1709118800250,"snapshot":"false","db":"shop",'
        f'"sequence":"[\\"23803648\\",\\"{lsn}\\"]","schema":"public","table":"mixed",'
        f'"txId":771,"lsn":{lsn},"xmin":null}}'
    )


def pg_tx(total: int) -> str:
    return (
        f'"ts_ms":1700000000123,"transaction":{{"id":"771:23805952","total_order":{total},'
        f'"data_collection_order":{total}}}}}'
    )


PG_OLD_IMAGE = (
    '{"id":7,"n":-2147483648,"amount":"-1234567890.05","note":"tab\\tquote\\" é ✓",'
    '"flag":true,"ratio":-1.5e-07,"raw":"AP8Q","day":19782,"at":-1,"at3":1709201472345,'
    '"atz":"2024-01-01T04:30:00.25Z","clock":45296789,"span":26571906500000,'
    '"uid":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","doc":"{\\"k\\": [1, 2.50, null]}",'
    '"nums":[1,null,-3],"big":"' + "x" * 40 + '"}'
)
PG_NEW_IMAGE = (
    '{"id":7,"n":null,"amount":"0.00","note":"","flag":false,"ratio":"NaN","raw":null,'
    '"day":-719528,"at":1704067200000000,"at3":null,"atz":"infinity","clock":86400000,'
    '"span":0,"uid":null,"doc":"[]","nums":[],"big":"' + "x" * 40 + '"}'
)
PG_INSERTED = PG_NEW_IMAGE.replace('"id":7', '"id":8').replace('"x' + "x" * 39 + '"', '"y"')
PG_MOVED = PG_INSERTED.replace('"id":8', '"id":9')
PG_KEY_ONLY = '{"id":9}'
PG_FULL = PG_OLD_IMAGE.replace('"id":7', '"id":10')
PG_FULL_UPDATED = PG_FULL.replace('"tab\\tquote\\" é ✓"', '"ünïcode"')
PG_EXPECTED = [
    '{"before":' + PG_OLD_IMAGE + ',"after":' + PG_NEW_IMAGE + ","
    + pg_source(0x16B3748) + ',"op":"u",' + pg_tx(1),
    '{"before":null,"after":' + PG_INSERTED + "," + pg_source(0x16B3800) + ',"op":"c",' + pg_tx(2),
    '{"before":' + PG_INSERTED + ',"after":null,' + pg_source(0x16B3900) + ',"op":"d",' + pg_tx(3),
    '{"before":null,"after":' + PG_MOVED + "," + pg_source(0x16B3900) + ',"op":"c",' + pg_tx(4),
    '{"before":' + PG_KEY_ONLY + ',"after":null,' + pg_source(0x16B3A00) + ',"op":"d",' + pg_tx(5),
    '{"before":null,"after":' + PG_FULL + "," + pg_source(0x16B3B00) + ',"op":"c",' + pg_tx(6),
    '{"before":null,"after":' + PG_FULL_UPDATED + "," + pg_source(0x16B3C00) + ',"op":"u",'
    + pg_tx(7),
]  # fmt: skip


def test_postgres_mixed_types_to_exact_bytes() -> None:
    records = pg_records()
    assert [r.to_json() for r in records] == [pinned(text) for text in PG_EXPECTED]
    assert [r.key_json() for r in records] == [
        '{"id":7}', '{"id":8}', '{"id":8}', '{"id":9}', '{"id":9}', '{"id":10}', '{"id":10}'
    ]  # fmt: skip
    assert [r.position.text for r in records] == [
        "0/16B3748:0", "0/16B3800:0", "0/16B3900:0", "0/16B3900:1", "0/16B3A00:0",
        "0/16B3B00:0", "0/16B3C00:0",
    ]  # fmt: skip
    assert {r.resume for r in records} == {LsnOffset(0x16B3700)}


def test_postgres_rows_without_the_one_pass_reader_give_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows of only text values are read in one pass; through the tuple parser and the
    converters one by one (as rows with a NULL are) they give the same bytes."""
    monkeypatch.setattr(PgRelation, "row_reader", lambda self, codec: lambda data, pos: None)
    assert [r.to_json() for r in pg_records()] == [pinned(text) for text in PG_EXPECTED]


# --- MySQL/MariaDB: binlog events ----------------------------------------------------------------

BINLOG = Path(__file__).parent / "data" / "mariadb_mixed_types.binlog"
"""The events of one transaction, cut from a MariaDB 10.11 binlog file (``mysql-bin.000001``
from :data:`BINLOG_START`; CRC32 checksums, ``binlog_row_metadata=FULL``): an INSERT of
two rows, an UPDATE, a key-changing UPDATE and a DELETE on a table of mixed column types
(the statements are in :data:`BINLOG_SQL`)."""
BINLOG_FILE, BINLOG_START = "mysql-bin.000001", 1066
BINLOG_SQL = """
CREATE TABLE shop.mixed (
  id BIGINT NOT NULL PRIMARY KEY,
  n INT, u BIGINT UNSIGNED, small SMALLINT, f FLOAT, d DOUBLE, amount DECIMAL(12,2),
  note VARCHAR(64), code CHAR(3), body TEXT, raw VARBINARY(16), fixed BINARY(4), blob_ BLOB,
  day DATE, at6 DATETIME(6), at3 DATETIME(3), ts2 TIMESTAMP(2) NULL DEFAULT NULL,
  clock TIME(6), yr YEAR, flag BIT(1), bits BIT(10), kind ENUM('a','b','c'),
  tags SET('x','y','z'), doc JSON, latin VARCHAR(8) CHARACTER SET latin1
) DEFAULT CHARSET=utf8mb4;
-- recorded from here, with time_zone '+00:00'
BEGIN;
INSERT INTO shop.mixed VALUES
  (7, -2147483648, 18446744073709551615, -32768, 1.1, -1.7976931348623157e308,
   -1234567890.05, 'tab\\tquote" é ✓', 'ab', REPEAT('é', 3), x'00ff10', x'01', x'',
   '2024-02-29', '1969-12-31 23:59:59.999999', '2024-02-29 10:11:12.345',
   '2038-01-19 03:14:07.99', '-838:59:58.5', 2155, b'1', b'1000000001', 'b', 'z,x',
   '{"k": [1, 2.50, null]}', 'café'),
  (8, NULL, 0, 0, 0, 0, 0.00, '', '', '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL, NULL, '', NULL, NULL);
UPDATE shop.mixed SET n = 42, note = 'änderung', at6 = '2024-01-01 00:00:00', tags = ''
  WHERE id = 7;
UPDATE shop.mixed SET id = 9 WHERE id = 8;
DELETE FROM shop.mixed WHERE id = 7;
COMMIT;
"""


READER_EVENTS = frozenset(
    {
        RotateEvent,
        MariadbGtidEvent,
        QueryEvent,
        XidEvent,
        TableMapEvent,
        WriteRowsEvent,
        UpdateRowsEvent,
        DeleteRowsEvent,
        HeartbeatLogEvent,
    }
)
"""The event classes the reader asks the library for that a MariaDB transaction holds."""


class _Control:
    """What python-mysql-replication asks of its control connection while parsing these
    events: the server's kind and the connection's character set (the column names and
    character sets come from the table map's metadata)."""

    charset = "utf8mb4"

    def _get_dbms(self) -> str:
        return "mariadb"


def binlog_events() -> list[Any]:
    """The recorded events as python-mysql-replication's event objects, read from their
    bytes by the library's own packet wrapper, as a stream would hand them over."""
    data = BINLOG.read_bytes()
    table_map: dict[int, Any] = {}
    events = []
    pos = 0
    while pos < len(data):
        (size,) = struct.unpack_from("<I", data, pos + 9)
        packet = MysqlPacket(b"\x00" + data[pos : pos + size], "utf8")
        wrapper = BinLogPacketWrapper(
            packet, table_map, _Control(), (10, 11, 19), True, READER_EVENTS,
            None, None, None, None, False, False, False, True, False,
        )  # fmt: skip
        if wrapper.event is not None:
            if isinstance(wrapper.event, TableMapEvent):
                table_map[wrapper.event.table_id] = wrapper.event.get_table()
            events.append(wrapper.event)
        pos += size
    return events


def mysql_records() -> tuple[BinlogReader, list[CaptureRecord]]:
    reader = BinlogReader({"host": "db", "port": 3306}, ["shop.mixed"], name="srv")
    reader._file = BINLOG_FILE
    records = []
    for event in binlog_events():
        records.extend(r for r in reader._handle(event) if isinstance(r, CaptureRecord))
    return reader, records


MYSQL_ROW_7 = (
    '{"id":7,"n":-2147483648,"u":18446744073709551615,"small":-32768,"f":1.1'
    ',"d":-1.7976931348623157e+308,"amount":"-1234567890.05","note":"tab\\tquote\\" é ✓"'
    ',"code":"ab","body":"ééé","raw":"AP8Q","fixed":"AQAAAA==","blob_":"","day":19782'
    ',"at6":-1,"at3":1709201472345,"ts2":"2038-01-19T03:14:07.99Z","clock":-3020398500000'
    ',"yr":2155,"flag":true,"bits":"AQI=","kind":"b","tags":"x,z"'
    ',"doc":"{\\"k\\": [1, 2.50, null]}","latin":"café"}'
)
MYSQL_ROW_8 = (
    '{"id":8,"n":null,"u":0,"small":0,"f":0.0,"d":0.0,"amount":"0.00","note":"","code":""'
    ',"body":"","raw":null,"fixed":null,"blob_":null,"day":null,"at6":null,"at3":null'
    ',"ts2":null,"clock":null,"yr":null,"flag":null,"bits":null,"kind":null,"tags":""'
    ',"doc":null,"latin":null}'
)
MYSQL_ROW_7_UPDATED = (
    '{"id":7,"n":42,"u":18446744073709551615,"small":-32768,"f":1.1'
    ',"d":-1.7976931348623157e+308,"amount":"-1234567890.05","note":"änderung","code":"ab"'
    ',"body":"ééé","raw":"AP8Q","fixed":"AQAAAA==","blob_":"","day":19782'
    ',"at6":1704067200000000,"at3":1709201472345,"ts2":"2038-01-19T03:14:07.99Z"'
    ',"clock":-3020398500000,"yr":2155,"flag":true,"bits":"AQI=","kind":"b","tags":""'
    ',"doc":"{\\"k\\": [1, 2.50, null]}","latin":"café"}'
)


def mysql_change(op: str, before: str, after: str, pos: int, row: int, order: int) -> str:
    source = (
        '"source":{"version":"VERSION","connector":"mysql","name":"srv","ts_ms":1796197509000,'
        '"snapshot":"false","db":"shop","sequence":null,"table":"mixed","server_id":1,'
        f'"gtid":"0-1-3","file":"mysql-bin.000001","pos":{pos},"row":{row},"thread":null,'
        '"query":null}'
    )
    return (
        f'{{"before":{before},"after":{after},{source},"op":"{op}","ts_ms":1700000000123,'
        f'"transaction":{{"id":"0-1-3","total_order":{order},"data_collection_order":{order}}}}}'
    )


MYSQL_ROW_9 = MYSQL_ROW_8.replace('"id":8', '"id":9')
MYSQL_EXPECTED = [
    mysql_change("c", "null", MYSQL_ROW_7, 1890, 0, 1),
    mysql_change("c", "null", MYSQL_ROW_8, 1890, 1, 2),
    mysql_change("u", MYSQL_ROW_7, MYSQL_ROW_7_UPDATED, 2497, 0, 3),
    mysql_change("d", MYSQL_ROW_8, "null", 3142, 0, 4),
    mysql_change("c", "null", MYSQL_ROW_9, 3142, 0, 5),
    mysql_change("d", MYSQL_ROW_7_UPDATED, "null", 3585, 0, 6),
]


def test_mysql_mixed_types_to_exact_bytes() -> None:
    reader, records = mysql_records()
    assert [r.to_json() for r in records] == [pinned(text) for text in MYSQL_EXPECTED]
    assert [r.key_json() for r in records] == [
        '{"id":7}', '{"id":8}', '{"id":7}', '{"id":8}', '{"id":9}', '{"id":7}'
    ]  # fmt: skip
    assert [r.position.text for r in records] == [
        "mysql-bin.000001:1890:0", "mysql-bin.000001:1890:1", "mysql-bin.000001:2497:0",
        "mysql-bin.000001:3142:0", "mysql-bin.000001:3142:0", "mysql-bin.000001:3585:0",
    ]  # fmt: skip
    assert {r.resume for r in records} == {BinlogOffset(BINLOG_FILE, BINLOG_START, None)}
    assert reader.committed == BinlogOffset(BINLOG_FILE, BINLOG_START + len(BINLOG.read_bytes()))


def test_mysql_library_rows_give_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without icetide's row decoder (a column type only the library reads), the rows
    go through python-mysql-replication and the converters: the same bytes."""
    monkeypatch.setattr(reader_module, "row_decoder", lambda columns, infos: None)
    _, records = mysql_records()
    assert [r.to_json() for r in records] == [pinned(text) for text in MYSQL_EXPECTED]


@pytest.mark.parametrize("source", ["mysql", "postgres"])
def test_record_text_is_the_value_serialised(source: str) -> None:
    """The text a reader assembles from its parts is ``value`` serialised, always: the
    transports write the text, registry formats and tests read ``value``."""
    records = mysql_records()[1] if source == "mysql" else pg_records()
    for record in records:
        assert record.text == json.dumps(record.value, ensure_ascii=False, separators=(",", ":"))
