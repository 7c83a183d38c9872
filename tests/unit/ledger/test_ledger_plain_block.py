"""The block read of bare envelopes (icetide.ledger.plain_block) gives, for a batch of
messages, exactly the ledger and dead-letter rows the per-message read gives: on a
seeded corpus of usual events of MySQL and PostgreSQL shapes mixed with every kind of
unusual envelope, value and line (hostile ones too), each batch projected both ways."""

from __future__ import annotations

import json
import random
import sys
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from icetide.ledger import decode
from icetide.ledger.decode import Era, Projection, _plain_rows, project_batches
from icetide.ledger.plain_block import block_reader
from icetide.schema.file import schema_from_dict

TYPES = {
    "id": "long",
    "n": "int",
    "name": "string",
    "price": "double",
    "ratio": "float",
    "ok": "boolean",
    "note": "string",
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
TYPED_TYPES = {
    "id": "long",
    "amount": "decimal(10,2)",
    "day": "date",
    "at": "timestamp",
    "atz": "timestamptz",
    "tod": "time",
    "doc": "json",
    "u": "uuid",
    "blob": "binary",
    "name": "string",
}
TYPED = schema_from_dict(
    {
        "table": "things",
        "primary_key": ["id", "amount"],
        "columns": [
            {"id": i, "name": n, "type": t, "nullable": n not in ("id", "amount", "at")}
            for i, (n, t) in enumerate(TYPED_TYPES.items(), 1)
        ],
        "sink": {
            "logical": {"day": "io.debezium.time.Date", "at": "io.debezium.time.MicroTimestamp"}
        },
    }
)
"""A table whose values the block leaves to the one-pass converters (a decimal in the
key too): base64 and text decimals, epoch and ISO dates and times, JSON text, ..."""


def _list(element: Any) -> dict[str, Any]:
    return {"list": {"element_id": 0, "element": element}}


def _map(key: str, value: str) -> dict[str, Any]:
    return {"map": {"key_id": 0, "key": key, "value_id": 0, "value": value}}


NESTED_TYPES: dict[str, Any] = {
    "id": "long",
    "name": "string",
    "n": "int",
    "tags": _list("string"),
    "scores": _map("string", "long"),
    "addr": {"struct": [{"id": 0, "name": "city", "type": "string"},
                        {"id": 0, "name": "zip", "type": "int"}]},
    "grid": _list(_list("int")),
    "amounts": _list("decimal(6,2)"),
    "attrs": _map("int", "long"),
}  # fmt: skip


def _numbered(kind: Any, ids: list[int]) -> Any:
    """``kind`` with every field id (0 above) numbered from ``ids``."""
    if isinstance(kind, dict):
        return {k: ids.pop() if k.endswith("id") and v == 0 else _numbered(v, ids)
                for k, v in kind.items()}  # fmt: skip
    if isinstance(kind, list):
        return [_numbered(v, ids) for v in kind]
    return kind


NESTED = schema_from_dict(
    _numbered(
        {
            "table": "things",
            "primary_key": ["id"],
            "columns": [
                {"id": 0, "name": n, "type": t, "nullable": n != "id"}
                for n, t in NESTED_TYPES.items()
            ],
        },
        list(range(99, 0, -1)),
    )
)
"""A table of list, map and struct columns: read in a block, their values taken from
each message parsed whole (a map's keys are not a struct's fields)."""
NOW = datetime(2026, 12, 6, tzinfo=UTC)
VALUES: list[Any] = [
    None, 0, -1, 2**31, -(2**31) - 1, 2**31 - 1, 2**63 - 1, 2**63, 10**30, True, False,
    0.0, -0.0, 1.5, 0.1, 1e300, 1e-320, 12345678901234567890123, "", "x", "12", "1.5",
    "__debezium_unavailable_value", "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",
    "\u2603 \U0001f600", [1], [], {"a": 1},
]  # fmt: skip


NESTED_SHAPES: dict[str, tuple[list[Any], list[Any]]] = {
    # Nested values of their column's shape, and of other shapes: a float inside, the
    # TOAST placeholder as an array, a value out of range.
    "tags": ([["a", "é"], [], [None, "x"], ["x" * 30]],
             [["a", 1], [True], ["__debezium_unavailable_value"], "a", [1.5], [["a"]]]),
    "scores": ([{"a": 1, "b": None}, {}, {"k": -(2**63)}],
               [{"a": 1.5}, {"a": "x"}, {"a": 2**63}, [1], {"a": True}, {"a": [1]}]),
    "addr": ([{"city": "Lisbon", "zip": 1000}, {"city": "x"}, {}, {"city": None, "zip": -1}],
             [{"zip": "12"}, {"zip": 2**40}, {"city": 1, "zip": 2}, {"city": "y", "o": [1]},
              {"city": "y", "o": 1.5}, ["Lisbon"], {"zip": 1.5}]),
    "grid": ([[[1, 2], [3]], [[]], [], [[None, 4]]], [[1, 2], [[[1]]], [[2**31]], [[1.0]]]),
    "amounts": ([["1.50", "AeI="], [None], []], [[1.5], [1, 2], ["1e400"], [0.125]]),
    "attrs": ([{"1": 1, "-2": 2}, {}], [{"a": 1}, {"1": "x"}, {"1": None}, {" 3": 4}]),
}  # fmt: skip
NESTED_USUAL = 0.97
"""The share of a nested column's values of its usual shape (another shape fails Arrow's
read of its whole block, which is then read by halves around it)."""


def column_value(name: str, rnd: random.Random) -> Any:
    def pick(usual: list[Any], refused: list[Any], rate: float = 0.97) -> Any:
        return rnd.choice(usual if rnd.random() < rate else refused)

    if name in NESTED_SHAPES:
        return pick(*NESTED_SHAPES[name], NESTED_USUAL)

    usual = {
        "id": rnd.randint(-(2**63), 2**63 - 1),
        "n": rnd.randint(-(2**31), 2**31 - 1),
        "name": rnd.choice(["a", "é", "\u2603", "x" * 50, 'q"uote\\']),
        "price": rnd.choice([rnd.random() * 10 ** rnd.randint(-5, 20), rnd.randint(-99, 99)]),
        "ratio": rnd.choice([rnd.random(), 3.5e38, 1e39]),
        "ok": rnd.random() < 0.5,
        "note": rnd.choice([None, "n", "long " * 20]),
        # Each typed column in one JSON type, as a connector writes it (another type is a
        # mutation): decimals as base64 or text, epoch dates and times, ISO instants;
        # now and then a value its converter refuses.
        "amount": pick(["AeI=", "/w==", "AAAAAAAAAAAAAAE=", "12.50", "-0.01"], ["x", "1e999"]),
        "day": pick([19_000, -1, 0], [10**9]),
        "at": pick([1_700_000_000_123_456, 0], [10**17]),
        "atz": pick(["2024-01-01T00:00:00+01:00", "2024-01-01T00:00:00Z"], ["junk"]),
        "tod": pick([36_000_000_000, 0], [-5, 10**12]),
        "doc": pick(['{"a":1}', '{"a": [1, 2.50]}', "[]"], ["not json"]),
        "u": pick(["3f2504e0-4f89-11d3-9a0c-0305e82c3301"], ["not-a-uuid"]),
        "blob": pick(["AeI=", "", None], ["!!"]),
    }
    return usual[name]


def image(rnd: random.Random, names: Any = TYPES) -> dict[str, Any]:
    return {n: column_value(n, rnd) for n in names}


def envelope(rnd: random.Random, mysql: float = 0.6, names: Any = TYPES) -> dict[str, Any]:
    """A row event of ``shop.things`` in the shape the MySQL or PostgreSQL connector
    writes it (every source field they write)."""
    op = rnd.choice(["c", "u", "d", "r"])
    source: dict[str, Any] = {
        "version": "2.7.3.Final",
        "name": "srv",
        "ts_ms": 1_700_000_000_000 + rnd.randint(0, 10**6),
        "snapshot": rnd.choice(["false", "true", "last"]),
        "db": "shop",
        "sequence": None,
        "table": "things",
    }
    if rnd.random() < mysql:
        source.update(
            connector=rnd.choice(["mysql", "mariadb"]),
            server_id=1,
            gtid=rnd.choice([None, f"0-1-{rnd.randint(1, 99)}"]),
            file=f"mysql-bin.00000{rnd.randint(1, 4)}",
            pos=rnd.randint(4, 10**9),
            row=rnd.choice([0, 0, 1, 2]),
            thread=rnd.choice([None, 7]),
            query=None,
        )
    else:
        source.update(
            connector="postgresql",
            schema="public",
            txId=rnd.randint(1, 99),
            lsn=rnd.randint(1, 2**40),
            xmin=None,
        )
    doc: dict[str, Any] = {
        "before": image(rnd, names) if op in ("u", "d") else None,
        "after": image(rnd, names) if op != "d" else None,
        "source": source,
        "op": op,
        "ts_ms": 1_700_000_000_005,
    }
    if rnd.random() < 0.3:
        doc["transaction"] = {
            "id": f"{rnd.randint(1, 9)}:{rnd.randint(1, 999)}",
            "total_order": 1,
            "data_collection_order": 1,
        }
    if rnd.random() < 0.3:
        doc["ts_us"] = 1_700_000_000_005_000
    return doc


MUTATIONS: list[tuple[str, str, list[Any]]] = [
    ("after", "*", VALUES),
    ("after", "*", VALUES),
    ("after", "*", [None]),
    ("before", "*", VALUES),
    ("after", "not_in_schema", [1, None]),
    ("after", "-", []),
    ("before", "-", []),
    ("", "op", ["t", "m", "x", 1, None]),
    ("", "before", [None, "s", {}]),
    ("", "after", [None, [], {}]),
    ("", "ts_ms", [None, 0, "12", 2.5, 10**20, -(10**17)]),
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
    ("source", "table", ["", None, 1]),
    ("source", "snapshot", [None, "true", False, 1]),
    ("source", "file", ["binlog", "", None, 5, "b.0000000000000000000000000009"]),
    ("source", "pos", [2**70, -1, "5", 4.0, None, 10**13, 10**13 - 1]),
    ("source", "row", [1, None, False, 10**7, 0.0, "1"]),
    ("source", "lsn", ["0/16B3748", "junk", None, -5, 2**65, 1.0, 0]),
    ("source", "txId", [None, "7", 7.0]),
    ("source", "gtid", ["0-1-42", "", None, 9]),
    ("source", "ts_sec", [1_700_000_000]),
]
HOSTILE = [
    b"",
    b"{",
    b"null",
    b"[1, 2]",
    b'\xef\xbb\xbf{"op": "c"}',
    b'{"op": "c", "after": {"id": 1, "id": 2}}',
    b'{"op": "c"} {"op": "d"}',
    b'{"op": "c", "after": {"id": 1, "name": "\xff"}}',
    b'{"op": "c", "after": {"id": 1, "name": "\\ud800"}}',
    b'{"op": "c", "after": {"id": 1, "name": "a\tb"}}',
    b'{"op": "c", "after": {"id": 1, "price": NaN}}',
]


def mutate(doc: dict[str, Any], rnd: random.Random, names: Any = TYPES) -> None:
    where, key, values = rnd.choice(MUTATIONS)
    target = doc if not where else doc.get(where)
    if not isinstance(target, dict):
        return
    if key == "*":
        key = rnd.choice(list(names))
    if key == "-":
        if target:
            target.pop(rnd.choice(list(target)), None)
        return
    if key == "ts_sec":
        target.pop("ts_ms", None)
    target[key] = rnd.choice(values)


def serialised(doc: dict[str, Any], rnd: random.Random, unusual: float) -> bytes:
    text = json.dumps(doc, ensure_ascii=rnd.random() < 0.5)
    roll = rnd.random() / max(unusual, 1e-9)
    if roll < 0.02 and isinstance(doc.get("after"), dict):
        doc["after"][rnd.choice(list(TYPES))] = "@num"
        text = json.dumps(doc).replace('"@num"', rnd.choice(["NaN", "1e400", "-Infinity"]), 1)
    elif roll < 0.04:
        text = rnd.choice(["\ufeff", " ", "\n", "\r\n"]) + text
    elif roll < 0.05:
        text = json.dumps(doc, indent=1)  # a pretty-printed message: line breaks inside
    return text.encode()


def corpus(
    count: int, seed: int, unusual: float, mysql: float = 0.6, names: Any = TYPES
) -> list[bytes]:
    """``count`` messages, about ``unusual`` of them mutated or hostile, ``mysql`` of
    them of the binlog's shape, the others PostgreSQL's."""
    rnd = random.Random(seed)
    out = []
    for _ in range(count):
        if rnd.random() < unusual * 0.05:
            out.append(rnd.choice(HOSTILE))
            continue
        doc = envelope(rnd, mysql, names)
        if rnd.random() < unusual:
            for _ in range(rnd.choice([1, 1, 2])):
                mutate(doc, rnd, names)
        out.append(serialised(doc, rnd, unusual))
    return out


BATCH_SIZES = [1, 7, 50, 400, 2000]


def batches(raws: list[bytes], rnd: random.Random, sizes: list[int]) -> list[pa.RecordBatch]:
    """``raws`` as Arrow batches of uneven ``sizes``, as Spark hands them over."""
    out, start = [], 0
    while start < len(raws):
        size = rnd.choice(sizes)
        part = raws[start : start + size]
        ids = [f"m{start + i}" for i in range(len(part))]
        out.append(
            pa.RecordBatch.from_pydict({"message_id": ids, "raw": pa.array(part, pa.binary())})
        )
        start += size
    return out


def both_ways(
    projection: Projection,
    raws: list[bytes],
    monkeypatch: pytest.MonkeyPatch,
    sizes: list[int] = BATCH_SIZES,
) -> tuple[pa.Table, pa.Table, int]:
    """The batches of ``raws`` projected with the block read and without, and how many
    messages the block read took."""
    parts = batches(raws, random.Random(11), sizes)
    counted = [0]
    made = decode._block_reader

    def counting(*args: Any) -> Any:
        read = made(*args)
        if read is None:
            return None

        def run(raws: Any) -> Any:
            found = read(raws)
            counted[0] += 0 if found is None else len(found.taken)
            return found

        return run

    with monkeypatch.context() as patch:
        patch.setattr(decode, "_block_reader", counting)
        patch.setattr(decode, "BLOCK_SMALLEST", 1)  # every batch read as a block here
        fast = pa.Table.from_batches(list(project_batches(projection, NOW)(iter(parts))))
    with monkeypatch.context() as patch:
        patch.setattr(decode, "_block_reader", lambda *_: None)
        slow = pa.Table.from_batches(list(project_batches(projection, NOW)(iter(parts))))
    return fast, slow, counted[0]


def assert_block_agrees(
    projection: Projection,
    raws: list[bytes],
    monkeypatch: pytest.MonkeyPatch,
    sizes: list[int],
    share: float,
    unusual: float,
) -> None:
    """The batches of ``raws`` give the same rows with the block read and without, and
    the block takes more than ``share`` of what the one-pass read takes, no more."""
    fast, slow, by_block = both_ways(projection, raws, monkeypatch, sizes)
    assert fast.num_rows == len(raws)
    assert_same(fast, slow)
    if unusual > 0.1:
        assert set(fast.column("_status").to_pylist()) == {"row", "dead"}
    one_pass = _plain_rows(projection, None)
    assert one_pass is not None
    taken_one_by_one = sum(one_pass(raw) is not None for raw in raws)
    assert taken_one_by_one * share < by_block <= taken_one_by_one, (by_block, taken_one_by_one)


def assert_same(fast: pa.Table, slow: pa.Table) -> None:
    assert fast.schema == slow.schema
    for name in fast.column_names:
        a, b = fast.column(name).to_pylist(), slow.column(name).to_pylist()
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            # repr: True is not 1, 1.0 is not 1, -0.0 is not 0.0, nan compared as text.
            assert repr(x) == repr(y), (name, i, x, y)


def taken(projection: Projection, raws: list[bytes]) -> int:
    read = block_reader(
        projection.value_schema, projection.layout, decode.projected_arrow_schema(projection)
    )
    assert read is not None
    found = read(raws)
    return 0 if found is None else len(found.taken)


WIDER = SCHEMA.with_columns(
    (
        *SCHEMA.columns,
        *schema_from_dict(
            {
                "table": "t",
                "primary_key": ["extra"],
                "columns": [{"id": 99, "name": "extra", "type": "string"}],
            }
        ).columns,
    )
)


@pytest.mark.parametrize(
    ("unusual", "sizes", "mysql", "share"),
    [
        # A stream as it usually is: few unusual messages, batches of every size, each
        # block read whole or by halves around them.
        (0.01, BATCH_SIZES, 1.0, 0.4),
        (0.01, BATCH_SIZES, 0.0, 0.4),
        # Half the messages unusual, each batch of a message or three, so that the
        # block read meets each kind of unusual envelope and value on its own.
        (0.5, [1, 1, 2, 3], 0.6, 0.5),
    ],
)
@pytest.mark.parametrize(
    "projection",
    [Projection(SCHEMA), Projection(WIDER, values=SCHEMA), Projection(TYPED)],
    ids=["scalars", "wider-layout", "typed"],
)
def test_a_batch_read_as_a_block_gives_the_per_message_rows(
    projection: Projection,
    unusual: float,
    sizes: list[int],
    mysql: float,
    share: float,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    count = 2500 if unusual > 0.1 else 6000
    names = projection.value_schema.by_name
    raws = corpus(count, int(unusual * 100 + mysql), unusual, mysql, names)
    assert_block_agrees(projection, raws, monkeypatch, sizes, share, unusual)


@pytest.mark.parametrize(
    ("unusual", "usual_shapes", "sizes", "share"),
    # A stream of usual values, a rare one of another shape read by halves around it;
    # then batches of a message or three, each kind of odd value met on its own.
    [(0.01, 0.999, BATCH_SIZES, 0.35), (0.5, 0.9, [1, 1, 2, 3], 0.5)],
    ids=["usual", "unusual"],
)
def test_a_batch_of_nested_columns_read_as_a_block_gives_the_per_message_rows(
    unusual: float,
    usual_shapes: float,
    sizes: list[int],
    share: float,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "NESTED_USUAL", usual_shapes)
    raws = corpus(1500 if unusual > 0.1 else 4000, 17, unusual, 0.6, NESTED.by_name)
    assert_block_agrees(Projection(NESTED), raws, monkeypatch, sizes, share, unusual)


def test_a_list_arrow_reads_as_an_invalid_array_does_not_stop_the_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Arrow 26 infers [null, 4] as a list whose offsets run past its values; reading that
    # column raised out of the worker, and the batch stopped on one message.
    rnd = random.Random(6)
    docs = [envelope(rnd, 1.0, TYPED.by_name) for _ in range(300)]
    for doc in docs:  # no other value of the column to fail the block's read
        for side in ("before", "after"):
            if doc[side]:
                doc[side]["doc"] = None
    docs[40].update(op="c", before=None, after={**image(rnd, TYPED.by_name), "doc": [None, 4]})
    raws = [json.dumps(doc).encode() for doc in docs]
    fast, slow, by_block = both_ways(Projection(TYPED), raws, monkeypatch, [300])
    assert_same(fast, slow)
    assert json.loads(fast.column("_after")[40].as_py()["doc"]) == [None, 4]
    assert by_block > 100


def test_a_nested_message_the_one_pass_read_leaves_is_not_taken_in_a_block() -> None:
    # More [ and { than the one-pass read takes: it leaves the message to the general
    # read (which fails on deep nesting), and so does the block, however wide it is.
    rnd = random.Random(5)
    docs = [envelope(rnd, 1.0, NESTED.by_name) for _ in range(200)]
    for doc in docs:
        doc.update(op="c", before=None, after={"id": rnd.randint(1, 10**9), "grid": [[1]]})
    docs[70]["after"]["grid"] = [[1]] * 300
    raws = [json.dumps(doc).encode() for doc in docs]
    one_pass = _plain_rows(Projection(NESTED), None)
    assert one_pass is not None and one_pass(raws[70]) is None and one_pass(raws[71]) is not None
    taken_here = taken(Projection(NESTED), raws)
    read = block_reader(NESTED, NESTED, decode.projected_arrow_schema(NESTED))
    assert read is not None
    found = read(raws)
    assert found is not None and 70 not in found.taken and taken_here == 199


def test_the_block_takes_the_usual_message_and_declines_what_it_cannot_tell() -> None:
    projection = Projection(SCHEMA)
    for mysql in (0.0, 1.0):
        clean = corpus(2000, seed=5, unusual=0.0, mysql=mysql)
        # Most usual messages are taken (an update whose after image holds a null is
        # not: absent and null read alike there).
        assert taken(projection, clean) > len(clean) * 0.75
    # One message Arrow's reader refuses sends the whole block the per-message way.
    assert taken(projection, [*clean[:50], b'{"op": "c", "after": {"id": 1, "id": 2}}']) == 0
    # A column the value schema lacks (the merge will rescue it) declines the block.
    doc = json.loads(clean[0])
    doc["after"] = dict(doc["after"] or doc["before"], surprise=1)
    assert taken(projection, [*clean[:50], json.dumps(doc).encode()]) == 0


def test_an_update_with_an_absent_column_keeps_its_unchanged_toast_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rnd = random.Random(3)
    doc = envelope(rnd)
    doc.update(op="u", before=image(rnd), after=image(rnd))
    doc["after"]["note"] = "set"
    with_null = json.loads(json.dumps(doc))
    with_null["after"]["note"] = None
    absent = json.loads(json.dumps(doc))
    del absent["after"]["note"]
    raws = [json.dumps(d).encode() for d in (doc, with_null, absent)]
    fast, slow, _ = both_ways(Projection(SCHEMA), raws, monkeypatch)
    assert_same(fast, slow)
    assert fast.column("_unavailable").to_pylist() == [[], [], ["note"]]


def test_earlier_versions_and_renames_keep_the_per_message_read() -> None:
    shape = decode.projected_arrow_schema(SCHEMA)
    era = Era(2 * 10**19, {}, None)
    assert decode._block_reader(Projection(SCHEMA, earlier=(era,)), None, shape) is None
    assert decode._block_reader(Projection(SCHEMA, aliases={"old": "name"}), None, shape) is None
    # Bare messages refused: the block takes none of them (inline ones it may).
    refusing_bare = decode._block_reader(Projection(SCHEMA), {"": ("r", "why")}, shape)
    assert refusing_bare is not None and refusing_bare(corpus(400, 3, 0.0)) is None
    usual = decode._block_reader(Projection(SCHEMA), None, shape)
    assert usual is not None and usual(corpus(400, 3, 0.0)) is not None
    # A batch too small to be worth a block's fixed cost goes message by message.
    assert usual(corpus(decode.BLOCK_SMALLEST - 1, 3, 0.0)) is None


PLACEHOLDER_FORMS = ("__debezium_unavailable_value", "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==")
TEXT_KEYED = schema_from_dict(
    {
        "table": "things",
        "primary_key": ["sku"],
        "columns": [
            {"id": 1, "name": "sku", "type": "string", "nullable": False},
            {"id": 2, "name": "name", "type": "string"},
            {"id": 3, "name": "body", "type": "string", "nullable": False},
            {"id": 4, "name": "doc", "type": "json"},
            {"id": 5, "name": "n", "type": "long"},
        ],
    }
)


def test_the_unchanged_toast_placeholder_is_taken_as_the_general_read_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The placeholder in a value column of either image, in a required one, in a key,
    in a delete's after image, with and without absent columns: the rows and the
    ``_unavailable`` lists the general read makes (the one-pass read sends it there)."""
    rnd = random.Random(8)
    raws = []
    for i in range(400):
        doc = envelope(rnd, mysql=0.0, names={})
        op = rnd.choice(["c", "r", "u", "u", "d"])
        images = [
            {"sku": f"k{i}", "name": "a", "body": "b", "doc": '{"a":1}', "n": i} for _ in "ab"
        ]
        for image in images:
            for name in rnd.sample(["name", "body", "doc", "sku", "n"], rnd.choice([0, 1, 1, 2])):
                image[name] = rnd.choice(PLACEHOLDER_FORMS) if name != "n" else None
            if rnd.random() < 0.2:
                image.pop(rnd.choice(["name", "doc"]))
        doc.update(op=op, before=images[0] if op in ("u", "d") else None, after=images[1])
        if op == "d" and rnd.random() < 0.5:
            doc["after"] = None
        raws.append(json.dumps(doc).encode())
    fast, slow, by_block = both_ways(Projection(TEXT_KEYED), raws, monkeypatch, [50, 400])
    assert_same(fast, slow)
    assert by_block > len(raws) / 2
    held = fast.column("_unavailable").to_pylist()
    assert any(len(names or ()) == 2 for names in held) and ["sku"] not in held


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("n", 2**31),
        ("n", -(2**31) - 1),
        ("name", "__debezium_unavailable_value"),
        ("note", "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="),
        ("ratio", 1e39),
        ("price", 12345678901234567890123),
    ],
)
def test_a_value_among_usual_ones_is_typed_as_the_per_message_read_types_it(
    column: str, value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rnd = random.Random(9)
    docs = [envelope(rnd, mysql=1.0) for _ in range(200)]
    for doc in docs[::3]:
        doc.update(op="c", before=None, after=image(rnd))
        doc["after"][column] = value
    raws = [json.dumps(doc).encode() for doc in docs]
    fast, slow, by_block = both_ways(Projection(SCHEMA), raws, monkeypatch, [200])
    assert_same(fast, slow)
    assert by_block > 100


def test_nesting_the_general_decoder_cannot_read_is_its_dead_letter_here_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rnd = random.Random(4)
    docs = [envelope(rnd, mysql=1.0) for _ in range(300)]
    raws = [json.dumps(doc).encode() for doc in docs]
    docs[0].update(op="c", before=None, after={**image(rnd), "note": "taken but for its depth"})
    deep = json.dumps(docs[0])[:-1] + ', "deep": ' + "[" * 1_100 + "]" * 1_100 + "}"
    raws[150] = deep.encode()
    fast, slow, by_block = both_ways(Projection(SCHEMA), raws, monkeypatch, [300])
    assert_same(fast, slow)
    assert fast.column("_status")[150].as_py() == "dead"
    assert by_block > 150  # the block read by halves around the deep message


def test_a_nested_value_in_a_typed_column_is_read_as_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    # Arrow reads {"a": 1} and {"b": 2} of one block as one struct with both fields (each
    # message gaining the other's as null): such a value goes the per-message way.
    rnd = random.Random(12)
    docs = [envelope(rnd, mysql=1.0, names=TYPED.by_name) for _ in range(300)]
    usual = {"id": 1, "amount": "AeI=", "day": 19_000, "at": 0, "atz": "2024-01-01T00:00:00Z"}
    for i, doc in enumerate(docs):  # the column's values all objects, of varying keys
        for side in ("before", "after"):
            if doc[side]:
                doc[side]["doc"] = {f"k{i % 3}": i}
    for doc, value in zip(docs[:2], [{"a": 1}, {"b": 2}], strict=True):
        doc.update(op="c", before=None, after={**usual, "name": "n", "doc": value})
    raws = [json.dumps(doc).encode() for doc in docs]
    fast, slow, _ = both_ways(Projection(TYPED), raws, monkeypatch, [300])
    assert_same(fast, slow)
    assert [json.loads(a["doc"]) for a in fast.column("_after").to_pylist()[:2]] == [
        {"a": 1},
        {"b": 2},
    ]


def test_a_table_whose_messages_the_block_cannot_take_stops_paying_its_parse() -> None:
    rnd = random.Random(21)

    def messages(doc_value: Any) -> list[bytes]:
        docs = [envelope(rnd, mysql=1.0, names=TYPED.by_name) for _ in range(1_000)]
        for doc in docs:
            doc.update(op="c", before=None, after=image(rnd, TYPED.by_name))
            doc["after"].update(amount="AeI=", at=0, atz="2024-01-01T00:00:00Z", doc=doc_value)
        return [json.dumps(doc).encode() for doc in docs]

    shape = decode.projected_arrow_schema(TYPED)
    read = block_reader(TYPED, TYPED, shape)
    fresh = block_reader(TYPED, TYPED, shape)
    assert read is not None and fresh is not None
    assert read(messages({"k": 1})) is None  # a JSON column's object: per message
    usual = messages('{"k": 1}')
    assert read(usual) is None  # given up for the rest of the batch
    found = fresh(usual)
    assert found is not None and len(found.taken) > 500


def test_a_decimal_sent_as_a_fraction_is_taken_as_the_one_pass_read_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As a connector with decimal.handling.mode=double writes it; whole numbers among
    # them (read as doubles by Arrow), fractions over the scale, and numbers written
    # with more digits than a double keeps (the one-pass read leaves those).
    amounts: list[Any] = [12.5, 0.01, -3.25, 5, 0, -0.0, 1e-3, 12345678.91, 99999999.99]
    amounts += [0.30000000000000004, 123456789012345678, 1e30, 2.5e-7, 7.10]
    rnd = random.Random(8)
    docs = []
    for i in range(600):
        doc = envelope(rnd, mysql=1.0, names=TYPED.by_name)
        for side in ("before", "after"):
            if doc[side]:
                doc[side]["amount"] = amounts[(i + len(side)) % len(amounts)]
        docs.append(doc)
    raws = [json.dumps(doc).encode() for doc in docs]
    # A number a double reads as 5.0, whose digits the column's scale refuses.
    raws[::3] = [
        raw.replace(b'"amount": 5,', b'"amount": 5.00000000000000001,') for raw in raws[::3]
    ]
    assert sum(b"5.00000000000000001" in raw for raw in raws) > 10
    fast, slow, by_block = both_ways(Projection(TYPED), raws, monkeypatch, [600])
    assert_same(fast, slow)
    one_pass = _plain_rows(Projection(TYPED), None)
    assert one_pass is not None
    assert by_block > 0.6 * sum(one_pass(raw) is not None for raw in raws)
