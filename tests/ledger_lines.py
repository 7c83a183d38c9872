"""Lines for the ledger's robustness tests: valid Debezium events for ``shop.items`` and
mutations of them (bytes flipped, truncated, nested deep, wrong types, invalid UTF-8,
BOMs, huge values, unknown columns). Shared by the unit test of the Python decode path
and the integration test that pushes one file of them through the Spark ledger stage."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import strategies as st

from icetide.schema.file import schema_from_dict

ITEMS = schema_from_dict(
    {
        "table": "items",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {"id": 2, "name": "name", "type": "string"},
            {"id": 3, "name": "qty", "type": "int"},
            {"id": 4, "name": "doc", "type": "json"},
        ],
    }
)


def event(pos: int, item: int, **after: Any) -> dict[str, Any]:
    """A MySQL-connector insert into shop.items at binlog position ``pos``."""
    return {
        "before": None,
        "after": {"id": item, "name": f"n{item}", "qty": 1, **after},
        "source": {
            "connector": "mysql",
            "name": "srv",
            "ts_ms": 1_700_000_000_000,
            "db": "shop",
            "table": "items",
            "file": "mysql-bin.000001",
            "pos": pos,
            "row": 0,
        },
        "op": "c",
        "ts_ms": 1_700_000_000_005,
    }


def line(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


# -- mutations of valid events ------------------------------------------------------------


def flip(raw: bytes, rnd: random.Random) -> bytes:
    data = bytearray(raw)
    for _ in range(rnd.randint(1, 4)):
        i = rnd.randrange(len(data))
        data[i] = rnd.randrange(256)
    return bytes(data)


def truncate(raw: bytes, rnd: random.Random) -> bytes:
    return raw[: rnd.randrange(len(raw))]


def nest(raw: bytes, rnd: random.Random) -> bytes:
    depth = rnd.choice([50, 900, 5_000, 20_000])
    doc = json.loads(raw)
    if rnd.random() < 0.5:
        return b"[" * depth + raw + b"]" * depth
    doc["after"]["doc"] = "@"
    return line(doc).replace(b'"@"', b"[" * depth + b"1" + b"]" * depth)


def wrong_type(raw: bytes, rnd: random.Random) -> bytes:
    doc = json.loads(raw)
    target, key = rnd.choice(
        [
            (doc["after"], "id"),
            (doc["after"], "qty"),
            (doc["after"], "name"),
            (doc["source"], "pos"),
            (doc, "op"),
            (doc, "after"),
            (doc, "source"),
            (doc["source"], "table"),
            (doc["source"], "name"),
        ]
    )
    target[key] = rnd.choice([None, True, -1.5, "x", [1], {"a": 1}, 2**70, "", 0])
    return line(doc)


def bad_utf8(raw: bytes, rnd: random.Random) -> bytes:
    i = rnd.randrange(len(raw))
    return raw[:i] + rnd.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88"]) + raw[i:]


def bom(raw: bytes, rnd: random.Random) -> bytes:
    return b"\xef\xbb\xbf" + raw


def huge(raw: bytes, rnd: random.Random, sizes: tuple[int, ...] = (70_000, 1_000_000)) -> bytes:
    doc = json.loads(raw)
    doc["after"]["name"] = "x" * rnd.choice(sizes)
    return line(doc)


def extra_column(raw: bytes, rnd: random.Random) -> bytes:
    doc = json.loads(raw)
    doc["after"]["not_in_schema"] = 1
    return line(doc)


MUTATIONS = [flip, truncate, nest, wrong_type, bad_utf8, bom, huge, extra_column]
VALID_AFTER = {bom, huge, extra_column}  # still valid events after these mutations


@st.composite
def messages(draw: st.DrawFn) -> tuple[bytes, bool]:
    """(raw message, whether it is a valid row event that must reach the ledger)."""
    kind = draw(st.sampled_from(["valid", "mutated", "mutated", "random", "skip"]))
    pos = draw(st.integers(4, 10**9))
    item = draw(st.integers(-(2**63), 2**63 - 1))
    raw = line(event(pos, item))
    if kind == "valid":
        return raw, True
    if kind == "random":
        return draw(st.binary(max_size=200)), False
    if kind == "skip":
        return draw(st.sampled_from([b"null", b'{"schema":null,"payload":null}'])), False
    mutation = draw(st.sampled_from(MUTATIONS))
    rnd = random.Random(draw(st.integers(0, 2**32)))
    return mutation(raw, rnd), mutation in VALID_AFTER


def seeded_lines(seed: int, count: int) -> list[tuple[bytes, bool]]:
    """``count`` lines drawn like :func:`messages` from a seeded generator, for one file.

    Keys are distinct per valid event, so each must be found in the base table.
    """
    rnd = random.Random(seed)
    out: list[tuple[bytes, bool]] = []
    for n in range(count):
        raw = line(event(4 + n, n + 1))
        kind = rnd.choice(["valid", "mutated", "mutated", "random", "skip"])
        if kind == "valid":
            out.append((raw, True))
        elif kind == "random":
            out.append((rnd.randbytes(rnd.randrange(200)), False))
        elif kind == "skip":
            out.append((b"null", False))
        else:
            mutation = rnd.choice(MUTATIONS)
            mutated = huge(raw, rnd, (100_000,)) if mutation is huge else mutation(raw, rnd)
            out.append((mutated, mutation in VALID_AFTER))
    return out
