"""Every golden ALTER plan runs on real Iceberg tables and lands where CREATE would.

For each non-refused case of ``tests/unit/schema/golden/alter.yaml``: create the base
and ledger from the old schema, run the plan, and compare the tables' schemas with
tables created fresh from the new schema. A soft-dropped column is the one allowed
difference: it stays, carrying the "dropped" comment. The same version as one Iceberg
schema update per table (:mod:`icetide.lake.schema_update`, the form the stages apply)
lands there too, in one commit adding one schema (none when it changes no column).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import SparkSession

from icetide.lake.schema_update import commit_version
from icetide.lake.tables import iceberg_table
from icetide.schema.contract.alter import alter_plan
from icetide.schema.contract.base import DROPPED_COMMENT
from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.contract.names import TableName
from icetide.schema.contract.update import version_update
from icetide.schema.file import schema_from_dict
from tests.unit.schema.test_contract_golden import ALTER, SCHEMAS, slug

CASES = [case for case in ALTER if "error" not in case]
DROPPED = DROPPED_COMMENT.split("{")[0]


def _shape(spark: SparkSession, table: TableName) -> tuple[list[Any], list[str]]:
    """The table's fields without soft-dropped ones (and comments), and the dropped paths."""
    dropped: list[str] = []

    def strip(field: dict[str, Any], path: str) -> dict[str, Any] | None:
        if DROPPED in field.get("metadata", {}).get("comment", ""):
            dropped.append(path)
            return None
        kind = field["type"]
        if isinstance(kind, dict) and kind.get("type") == "struct":
            fields = [strip(f, f"{path}.{f['name']}") for f in kind["fields"]]
            kind = {**kind, "fields": [f for f in fields if f is not None]}
        return {"name": field["name"], "type": kind, "nullable": field["nullable"]}

    schema = json.loads(spark.table(table.sql).schema.json())
    kept = [strip(f, f["name"]) for f in schema["fields"]]
    return [f for f in kept if f is not None], dropped


@pytest.mark.parametrize("case", CASES, ids=[slug(c["name"]) for c in CASES])
def test_a_golden_alter_plan_takes_the_tables_where_create_would(
    spark: SparkSession, case: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    namespace = "alter_" + slug(case["name"]).replace("-", "_")[:40]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `lake`.`{namespace}`")
    old = TableContract(schema_from_dict(SCHEMAS[case["from"]]), TableSettings(2))
    new = TableContract(schema_from_dict(case["to"]), TableSettings(2))
    base, fresh = TableName("lake", namespace, "t"), TableName("lake", namespace, "fresh")
    one = TableName("lake", namespace, "one")
    for contract, table in ((old, base), (new, fresh), (old, one)):
        spark.sql(contract.base_ddl(table))
        spark.sql(contract.ledger_ddl(table.suffixed("_cdc")))
    plan = alter_plan(old, new, base, base.suffixed("_cdc"), case.get("drop", "soft"))
    for statement in (*plan.base, *plan.ledger):
        spark.sql(statement)

    dropped_ids = {ch.field_id for ch in plan.changes if ch.kind == "drop"}
    soft = case.get("drop", "soft") == "soft" and dropped_ids
    for altered, created in ((base, fresh), (base.suffixed("_cdc"), fresh.suffixed("_cdc"))):
        got, dropped = _shape(spark, altered)
        want, _ = _shape(spark, created)
        assert got == want, (case["name"], altered)
        assert bool(dropped) == bool(soft), dropped
    props = spark.sql(f"SHOW TBLPROPERTIES {base}").collect()
    version = {r.key: r.value for r in props}["icetide.schema-version"]
    assert version == str(new.schema.version)

    update = version_update(old, new, case.get("drop", "soft"))
    recorded = {"icetide.schema-version": str(new.schema.version)}
    for table, ops in ((one, update.base), (one.suffixed("_cdc"), update.ledger)):
        before = iceberg_table(spark, table).operations().current()
        commit_version(spark, table, ops, new.schema.version, recorded)
        after = iceberg_table(spark, table).operations().current()
        assert after.previousFiles().size() == before.previousFiles().size() + 1
        added = after.schemas().size() - before.schemas().size()
        assert added == (1 if ops else 0), (case["name"], table, added)
    for updated, created in ((one, fresh), (one.suffixed("_cdc"), fresh.suffixed("_cdc"))):
        got, dropped = _shape(spark, updated)
        want, _ = _shape(spark, created)
        assert got == want, (case["name"], updated)
        assert bool(dropped) == bool(soft), dropped
