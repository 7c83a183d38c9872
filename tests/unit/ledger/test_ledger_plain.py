"""The one-pass read of bare row envelopes (icetide.events.plain) gives exactly what the
general decoder gives, for every message it takes; every other message it leaves to the
general decoder. Checked on a seeded corpus mixing usual events with every kind of
unusual value, envelope and column type, both paths run on each message."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from typing import Any

from icetide.errors import DecodeError
from icetide.events.plain import parse, read_plain
from icetide.ledger.decode import (
    DEAD,
    ROW,
    STATUS,
    Era,
    Projection,
    Routes,
    _classify,
    _classify_read,
    _plain_rows,
    _project,
    _route_plain,
    project_batches,
    projected_arrow_schema,
    row_projector,
)
from icetide.schema.file import schema_from_dict

TYPES = {
    "id": "long",
    "n": "int",
    "name": "string",
    "price": "double",
    "ratio": "float",
    "amount": "decimal(10,2)",
    "ok": "boolean",
    "at": "timestamp",
    "atz": "timestamptz",
    "day": "date",
    "tod": "time",
    "doc": "json",
    "u": "uuid",
}
SCHEMA = schema_from_dict(
    {
        "table": "things",
        "primary_key": ["id"],
        "columns": [
            {"id": i, "name": n, "type": t, "nullable": n not in ("id", "name")}
            for i, (n, t) in enumerate(TYPES.items(), 1)
        ],
    }
)
ROUTES = Routes({"shop.things": [(None, "things")], "other.x": [("srv2", "x")]})
VALUES: list[Any] = [
    None, 0, 1, -1, 7, 2**31, 2**40, 2**63 - 1, 2**63, 2**64 + 1, 10**30, True, False,
    0.0, -0.0, 1.5, 0.1, 1e300, 3.14159265358979, 1.0, 1e-320,
    "", "x", "12", " 7 ", "1.50", "AeI=", "2024-02-29T10:00:00Z", "2024-02-29",
    "10:30:00", "NaN", "Infinity", "abc", "__debezium_unavailable_value",
    "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==", "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
    [1], [], {"a": 1}, {"a": 1.25},
]  # fmt: skip
NUMBERS_AS_TEXT = ["1.50", "1e400", "NaN", "-0.0", "123456789012345678901234567890.5"]


def column_value(name: str, rnd: random.Random) -> Any:
    """A value for ``name`` of a form its type takes (not always in range)."""
    usual = {
        "id": rnd.randint(-(2**63), 2**63 - 1),
        "n": rnd.randint(-(2**31), 2**31 - 1),
        "name": rnd.choice(["a", "é", "\u2603", "x" * 50]),
        "price": rnd.choice([rnd.random() * 10 ** rnd.randint(-5, 20), rnd.randint(-99, 99)]),
        "ratio": rnd.random(),
        "amount": rnd.choice([rnd.randint(-999, 999), "AeI="]),
        "ok": rnd.random() < 0.5,
        "at": rnd.choice([1_700_000_000_000, "2024-01-01T00:00:00"]),
        "atz": rnd.choice(["2024-01-01T00:00:00+01:00", 1_700_000_000_123]),
        "day": rnd.choice([19_000, "2024-03-01"]),
        "tod": rnd.choice([36_000_000_000, "10:00:01"]),
        "doc": rnd.choice(['{"a":1}', None]),
        "u": "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
    }
    return usual[name]


def image(rnd: random.Random) -> dict[str, Any]:
    return {n: column_value(n, rnd) for n in TYPES if rnd.random() < 0.9 or n in ("id", "name")}


def envelope(rnd: random.Random) -> dict[str, Any]:
    """A valid MySQL or PostgreSQL row event of ``shop.things``."""
    op = rnd.choice(["c", "u", "d", "r"])
    src: dict[str, Any] = {
        "version": "2.5.0.Final",
        "name": "srv",
        "ts_ms": 1_700_000_000_000,
        "db": "shop",
        "table": "things",
        "snapshot": "false",
    }
    if rnd.random() < 0.6:
        src.update(connector="mysql", file=f"mysql-bin.00000{rnd.randint(1, 4)}", row=0)
        src["pos"] = rnd.randint(4, 10**9)
    else:
        src.update(connector="postgresql", lsn=rnd.randint(1, 2**40), txId=rnd.randint(1, 99))
    return {
        "before": image(rnd) if op in ("u", "d") else None,
        "after": image(rnd) if op != "d" else None,
        "source": src,
        "op": op,
        "ts_ms": 1_700_000_000_005,
    }


MUTATIONS: list[tuple[str, str, list[Any]]] = [
    ("after", "*", VALUES),
    ("after", "*", VALUES),
    ("before", "*", VALUES),
    ("after", "not_in_schema", [1]),
    ("after", "-", []),
    ("before", "-", []),
    ("", "op", ["t", "m", "x", 1, None]),
    ("", "before", [None, "s", {}]),
    ("", "after", [None, [], {}]),
    ("", "ts_ms", [None, 0, "12", 2.5, 10**20]),
    ("", "transaction", [None, {"id": "tx1"}, {"id": 5}, {"id": 1.5}, {}, "t"]),
    ("", "source", [None, "s", []]),
    ("", "payload", [None]),
    ("", "schema", [None]),
    ("", "ddl", ["ALTER TABLE things ADD x INT"]),
    ("source", "connector", ["mariadb", "postgresql", None, 5]),
    ("source", "name", ["srv2", "", None, 3]),
    ("source", "ts_ms", [0, None, "1700000000000", 1.5e12, 10**17, -(10**15)]),
    ("source", "db", ["other", None, 7]),
    ("source", "schema", ["shop", None, 2, ""]),
    ("source", "table", ["x", "", None, 1]),
    ("source", "snapshot", [None, "true", False, 1]),
    ("source", "file", ["binlog", "", None, 5]),
    ("source", "pos", [2**70, -1, "5", 4.0, None, 10**13]),
    ("source", "row", [1, None, False, 10**7, 0.0, "1"]),
    ("source", "lsn", ["0/16B3748", "junk", None, -5, 2**65, 1.0]),
    ("source", "txId", [None, "7", 7.0]),
    ("source", "gtid", ["0-1-42", None, 9]),
    ("source", "ts_sec", [1_700_000_000]),
]


def mutate(doc: dict[str, Any], rnd: random.Random) -> None:
    where, key, values = rnd.choice(MUTATIONS)
    target = doc if not where else doc.get(where)
    if not isinstance(target, dict):
        return
    if key == "*":
        key = rnd.choice(list(TYPES))
    if key == "-":
        target.pop(rnd.choice(list(target)), None) if target else None
        return
    if key == "ts_sec":
        target.pop("ts_ms", None)
    target[key] = rnd.choice(values)


def serialised(doc: dict[str, Any], rnd: random.Random) -> bytes:
    text = json.dumps(doc)
    if rnd.random() < 0.05 and isinstance(doc.get("after"), dict):
        # A number written as its digits (1.50, 1e400, NaN) in a column.
        doc["after"][rnd.choice(list(TYPES))] = "@num"
        text = json.dumps(doc).replace('"@num"', rnd.choice(NUMBERS_AS_TEXT), 1)
    if rnd.random() < 0.02:
        text = rnd.choice(["\ufeff", " ", "\n"]) + text
    return text.encode()


def corpus(count: int, seed: int = 20261202) -> list[bytes]:
    rnd = random.Random(seed)
    out = []
    for _ in range(count):
        doc = envelope(rnd)
        for _ in range(rnd.choice([0, 0, 1, 1, 2])):
            mutate(doc, rnd)
        out.append(serialised(doc, rnd))
    return out


def general(raw: bytes, projection: Projection) -> dict[str, Any]:
    try:
        return _project(raw, projection)
    except DecodeError as exc:
        return {STATUS: DEAD, "reason": exc.reason, "error": exc.message}


PROJECTIONS = [
    Projection(SCHEMA),
    # A layout one column wider than the values (a column the merge does not know yet),
    # and an earlier version for events before position 2e20 (binlog file 2 and below).
    Projection(
        SCHEMA.with_columns(
            (*SCHEMA.columns, *schema_from_dict(
                {"table": "t", "primary_key": ["extra"],
                 "columns": [{"id": 99, "name": "extra", "type": "string"}]}
            ).columns)
        ),
        values=SCHEMA,
        earlier=(Era(2 * 10**19, {}, None),),
    ),
]  # fmt: skip


def taken_rows(raws: list[bytes], projection: Projection) -> list[dict[str, Any]]:
    """The rows of the messages the one pass takes, each the general decoder's row."""
    plain = _plain_rows(projection, None)
    assert plain is not None
    taken = []
    for raw in raws:
        row = plain(raw)
        if row is not None:
            # repr: True is not 1, 1.0 is not 1, Decimal('1.5') is not Decimal('1.50').
            assert repr(row) == repr(general(raw, projection)), raw
            taken.append(row)
    return taken


def test_the_one_pass_read_gives_what_the_general_decoder_gives() -> None:
    raws = corpus(6000)
    for projection in PROJECTIONS:
        taken = len(taken_rows(raws, projection))
        # Both paths are exercised: many messages taken, many left to the general one.
        assert len(raws) * 0.15 < taken < len(raws) * 0.85, taken


def test_classify_routes_what_it_takes_as_the_general_decoder_does() -> None:
    taken = 0
    for raw in corpus(6000, seed=7):
        found = read_plain(parse(raw))
        if found is None:
            continue
        taken += 1
        assert _route_plain(found, ROUTES) == _classify_read(raw, ROUTES)[0], raw
        assert _classify_read(raw, ROUTES)[1] is None  # no schema key: nothing to walk
    assert taken > 1000


def test_a_refused_or_renaming_projection_reads_every_message_the_general_way() -> None:
    assert _plain_rows(Projection(SCHEMA, aliases={"old": "name"}), None) is None
    assert _plain_rows(Projection(SCHEMA), {"*": ("schema_change_failed", "held")}) is None
    raw = json.dumps(
        {
            "op": "c",
            "after": {"id": 1, "name": "a"},
            "source": {"connector": "mysql", "db": "shop", "table": "things",
                       "file": "b.000001", "pos": 4},
        }
    ).encode()  # fmt: skip
    row = row_projector(Projection(SCHEMA), refused={"*": ("schema_change_failed", "held")})(raw)
    assert (row[STATUS], row["_reason"]) == (DEAD, "schema_change_failed")


def test_a_float_keeps_its_digits_outside_float_columns() -> None:
    # orjson reads 1.10 as the float 1.1: a string or JSON column needs the digits (a
    # decimal column needs their value only: test_decimal_columns_take_floats_...).
    raw = (
        b'{"op": "c", "after": {"id": 1, "name": "a", "amount": 1.10, "doc": {"k": 1.10},'
        b' "price": 1.10}, "source": {"connector": "mysql", "db": "shop", "table": "things",'
        b' "file": "b.000001", "pos": 4}}'
    )
    assert _plain_rows(Projection(SCHEMA), None)(raw) is None  # type: ignore[misc]
    row = row_projector(Projection(SCHEMA))(raw)
    assert row[STATUS] == ROW
    assert row["_after"]["amount"] == Decimal("1.10")
    assert row["_after"]["doc"] == '{"k":1.10}'
    assert row["_after"]["price"] == 1.1


def test_nesting_json_cannot_read_is_its_dead_letter_whichever_parser_could() -> None:
    # orjson reads 1,100 levels; Python's json fails near 1,000: the message must be the
    # general decoder's malformed_json dead letter, not a routed row.
    doc = json.loads(corpus(1, seed=5)[0])
    doc["op"], doc["before"], doc["after"] = "c", None, {"id": 1, "name": "a"}
    for depth in (300, 1_100):
        doc["after"]["doc"] = "@"
        raw = json.dumps(doc).replace('"@"', "[" * depth + "]" * depth).encode()
        assert parse(raw) is None
        assert _classify(raw, ROUTES) == _classify_read(raw, ROUTES)
    assert _classify_read(raw, ROUTES)[0][1:3] == (DEAD, "malformed_json")


def test_a_batch_holds_the_rows_of_both_paths() -> None:
    from datetime import UTC, datetime

    import pyarrow as pa

    raws = corpus(400, seed=3)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([f"m{i}" for i in range(len(raws))]), pa.array(raws, pa.binary())],
        names=["message_id", "raw"],
    )
    out = pa.Table.from_batches(
        list(project_batches(SCHEMA, datetime(2026, 1, 1, tzinfo=UTC))([batch]))
    )
    assert out.num_rows == len(raws)
    assert out.schema.remove(out.schema.get_field_index("_ingested_at")) == (
        projected_arrow_schema(SCHEMA)
    )


def _list(element_id: int, element: Any, nullable: bool = True) -> dict[str, Any]:
    return {"list": {"element_id": element_id, "element": element, "element_nullable": nullable}}


NESTED = schema_from_dict(
    {
        "table": "things",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {"id": 2, "name": "tags", "type": _list(20, "string")},
            {"id": 3, "name": "counts", "type": _list(21, "long", nullable=False)},
            {"id": 4, "name": "grid", "type": _list(22, _list(23, "int"))},
            {
                "id": 5,
                "name": "attrs",
                "type": {"map": {"key_id": 24, "key": "int", "value_id": 25, "value": "long"}},
            },
            {
                "id": 6,
                "name": "addr",
                "type": {
                    "struct": [
                        {"id": 26, "name": "city", "type": "string"},
                        {"id": 27, "name": "zip", "type": "int", "nullable": False},
                    ]
                },
            },
            {"id": 7, "name": "amounts", "type": _list(28, "decimal(6,2)")},
            {"id": 8, "name": "points", "type": _list(29, "double")},
            {"id": 9, "name": "days", "type": _list(30, "date")},
            {"id": 10, "name": "doc", "type": "json"},
            {"id": 11, "name": "label", "type": "string"},
            {
                "id": 12,
                "name": "scores",
                "type": {"map": {"key_id": 31, "key": "string", "value_id": 32, "value": "long"}},
            },
        ],
    }
)
PLACEHOLDER = "__debezium_unavailable_value"
NESTED_VALUES: dict[str, list[Any]] = {
    "tags": [["a", "é"], [], [None, "x"], ["a", 1], [True], [PLACEHOLDER], "a", {"a": "b"}],
    "counts": [[1, -2, 2**63 - 1], [2**63], ["12", " 7 "], [True], [1.5], [1.0], [None], [[1]]],
    "grid": [[[1, 2], [3]], [[]], [1, 2], [[[1]]], [[2**31]], [[None, 4]], [], [[1.0]]],
    "attrs": [{"1": 1, "-2": 2}, {}, {"a": 1}, {"1": "x"}, {"1": None}, {"1": 1.5}, [1],
              {" 3": 4}, {"1": [1]}],
    "addr": [{"city": "Lisbon", "zip": 1000}, {"city": "x"}, {"zip": "12"}, {"zip": 2**40},
             {"city": 1, "zip": 2}, {"city": "y", "other": [1]}, {}, ["Lisbon"], {"zip": 1.5},
             {"city": "y", "zip": 3, "other": 0.5}, {"zip": True}],
    "scores": [{"a": 1, "b": None}, {}, {"a": 1.5}, {"a": "7"}, {"a": 2**63}, {"a": True},
               {"a": [1]}, ["a"], {"a": -(2**63)}],
    "amounts": [[1, 2], ["1.50", "AeI="], [1.5], [0.125], ["1e400"], [None], [1.10]],
    "points": [[1.5, 2], [1, 2], ["NaN", "1"], [0.1], [], [True]],
    "days": [[19000, "2024-02-29"], ["2024-13-01"], [1.5], [-1], [None, 1]],
    "doc": [{"a": [1, {"b": None}]}, [1, "x", True], {"a": 1.50}, '{"a":1}', [], {}],
    "label": [[PLACEHOLDER], list(PLACEHOLDER.encode()), PLACEHOLDER, "x", ["x"], {"a": 1}],
}  # fmt: skip


FRACTION_TEXTS = ["1.50", "0.10000000000000001", "2.5", "1e2", "-0.0"]


def nested_corpus(count: int, seed: int) -> list[bytes]:
    """Row events of ``NESTED``: most values the first of their column's list (of the
    column's own shape), the others any of it (of another shape, a float inside, the
    TOAST placeholder in a text's or an array's shape); some with a fraction written
    with digits a double does not keep (``1.50``, ``0.10000000000000001``) inside a
    value, which only the general parse reads as written; a few with a duplicate key
    inside a struct value."""
    rnd = random.Random(seed)
    out = []
    for _ in range(count):
        doc = envelope(rnd)
        for name in ("before", "after"):
            if doc[name] is None:
                continue
            doc[name] = {"id": rnd.randint(1, 10**6)} | {
                n: values[0] if rnd.random() < 0.85 else rnd.choice(values)
                for n, values in NESTED_VALUES.items()
                if rnd.random() < 0.8
            }
        after = doc["after"]
        if after is not None and rnd.random() < 0.15:
            # A fraction written with digits a double does not keep: inside a value.
            column = rnd.choice(["amounts", "doc", "points", "counts"])
            after[column] = ["@num"] if column != "doc" else {"a": ["@num"]}
        text = json.dumps(doc).replace('"@num"', rnd.choice(FRACTION_TEXTS))
        if rnd.random() < 0.1:
            text = text.replace('"city": ', '"city": "dup", "city": ', 1)
        out.append(text.encode())
    return out


def test_nested_values_taken_in_one_pass_give_what_the_general_decoder_gives() -> None:
    """List, map and struct columns: a value of strings, integers, booleans and nulls is
    typed in the one pass exactly as the general decoder types it (dead letters, TOAST
    placeholders and floats inside are left to it); many such messages are taken."""
    raws = nested_corpus(3000, seed=20261204)
    taken = taken_rows(raws, Projection(NESTED))
    assert len(raws) * 0.02 < len(taken) < len(raws) * 0.9, len(taken)
    # Every kind of nested column is in what was taken, with a value in it.
    for name in ("tags", "counts", "grid", "attrs", "addr", "amounts", "days", "doc", "scores"):
        assert any((row["_after"] or {}).get(name) for row in taken), name


DECIMAL_TEXTS = [
    "0.0", "-0.0", "12.5", "12.50", "-7.25", "99999999.99", "100000000.00", "1.234", "0.005",
    "1e2", "1.5E3", "-2.5e-1", "1e-320", "1e20", "1e400", "1234567890.12345", "0.1",
    "12345678.123456789", "0.30000000000000004", "2.5000000000000000001",
    "0.1000000000000000055511151231257827", "99999999.990000000001", "1.00000000000000000000",
]  # fmt: skip
"""Decimal column values as JSON numbers: short ones, over the scale or the precision,
subnormal, overflowing, and ones with more digits than a double keeps (whose float is
that of a short one: 2.5000000000000000001 reads as 2.5)."""


def decimal_corpus(count: int, seed: int) -> list[bytes]:
    """Row events whose decimal column ``amount`` holds a JSON number of every shape, in
    the after image, the before image or both; the double column ``price`` often holds a
    long number, sometimes the very one ``amount`` holds."""
    rnd = random.Random(seed)
    out = []
    for _ in range(count):
        doc = envelope(rnd)
        texts = {
            "@a": rnd.choice(
                [
                    rnd.choice(DECIMAL_TEXTS),
                    f"{rnd.randint(-(10**8), 10**8) / 100}",
                    repr(rnd.uniform(-1e8, 1e8)),
                ]
            ),
            "@b": rnd.choice(DECIMAL_TEXTS),
            "@p": rnd.choice(["@a", repr(rnd.uniform(-1e9, 1e9)), "3.5"]),
        }
        texts["@p"] = texts.get(texts["@p"], texts["@p"])
        for image, key in ((doc["after"], "@a"), (doc["before"], "@b")):
            if image is not None:
                image["amount"] = key
                image["price"] = "@p"
        text = json.dumps(doc)
        for key, value in texts.items():
            text = text.replace(f'"{key}"', value)
        out.append(text.encode())
    return out


def test_decimal_columns_take_floats_written_with_digits_a_double_keeps() -> None:
    """A decimal column's JSON number is taken in the one pass when it was written with
    at most 15 significant digits, and typed exactly as the general decoder types its
    digits (to the same value or the same dead letter); a longer one, or one whose
    double some long number in the message shares, is left to the general decoder."""
    raws = decimal_corpus(4000, seed=20261205)
    for projection in PROJECTIONS:
        taken = taken_rows(raws, projection)
        assert len(raws) * 0.1 < len(taken) < len(raws) * 0.9, len(taken)
        amounts = {row["_after"]["amount"] for row in taken if row["_after"]}
        assert {Decimal("12.50"), Decimal("-0.25"), Decimal("100.00")} <= amounts, amounts


def test_a_decimal_written_longer_than_a_double_keeps_is_read_from_its_digits() -> None:
    """2.5000000000000000001 reads as the double 2.5: taken, it would be stored as 2.50,
    where its digits do not fit the column's scale."""
    for amount in (b"2.5000000000000000001", b"0.1000000000000000055511151231257827"):
        raw = (
            b'{"op": "c", "after": {"id": 1, "name": "a", "amount": ' + amount + b"}, "
            b'"source": {"connector": "mysql", "db": "shop", "table": "things",'
            b' "file": "b.000001", "pos": 4}}'
        )
        assert _plain_rows(Projection(SCHEMA), None)(raw) is None  # type: ignore[misc]
        row = row_projector(Projection(SCHEMA))(raw)
        assert row[STATUS] == DEAD, row
    short = raw.replace(amount, b"0.10")
    row = _plain_rows(Projection(SCHEMA), None)(short)  # type: ignore[misc]
    assert row is not None and row["_after"]["amount"] == Decimal("0.10")
