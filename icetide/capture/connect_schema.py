"""The Kafka Connect envelope schema Debezium gives a table's change events.

Every connector writes the same envelope — ``before``/``after`` images, a connector's own
``source`` block, ``op``, ``ts_ms`` and the ``transaction`` block — so it is built here once
and each reader passes its column fields and its ``source`` fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SourceField = tuple[str, str, bool]
"""``(name, Connect type, optional)`` of one field of a connector's ``source`` block."""


def envelope_schema(
    prefix: str,
    fields: Sequence[dict[str, Any]],
    source_name: str,
    source_fields: Sequence[SourceField],
) -> dict[str, Any]:
    """The envelope schema of topic ``prefix`` (``server.db.table``).

    ``fields`` are the row's Connect fields (each with its ``field`` name);
    ``source_name`` is the connector's source struct (``io.debezium.connector.mysql.Source``).
    """

    def image(name: str) -> dict[str, Any]:
        return {
            "type": "struct",
            "fields": list(fields),
            "optional": True,
            "name": f"{prefix}.Value",
            "field": name,
        }

    return {
        "type": "struct",
        "name": f"{prefix}.Envelope",
        "optional": False,
        "version": 1,
        "fields": [
            image("before"),
            image("after"),
            {
                "type": "struct",
                "name": source_name,
                "optional": False,
                "field": "source",
                "fields": [
                    {"type": kind, "optional": optional, "field": name}
                    for name, kind, optional in source_fields
                ],
            },
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
            {
                "type": "struct",
                "name": "event.block",
                "version": 1,
                "optional": True,
                "field": "transaction",
                "fields": [
                    {"type": "string", "optional": False, "field": "id"},
                    {"type": "int64", "optional": False, "field": "total_order"},
                    {"type": "int64", "optional": False, "field": "data_collection_order"},
                ],
            },
        ],
    }
