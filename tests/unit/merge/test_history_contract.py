"""The history table's DDL (icetide/schema/contract/history.py): its columns, layout and
the names it quotes."""

from __future__ import annotations

from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.contract.history import META_COLUMNS, history_ddl, sort_order_sql
from icetide.schema.contract.names import TableName
from icetide.schema.file import schema_from_dict

SCHEMA = schema_from_dict(
    {
        "table": "odd table",
        "version": 3,
        "primary_key": ["the id"],
        "columns": [
            {"id": 1, "name": "the id", "type": "long", "nullable": False},
            {"id": 2, "name": "name", "type": "string"},
        ],
    }
)


def test_history_ddl_has_every_column_the_intervals_and_the_base_layout() -> None:
    table = TableName("lake", "ns", "odd table_history")
    contract = TableContract(SCHEMA, TableSettings(8, "copy-on-write"))
    ddl = history_ddl(contract, table)
    assert "`the id` BIGINT NOT NULL" in ddl and "`name` STRING" in ddl
    for column in META_COLUMNS:
        assert f"\n  {column} " in ddl
    assert "PARTITIONED BY (bucket(8, `the id`))" in ddl
    assert "'write.merge.mode'='copy-on-write'" in ddl
    assert "'icetide.schema-version'='3'" in ddl
    assert sort_order_sql(contract, table).endswith(
        "WRITE DISTRIBUTED BY PARTITION LOCALLY ORDERED BY `the id`, _from_position"
    )
