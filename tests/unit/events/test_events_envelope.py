"""decode_message on hand-built envelopes: every skip kind, every error reason, the rules."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest

from icetide.errors import DecodeError
from icetide.events.envelope import REASONS, SKIP_KINDS, decode_document, decode_message
from icetide.events.model import UNAVAILABLE, ChangeEvent, Skipped, SourceTable

MYSQL_SOURCE = {
    "connector": "mysql",
    "db": "shop",
    "table": "orders",
    "file": "binlog.000010",
    "pos": 4,
    "row": 2,
    "ts_ms": 1700000000000,
    "gtid": None,
}
PG_SOURCE = {
    "connector": "postgresql",
    "db": "shop",
    "schema": "public",
    "table": "orders",
    "lsn": 4294967296,
    "txId": 99,
    "ts_ms": 1700000000000,
}


def envelope(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "op": "c",
        "before": None,
        "after": {"id": 1},
        "source": MYSQL_SOURCE,
        "ts_ms": 1700000000123,
    }
    base.update(fields)
    return base


def event_of(doc: Any) -> ChangeEvent:
    result = decode_message(json.dumps(doc))
    assert isinstance(result, ChangeEvent), result
    return result


def error_of(raw: str | bytes | None) -> DecodeError:
    with pytest.raises(DecodeError) as err:
        decode_message(raw)
    return err.value


# --- skips ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw", [None, "", b"", "  \n", "null", '{"schema": null, "payload": null}', b'{"payload":null}']
)
def test_tombstones(raw: str | bytes | None) -> None:
    assert decode_message(raw) == Skipped("tombstone")


def test_heartbeat_bare_and_wrapped() -> None:
    assert decode_message('{"ts_ms": 1588252618953}') == Skipped(
        "heartbeat", {"ts_ms": 1588252618953}
    )
    wrapped = {
        "schema": {
            "type": "struct",
            "name": "io.debezium.connector.common.Heartbeat",
            "fields": [{"field": "ts_ms", "type": "int64"}],
        },
        "payload": {"ts_ms": 1},
    }
    assert decode_message(json.dumps(wrapped)) == Skipped("heartbeat", {"ts_ms": 1})


def test_key_documents() -> None:
    server_key = {
        "schema": {"type": "struct", "name": "io.debezium.connector.common.ServerNameKey"},
        "payload": {"serverName": "dbserver1"},
    }
    assert decode_message(json.dumps(server_key)) == Skipped(
        "key", {"key": {"serverName": "dbserver1"}}
    )
    # A key whose column is called "op" is still a key when its schema says so.
    named = {"schema": {"name": "srv.shop.orders.Key"}, "payload": {"op": 5}}
    assert decode_message(json.dumps(named)) == Skipped("key", {"key": {"op": 5}})
    assert decode_message('{"order_id": 7, "line": 2}') == Skipped(
        "key", {"key": {"order_id": 7, "line": 2}}
    )


def test_transaction_markers_bare_and_wrapped() -> None:
    end = {"status": "END", "id": "571:53195832", "ts_ms": 1, "event_count": 3}
    result = decode_message(json.dumps(end))
    assert isinstance(result, Skipped)
    assert (result.kind, result.detail["id"], result.detail["event_count"]) == (
        "transaction",
        "571:53195832",
        3,
    )
    wrapped = {
        "schema": {"name": "io.debezium.connector.common.TransactionMetadataValue"},
        "payload": {**end, "status": "BEGIN", "extra": 1},
    }
    begin = decode_message(json.dumps(wrapped))
    assert isinstance(begin, Skipped)
    assert (begin.kind, begin.detail["status"]) == ("transaction", "BEGIN")


def test_schema_change_with_only_table_changes() -> None:
    doc = {"source": PG_SOURCE, "tableChanges": [{"type": "CREATE", "id": '"public"."t"'}]}
    result = decode_message(json.dumps(doc))
    assert isinstance(result, Skipped)
    assert result.kind == "schema_change"
    assert result.detail["ddl"] is None
    assert result.detail["table"] == "orders"
    assert result.detail["databaseName"] == "shop"
    assert result.detail["position"].text == "1/0:0"


def test_logical_message() -> None:
    doc = envelope(op="m", after=None, message={"prefix": "p", "content": "AQ=="})
    assert decode_message(json.dumps(doc)) == Skipped("message", {"prefix": "p", "content": "AQ=="})


def test_kinds_and_reasons_are_published() -> None:
    assert SKIP_KINDS == (
        "tombstone",
        "transaction",
        "schema_change",
        "message",
        "key",
        "heartbeat",
    )
    assert set(REASONS) == {
        "malformed_json",
        "missing_op",
        "unknown_op",
        "bad_envelope",
        "bad_logical_value",
    }


# --- row events ----------------------------------------------------------------------------


def test_mysql_binlog_position_row_and_timestamps() -> None:
    e = event_of(envelope())
    assert e.source == SourceTable("shop", None, "orders")
    assert e.position is not None
    assert (e.position.kind, e.position.text) == ("binlog", "binlog.000010:4:2")
    assert e.position.key == (10 * 10**13 + 4) * 10**6 + 2
    assert e.source_ts == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert e.event_ts == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)


def test_mysql_row_defaults_to_zero_and_gtid_is_the_tx_id() -> None:
    source = {**MYSQL_SOURCE, "gtid": "3E11FA47-71CA-11E1-9E33-C80AA9429562:23"}
    del source["row"]
    e = event_of(envelope(source=source))
    assert e.position is not None and e.position.text == "binlog.000010:4:0"
    assert e.tx_id == "3E11FA47-71CA-11E1-9E33-C80AA9429562:23"


def test_gtid_only_position_for_mariadb() -> None:
    source = {"connector": "mariadb", "db": "shop", "table": "t", "gtid": "0-1-42", "row": 1}
    e = event_of(envelope(source=source))
    assert e.position is not None
    assert (e.position.kind, e.position.key, e.position.text) == ("gtid", 42_000_001, "0-1-42:1")
    assert e.connector == "mariadb"


def test_postgres_lsn_position_and_tx_id() -> None:
    e = event_of(envelope(source=PG_SOURCE))
    assert e.source == SourceTable("shop", "public", "orders")
    assert e.position is not None
    assert (e.position.kind, e.position.key, e.position.text) == ("lsn", 2**32 * 10**6, "1/0:0")
    assert e.tx_id == "99"


def test_postgres_lsn_written_as_text() -> None:
    e = event_of(envelope(source={**PG_SOURCE, "lsn": "0/16B3748"}))
    assert e.position is not None and e.position.text == "0/16B3748:0"


def test_transaction_block_id_wins_over_tx_id() -> None:
    e = event_of(envelope(source=PG_SOURCE, transaction={"id": "99:4294967296"}))
    assert e.tx_id == "99:4294967296"


def test_no_source_means_no_table_position_or_times() -> None:
    e = event_of({"op": "r", "after": {"id": 1}})
    assert (e.source, e.position, e.source_ts, e.event_ts, e.tx_id) == (
        None,
        None,
        None,
        None,
        None,
    )


def test_empty_schema_and_zero_ts_become_none() -> None:
    source = {**PG_SOURCE, "schema": "", "ts_ms": 0}
    e = event_of(envelope(source=source, ts_ms="0"))
    assert e.source == SourceTable("shop", None, "orders")
    assert (e.source_ts, e.event_ts) == (None, None)


def test_other_connectors_have_no_position() -> None:
    source = {"connector": "sqlserver", "db": "shop", "schema": "dbo", "table": "t"}
    assert event_of(envelope(source=source)).position is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        (None, False),
        ("true", True),
        ("false", False),
        ("FALSE", False),
        ("last", True),
        ("first", True),
        ("incremental", True),
        ("last_in_data_collection", True),
    ],
)
def test_snapshot_flag(value: Any, expected: bool) -> None:
    assert event_of(envelope(source={**MYSQL_SOURCE, "snapshot": value})).snapshot is expected


def test_truncate_with_explicit_null_images() -> None:
    e = event_of(envelope(op="t", after=None, before=None))
    assert (e.op, e.before, e.after) == ("t", None, None)


def test_unchanged_toast_placeholders_in_every_shape() -> None:
    placeholder_bytes = list(UNAVAILABLE.encode())
    after = {
        "id": 1,
        "bio": UNAVAILABLE,
        "photo": "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",
        "tags": [UNAVAILABLE],
        "scores": placeholder_bytes,
        "note": "__debezium_unavailable_value ",
    }
    e = event_of(
        envelope(source=PG_SOURCE, op="u", before={"id": 1, "bio": UNAVAILABLE}, after=after)
    )
    assert e.unavailable == frozenset({"bio", "photo", "tags", "scores"})
    assert e.after == {"id": 1, "note": "__debezium_unavailable_value "}
    assert e.before == {"id": 1}


def test_bare_envelope_keeps_raw_json_with_exact_decimals() -> None:
    e = decode_message('{"op": "c", "after": {"id": 1, "price": 12.50, "ratio": 1e-3}}')
    assert isinstance(e, ChangeEvent)
    assert e.after == {"id": 1, "price": Decimal("12.50"), "ratio": Decimal("0.001")}
    assert str(e.after["price"]) == "12.50"


def test_schema_wrapper_decodes_logical_types() -> None:
    value_schema = {
        "type": "struct",
        "name": "srv.shop.orders.Value",
        "optional": True,
        "fields": [
            {"field": "id", "type": "int64"},
            {
                "field": "price",
                "type": "bytes",
                "name": "org.apache.kafka.connect.data.Decimal",
                "parameters": {"scale": "2"},
            },
            {"field": "ratio", "type": "float64"},
            {"field": "day", "type": "int32", "name": "io.debezium.time.Date"},
            {"field": "at", "type": "string", "name": "io.debezium.time.ZonedTimestamp"},
        ],
    }
    doc = {
        "schema": {
            "type": "struct",
            "name": "srv.shop.orders.Envelope",
            "fields": [
                {**value_schema, "field": "before"},
                {**value_schema, "field": "after"},
            ],
        },
        "payload": envelope(
            op="u",
            before={"id": 7, "price": "hQ==", "ratio": 2, "day": 0, "at": None},
            after={
                "id": 7,
                "price": "AeI=",
                "ratio": 0.25,
                "day": 17897,
                "at": "2024-01-01T01:00:00+01:00",
                "unknown": 0.5,
            },
        ),
    }
    e = event_of(doc)
    assert e.after == {
        "id": 7,
        "price": Decimal("4.82"),
        "ratio": 0.25,
        "day": date(2019, 1, 1),
        "at": datetime(2024, 1, 1, tzinfo=UTC),
        "unknown": Decimal("0.5"),
    }
    assert e.after is not None and type(e.after["ratio"]) is float
    assert e.before == {
        "id": 7,
        "price": Decimal("-1.23"),
        "ratio": 2.0,
        "day": date(1970, 1, 1),
        "at": None,
    }


def test_elided_schema_leaves_values_raw() -> None:
    e = event_of({"schema": {}, "payload": envelope(after={"id": 1, "price": "AeI="})})
    assert e.after == {"id": 1, "price": "AeI="}


def test_decode_document_takes_parsed_json() -> None:
    assert decode_document(None) == Skipped("tombstone")
    assert isinstance(decode_document(envelope()), ChangeEvent)


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("not json", "not valid JSON"),
        ('{"op": "c",', "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        ("[1, 2]", "must be a JSON object, got list"),
        ("42", "must be a JSON object, got int"),
        ('"c"', "must be a JSON object, got str"),
    ],
)
def test_malformed_json(raw: str | bytes, fragment: str) -> None:
    err = error_of(raw)
    assert err.reason == "malformed_json"
    assert fragment in err.message


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"before": None, "after": {"id": 1}, "source": MYSQL_SOURCE},
        {"schema": {}, "payload": {"after": {"id": 1}}},
    ],
)
def test_missing_op(doc: dict[str, Any]) -> None:
    err = error_of(json.dumps(doc))
    assert err.reason == "missing_op"
    assert "'op'" in err.message


@pytest.mark.parametrize("op", ["x", "", "C", "insert"])
def test_unknown_op(op: str) -> None:
    err = error_of(json.dumps(envelope(op=op)))
    assert err.reason == "unknown_op"
    assert repr(op) in err.message


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (envelope(after="oops"), "'after'"),
        (envelope(after=5), "'after'"),
        (envelope(op="u", before=[1]), "'before'"),
        (envelope(source="mysql"), "'source'"),
        (envelope(op=1), "'op'"),
        (envelope(ts_ms="soon"), "'ts_ms'"),
        (envelope(ts_ms=True), "'ts_ms'"),
        (envelope(ts_ms=10**20), "'ts_ms'"),
        (envelope(after=None), "'after'"),
        (envelope(op="r", after=None), "'after'"),
        (envelope(op="u", after=None), "'after'"),
        (envelope(op="d", after=None, before=None), "'before'"),
        (envelope(transaction="tx"), "'transaction'"),
        (envelope(source={**MYSQL_SOURCE, "snapshot": 1}), "'source.snapshot'"),
        (envelope(source={**MYSQL_SOURCE, "table": 5}), "'source.table'"),
        (envelope(source={**MYSQL_SOURCE, "pos": "here"}), "'source.pos'"),
        (envelope(source={**MYSQL_SOURCE, "file": "binlog"}), "'source'"),
        (envelope(source={**PG_SOURCE, "lsn": "zz"}), "'source.lsn'"),
        (envelope(source={**PG_SOURCE, "ts_ms": 1.5}), "'source.ts_ms'"),
        ({"schema": "x", "payload": envelope()}, "'schema'"),
        ({"schema": None, "payload": [envelope()]}, "'payload'"),
    ],
)
def test_bad_envelope_names_the_field(doc: dict[str, Any], field: str) -> None:
    err = error_of(json.dumps(doc))
    assert err.reason == "bad_envelope"
    assert field in err.message


def test_bad_envelope_names_the_table_when_known() -> None:
    err = error_of(json.dumps(envelope(op="d", after=None)))
    assert err.message == "op 'd' event has no 'before' object (table shop.orders)"


def test_bad_logical_value_names_image_and_column() -> None:
    doc = {
        "schema": {
            "type": "struct",
            "fields": [
                {
                    "field": "after",
                    "type": "struct",
                    "fields": [
                        {
                            "field": "price",
                            "type": "bytes",
                            "name": "org.apache.kafka.connect.data.Decimal",
                            "parameters": {"scale": "2"},
                        }
                    ],
                }
            ],
        },
        "payload": envelope(after={"price": "***"}),
    }
    err = error_of(json.dumps(doc))
    assert (err.reason, err.column) == ("bad_logical_value", "price")
    assert err.message.startswith("after.price: expected base64 decimal bytes (scale 2)")
