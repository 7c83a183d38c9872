"""Hand-written Debezium envelopes for targeted tests (schemaless JSON, as with
``value.converter.schemas.enable=false``)."""

from __future__ import annotations

import json
from typing import Any

from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema

ITEMS = schema_from_dict(
    {
        "table": "items",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {"id": 2, "name": "name", "type": "string"},
            {"id": 3, "name": "qty", "type": "int"},
        ],
    }
)
DOCS = schema_from_dict(
    {
        "table": "docs",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "int", "nullable": False},
            {"id": 2, "name": "title", "type": "string"},
            {"id": 3, "name": "body", "type": "string"},
        ],
    }
)
SCHEMAS: dict[str, TableSchema] = {"items": ITEMS, "docs": DOCS}
SOURCES = {"items": "shop.items", "docs": "public.docs"}
TOAST = "__debezium_unavailable_value"


def mysql(
    op: str,
    pos: int,
    *,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    file: str = "mysql-bin.000003",
    row: int = 0,
    table: str = "items",
    ts_ms: int = 1_700_000_000_000,
    wrap: bool = False,
) -> str:
    """One MySQL connector event for ``shop.<table>`` at binlog ``file:pos`` row ``row``."""
    payload = {
        "before": before,
        "after": after,
        "source": {
            "version": "2.7.3.Final",
            "connector": "mysql",
            "name": "srv",
            "ts_ms": ts_ms,
            "snapshot": "false",
            "db": "shop",
            "table": table,
            "server_id": 1,
            "file": file,
            "pos": pos,
            "row": row,
        },
        "op": op,
        "ts_ms": ts_ms + 5,
        "transaction": None,
    }
    return json.dumps({"schema": None, "payload": payload} if wrap else payload)


def postgres(
    op: str,
    lsn: int,
    *,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    tx_id: int = 700,
) -> str:
    """One PostgreSQL connector event for ``public.docs`` at ``lsn``."""
    return json.dumps(
        {
            "before": before,
            "after": after,
            "source": {
                "version": "2.7.3.Final",
                "connector": "postgresql",
                "name": "pg",
                "ts_ms": 1_700_000_000_000,
                "snapshot": "false",
                "db": "shop",
                "schema": "public",
                "table": "docs",
                "txId": tx_id,
                "lsn": lsn,
            },
            "op": op,
            "ts_ms": 1_700_000_000_005,
        }
    )
