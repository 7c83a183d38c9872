"""The merge strategy choice and the MERGE statements the strategies run."""

from __future__ import annotations

import sqlglot

from icetide.merge.strategy import SMALL_BASE_ROWS, choose, staging_table
from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.contract.names import TableName
from icetide.schema.file import schema_from_dict

SCHEMA = schema_from_dict(
    {
        "table": "t",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {"id": 2, "name": "a", "type": "string"},
            {"id": 3, "name": "b", "type": "string"},
        ],
    }
)
CONTRACT = TableContract(SCHEMA, TableSettings(8, "merge-on-read"))
BASE = TableName("lake", "ns", "t")


def test_auto_shuffles_a_small_base_and_bucket_joins_a_large_one() -> None:
    assert choose("auto", SMALL_BASE_ROWS - 1, 10).strategy == "shuffle"
    big = choose("auto", 5_000_000, 50_000)
    assert big.strategy == "bucket_join_pruned"
    assert "5,000,000" in big.reason and "50,000" in big.reason


def test_auto_shuffles_a_batch_as_large_as_the_base() -> None:
    choice = choose("auto", 1_000_000, 600_000)
    assert choice.strategy == "shuffle"
    assert "600,000" in choice.reason


def test_a_configured_strategy_is_taken_as_it_is() -> None:
    assert choose("bucket_join", 10, 10_000).strategy == "bucket_join"
    assert choose("shuffle", 10**9, 10).reason == "configured"


def test_columns_not_kept_are_set_from_the_batch_alone() -> None:
    sql = CONTRACT.merge_sql(BASE, "batch", keep={"b"})
    assert "`a` = s._v2.v" in sql
    assert "`b` = CASE WHEN s._v3 IS NULL THEN t.`b` ELSE s._v3.v END" in sql
    # Without ``keep`` every column may keep its stored value (the statement as before).
    assert "CASE WHEN s._v2 IS NULL" in CONTRACT.merge_sql(BASE, "batch")
    sqlglot.parse_one(sql, read="spark")


def test_the_bucket_merge_reads_the_staging_table_and_only_touched_buckets() -> None:
    staging = staging_table(BASE)
    sql = CONTRACT.bucket_merge_sql(BASE, staging, [5, 1])
    assert f"USING {staging.sql} s" in sql
    assert "`lake`.system.bucket(8, t.`id`) IN (1, 5)" in sql
    assert "IN (" not in CONTRACT.bucket_merge_sql(BASE, staging)
    sqlglot.parse_one(sql, read="spark")
