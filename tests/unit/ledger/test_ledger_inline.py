"""Messages with an inline Connect schema (``{"schema", "payload"}``, JsonConverter's
default) read in one pass (icetide.events.inline) give exactly what the general decoder
gives, for every message that path takes; every other message, its dead-letter reason
and text, and its schema key are the general decoder's. Checked on a seeded corpus of
envelopes as Debezium writes them (every column type, MySQL and PostgreSQL source
blocks), mixed with hostile schema blocks (``before`` and ``after`` that differ, a key
schema, a fractional parameter, a duplicated field) and hostile values (floats where
digits matter, nested values, placeholders), both paths run on each message."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from icetide.capture.mysql.reader import SOURCE as MYSQL
from icetide.capture.postgres.reader import SOURCE as POSTGRES
from icetide.events.inline import InlineSchemas, read_inline
from icetide.events.plain import parse
from icetide.ledger.decode import (
    DEAD,
    REASON,
    ROW,
    STATUS,
    _classify,
    _classify_read,
    _general_key,
    _plain_rows,
    row_projector,
)
from tests.unit.ledger.test_ledger_plain import NUMBERS_AS_TEXT, PROJECTIONS, ROUTES, TYPES, VALUES
from tests.unit.ledger.test_ledger_registry_prepared import (
    PLAIN_FIELDS,
    ROW_FIELDS,
    connect,
    general_row,
    image,
    payload,
    same,
)


def _row_struct(schema: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in schema["fields"] if f.get("field") == name)


def hostile_schema(schema: dict[str, Any], rnd: random.Random) -> dict[str, Any]:
    """A schema block the one-pass read must leave to the general decoder, or one it
    may take that reads values another way (a field's type changed)."""
    schema = copy.deepcopy(schema)
    before, after = _row_struct(schema, "before"), _row_struct(schema, "after")
    before["fields"] = json.loads(json.dumps(before["fields"]))  # not the after's objects
    choice = rnd.randrange(9)
    if choice == 0:  # before and after differ: a logical type in one of them only
        for field in before["fields"]:
            field.pop("name", None)
            field.pop("parameters", None)
    elif choice == 1:
        schema["fields"] = [f for f in schema["fields"] if f.get("field") != "after"]
    elif choice == 2:
        schema["name"] = "srv.shop.things.Key"
    elif choice == 3:  # a fractional number in the block: the parsers may disagree
        after["fields"][0]["default"] = before["fields"][0]["default"] = 1.5
    elif choice == 4:  # a duplicated field (the general decoder takes the last)
        extra = {"field": "n", "type": "string", "optional": True}
        after["fields"].append(extra)
        before["fields"].append(dict(extra))
    elif choice == 5:  # another type for a column: values read by it
        for struct in (before, after):
            field = rnd.choice(struct["fields"][1:])
            field["type"] = rnd.choice(["string", "int64", "float64", "boolean", "bytes"])
            field.pop("name", None)
    elif choice == 6:
        schema["fields"] = {"not": "a list"}
    elif choice == 7:  # the scale as a number, or missing
        for struct in (before, after):
            for field in struct["fields"]:
                if field["field"] == "amount":
                    field["parameters"] = rnd.choice([{"scale": 2}, {}])
    else:
        schema = None  # type: ignore[assignment]
    return schema


def compact_twist(text: str, rnd: random.Random) -> str:
    """A compact message whose text a split at ``,"payload":`` would misread: a member
    after the payload (JSON keeps the last of two), no payload object, trailing text."""
    other = json.dumps(connect(PLAIN_FIELDS, POSTGRES), separators=(",", ":"))
    return rnd.choice(
        [
            text[:-1] + ',"schema":' + other + "}",
            text[:-1] + ',"payload":{"op":"c"}}',
            text[: text.index(',"payload":')] + ',"payload":null}',
            text + " ",
            text + "}",
        ]
    )


def corpus(count: int, seed: int = 20261204) -> list[bytes]:
    """``count`` inline-schema messages, about a fifth of them hostile."""
    rnd = random.Random(seed)
    out: list[bytes] = []
    for _ in range(count):
        source = rnd.choice([MYSQL, POSTGRES])
        fields = rnd.choice([ROW_FIELDS, PLAIN_FIELDS])
        schema = connect(fields, source)
        body = payload(fields, source, rnd)
        if rnd.random() < 0.08:
            schema = hostile_schema(schema, rnd)
        if rnd.random() < 0.1:
            image = body.get("after") or body.get("before")
            if isinstance(image, dict):
                image[rnd.choice(list(TYPES))] = rnd.choice(VALUES)
        doc: dict[str, Any] = {"schema": schema, "payload": body}
        if rnd.random() < 0.02:
            doc["extra"] = 1
        compact = rnd.random() < 0.5
        text = json.dumps(doc, separators=(",", ":") if compact else None)
        if rnd.random() < 0.03 and isinstance(body.get("after"), dict):
            body["after"][rnd.choice(list(TYPES))] = "@num"
            text = json.dumps(doc).replace('"@num"', rnd.choice(NUMBERS_AS_TEXT), 1)
        elif compact and rnd.random() < 0.06:
            text = compact_twist(text, rnd)
        out.append(text.encode())
    return out


RAWS = corpus(2500)


def test_ledger_rows_and_dead_letters_are_the_general_decoders() -> None:
    reasons: set[str] = set()
    for projection in PROJECTIONS:
        fast = _plain_rows(projection, None)
        assert fast is not None
        project = row_projector(projection)
        taken = 0
        for raw in RAWS:
            expected = general_row(raw, projection, None)
            row = fast(raw)
            if row is not None:
                taken += 1
                assert same(row) == same(expected), raw
            assert same(project(raw)) == same(expected), raw
            reasons.add(expected.get(REASON) or "row")
        # Both paths are exercised: many messages taken, many left to the general one.
        assert len(RAWS) * 0.15 < taken < len(RAWS) * 0.85, taken
    assert {"row", "bad_logical_value", "type_mismatch", "missing_position", "unknown_op"} <= (
        reasons
    ), reasons


def test_classify_and_schema_keys_are_the_general_decoders() -> None:
    taken = 0
    keys = set()
    for raw in RAWS:
        expected = _classify_read(raw, ROUTES)
        assert same(_classify(raw, ROUTES)) == same(expected), raw
        doc = parse(raw)
        taken += read_inline(doc) is not None
        keys.add(expected[1])
    assert taken > len(RAWS) * 0.8
    assert len(keys - {None}) >= 4  # the two field sets of two sources, and hostile ones


def test_a_refused_schema_version_is_the_general_decoders_dead_letter() -> None:
    raw = next(r for r in RAWS if _classify_read(r, ROUTES)[0][1] == ROW)
    key = _general_key(raw)
    assert key is not None and key.startswith("inline:")
    projection = PROJECTIONS[0]
    assert _plain_rows(projection, None)(raw) is not None  # type: ignore[misc]
    for refused in ({key: ("schema_incompatible", "held")}, {"*": ("schema_change_failed", "x")}):
        row = row_projector(projection, refused=refused)(raw)
        assert (row[STATUS], row[REASON]) == (DEAD, next(iter(refused.values()))[0])
    other = {"inline:0000000000000000": ("schema_incompatible", "held")}
    assert row_projector(projection, refused=other)(raw)[STATUS] == ROW


def test_a_block_is_read_once_and_told_apart_by_its_exact_text() -> None:
    calls: list[bytes] = []

    def key_of(raw: bytes) -> str:
        calls.append(raw)
        return f"k{len(calls)}"

    blocks = InlineSchemas(key_of)
    schema = connect(ROW_FIELDS, MYSQL)
    first = blocks.get(schema, b"1")
    assert first is not None and first.key == "k1"
    assert blocks.get(copy.deepcopy(schema), b"2") is first and len(calls) == 1
    # An integer parameter where the block had text is another block (2 == 2.0 would not
    # tell them apart); a fractional number anywhere makes the block the general path's.
    changed = copy.deepcopy(schema)
    _row_struct(changed, "after")["version"] = True
    _row_struct(changed, "before")["version"] = True
    assert blocks.get(changed, b"3") is not None and len(calls) == 2
    _row_struct(changed, "after")["version"] = 1
    assert blocks.get(changed, b"4") is not None and len(calls) == 3
    _row_struct(changed, "after")["version"] = 1.0
    assert blocks.get(changed, b"5") is None and len(calls) == 3


def test_a_float_keeps_its_digits_where_no_field_reads_it() -> None:
    # orjson reads 1.10 as the float 1.1: a column no schema field decodes keeps the
    # digits only through the general parse.
    schema = connect([f for f in ROW_FIELDS if f["field"] not in ("doc", "amount")], MYSQL)
    body = payload(ROW_FIELDS, MYSQL, random.Random(1))
    body.update(op="c", before=None, after=image(ROW_FIELDS, random.Random(3)))
    body["source"].update(name="srv", table="things", file="mysql-bin.000001", pos=4, row=0)
    body["after"].update(id=1, name="a", doc="@num", amount="@num")
    raw = json.dumps({"schema": schema, "payload": body}).replace('"@num"', "1.10").encode()
    projection = PROJECTIONS[0]
    assert _plain_rows(projection, None)(raw) is None  # type: ignore[misc]
    row = row_projector(projection)(raw)
    assert row[STATUS] == ROW, row
    assert (row["_after"]["doc"], str(row["_after"]["amount"])) == ("1.10", "1.10")
    assert same(row) == same(general_row(raw, projection, None))


def test_a_before_struct_unlike_the_after_one_is_the_general_decoders() -> None:
    # The general decoder reads each image by its own struct: here the before image's
    # amount is plain bytes, not a Connect Decimal, so it is no decimal there.
    schema = connect(ROW_FIELDS, MYSQL)
    before = _row_struct(schema, "before")
    before["fields"] = json.loads(json.dumps(before["fields"]))  # not the after's objects
    for field in before["fields"]:
        if field["field"] == "amount":
            field.pop("name")
            field.pop("parameters")
    body = payload(ROW_FIELDS, MYSQL, random.Random(2))
    body.update(op="d", after=None, before=image(ROW_FIELDS, random.Random(3)))
    body["source"].update(name="srv", table="things", file="mysql-bin.000001", pos=4, row=0)
    body["before"].update(id=1, name="a", amount="AeI=")
    raw = json.dumps({"schema": schema, "payload": body}).encode()
    projection = PROJECTIONS[0]
    assert _plain_rows(projection, None)(raw) is None  # type: ignore[misc]
    row = row_projector(projection)(raw)
    assert (row[STATUS], row[REASON]) == (DEAD, "type_mismatch"), row
    assert same(row) == same(general_row(raw, projection, None))
