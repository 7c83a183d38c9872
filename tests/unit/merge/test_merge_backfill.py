"""Which added columns phase 3 reads back from the source by key (no JVM)."""

from __future__ import annotations

from icetide.merge.backfill import source_valued_columns
from icetide.merge.converge import new_columns
from icetide.schema.file import schema_from_dict

BEFORE = schema_from_dict(
    {
        "table": "t",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "int"},
            {"id": 2, "name": "label", "type": "string"},
        ],
    }
)


def test_computed_defaults_and_implicit_values_are_read_back_constants_are_not() -> None:
    after = schema_from_dict(
        {
            "table": "t",
            "version": 2,
            "primary_key": ["id"],
            "columns": [
                {"id": 1, "name": "id", "type": "int"},
                {"id": 2, "name": "title", "type": "string"},
                {"id": 3, "name": "flag", "type": "int", "default": 7},
                {"id": 4, "name": "made", "type": "string", "default": {"sql": "uuid()"}},
                {"id": 5, "name": "note", "type": "string"},
                {"id": 6, "name": "n", "type": "int", "nullable": False},
                {"id": 7, "name": "hidden", "type": "string", "default": {"sql": "uuid()"}},
            ],
            "sink": {"columns": {"hidden": {"convert": "sha256"}}},
        }
    )
    assert [c.name for c in source_valued_columns(after, BEFORE)] == ["made", "n"]
    # phase 3's fill from _rescued: every added column, and the renamed one
    assert [c.name for c in new_columns(after, BEFORE)] == [
        "title",
        "flag",
        "made",
        "note",
        "n",
        "hidden",
    ]
