"""Messages with an inline schema block read as one block by their payloads: every row
equal to the per-message read's, over corpora of usual and mutated messages and of
blocks whose fields do and do not match the table's columns."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from icetide.events.inline import InlineSchemas, block_decoders, struct_reader
from icetide.ledger import decode
from icetide.ledger.decode import Projection
from icetide.schema.file import schema_from_dict
from tests.unit.ledger.test_ledger_plain_block import (
    TYPED,
    TYPES,
    VALUES,
    assert_block_agrees,
    envelope,
    mutate,
)

SCALARS = schema_from_dict(
    {
        "table": "things",
        "primary_key": ["id"],
        "columns": [
            {"id": i, "name": n, "type": t, "nullable": n not in ("id", "name")}
            for i, (n, t) in enumerate(TYPES.items(), 1)
            if t != "float"
        ],
    }
)
CONNECT: dict[str, dict[str, Any]] = {
    "long": {"type": "int64"},
    "int": {"type": "int32"},
    "string": {"type": "string"},
    "boolean": {"type": "boolean"},
    "double": {"type": "double"},
    "decimal(10,2)": {
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
    },
    "date": {"type": "int32", "name": "io.debezium.time.Date"},
    "timestamp": {"type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    "timestamptz": {"type": "string", "name": "io.debezium.time.ZonedTimestamp"},
    "time": {"type": "int64", "name": "io.debezium.time.MicroTime"},
    "json": {"type": "string", "name": "io.debezium.data.Json"},
    "uuid": {"type": "string", "name": "io.debezium.data.Uuid"},
    "binary": {"type": "bytes"},
}
"""Each column type's field as Debezium's JsonConverter writes it."""
CONNECT_FORMS: dict[str, list[Any]] = {
    "amount": ["AeI=", "/w==", "AAAAAAAAAAAAAAE=", "AA=="],
    "atz": ["2024-01-01T00:00:00+01:00", "2024-01-01T00:00:00Z", "2024-02-29T23:59:59.5-05:30"],
}
"""Values in the forms the usual fields take (the bare corpus also writes text ones)."""
ODD: list[tuple[str, dict[str, Any]]] = [
    ("amount", {**CONNECT["decimal(10,2)"], "parameters": {"scale": "3"}}),
    ("amount", {"type": "double"}),
    ("amount", {"type": "string"}),
    ("day", {"type": "int32"}),
    ("day", {"type": "int16", "name": "io.debezium.time.Date"}),
    ("at", {"type": "int64", "name": "io.debezium.time.Timestamp"}),
    ("atz", {"type": "string"}),
    ("id", {"type": "int32"}),
    ("id", {"type": "string"}),
    ("n", {"type": "int16"}),
    ("n", {"type": "int64"}),
    ("name", {"type": "string", "name": "io.debezium.data.Enum"}),
    ("name", {"type": "string", "name": "io.debezium.data.Xml"}),
    ("name", {"type": "bytes"}),
    ("price", {"type": "float"}),
    ("ok", {"type": "int8"}),
    ("extra", {"type": "string"}),
    ("doc", {}),
]
"""Fields that differ from the usual (``{}``: the column left out of the block)."""
INLINE_VALUES: dict[str, list[Any]] = {
    "atz": ["2024-01-01T00:00:00", "2024-01-01 00:00:00+02:00", 5],
    "day": [1.0, "2024-01-01", -(10**9)],
    "at": [1.5, "2024-01-01T00:00:00", 2**62],
    "amount": [1.25, 12, "AeI", "", "12.50"],
    "tod": [-1, 86_400_000_000, "10:00"],
    "n": [2**15, -(2**15) - 1],
    "blob": ["AeI", "!!"],
}
"""Values each field's decoder may refuse where a bare read of the same text takes it."""


def connect_block(schema: Any, odd: tuple[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The inline schema block of ``schema``'s envelopes, one of its fields made odd."""
    fields = [
        {**CONNECT[str(col.type)], "optional": col.nullable, "field": col.name}
        for col in schema.columns
    ]
    if odd is not None:
        name, field = odd
        fields = [f for f in fields if f["field"] != name]
        if field:
            fields.append({**field, "optional": True, "field": name})
    image = {"type": "struct", "fields": fields, "optional": True}
    return {
        "type": "struct",
        "name": "srv.shop.things.Envelope",
        "fields": [
            {**image, "field": "before"},
            {**image, "field": "after"},
            {"type": "struct", "fields": [], "optional": False, "field": "source"},
            {"type": "string", "optional": False, "field": "op"},
        ],
    }


def inline_corpus(schema: Any, count: int, seed: int, unusual: float, mysql: float) -> list[bytes]:
    """``count`` compact messages of ``schema`` with their inline block: about
    ``unusual`` of them with a mutated payload, an odd block or a refused value;
    ``mysql`` of them of the binlog's shape, the others PostgreSQL's."""
    rnd = random.Random(seed)
    names = schema.by_name
    usual = json.dumps(connect_block(schema), separators=(",", ":"))
    odd = [
        json.dumps(connect_block(schema, o), separators=(",", ":")) for o in ODD if o[0] in names
    ]
    out = []
    for _ in range(count):
        doc = envelope(rnd, mysql, names)
        for image in (doc["before"], doc["after"]):
            for name, forms in CONNECT_FORMS.items():
                if image is not None and name in image:
                    image[name] = rnd.choice(forms)
        block = usual
        if rnd.random() < unusual:
            roll = rnd.random()
            if roll < 0.4:
                mutate(doc, rnd, names)
            elif roll < 0.7:
                block = rnd.choice(odd)
            else:
                image = doc["after"] or doc["before"]
                name = rnd.choice([n for n in INLINE_VALUES if n in names] or list(names))
                image[name] = rnd.choice(INLINE_VALUES.get(name, VALUES))
        payload = json.dumps(doc, separators=(",", ":"), ensure_ascii=rnd.random() < 0.5)
        if rnd.random() < unusual * 0.1:
            out.append(json.dumps({"schema": json.loads(block), "payload": doc}).encode())
        else:
            out.append(f'{{"schema":{block},"payload":{payload}}}'.encode())
    return out


@pytest.mark.parametrize(
    ("unusual", "sizes", "mysql"),
    [(0.01, [50, 400, 2000], 1.0), (0.01, [50, 400, 2000], 0.0), (0.5, [1, 1, 2, 3], 0.5)],
)
@pytest.mark.parametrize("table", [SCALARS, TYPED], ids=["scalars", "typed"])
def test_inline_messages_read_as_a_block_give_the_per_message_rows(
    table: Any, unusual: float, sizes: list[int], mysql: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    projection = Projection(table)
    count = 3000 if unusual > 0.1 else 5000
    raws = inline_corpus(table, count, int(unusual * 100 + mysql), unusual, mysql)
    # This worker reads each block once: the first batches meet them unread.
    monkeypatch.setattr(decode, "_INLINE", InlineSchemas(decode._general_key))
    # The block takes most of what the per-message read of such a message takes.
    assert_block_agrees(projection, raws, monkeypatch, sizes, 0.4, unusual)


def test_a_block_whose_fields_a_bare_read_would_type_otherwise_is_read_per_message() -> None:
    def decoders(odd: tuple[str, dict[str, Any]] | None) -> Any:
        reader = struct_reader(connect_block(TYPED, odd))
        assert reader is not None
        return block_decoders(reader, TYPED)

    assert decoders(None) is not None
    # A different name set either way, or a column Arrow types from a field that may
    # decode it otherwise.
    assert decoders(("extra", {"type": "string"})) is None
    assert decoders(("doc", {})) is None
    assert decoders(("id", {"type": "int32"})) is None
    assert decoders(("name", {"type": "bytes"})) is None
    # A fractional field of a column the converters type: its values one by one.
    assert decoders(("amount", {"type": "double"})) is None
    # Fields the per-value decoders read (the converters see what they make of it).
    assert decoders(("day", {"type": "int32"})) is not None
    assert decoders(("amount", {"type": "string"})) is not None
    scalars = struct_reader(connect_block(SCALARS, ("n", {"type": "int16"})))
    assert scalars is not None and block_decoders(scalars, SCALARS) is None
    text = struct_reader(
        connect_block(SCALARS, ("name", {"type": "string", "name": "io.debezium.data.Enum"}))
    )
    assert text is not None and block_decoders(text, SCALARS) is not None
