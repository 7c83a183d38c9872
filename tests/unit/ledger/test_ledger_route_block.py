"""The block route of bare envelopes (icetide.ledger.envelope_block.route_reader) gives,
for every message of a batch, exactly the classification the per-message read gives
(table, status, reason, error, schema key): on seeded corpora of MySQL and PostgreSQL
row events of several tables and servers, mixed with unusual envelopes, hostile lines,
inline schema blocks, schema changes, tombstones and landing-file receipts."""

from __future__ import annotations

import json
import random
from typing import Any

import pyarrow as pa
import pytest

from icetide.capture.mysql.reader import SOURCE as MYSQL
from icetide.capture.postgres.reader import SOURCE as POSTGRES
from icetide.ledger import decode
from icetide.ledger.decode import Routes, classify_batches, classify_keyed
from icetide.ledger.envelope_block import route_reader
from tests.unit.ledger.test_ledger_plain_block import HOSTILE, TYPES, batches, envelope, mutate
from tests.unit.ledger.test_ledger_registry_prepared import PLAIN_FIELDS, connect, payload

ROUTES = Routes(
    {
        "shop.things": [("srv", "things"), (None, "things_elsewhere")],
        "public.things": [(None, "pg_things")],
        "shop.other": [("srv2", "other")],
    }
)
"""Tables by server: a table of one server, one of any other, one of any server, one of
another server only (``srv`` writing it is an unknown-table dead letter)."""
INLINE = json.dumps(
    {
        "schema": {
            "type": "struct",
            "fields": [
                {"field": "after", "type": "struct", "fields": [{"field": "id", "type": "int64"}]}
            ],
        },
        "payload": {
            "op": "c",
            "after": {"id": 1},
            "source": {"db": "shop", "table": "things", "file": "b.1", "pos": 4},
        },
    }
).encode()
ENVELOPE_MUTATIONS: list[tuple[str, str, list[Any]]] = [
    ("source", "table", ["things", "other", "missing", "things"]),
    ("source", "name", ["srv", "srv2", None, "", "elsewhere"]),
    ("source", "db", ["shop", "SHOP", "", None]),
    ("source", "schema", ["public", "", None]),
    ("source", "file", [None, "mysql-bin.10000000000000000000", "mysql-bin.9999999999999999999"]),
    ("source", "pos", [None]),
    ("", "payload", [None, {}]),
    ("", "schema", [None, {"type": "struct", "fields": [{"field": "after", "type": "struct"}]}]),
    ("", "ddl", [None]),
    ("", "tableChanges", [None, []]),
    ("", "extra", [[{}] * 300, [[]] * 2]),
]
ESCAPED = [
    (b'"file"', b'"fil\\u0065"'),
    (b'"pos"', b'"po\\u0073"'),
    (b'"op"', b'"o\\u0070"'),
    (b'"ddl"', b'"dd\\u006c"'),
    (b'"tableChanges"', b'"table\\u0043hanges"'),
]
DEEP = b'{"op": "c", "after": {"id": 1}, "x": ' + b"[" * 1100 + b"]" * 1100 + b', "source": {}}'


def routing_corpus(count: int, seed: int, unusual: float, mysql: float) -> list[bytes | None]:
    """Row events of three tables from three servers, about ``unusual`` of them with an
    envelope or a line the usual read does not take."""
    rnd = random.Random(seed)
    out: list[bytes | None] = []
    for _ in range(count):
        roll = rnd.random()
        if roll < unusual * 0.05:
            out.append(rnd.choice([*HOSTILE, None, INLINE, DEEP]))
            continue
        doc = envelope(rnd, mysql)
        where, key, values = rnd.choice(ENVELOPE_MUTATIONS[:4])
        doc[where][key] = rnd.choice(values)  # another table or server, usually
        if roll < unusual:
            for _ in range(rnd.choice([1, 1, 2])):
                if rnd.random() < 0.5:
                    mutate(doc, rnd, TYPES)
                else:
                    where, key, values = rnd.choice(ENVELOPE_MUTATIONS)
                    (doc if not where else doc.get(where) or {})[key] = rnd.choice(values)
        text = json.dumps(doc).encode()
        if roll < unusual and rnd.random() < 0.2:
            old, new = rnd.choice(ESCAPED)
            text = text.replace(old, new)
        out.append(text)
    return out


def with_receipts(batch: pa.RecordBatch, rnd: random.Random) -> pa.RecordBatch:
    """The batch as a landing-file read gives it: now and then a receipt row."""
    receipts = [f"file-{i}" if rnd.random() < 0.01 else None for i in range(batch.num_rows)]
    return batch.append_column("receipt", pa.array(receipts, pa.string()))


def classified_both_ways(
    raws: list[bytes | None], sizes: list[int], monkeypatch: pytest.MonkeyPatch
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], int]:
    """Each message's (table, status, reason, error, schema key) from the batches with
    the block route, and from the per-message read; and how many the block took."""
    rnd = random.Random(7)
    parts = [with_receipts(b, rnd) for b in batches(raws, rnd, sizes)]  # type: ignore[arg-type]
    counted = [0]

    def counting() -> Any:
        read = route_reader()

        def run(messages: Any) -> Any:
            found = read(messages)
            counted[0] += 0 if found is None else len(found.taken)
            return found

        return run

    monkeypatch.setattr(decode, "route_reader", counting)
    fast = pa.Table.from_batches(list(classify_batches(ROUTES)(iter(parts))))
    names = ("table", "status", "reason", "error", "schema_key")
    got = list(zip(*(fast.column(n).to_pylist() for n in names), strict=True))
    want = []
    for part in parts:
        for raw, receipt in zip(
            part.column("raw").to_pylist(), part.column("receipt").to_pylist(), strict=True
        ):
            if receipt is not None:
                want.append((None, decode.FILE, receipt, "", None))
            else:
                (table, status, reason, error), key = classify_keyed(raw, ROUTES)
                want.append((table, status, reason, error, key))
    return got, want, counted[0]


@pytest.mark.parametrize(
    ("unusual", "sizes", "mysql", "share"),
    [
        (0.01, [1, 7, 50, 400, 2000], 1.0, 0.8),
        (0.01, [1, 7, 50, 400, 2000], 0.0, 0.8),
        # Both connectors in large batches, each with ~60 unusual messages: the halving
        # around them leaves more to the per-message read.
        (0.02, [3000], 0.5, 0.4),
        # Half the messages unusual, a message or three a batch: each kind on its own.
        (0.5, [1, 1, 2, 3], 0.6, 0.5),
    ],
)
def test_the_block_route_classifies_every_message_as_the_per_message_read(
    unusual: float, sizes: list[int], mysql: float, share: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    raws = routing_corpus(
        2500 if unusual > 0.1 else 6000, int(unusual * 100 + mysql), unusual, mysql
    )
    got, want, by_block = classified_both_ways(raws, sizes, monkeypatch)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a == b, (i, raws[i] if i < len(raws) else None, a, b)
    statuses = {w[1] for w in want}
    assert {"row", "dead"} <= statuses
    # The block takes most of the bare row events the per-message read routes, no more.
    plain = sum(
        1
        for raw, w in zip(raws, want, strict=False)
        if w[4] is None and w[1] == "row" or w[2] == "unknown_table"
    )
    assert plain * share < by_block <= plain, (by_block, plain)


def test_the_block_route_declines_what_only_the_message_itself_tells() -> None:
    """Cases where a block reads alike two messages the per-message read tells apart."""
    read = route_reader()
    base = json.loads(routing_corpus(1, 1, 0.0, 0.0)[0])  # a PostgreSQL row event
    base["source"].update(table="things", name="srv", schema="public")

    def took(doc: dict[str, Any] | bytes) -> bool:
        raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        found = read([raw])
        return found is not None and len(found.taken) == 1

    assert took(base)
    # "file": null with a "pos" picks the binlog position (refused); absent, the LSN.
    both = json.loads(json.dumps(base))
    both["source"].update(file=None, pos=5)
    assert not took(both)
    only_pos = json.loads(json.dumps(base))
    only_pos["source"]["pos"] = 5
    assert took(only_pos)
    escaped = json.dumps(both).encode().replace(b'"file"', b'"fil\\u0065"')
    assert not took(escaped)
    # A key written with an escaped letter escapes every check of its text.
    ddl = json.dumps({**base, "ddl": None}).encode().replace(b'"ddl"', b'"dd\\u006c"')
    assert not took(ddl)
    assert took(json.dumps({**base, "x": "\u00e9"}).encode())
    # A schema change's keys, present with null, make it one (general decoder).
    assert not took({**base, "ddl": None})
    assert not took({**base, "tableChanges": None})
    # More openers than the one-pass read takes: the general decoder's call.
    assert not took({**base, "x": [{}] * 300})
    assert took({**base, "x": [{}] * 200})
    # Arrow reads invalid UTF-8 in a value it skips; orjson refuses the message.
    assert not took(json.dumps(base).encode().replace(b'"public"', b'"p\xffblic"'))


def test_a_batch_of_other_messages_stops_the_block_route() -> None:
    """A stream of messages the block does not take pays its parse once, then not."""
    read = route_reader()
    others = [INLINE] * 1500
    assert read(others) is None
    usual = [r for r in routing_corpus(1500, 2, 0.0, 1.0) if r is not None]
    assert read(usual) is None  # given up for this worker's batches
    assert route_reader()(usual) is not None


def test_compact_messages_with_an_inline_schema_are_routed_by_their_payload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A message as JsonConverter writes it with ``schemas.enable=true`` whose block a
    worker has read before is routed by the block read of its payload, its schema key
    the block's; a batch mixes them with bare envelopes and unusual payloads."""
    rnd = random.Random(4)
    raws: list[bytes | None] = []
    for _ in range(3000):
        source = MYSQL if rnd.random() < 0.5 else POSTGRES
        doc = payload(PLAIN_FIELDS, source, rnd)
        if rnd.random() < 0.7:
            message = {"schema": connect(PLAIN_FIELDS, source), "payload": doc}
            raws.append(json.dumps(message, separators=(",", ":")).encode())
        else:
            raws.append(json.dumps(doc).encode())
    got, want, by_block = classified_both_ways(raws, [500], monkeypatch)
    assert got == want
    keyed = sum(1 for w in want if w[1] == "row" and (w[4] or "").startswith("inline:"))
    routed = sum(1 for w in want if w[1] == "row" or w[2] == "unknown_table")
    assert keyed > 1000
    # All but the first batch's inline messages (their blocks not read yet) and the
    # unusual ones are taken by the block.
    assert routed * 0.7 < by_block <= routed, (by_block, routed)
