"""icetide's own row-image decoder against python-mysql-replication's, value for value.

The same binlog is read twice, once with :mod:`icetide.capture.mysql.rows` and once with
the decoder switched off (every row through the library and ``convert_row``); the
envelopes must be identical. The rows hold edge values of every type the decoder reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from icetide.capture.mysql import reader as reader_module
from icetide.capture.mysql.reader import BinlogOffset, BinlogReader, CaptureRecord
from icetide.capture.mysql.rows import RowDecoder
from icetide.devservers.mariadb import MariaDBServer

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore:'db' is deprecated:DeprecationWarning"),
]

DB = "rowsdb"
EDGE_DDL = f"""
CREATE TABLE {DB}.edges (
  id INT NOT NULL PRIMARY KEY,
  c_tiny TINYINT, c_tiny_u TINYINT UNSIGNED, c_small SMALLINT, c_small_u SMALLINT UNSIGNED,
  c_medium MEDIUMINT, c_medium_u MEDIUMINT UNSIGNED, c_int INT, c_int_u INT UNSIGNED,
  c_big BIGINT, c_big_u BIGINT UNSIGNED, c_float FLOAT, c_double DOUBLE,
  c_d52 DECIMAL(5,2), c_d90 DECIMAL(9,0), c_d99 DECIMAL(9,9), c_d189 DECIMAL(18,9),
  c_d100 DECIMAL(10,0), c_d6530 DECIMAL(65,30), c_d2010 DECIMAL(20,10), c_d11 DECIMAL(1,1),
  c_date DATE, c_year YEAR,
  c_dt0 DATETIME, c_dt1 DATETIME(1), c_dt3 DATETIME(3), c_dt4 DATETIME(4), c_dt6 DATETIME(6),
  c_ts0 TIMESTAMP NULL DEFAULT NULL, c_ts2 TIMESTAMP(2) NULL DEFAULT NULL,
  c_ts6 TIMESTAMP(6) NULL DEFAULT NULL,
  c_t0 TIME, c_t1 TIME(1), c_t3 TIME(3), c_t6 TIME(6),
  c_bit1 BIT(1), c_bit9 BIT(9), c_bit64 BIT(64),
  c_enum ENUM('a','b','c'), c_set SET('x','y','z'), c_bigset SET(
    'm0','m1','m2','m3','m4','m5','m6','m7','m8','m9','m10','m11','m12','m13','m14','m15',
    'm16','m17','m18'),
  c_char CHAR(3), c_char_long CHAR(100), c_varchar VARCHAR(300), c_tiny_text TINYTEXT,
  c_text TEXT, c_latin VARCHAR(10) CHARACTER SET latin1, c_ascii CHAR(4) CHARACTER SET ascii,
  c_binary BINARY(4), c_varbinary VARBINARY(300), c_blob BLOB, c_json JSON,
  c_geo GEOMETRY
) DEFAULT CHARSET=utf8mb4
"""

ROWS = [
    # Maxima, minima and negatives of everything.
    "(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, "
    "-9223372036854775808, 18446744073709551615, -3.4e38, -1.7976931348623157e308, "
    "-999.99, -999999999, -0.999999999, -123456789.123456789, -9999999999, "
    "-12345678901234567890123456789012345.123456789012345678901234567890, "
    "-1234567890.0123456789, -0.9, '1000-01-01', 1901, '1000-01-01 00:00:00', "
    "'1000-01-01 00:00:00.1', '1969-12-31 23:59:59.999', '1969-12-31 23:59:59.0001', "
    "'1000-01-01 00:00:00.000001', '1970-01-01 00:00:01', '1970-01-01 00:00:01.01', "
    "'2038-01-19 03:14:07.999999', '-838:59:59', '-838:59:58.9', '-00:00:00.001', "
    "'-12:34:56.789012', b'0', b'100000001', b'" + "1" * 64 + "', 'a', 'x,y,z', 'm5', "
    "'z', 'ÿ✓x', 'é', '', '', 'café', 'ok',"
    " x'00', x'', x'', '[]', ST_GeomFromText('POINT(-1.5 2.25)', 4326))",
    # Zeros, empties and the other ends.
    "(2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '0000-00-00', 0, "
    "'0000-00-00 00:00:00', '0000-00-00 00:00:00.0', '0000-00-00 00:00:00.000', "
    "'0000-00-00 00:00:00.0000', '0000-00-00 00:00:00.000000', '0000-00-00 00:00:00', "
    "'0000-00-00 00:00:00', '0000-00-00 00:00:00', '00:00:00', '00:00:00', '00:00:00', "
    "'00:00:00', b'1', b'0', b'0', 'c', 'x', 'm0,m18', '', '', '', '', '', '', '', "
    "x'01020304', x'00ff00', x'0000', '{}', ST_GeomFromText('LINESTRING(0 0, 1 1)'))",
    # Ordinary positive values with fractions.
    "(3, 127, 1, 32767, 1, 8388607, 1, 2147483647, 1, 9223372036854775807, 1, 1.1, 0.1, "
    "999.99, 999999999, 0.000000001, 123456789.000000001, 9999999999, "
    "99999999999999999999999999999999999.999999999999999999999999999999, 0.0000000001, 0.1, "
    "'9999-12-31', 2155, '9999-12-31 23:59:59', '2024-02-29 12:00:00.5', "
    "'2024-02-29 12:00:00.5', '2024-02-29 12:00:00.1234', '2024-02-29 12:00:00.123456', "
    "'2000-01-01 00:00:00', '2000-01-01 00:00:00.99', '2000-01-01 00:00:00.000001', "
    "'838:59:59', '838:59:58.9', '00:00:00.999', '12:34:56.789012', b'1', b'111111111', b'1', "
    "'b', 'y,x', 'm17,m3', 'abc', 'x', 'v', 't', 't', 'ÿ', 'abcd', x'ffffffff', x'ff', x'ff',"
    " '{\"k\": [1, \"v\"]}', ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))'))",
]


@pytest.fixture(scope="module")
def server() -> Iterator[MariaDBServer]:
    """A private MariaDB that also accepts zero dates (for the zero-value rows)."""
    with MariaDBServer() as started:
        yield started


def _execute(server: MariaDBServer, *statements: str) -> None:
    with server.connect(init_command="SET sql_mode = ''") as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def _position(server: MariaDBServer) -> BinlogOffset:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
        assert row is not None
    return BinlogOffset(str(row[0]), int(row[1]))


def _read(server: MariaDBServer, start: BinlogOffset) -> list[CaptureRecord]:
    tables = [f"{DB}.edges", f"{DB}.minimal"]
    with BinlogReader(server.connection_settings(), tables, start=start) as reader:
        return [r for r in reader if isinstance(r, CaptureRecord)]


def _comparable(records: list[CaptureRecord]) -> list[tuple[Any, ...]]:
    out = []
    for record in records:
        value = json.loads(record.to_json())
        value.pop("ts_ms", None)  # processing time, differs between reads
        out.append((record.key_json(), value, record.position, record.resume))
    return out


def _both(
    server: MariaDBServer, start: BinlogOffset, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[CaptureRecord], list[CaptureRecord], list[RowDecoder | None]]:
    built: list[RowDecoder | None] = []
    real = reader_module.row_decoder

    def spy(columns: Any, infos: Any) -> RowDecoder | None:
        decoder = real(columns, infos)
        built.append(decoder)
        return decoder

    with monkeypatch.context() as patch:
        patch.setattr(reader_module, "row_decoder", spy)
        fast = _read(server, start)
    with monkeypatch.context() as patch:
        patch.setattr(reader_module, "row_decoder", lambda columns, infos: None)
        library = _read(server, start)
    return fast, library, built


def test_decoder_matches_the_library(
    server: MariaDBServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _execute(server, f"CREATE DATABASE {DB}", EDGE_DDL)
    start = _position(server)
    _execute(
        server,
        *(f"INSERT INTO {DB}.edges VALUES {row}" for row in ROWS),
        f"INSERT INTO {DB}.edges (id) VALUES (4)",  # NULL in every other column
        f"UPDATE {DB}.edges SET c_int = c_int DIV 2, c_set = '', c_dt6 = NOW(6)",
        f"UPDATE {DB}.edges SET id = id + 10 WHERE id = 3",  # a key change: d + c
        f"UPDATE {DB}.edges SET c_text = REPEAT('é', 20000) WHERE id = 1",
        f"DELETE FROM {DB}.edges WHERE id IN (1, 2)",
    )
    fast, library, built = _both(server, start, monkeypatch)
    assert built and all(decoder is not None for decoder in built)
    ops = [r.value["op"] for r in fast]
    assert ops == ["c"] * 4 + ["u"] * 4 + ["d", "c", "u", "d", "d"]
    assert _comparable(fast) == _comparable(library)
    # BINARY(4) x'00': the binlog drops the zeros, SELECT shows all four.
    assert fast[0].value["after"]["c_binary"] == "AAAAAA=="


def test_minimal_images_go_through_the_library(
    server: MariaDBServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _execute(
        server,
        f"CREATE DATABASE IF NOT EXISTS {DB}",
        f"CREATE TABLE {DB}.minimal (id INT PRIMARY KEY, a VARCHAR(10), b DECIMAL(8,3))",
    )
    start = _position(server)
    _execute(
        server,
        f"INSERT INTO {DB}.minimal VALUES (1, 'one', 1.5), (2, NULL, -2.25)",
    )
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
        cur.execute(f"UPDATE {DB}.minimal SET a = 'uno' WHERE id = 1")
        cur.execute(f"DELETE FROM {DB}.minimal WHERE id = 2")
    fast, library, built = _both(server, start, monkeypatch)
    assert built and all(decoder is not None for decoder in built)
    # The before image holds only the key, the after image only the changed column.
    assert fast[2].value["before"] == {"id": 1, "a": None, "b": None}
    assert fast[3].value["after"] == {"id": None, "a": "uno", "b": None}
    assert _comparable(fast) == _comparable(library)
