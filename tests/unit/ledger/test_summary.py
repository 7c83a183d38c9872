"""A micro-batch's summary, put together from its tables' parts (each table's share of a
batch is stored in a thread of its own, with a part of its own)."""

from __future__ import annotations

from icetide.ledger.summary import BatchSummary


def part(table: str, rows: int, dead: dict[str, list[str]]) -> BatchSummary:
    summary = BatchSummary(7)
    summary.rows[table] = rows
    for reason, ids in dead.items():
        summary.add_dead(reason, len(ids), ids, table)
    return summary


def test_parts_absorbed_count_as_if_counted_in_one_summary() -> None:
    whole = BatchSummary(7)
    whole.skipped["heartbeat"] = 2
    whole.add_dead("malformed_json", 1, ["m0"])  # unrouted, counted by the batch itself
    orders = part("orders", 5, {"bad_value": [f"o{i}" for i in range(8)]})
    orders.extra_columns["orders"] = {"note": 3}
    items = part("items", 4, {"bad_value": [f"i{i}" for i in range(6)], "too_old": ["i9"]})
    whole.absorb(orders)
    whole.absorb(items)

    assert whole.rows == {"orders": 5, "items": 4}
    assert whole.skipped == {"heartbeat": 2}
    assert whole.dead == {"malformed_json": 1, "bad_value": 14, "too_old": 1}
    assert whole.dead_by_table == {
        "": {"malformed_json": 1},
        "orders": {"bad_value": 8},
        "items": {"bad_value": 6, "too_old": 1},
    }
    # Ten samples a reason, the first part's first.
    assert whole.samples["bad_value"] == [f"o{i}" for i in range(8)] + ["i0", "i1"]
    assert whole.samples["too_old"] == ["i9"]
    assert whole.extra_columns == {"orders": {"note": 3}}
    assert whole.render().startswith("ledger batch 7: 9 events (items 4, orders 5)")
