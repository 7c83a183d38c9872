"""A primary-key UPDATE under REPLICA IDENTITY DEFAULT keeps the row's unchanged TOASTed
values, on the run's real PostgreSQL: pgoutput leaves them out, capture sends a delete of
the old key and a create of the new one with placeholders, and the merge fills them from
the old row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from icetide.capture.runner import run_capture
from tests.devservers.postgres import PostgresServer
from tests.integration.capture.test_postgres_pipeline import (
    assert_verified,
    catch_up,
    make_pipeline,
)
from tests.integration.harness import Pipeline

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DB = "key_toast"
DDL = """
CREATE TABLE accounts (id integer PRIMARY KEY, title text, note text, doc jsonb);
CREATE TABLE labels (id integer PRIMARY KEY, tags text[]);
-- Out of line and uncompressed: every value below is a TOAST value.
ALTER TABLE accounts ALTER COLUMN note SET STORAGE EXTERNAL,
                     ALTER COLUMN doc SET STORAGE EXTERNAL;
ALTER TABLE labels ALTER COLUMN tags SET STORAGE EXTERNAL;
"""
INSERT = """
INSERT INTO accounts
SELECT g, 'account ' || g,
       (SELECT string_agg(md5(i::text || '-' || g), '') FROM generate_series(1, 320) i),
       (SELECT jsonb_object_agg('k' || i, md5(i::text || g)) FROM generate_series(1, 300) i)
FROM generate_series(50, 60) g;
INSERT INTO labels
SELECT g, (SELECT array_agg(md5(i::text || '+' || g)) FROM generate_series(1, 200) i)
FROM generate_series(1, 2) g;
"""
SCHEMAS: dict[str, dict[str, Any]] = {
    "accounts": {
        "table": "accounts",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "int", "nullable": False},
            {"id": 2, "name": "title", "type": "string"},
            {"id": 3, "name": "note", "type": "string"},
            {"id": 4, "name": "doc", "type": "json"},
        ],
    },
    "labels": {
        "table": "labels",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "int", "nullable": False},
            {"id": 2, "name": "tags", "type": {"list": {"element_id": 3, "element": "string"}}},
        ],
    },
}


TOASTED = {"accounts": ("note", "doc"), "labels": ("tags",)}


def source_values(server: PostgresServer, table: str, key: int) -> tuple[Any, ...]:
    columns = TOASTED[table]
    [row] = server.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE id = %s", DB, [key])
    return tuple(row)


def mirror_values(pipe: Pipeline, spark: SparkSession, table: str, key: int) -> tuple[Any, ...]:
    row = spark.table(pipe.refs(table).base.sql).where(f"id = {key}").first()
    assert row is not None, f"{table} {key} is missing from the mirror"
    values = []
    for name in TOASTED[table]:
        values.append(json.loads(row[name]) if name == "doc" else row[name])
    return tuple(values)


def test_primary_key_updates_keep_unchanged_toast_values_in_one_batch_and_across_batches(
    tmp_path: Path, warehouse: Path, postgres: PostgresServer, spark: SparkSession
) -> None:
    postgres.create_database(DB)
    postgres.execute(DDL, DB)
    pipe = make_pipeline(
        tmp_path, warehouse, postgres, spark, SCHEMAS, database=DB, slot=DB, publication=DB
    )
    try:
        run_capture(pipe.config, pipe.config.sources[0], follow=False, from_now=True)
        postgres.execute(INSERT, DB)
        sizes = postgres.execute(
            "SELECT min(octet_length(note)), min(pg_column_size(doc)), "
            "(SELECT min(pg_column_size(tags)) FROM labels) FROM accounts",
            DB,
        )
        assert sizes[0][0] >= 10_000 and sizes[0][1] >= 12_000 and sizes[0][2] >= 6_000
        expected = {
            ("accounts", old): source_values(postgres, "accounts", old) for old in (50, 55, 60)
        }
        expected.update({("labels", old): source_values(postgres, "labels", old) for old in (1, 2)})
        # Inserted and moved in one batch; 55 moves twice (a chain) with an update of
        # another column in between.
        postgres.execute(
            "UPDATE accounts SET id = 900001 WHERE id = 50; "
            "UPDATE accounts SET id = 900055 WHERE id = 55; "
            "UPDATE accounts SET title = 'renamed' WHERE id = 900055; "
            "UPDATE accounts SET id = 900056 WHERE id = 900055; "
            "UPDATE labels SET id = 101 WHERE id = 1",
            DB,
        )
        catch_up(pipe)
        # Moved in a later batch: the old row is only in the mirror.
        postgres.execute(
            "UPDATE accounts SET id = 900060 WHERE id = 60; "
            "UPDATE labels SET id = 102 WHERE id = 2",
            DB,
        )
        catch_up(pipe)

        placeholders = spark.table(pipe.refs("accounts").cdc.sql).where(
            "_op = 'c' AND size(_unavailable) = 2"
        )
        assert placeholders.count() == 4  # the case under test really happened
        moves = {("accounts", 50): 900001, ("accounts", 55): 900056, ("accounts", 60): 900060}
        moves.update({("labels", 1): 101, ("labels", 2): 102})
        for (table, old), new in moves.items():
            assert mirror_values(pipe, spark, table, new) == expected[(table, old)], (table, new)
        renamed = spark.table(pipe.refs("accounts").base.sql).where("id = 900056").first()
        assert renamed is not None and renamed["title"] == "renamed"
        for table in SCHEMAS:
            assert not spark.table(pipe.refs(table).dead_letters.sql).count()
        assert_verified(pipe, spark)  # both tables, the text[] array (a list) included
    finally:
        postgres.drop_slot(DB, DB)
