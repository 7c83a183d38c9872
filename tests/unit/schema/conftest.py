"""A schema holding every column type, nested ones too (a struct in a list in a map)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema

EVERY_TYPE: dict[str, Any] = {
    "table": "everything",
    "version": 1,
    "primary_key": ["id"],
    "last_column_id": 40,
    "columns": [
        {"id": 1, "name": "id", "type": "long", "nullable": False},
        {"id": 2, "name": "flag", "type": "boolean"},
        {"id": 3, "name": "small", "type": "int"},
        {"id": 4, "name": "ratio", "type": "float"},
        {"id": 5, "name": "score", "type": "double"},
        {"id": 6, "name": "email", "type": "string", "doc": "the customer's address"},
        {"id": 7, "name": "photo", "type": "binary"},
        {"id": 8, "name": "born", "type": "date"},
        {"id": 9, "name": "opens", "type": "time"},
        {"id": 10, "name": "updated_at", "type": "timestamp"},
        {"id": 11, "name": "paid_at", "type": "timestamptz"},
        {"id": 12, "name": "token", "type": "uuid"},
        {"id": 13, "name": "extra", "type": "json"},
        {"id": 14, "name": "amount", "type": "decimal(12,2)"},
        {"id": 15, "name": "status", "type": {"enum": ["new", "paid"]}},
        {
            "id": 16,
            "name": "address",
            "type": {
                "struct": [
                    {"id": 17, "name": "city", "type": "string"},
                    {"id": 18, "name": "zip", "type": "string", "nullable": False},
                ]
            },
        },
        {"id": 19, "name": "tags", "type": {"list": {"element_id": 20, "element": "string"}}},
        {
            "id": 21,
            "name": "orders",
            "type": {
                "map": {
                    "key_id": 22,
                    "key": "string",
                    "value_id": 23,
                    "value": {
                        "list": {
                            "element_id": 24,
                            "element": {
                                "struct": [
                                    {"id": 25, "name": "sku", "type": "string"},
                                    {"id": 26, "name": "qty", "type": "int"},
                                    {
                                        "id": 27,
                                        "name": "dims",
                                        "type": {
                                            "struct": [{"id": 28, "name": "w", "type": "double"}]
                                        },
                                    },
                                ]
                            },
                        }
                    },
                }
            },
        },
        {
            "id": 29,
            "name": "scores",
            "type": {
                "map": {
                    "key_id": 30,
                    "key": "int",
                    "value_id": 31,
                    "value": "decimal(5,1)",
                    "value_nullable": False,
                }
            },
        },
        {
            "id": 32,
            "name": "matrix",
            "type": {
                "list": {
                    "element_id": 33,
                    "element": {
                        "list": {"element_id": 34, "element": "long", "element_nullable": False}
                    },
                }
            },
        },
    ],
    "sink": {"logical": {"updated_at": "io.debezium.time.MicroTimestamp"}},
}


@pytest.fixture
def every_type_data() -> dict[str, Any]:
    """:data:`EVERY_TYPE`, a fresh copy each time."""
    return copy.deepcopy(EVERY_TYPE)


@pytest.fixture
def every_type() -> TableSchema:
    """:data:`EVERY_TYPE` as a schema."""
    return schema_from_dict(EVERY_TYPE)
