"""The sink config end to end: events of a table whose schema file maps names, overrides a
type and converts values (a hash of a sensitive column, epoch millis to a timestamp,
JSON text to a struct, a mask) go through the ledger and the merge; the Iceberg tables
have the generated names and types and the mirror holds the converted values."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession

from icetide.schema.file import schema_from_dict
from tests.integration.events import mysql
from tests.integration.harness import Pipeline

USERS = schema_from_dict(
    {
        "table": "items",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "int"},
            {"id": 2, "name": "email", "type": "string"},
            {"id": 3, "name": "created_ms", "type": "long"},
            {"id": 4, "name": "prefs", "type": "string"},
            {"id": 5, "name": "card", "type": "string"},
            {"id": 6, "name": "visits", "type": "int"},
        ],
        "sink": {
            "columns": {
                "id": {"name": "user_id", "type": "long"},
                "email": {"name": "email_sha256", "convert": "sha256"},
                "created_ms": {"name": "created_at", "convert": "epoch_millis_to_timestamp"},
                "prefs": {
                    "convert": {
                        "function": "json_text_to_struct",
                        "type": {
                            "struct": [
                                {"id": 7, "name": "theme", "type": "string"},
                                {"id": 8, "name": "size", "type": "int"},
                            ]
                        },
                    }
                },
                "card": {"name": "card_last4", "convert": {"function": "mask", "keep": 4}},
                "visits": {"type": "long"},
            }
        },
    }
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_mapped_overridden_and_converted_columns_reach_the_mirror(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    pipe = Pipeline.custom(
        tmp_path, warehouse, "sink_config", {"items": USERS}, {"items": "shop.items"}, spark
    )
    ann = {
        "id": 1,
        "email": "ann@example.com",
        "created_ms": 1_700_000_000_123,
        "prefs": '{"theme": "dark", "size": 2}',
        "card": "4111222233334444",
        "visits": 3,
    }
    bob = {**ann, "id": 2, "email": "bob@example.com", "prefs": None, "card": "12"}
    pipe.land(
        [
            mysql("c", 100, after=ann),
            mysql("c", 110, after=bob),
            mysql(
                "u",
                120,
                before=ann,
                after={
                    **ann,
                    "email": "ann@new.example",
                    "visits": 4,
                    "prefs": '{"theme": "light"}',
                },
            ),
            mysql("d", 130, before=bob),
            mysql("c", 140, after={**ann, "id": 3, "prefs": "{oops"}),  # not JSON
        ]
    )
    pipe.stream()
    pipe.merge()

    refs = pipe.refs("items")
    types = {f.name: f.dataType.simpleString() for f in spark.table(refs.base.sql).schema}
    assert types == {
        "user_id": "bigint",
        "email_sha256": "string",
        "created_at": "timestamp",
        "prefs": "struct<theme:string,size:int>",
        "card_last4": "string",
        "visits": "bigint",
        "_icetide_position": "decimal(38,0)",
        "_icetide_source_ts": "timestamp",
    }
    ledger_after = spark.table(refs.cdc.sql).schema["_after"].dataType.simpleString()
    assert ledger_after.startswith("struct<user_id:bigint,email_sha256:string,created_at:")

    [row] = pipe.rows(refs.base, order="user_id")
    assert row["user_id"] == 1
    assert row["email_sha256"] == sha("ann@new.example")
    assert row["created_at"].astimezone(UTC) == datetime(
        2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC
    )
    assert row["prefs"] == {"theme": "light", "size": None}
    assert row["card_last4"] == "************4444"
    assert row["visits"] == 4
    [dead] = pipe.dead_letters(refs.dead_letters)
    assert dead["reason"] == "conversion_failed"
    assert "column prefs of table items" in dead["error"] and "{oops" in dead["payload"]
