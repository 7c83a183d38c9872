"""The shape of a generated stream: determinism, op kinds, positions, envelope forms."""

from __future__ import annotations

import base64
import json
from collections import Counter, defaultdict
from decimal import Decimal
from typing import Any

import pytest
from demo_support import Decoded, decode_all, key_of

from icetide.demo.workload import (
    Workload,
    demo_schemas,
    demo_sources,
    encode_decimal,
    generate,
)
from icetide.events.logical_types import connect_decimal
from icetide.events.model import UNAVAILABLE
from icetide.events.position import binlog_file_number

PRIMARY_KEYS = {s.table: s.primary_key for s in demo_schemas()}


def dumps(workload: Workload) -> list[str]:
    return [json.dumps(e.message, sort_keys=True) for e in workload.events]


def by_transaction(decoded: list[Decoded]) -> list[list[Decoded]]:
    """Consecutive events of one transaction (snapshot reads each on their own)."""
    groups: list[list[Decoded]] = []
    for d in decoded:
        tx = d.envelope.tx_id
        if groups and tx is not None and groups[-1][-1].envelope.tx_id == tx:
            groups[-1].append(d)
        else:
            groups.append([d])
    return groups


# --------------------------------------------------------------------------- the API


def test_demo_schemas_and_sources() -> None:
    schemas = {s.table: s for s in demo_schemas()}
    assert list(schemas) == ["customers", "order_lines", "products"]
    assert schemas["order_lines"].primary_key == ("order_id", "line_no")
    assert demo_sources() == {
        "customers": "inventory.customers",
        "order_lines": "inventory.order_lines",
        "products": "public.products",
    }
    for schema in schemas.values():  # stable ids: 1..n in column order
        assert [c.id for c in schema.columns] == list(range(1, len(schema.columns) + 1))


def test_same_seed_same_stream_other_seed_other_stream() -> None:
    first, again = generate(42, 300), generate(42, 300)
    assert dumps(first) == dumps(again)
    assert first.expected == again.expected
    assert first.events == again.events
    assert dumps(generate(43, 300)) != dumps(first)


def test_the_envelope_ratio_changes_the_encoding_only() -> None:
    bare, wrapped = generate(5, 300, with_schema_ratio=0.0), generate(5, 300, with_schema_ratio=1)
    assert bare.expected == wrapped.expected
    assert [d.projected for d in decode_all(bare)] == [d.projected for d in decode_all(wrapped)]
    assert not any("schema" in e.message for e in bare.events)
    assert all(set(e.message) == {"schema", "payload"} for e in wrapped.events)


def test_exact_event_counts_and_argument_checks() -> None:
    for n in (0, 1, 2, 9, 77):
        assert len(generate(3, n).events) == n
    for bad in (
        {"events": -1},
        {"events": 5, "key_space": 3},
        {"events": 5, "tables": []},
        {"events": 5, "tables": ["nope"]},
        {"events": 5, "with_schema_ratio": 1.5},
    ):
        with pytest.raises(ValueError):
            generate(1, **bad)


# --------------------------------------------------------------------------- op kinds


def test_every_op_kind_appears(decoded: list[Decoded]) -> None:
    ops = Counter((d.envelope.table, d.projected.op) for d in decoded)
    for table in PRIMARY_KEYS:
        for op in ("c", "u", "d", "r"):
            assert ops[table, op] >= 5, (table, op, ops)
    assert all(d.envelope.op == d.projected.op for d in decoded)


def test_snapshot_reads_come_first_and_end_with_last(decoded: list[Decoded]) -> None:
    snapshot = [d for d in decoded if d.projected.op == "r"]
    assert decoded[: len(snapshot)] == snapshot
    assert all(d.event.snapshot and d.envelope.tx_id is None for d in snapshot)
    marks = Counter(d.payload["source"]["snapshot"] for d in snapshot)
    assert marks == {"true": len(snapshot) - 2, "last": 2}  # one "last" per connector
    assert not any(d.event.snapshot for d in decoded[len(snapshot) :])


def test_key_changes_come_in_both_forms(decoded: list[Decoded]) -> None:
    as_update: Counter[str] = Counter()
    for d in decoded:
        p = d.projected
        pk = PRIMARY_KEYS[d.envelope.table]
        if p.op == "u" and p.before is not None and key_of(p.before, pk) != key_of(p.key, pk):
            as_update[d.envelope.table] += 1
    assert as_update["customers"] >= 3 and as_update["order_lines"] >= 3
    assert as_update["products"] == 0  # REPLICA IDENTITY DEFAULT: Debezium's delete + create

    as_delete_create: Counter[str] = Counter()
    for group in by_transaction(decoded):
        for a, b in zip(group, group[1:], strict=False):
            pk = PRIMARY_KEYS[a.envelope.table]
            if (
                a.envelope.table == b.envelope.table
                and (a.projected.op, b.projected.op) == ("d", "c")
                and key_of(a.projected.key, pk) != key_of(b.projected.key, pk)
            ):
                as_delete_create[a.envelope.table] += 1
    assert all(as_delete_create[t] >= 3 for t in PRIMARY_KEYS), as_delete_create


def test_delete_then_reinsert_of_the_same_key(decoded: list[Decoded]) -> None:
    found: Counter[str] = Counter()
    for group in by_transaction(decoded):
        for a, b in zip(group, group[1:], strict=False):
            if (
                a.envelope.table == b.envelope.table
                and (a.projected.op, b.projected.op) == ("d", "c")
                and a.projected.key == b.projected.key
            ):
                found[a.envelope.table] += 1
    assert all(found[t] >= 3 for t in PRIMARY_KEYS), found


def test_toast_unavailable_values_in_products_updates(decoded: list[Decoded]) -> None:
    products = [d for d in decoded if d.envelope.table == "products"]
    toasted = [d for d in products if d.projected.unavailable]
    assert len(toasted) >= 5
    for d in toasted:
        assert d.projected.op == "u" and d.projected.unavailable == ("description",)
        assert d.payload["after"]["description"] == UNAVAILABLE  # on the wire, as Debezium
    # REPLICA IDENTITY DEFAULT: no before image on updates, only the key on deletes.
    for d in products:
        if d.projected.op == "u":
            assert d.event.before is None
        if d.projected.op == "d":
            assert d.event.before is not None
            assert {k for k, v in d.event.before.items() if v is not None} == {"sku"}
    # Only the large (out-of-line) descriptions are ever withheld.
    stored: dict[tuple[object, ...], str | None] = {}
    for d in sorted(products, key=lambda d: d.position):
        key = tuple(d.projected.key.values())
        if d.projected.after is None:
            stored.pop(key, None)
            continue
        if d.projected.unavailable:
            assert len(stored[key] or "") > 2000
        else:
            stored[key] = d.projected.after["description"]
    assert not any(d.projected.unavailable for d in decoded if d.envelope.table != "products")


def test_without_toast_products_carry_full_images() -> None:
    decoded = [
        d for d in decode_all(generate(11, 400, toast=False)) if d.envelope.table == "products"
    ]
    assert not any(d.projected.unavailable for d in decoded)
    for d in decoded:
        if d.projected.op in ("u", "d"):
            assert d.event.before is not None and d.event.before["name"] is not None


def test_clock_columns_move_with_every_write(decoded: list[Decoded]) -> None:
    # The database stamps updated_at/modified with NOW(): one value per transaction, later
    # for each later transaction, so an update always moves the clock column forward.
    clocks = {"customers": "updated_at", "products": "modified"}
    last: dict[tuple[str, tuple[Any, ...]], tuple[Any, str | None]] = {}
    moved = 0
    for d in decoded:
        table, p = d.envelope.table, d.projected
        if table not in clocks or p.after is None:
            continue
        stamp, where = p.after[clocks[table]], (table, tuple(p.key.values()))
        if where in last and p.op == "u":
            previous, tx = last[where]
            assert stamp > previous if tx != d.envelope.tx_id else stamp == previous
            moved += 1
        last[where] = (stamp, d.envelope.tx_id)
    assert moved > 100
    for group in by_transaction(decoded):
        stamps = {
            (d.envelope.table, d.projected.after[clocks[d.envelope.table]])
            for d in group
            if d.envelope.table in clocks and d.projected.after is not None
        }
        assert len({t for t, _ in stamps}) == len(stamps)  # one NOW() per transaction


# --------------------------------------------------------------------------- positions


def test_positions_strictly_increase_per_source(decoded: list[Decoded]) -> None:
    last: dict[str, int] = {}
    for d in decoded:
        assert d.position == d.envelope.position_key
        connector = d.event.connector
        assert connector is not None
        assert d.position > last.get(connector, -1), d.event.position
        last[connector] = d.position
    assert set(last) == {"mysql", "postgresql"}


def test_binlog_rotates_from_000008_past_000010(decoded: list[Decoded]) -> None:
    mysql = [d for d in decoded if d.event.connector == "mysql"]
    files = [d.payload["source"]["file"] for d in mysql]
    assert files[0] == "mysql-bin.000008"
    assert {"mysql-bin.000009", "mysql-bin.000010"} <= set(files)
    numbers = [binlog_file_number(f) for f in files]
    assert numbers == sorted(numbers)
    # At each rotation the offset restarts, so the offset alone (or the position text,
    # whose offsets change digit count) would order events wrongly; the key does not.
    texts = [d.event.position.text for d in mysql if d.event.position is not None]
    offsets = [d.payload["source"]["pos"] for d in mysql]
    assert offsets != sorted(offsets)
    assert texts != sorted(texts)
    rotations = [i for i in range(1, len(files)) if files[i] != files[i - 1]]
    assert all(offsets[i] < offsets[i - 1] for i in rotations)


def test_rows_of_one_statement_share_an_offset(decoded: list[Decoded]) -> None:
    mysql = [d for d in decoded if d.event.connector == "mysql"]
    shared = 0
    for previous, d in zip(mysql, mysql[1:], strict=False):
        source, before = d.payload["source"], previous.payload["source"]
        if source["row"] == 0:
            continue
        shared += 1  # row N of a rows event follows row N-1 of it: same table, op, offset
        assert (source["file"], source["pos"], source["row"] - 1) == (
            before["file"],
            before["pos"],
            before["row"],
        )
        assert (d.envelope.table, d.envelope.op) == (previous.envelope.table, previous.envelope.op)
        assert d.envelope.tx_id == previous.envelope.tx_id
    assert shared >= 10


def test_lsn_crosses_the_32_bit_boundary(decoded: list[Decoded]) -> None:
    lsns = [d.payload["source"]["lsn"] for d in decoded if d.event.connector == "postgresql"]
    assert 0xFFFFF000 <= lsns[0] < 2**32 <= lsns[-1]
    texts = [
        d.event.position.text
        for d in decoded
        if d.event.position and d.event.connector == "postgresql"
    ]
    assert texts[0].startswith("0/FFFFF") and texts[-1].startswith("1/")


def test_transactions_are_named_as_in_the_metadata(decoded: list[Decoded]) -> None:
    for group in by_transaction(decoded):
        tx = group[0].envelope.tx_id
        if tx is None:
            assert all(d.payload["transaction"] is None for d in group)
            continue
        blocks = [d.payload["transaction"] for d in group]
        assert all(
            d.event.tx_id == tx and b["id"] == tx for d, b in zip(group, blocks, strict=True)
        )
        assert [b["total_order"] for b in blocks] == list(range(1, len(group) + 1))
        per_table: defaultdict[str, int] = defaultdict(int)
        for d, block in zip(group, blocks, strict=True):
            per_table[d.envelope.table] += 1
            assert block["data_collection_order"] == per_table[d.envelope.table]
        if group[0].event.connector == "mysql":
            assert all(d.payload["source"]["gtid"] == tx for d in group)


# --------------------------------------------------------------------------- encodings


def test_both_envelope_forms_at_about_the_ratio(workload: Workload) -> None:
    wrapped = sum("schema" in e.message for e in workload.events)
    assert abs(wrapped / len(workload.events) - 0.5) < 0.05
    few = generate(3, 1000, with_schema_ratio=0.2)
    assert abs(sum("schema" in e.message for e in few.events) / 1000 - 0.2) < 0.05


def test_decimals_are_base64_with_schema_and_without(decoded: list[Decoded]) -> None:
    # Debezium's default decimal.handling.mode=precise, in both envelope forms.
    forms: set[tuple[bool, type]] = set()
    for d in decoded:
        if d.envelope.table != "order_lines" or d.projected.op == "d":
            continue
        raw = d.payload["after"]["price"]
        wrapped = "schema" in d.envelope.message
        forms.add((wrapped, type(raw)))
        assert d.projected.after is not None
        assert encode_decimal(d.projected.after["price"], 2) == raw
    assert forms == {(True, str), (False, str)}


@pytest.mark.parametrize(
    "value",
    ["0.00", "1.27", "1.28", "-1.28", "-1.29", "2.55", "-0.01", "99999999.99", "-99999999.99"]
    + ["1234567890123456789012345678901234.5678"],
)
def test_encode_decimal_round_trips_in_minimal_bytes(value: str) -> None:
    number = Decimal(value)
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    unscaled = (-1) ** sign * int("".join(map(str, digits)))  # no context can round it
    text = encode_decimal(number, -exponent)
    assert connect_decimal(text, -exponent, "v") == number
    raw = base64.b64decode(text)
    assert int.from_bytes(raw, "big", signed=True) == unscaled
    # Java's BigInteger.toByteArray: the fewest bytes that keep the sign.
    fewest = 1
    while not -(2 ** (8 * fewest - 1)) <= unscaled < 2 ** (8 * fewest - 1):
        fewest += 1
    assert len(raw) == fewest


def test_encode_decimal_refuses_to_round() -> None:
    with pytest.raises(ValueError):
        encode_decimal(Decimal("1.005"), 2)
