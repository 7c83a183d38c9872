"""An event written before an ADD COLUMN, still in flight when the column arrives, holds no
value for it: projected with the new layout it keeps the stored value (like an
unchanged-TOAST one), and a NOT NULL column it predates is no reason to dead-letter it."""

from __future__ import annotations

import pytest

from icetide.errors import DecodeError
from icetide.events.envelope import decode_document
from icetide.events.model import ChangeEvent
from icetide.events.project import project_event
from icetide.schema.file import schema_from_dict

# After `ALTER TABLE t ADD COLUMN tag VARCHAR(8) NOT NULL DEFAULT 'x'`.
NOW = schema_from_dict(
    {
        "table": "t",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {"id": 2, "name": "name", "type": "string"},
            {"id": 3, "name": "tag", "type": "string", "nullable": False, "default": "x"},
        ],
    }
)
SOURCE = {"db": "shop", "table": "t", "file": "b.1", "pos": 4, "ts_ms": 1}


def _event(op: str, after: dict[str, object]) -> ChangeEvent:
    event = decode_document({"op": op, "before": None, "after": after, "source": SOURCE})
    assert isinstance(event, ChangeEvent)
    return event


def test_an_update_written_before_the_column_keeps_the_stored_value() -> None:
    projected = project_event(_event("u", {"id": 1, "name": "old write"}), NOW)
    assert projected.after is not None and projected.after["name"] == "old write"
    assert projected.unavailable == ("tag",)  # the merge keeps what the row holds


def test_an_insert_written_before_the_column_is_stored_without_it() -> None:
    projected = project_event(_event("c", {"id": 2, "name": "old insert"}), NOW)
    assert projected.after is not None and projected.after["tag"] is None
    assert projected.unavailable == ()


def test_a_null_in_a_required_column_the_event_knows_is_still_refused() -> None:
    with pytest.raises(DecodeError) as refused:
        project_event(_event("u", {"id": 1, "name": "n", "tag": None}), NOW)
    assert refused.value.reason == "null_in_required"
