"""A schema version reaches each table as one Iceberg commit, schema and version property
together (icetide.lake.schema_update): a reader sees the old version or the new one,
never a rename without its widening, and a crash before the commit leaves nothing.

The stages' phase 1 (the ledger's ``alter_ledger``, the merge's ``switch_base``) run on
real tables in the run's session; each table's metadata must gain exactly one schema and
one metadata commit. The REST catalog case commits base and ledger in one multi-table
commit: a conflict on either leaves both as they were.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.devservers.rest_catalog import RestCatalogServer
from icetide.lake import schema_update
from icetide.lake.alter import apply_version, table_properties
from icetide.lake.tables import ensure_namespace, iceberg_table
from icetide.ledger.phases import alter_ledger
from icetide.merge.phases import merge_version, switch_base
from icetide.schema.contract import ledger as c
from icetide.schema.contract.alter import alter_plan
from icetide.schema.contract.builder import TableContract
from icetide.schema.contract.names import TableName
from icetide.schema.contract.update import SchemaOp, TableUpdate, version_update
from icetide.schema.file import schema_from_dict
from icetide.schema.quoting import qualified
from tests.integration.events import ITEMS
from tests.integration.harness import Pipeline, killed_at

V2 = schema_from_dict(
    {
        "table": "items",
        "version": 2,
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "long", "nullable": False},
            {"id": 2, "name": "title", "type": "string"},  # renamed from name
            {"id": 3, "name": "qty", "type": "long"},  # widened from int
            {"id": 4, "name": "note", "type": "string"},  # added
        ],
    }
)

V2_COLUMNS = ["id bigint", "title string", "qty bigint", "note string"]


def metadata(spark: SparkSession, table: TableName) -> tuple[list[int], int, int]:
    """The table's schema ids, its current schema id and how many metadata files came
    before the current one (one per commit)."""
    current = iceberg_table(spark, table).operations().current()
    ids = [int(s.schemaId()) for s in current.schemas()]
    return ids, int(current.currentSchemaId()), int(current.previousFiles().size())


def columns(spark: SparkSession, table: TableName, image: str | None = None) -> list[str]:
    fields = spark.table(table.sql).schema
    if image is not None:
        fields = fields[image].dataType  # type: ignore[assignment]
    return [f"{f.name} {f.dataType.simpleString()}" for f in fields.fields]


def items_pipeline(tmp_path: Path, warehouse: Path, spark: SparkSession) -> Pipeline:
    """A pipeline of ``items`` at version 1 with its three tables, version 2 recorded."""
    namespace = f"onecommit_{uuid.uuid4().hex[:8]}"
    pipe = Pipeline.custom(
        tmp_path, warehouse, namespace, {"items": ITEMS}, {"items": "x.items"}, spark
    )
    refs = pipe.refs("items")
    ensure_namespace(spark, pipe.config.catalog.name, pipe.config.catalog.namespace)
    contract = TableContract(ITEMS)
    spark.sql(contract.base_ddl(refs.base))
    spark.sql(contract.ledger_ddl(refs.cdc))
    spark.sql(TableContract.dead_letter_ddl(refs.dead_letters))
    return pipe


def test_a_version_is_one_commit_and_one_schema_on_base_and_ledger(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    pipe = items_pipeline(tmp_path, warehouse, spark)
    stages = pipe.pipeline
    stages.schemas.record("items", V2)
    refs = pipe.refs("items")
    before = {t: metadata(spark, t) for t in (refs.base, refs.cdc)}

    alter_ledger(spark, stages, "items")
    switch_base(spark, stages, "items", merge_version(spark, stages, "items").contract)

    for table in (refs.base, refs.cdc):
        ids, current, commits = metadata(spark, table)
        old_ids, old_current, old_commits = before[table]
        assert len(ids) == len(old_ids) + 1 and current not in old_ids, table
        assert commits == old_commits + 1, table  # the schema and its property: one commit
        props = table_properties(spark, table)
        assert props[c.SCHEMA_VERSION_PROPERTY] == "2"
        assert json.loads(props[schema_update.SCHEMA_IDS]) == {"2": current}
    want = V2_COLUMNS
    assert columns(spark, refs.base)[:4] == want
    assert columns(spark, refs.cdc, c.AFTER) == want
    assert columns(spark, refs.cdc, c.BEFORE) == want
    assert any("in one commit" in line for line in pipe.logs), pipe.logs

    # Run again (a second process, a restart): nothing more to do, nothing committed.
    again = {t: metadata(spark, t) for t in (refs.base, refs.cdc)}
    alter_ledger(spark, stages, "items")
    switch_base(spark, stages, "items", merge_version(spark, stages, "items").contract)
    assert {t: metadata(spark, t) for t in (refs.base, refs.cdc)} == again


def test_a_crash_before_the_commit_leaves_the_old_version_whole(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    pipe = items_pipeline(tmp_path, warehouse, spark)
    stages = pipe.pipeline
    stages.schemas.record("items", V2)
    ledger = pipe.refs("items").cdc
    before, shape = metadata(spark, ledger), columns(spark, ledger, c.AFTER)

    with killed_at(schema_update, schema_update.BEFORE_COMMIT):
        alter_ledger(spark, stages, "items")
    assert metadata(spark, ledger) == before
    assert columns(spark, ledger, c.AFTER) == shape  # not renamed, not widened, no note
    assert table_properties(spark, ledger)[c.SCHEMA_VERSION_PROPERTY] == "1"

    alter_ledger(spark, stages, "items")  # the restart takes it there in one commit
    ids, _, commits = metadata(spark, ledger)
    assert (len(ids), commits) == (len(before[0]) + 1, before[2] + 1)
    assert columns(spark, ledger, c.AFTER) == [
        "id bigint",
        "title string",
        "qty bigint",
        "note string",
    ]


def test_a_refused_operation_leaves_the_operations_before_it_unapplied(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    """Iceberg refuses the third operation after taking the rename and the widening: the
    table keeps its version whole, with no schema and no commit added."""
    pipe = items_pipeline(tmp_path, warehouse, spark)
    base = pipe.refs("items").base
    before, shape = metadata(spark, base), columns(spark, base)
    update = version_update(TableContract(ITEMS), TableContract(V2)).base
    broken = TableUpdate((update.passes[0][:2] + (SchemaOp("rename", ("missing",), name="x"),),))
    assert [op.kind for op in broken.ops] == ["rename", "widen", "rename"]

    with pytest.raises(schema_update.UpdateRefused, match="missing"):
        schema_update.commit_version(spark, base, broken, 2, {c.SCHEMA_VERSION_PROPERTY: "2"})
    assert metadata(spark, base) == before
    assert columns(spark, base) == shape
    assert table_properties(spark, base)[c.SCHEMA_VERSION_PROPERTY] == "1"


def test_a_change_an_older_release_left_part_way_is_finished_by_its_alters(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    """An older release ran the version as ALTERs, one commit each, and stopped after the
    first: Iceberg refuses the update (its rename is done: no column ``name`` left), so
    the ALTERs finish it, passing over the one that ran, and the version is recorded."""
    pipe = items_pipeline(tmp_path, warehouse, spark)
    base = pipe.refs("items").base
    old, new = TableContract(ITEMS), TableContract(V2)
    statements = [s for s in alter_plan(old, new, base, base).base if "TBLPROPERTIES" not in s]
    spark.sql(statements[0])  # the rename, by the older release

    applied = apply_version(
        spark,
        base,
        version_update(old, new).base,
        2,
        {c.SCHEMA_VERSION_PROPERTY: "2"},
        statements=lambda: statements,
        columns=new.base_columns(),
    )
    assert applied.schema_id is None and applied.operations == len(statements) - 1
    assert columns(spark, base)[:4] == V2_COLUMNS
    assert table_properties(spark, base)[c.SCHEMA_VERSION_PROPERTY] == "2"


REST = "rest_onecommit"


def test_rest_catalog_commits_base_and_ledger_together(
    s3_spark: SparkSession, rest_catalog: RestCatalogServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both tables' versions go in one multi-table commit: when the ledger changes under
    it (another writer between staging and commit), the commit is refused whole and the
    base, whose own update had nothing wrong, stays at the old version too."""
    spark = s3_spark
    for key, value in rest_catalog.spark_catalog_conf(REST).items():
        spark.conf.set(key, value)
    namespace = f"onecommit_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE NAMESPACE {qualified(REST, namespace)}")
    base = TableName(REST, namespace, "items")
    ledger = base.suffixed("_cdc")
    old, new = TableContract(ITEMS), TableContract(V2)
    spark.sql(old.base_ddl(base))
    spark.sql(old.ledger_ddl(ledger))
    update = version_update(old, new)
    version = {c.SCHEMA_VERSION_PROPERTY: "2"}
    tables = [
        schema_update.TableVersion(base, update.base, 2, version),
        schema_update.TableVersion(ledger, update.ledger, 2, version),
    ]
    before = {t: metadata(spark, t) for t in (base, ledger)}

    def another_writer(name: str) -> None:
        if name == schema_update.BEFORE_COMMIT:
            spark.sql(f"ALTER TABLE {ledger} ADD COLUMN `late` STRING")

    monkeypatch.setattr(schema_update, "crash_point", another_writer)
    with pytest.raises(Exception, match="CommitFailedException"):
        schema_update.commit_together(spark, tables, c.SCHEMA_VERSION_PROPERTY)
    assert metadata(spark, base) == before[base]
    assert table_properties(spark, base)[c.SCHEMA_VERSION_PROPERTY] == "1"
    ledger_now = metadata(spark, ledger)
    assert ledger_now[2] == before[ledger][2] + 1  # only the other writer's commit

    monkeypatch.undo()
    how = schema_update.commit_together(spark, tables, c.SCHEMA_VERSION_PROPERTY)
    assert how == "2 tables in one multi-table commit"
    for table, (ids, _current, commits) in ((base, before[base]), (ledger, ledger_now)):
        after = metadata(spark, table)
        assert (len(after[0]), after[2]) == (len(ids) + 1, commits + 1), table
        assert table_properties(spark, table)[c.SCHEMA_VERSION_PROPERTY] == "2"
    assert columns(spark, ledger, c.AFTER) == [
        "id bigint",
        "title string",
        "qty bigint",
        "note string",
    ]
    assert schema_update.commit_together(spark, tables, c.SCHEMA_VERSION_PROPERTY) == (
        "every table at the version already"
    )
