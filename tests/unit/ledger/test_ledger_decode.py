"""The ledger's per-message Python path (no JVM): whatever bytes arrive, every message
ends in exactly one place — a ledger row, a dead letter or a counted skip — and nothing
raises out of it."""

from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icetide.events.raw import INVALID_UTF8
from icetide.ledger.decode import (
    DEAD,
    DECODE_FAILED,
    EXTRA,
    REASON,
    ROW,
    SKIP,
    STATUS,
    Routes,
    classify_one,
    project_one,
    projected_arrow_schema,
    to_arrow,
)
from icetide.ledger.source import split_lines
from tests.ledger_lines import ITEMS, event, line, messages

ROUTES = Routes({"shop.items": [(None, "items")]})
ARROW = projected_arrow_schema(ITEMS)


def outcome(raw: bytes) -> tuple[str, str]:
    """Where one message ends: ("ledger", "") / ("dead", reason) / ("skip", kind)."""
    table, status, reason, _ = classify_one(raw, ROUTES)
    assert status in (ROW, SKIP, DEAD)
    if status != ROW:
        return ("dead" if status == DEAD else "skip"), reason
    assert table == "items"
    row = project_one(raw, ITEMS)
    # The Arrow conversion of the worker must hold the row too (or dead-letter it).
    converted = to_arrow([{**row, "_message_id": "m"}], [raw], ARROW).to_pylist()
    assert len(converted) == 1
    if converted[0][STATUS] == DEAD:
        return "dead", converted[0][REASON]
    return "ledger", ""


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages())
def test_every_message_ends_in_exactly_one_place_and_valid_events_reach_the_ledger(
    message: tuple[bytes, bool],
) -> None:
    raw, valid = message
    place, _ = outcome(raw)
    if valid:
        assert place == "ledger"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages(), min_size=1, max_size=12))
def test_a_file_of_such_lines_accounts_for_every_line_once(
    lines: list[tuple[bytes, bool]],
) -> None:
    content = b"\n".join(raw for raw, _ in lines) + b"\n"
    numbers: dict[int, bool] = {}
    number = 1
    for raw, valid in lines:
        if valid:
            numbers[number] = True
        number += raw.count(b"\n") + 1
    split = list(split_lines("f.json", content))
    ids = [message_id for message_id, _ in split]
    assert len(ids) == len(set(ids))
    physical = content.split(b"\n")
    expected = {
        f"f.json:{i}"
        for i, text in enumerate(physical, 1)
        if text.removeprefix(b"\xef\xbb\xbf" if i == 1 else b"").strip(b" \t\r\n\f\v")
    }
    assert set(ids) == expected
    places = {message_id: outcome(raw)[0] for message_id, raw in split}
    for n in numbers:
        assert places[f"f.json:{n}"] == "ledger"


# -- one test per issue item ---------------------------------------------------------------


def test_deep_nesting_is_a_dead_letter_not_a_crash() -> None:
    # Issue item 6: the unparseable-message path parsed the line again and let the
    # RecursionError out, stopping the stream on every rerun.
    assert classify_one(b"[" * 10_000, ROUTES)[1:3] == (DEAD, "malformed_json")
    # A JSON column nested deeper than Python can re-serialise: projection fails in a
    # way no decoder foresaw, and still only this message is dead-lettered.
    doc = event(4, 1)
    doc["after"]["doc"] = json.loads("[" * 600 + "]" * 600)
    raw = line(doc)
    assert classify_one(raw, ROUTES)[:2] == ("items", ROW)
    row = project_one(raw, ITEMS)
    assert (row[STATUS], row[REASON]) == (DEAD, DECODE_FAILED)
    assert "RecursionError" in row["_error"]


def test_a_bad_column_value_is_routed_by_classify_and_dead_lettered_by_projection() -> None:
    # Classify decodes the envelope only (the column values once, in projection): a value
    # its schema cannot read still reaches its table, whose dead-letter table takes it.
    qty = {"field": "qty", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal"}
    row_struct = {"field": "after", "type": "struct", "fields": [qty]}
    doc = {"schema": {"type": "struct", "fields": [row_struct]}, "payload": event(4, 1, qty="*")}
    raw = line(doc)
    assert classify_one(raw, ROUTES) == ("items", ROW, "", "")
    row = project_one(raw, ITEMS)
    assert (row[STATUS], row[REASON]) == (DEAD, "bad_logical_value")
    assert row["_error"].startswith("after.qty: ")


def test_invalid_utf8_is_dead_lettered_with_its_table_when_it_can_be_told() -> None:
    text = json.dumps(event(4, 1, name="caf\u00e9"), ensure_ascii=False)
    raw = text.encode().replace("\u00e9".encode(), b"\xe9")  # Latin-1 é inside UTF-8
    table, status, reason, error = classify_one(raw, ROUTES)
    assert (table, status, reason) == ("items", DEAD, INVALID_UTF8)
    assert "byte" in error
    assert classify_one(b"\xff\xfe", ROUTES)[:3] == (None, DEAD, INVALID_UTF8)


def test_a_bom_does_not_make_the_event_a_dead_letter() -> None:
    assert outcome(b"\xef\xbb\xbf" + line(event(4, 1))) == ("ledger", "")


def test_whitespace_only_lines_are_no_messages() -> None:
    content = b'\xef\xbb\xbf{"a":1}\r\n \t\r\n\n\x0b\n{"b":2}'
    assert [i for i, _ in split_lines("f.json", content)] == ["f.json:1", "f.json:5"]


def test_columns_not_in_the_schema_are_reported() -> None:
    row = project_one(line(event(4, 1, loyalty=3, zone="b")), ITEMS)
    assert (row[STATUS], row[EXTRA]) == (ROW, ["loyalty", "zone"])


def test_arrow_refusing_one_row_dead_letters_only_that_row() -> None:
    good = project_one(line(event(4, 1)), ITEMS)
    bad = {**project_one(line(event(5, 2)), ITEMS), "_op": 12}  # not a string
    out = to_arrow([good, bad], [b"g", b"b"], ARROW)
    rows = pa.Table.from_batches([out]).to_pylist()
    assert [r[STATUS] for r in rows] == [ROW, DEAD]
    assert rows[1]["_raw"] == b"b" and rows[1][REASON] == DECODE_FAILED


def test_routing_uses_the_server_name_when_the_table_has_one() -> None:
    routes = Routes({"inventory.customers": [("pg", "pg_customers"), ("mysql", "my_customers")]})
    doc = event(4, 1)
    doc["source"].update(db="inventory", table="customers", name="pg")
    assert classify_one(line(doc), routes)[:2] == ("pg_customers", ROW)
    doc["source"]["name"] = "mysql"
    assert classify_one(line(doc), routes)[:2] == ("my_customers", ROW)
    doc["source"]["name"] = "other"
    table, status, reason, error = classify_one(line(doc), routes)
    assert (table, status, reason) == (None, DEAD, "unknown_table")
    assert "'other'" in error and "'mysql', 'pg'" in error
