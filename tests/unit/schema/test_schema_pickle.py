"""Spark ships a table's schema to its Python workers by pickling it."""

from __future__ import annotations

import pickle

from icetide.schema.file import schema_from_dict


def test_a_schema_with_nested_types_and_sink_settings_survives_pickling() -> None:
    schema = schema_from_dict(
        {
            "table": "t",
            "version": 3,
            "primary_key": ["id"],
            "last_column_id": 9,
            "columns": [
                {"id": 1, "name": "id", "type": "long"},
                {"id": 2, "name": "tags", "type": {"list": {"element_id": 3, "element": "int"}}},
                {"id": 4, "name": "at", "type": "timestamp"},
            ],
            "sink": {"logical": {"at": "io.debezium.time.MicroTimestamp"}},
        }
    )
    copy = pickle.loads(pickle.dumps(schema))
    assert copy == schema
    assert (copy.key_ids, copy.last_column_id, copy.version) == ((1,), 9, 3)
    assert dict(copy.sink.logical) == {4: "io.debezium.time.MicroTimestamp"}
