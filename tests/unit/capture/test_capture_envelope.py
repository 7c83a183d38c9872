"""The exact Debezium envelope JSON both readers write, pinned byte for byte.

Downstream (the decoder, Kafka consumers, landing files already on disk) reads these
bytes, so the envelope assembly may move but its output may not change: key order,
optional fields written as ``null``, the inline Connect schema. The records are built
through each reader's own envelope functions, with no server, and the clock fixed.
"""

from __future__ import annotations

import time

import pytest

from icetide import __version__
from icetide.capture.mysql.reader import BinlogReader, _Table
from icetide.capture.mysql.reader import _Transaction as MySQLTransaction
from icetide.capture.mysql.types import ColumnInfo as MySQLColumn
from icetide.capture.postgres.offset import LsnOffset
from icetide.capture.postgres.reader import PgOutputReader
from icetide.capture.postgres.reader import _Relation as PgRelation
from icetide.capture.postgres.reader import _Transaction as PgTransaction
from icetide.capture.postgres.settings import ServerInfo as PgServerInfo
from icetide.capture.record import CaptureRecord
from icetide.events.position import binlog_position
from icetide.sources.postgres_types import ColumnInfo as PgColumn
from icetide.sources.postgres_types import PgType, value_converter

NOW = 1_700_000_000.123


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: NOW)


def pinned(text: str) -> str:
    return text.replace("VERSION", __version__)


# --- MySQL ---------------------------------------------------------------------------------


def mysql_records(include_schema: bool) -> list[CaptureRecord]:
    reader = BinlogReader({"host": "db", "port": 3306}, ["shop.items"], name="srv")
    reader._include_schema = include_schema
    reader._file = "mysql-bin.000003"
    columns = (
        MySQLColumn("id", 3, nullable=False, primary=True),
        MySQLColumn("name", 15, max_length=40, charset="utf-8"),
    )
    table = _Table("shop", "items", columns, (), ("id",))
    tx = MySQLTransaction("mysql-bin.000003", 120, "0-1-42", "0-1-41", open=True, thread=9)
    position = binlog_position("mysql-bin.000003", 200, 0)
    source = reader._source("shop", "items", 1_699_999_999_000, 200, 0, tx, 1)
    source["row"] = 0
    change = reader._change(
        "u", "shop", "items", table, {"id": 1, "name": "a"}, {"id": 1, "name": "b"},
        source, position, tx,
    )  # fmt: skip
    truncate = reader._change("t", "shop", "items", None, None, None, source, position, tx)
    return [change, truncate]


MYSQL_CHANGE = (
    '{"before":{"id":1,"name":"a"},"after":{"id":1,"name":"b"},"source":{"version":"VERSION",'
    '"connector":"mysql","name":"srv","ts_ms":1699999999000,"snapshot":"false","db":"shop",'
    '"sequence":null,"table":"items","server_id":1,"gtid":"0-1-42","file":"mysql-bin.000003",'
    '"pos":200,"row":0,"thread":9,"query":null},"op":"u","ts_ms":1700000000123,'
    '"transaction":{"id":"0-1-42","total_order":1,"data_collection_order":1}}'
)
MYSQL_TRUNCATE = (
    '{"before":null,"after":null,"source":{"version":"VERSION","connector":"mysql","name":"srv",'
    '"ts_ms":1699999999000,"snapshot":"false","db":"shop","sequence":null,"table":"items",'
    '"server_id":1,"gtid":"0-1-42","file":"mysql-bin.000003","pos":200,"row":0,"thread":9,'
    '"query":null},"op":"t","ts_ms":1700000000123,"transaction":{"id":"0-1-42",'
    '"total_order":2,"data_collection_order":2}}'
)
MYSQL_SCHEMA = (
    '{"type":"struct","name":"srv.shop.items.Envelope","optional":false,"version":1,"fields":'
    '[{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},'
    '{"type":"string","optional":true,"field":"name"}],"optional":true,'
    '"name":"srv.shop.items.Value","field":"before"},{"type":"struct","fields":[{"type":"int32",'
    '"optional":false,"field":"id"},{"type":"string","optional":true,"field":"name"}],'
    '"optional":true,"name":"srv.shop.items.Value","field":"after"},{"type":"struct",'
    '"name":"io.debezium.connector.mysql.Source","optional":false,"field":"source","fields":'
    '[{"type":"string","optional":false,"field":"version"},{"type":"string","optional":false,'
    '"field":"connector"},{"type":"string","optional":false,"field":"name"},{"type":"int64",'
    '"optional":false,"field":"ts_ms"},{"type":"string","optional":true,"field":"snapshot"},'
    '{"type":"string","optional":false,"field":"db"},{"type":"string","optional":true,'
    '"field":"sequence"},{"type":"string","optional":true,"field":"table"},{"type":"int64",'
    '"optional":false,"field":"server_id"},{"type":"string","optional":true,"field":"gtid"},'
    '{"type":"string","optional":false,"field":"file"},{"type":"int64","optional":false,'
    '"field":"pos"},{"type":"int32","optional":false,"field":"row"},{"type":"int64",'
    '"optional":true,"field":"thread"},{"type":"string","optional":true,"field":"query"}]},'
    '{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,'
    '"field":"ts_ms"},{"type":"struct","name":"event.block","version":1,"optional":true,'
    '"field":"transaction","fields":[{"type":"string","optional":false,"field":"id"},'
    '{"type":"int64","optional":false,"field":"total_order"},{"type":"int64","optional":false,'
    '"field":"data_collection_order"}]}]}'
)


def test_mysql_envelope_without_schema() -> None:
    change, truncate = mysql_records(include_schema=False)
    assert change.to_json() == pinned(MYSQL_CHANGE)
    assert change.key_json() == '{"id":1}'
    assert truncate.to_json() == pinned(MYSQL_TRUNCATE)
    assert truncate.key is None


def test_mysql_envelope_with_schema() -> None:
    change, truncate = mysql_records(include_schema=True)
    assert change.to_json() == pinned(
        '{"schema":' + MYSQL_SCHEMA + ',"payload":' + MYSQL_CHANGE + "}"
    )
    # A truncate has no table layout, so no inline schema (as before).
    assert truncate.to_json() == pinned(MYSQL_TRUNCATE)


# --- PostgreSQL ----------------------------------------------------------------------------


def postgres_records(include_schema: bool) -> list[CaptureRecord]:
    reader = PgOutputReader("host=db port=5432 dbname=shop", ["public.items"], name="srv")
    reader._include_schema = include_schema
    reader.info = PgServerInfo("15.0", 150000, "shop", "u", {})
    columns = (
        PgColumn("id", PgType(23, "integer"), primary=True, identity=True, nullable=False),
        PgColumn("note", PgType(25, "text")),
    )
    relation = PgRelation(
        16384, "public", "items", "d", columns,
        tuple((c.name, value_converter(c)) for c in columns), ("id",), (0,),
        pending_change=(columns[0],),
    )  # fmt: skip
    reader._tx = PgTransaction(
        771, 0x16B3800, 1_699_999_999_000, LsnOffset(0x16B3700), skip=False
    )  # fmt: skip
    lsn = 0x16B3748
    schema_change = list(reader._schema_change(relation, lsn))
    change = reader._change("c", relation, None, {"id": 1, "note": "x"}, lsn)
    delete = reader._change("d", relation, {"id": 1, "note": None}, None, lsn)
    return [*schema_change, change, delete]


PG_SOURCE = (
    '"source":{"version":"VERSION","connector":"postgresql","name":"srv","ts_ms":1699999999000,'
    '"snapshot":"false","db":"shop","sequence":"[\\"23803648\\",\\"23803720\\"]",'
    '"schema":"public","table":"items","txId":771,"lsn":23803720,"xmin":null}'
)
PG_SCHEMA_CHANGE = (
    "{" + PG_SOURCE + ',"ts_ms":1700000000123,"databaseName":"shop","schemaName":"public",'
    '"ddl":null,"tableChanges":[{"type":"ALTER","id":"\\"shop\\".\\"public\\".\\"items\\"",'
    '"table":{"primaryKeyColumnNames":["id"],"columns":[{"name":"id","jsonType":"INT32",'
    '"oid":23,"typeName":"integer","typeExpression":"integer","position":1,"optional":false,'
    '"primary":true},{"name":"note","jsonType":"STRING","oid":25,"typeName":"text",'
    '"typeExpression":"text","position":2,"optional":true,"primary":false}]}}]}'
)
PG_CHANGE = (
    '{"before":null,"after":{"id":1,"note":"x"},' + PG_SOURCE + ',"op":"c",'
    '"ts_ms":1700000000123,"transaction":{"id":"771:23803904","total_order":1,'
    '"data_collection_order":1}}'
)
PG_DELETE = (
    '{"before":{"id":1,"note":null},"after":null,' + PG_SOURCE + ',"op":"d",'
    '"ts_ms":1700000000123,"transaction":{"id":"771:23803904","total_order":2,'
    '"data_collection_order":2}}'
)
PG_SCHEMA = (
    '{"type":"struct","name":"srv.public.items.Envelope","optional":false,"version":1,"fields":'
    '[{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},'
    '{"type":"string","optional":true,"field":"note"}],"optional":true,'
    '"name":"srv.public.items.Value","field":"before"},{"type":"struct","fields":'
    '[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,'
    '"field":"note"}],"optional":true,"name":"srv.public.items.Value","field":"after"},'
    '{"type":"struct","name":"io.debezium.connector.postgresql.Source","optional":false,'
    '"field":"source","fields":[{"type":"string","optional":false,"field":"version"},'
    '{"type":"string","optional":false,"field":"connector"},{"type":"string",'
    '"optional":false,"field":"name"},{"type":"int64","optional":false,"field":"ts_ms"},'
    '{"type":"string","optional":true,"field":"snapshot"},{"type":"string","optional":false,'
    '"field":"db"},{"type":"string","optional":true,"field":"sequence"},{"type":"string",'
    '"optional":false,"field":"schema"},{"type":"string","optional":false,"field":"table"},'
    '{"type":"int64","optional":true,"field":"txId"},{"type":"int64","optional":true,'
    '"field":"lsn"},{"type":"int64","optional":true,"field":"xmin"}]},{"type":"string",'
    '"optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"},'
    '{"type":"struct","name":"event.block","version":1,"optional":true,"field":"transaction",'
    '"fields":[{"type":"string","optional":false,"field":"id"},{"type":"int64",'
    '"optional":false,"field":"total_order"},{"type":"int64","optional":false,'
    '"field":"data_collection_order"}]}]}'
)


def test_postgres_envelope_without_schema() -> None:
    schema_change, change, delete = postgres_records(include_schema=False)
    assert (schema_change.kind, schema_change.key) == ("schema_change", None)
    assert schema_change.to_json() == pinned(PG_SCHEMA_CHANGE)
    assert change.to_json() == pinned(PG_CHANGE)
    assert change.key_json() == '{"id":1}'
    assert delete.to_json() == pinned(PG_DELETE)
    assert [r.position.text for r in (schema_change, change, delete)] == [
        "0/16B3748:0",
        "0/16B3748:1",
        "0/16B3748:2",
    ]


def test_postgres_envelope_with_schema() -> None:
    schema_change, change, delete = postgres_records(include_schema=True)
    assert schema_change.to_json() == pinned(PG_SCHEMA_CHANGE)
    assert change.to_json() == pinned('{"schema":' + PG_SCHEMA + ',"payload":' + PG_CHANGE + "}")
    assert delete.to_json() == pinned('{"schema":' + PG_SCHEMA + ',"payload":' + PG_DELETE + "}")
