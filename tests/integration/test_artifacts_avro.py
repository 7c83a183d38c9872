"""A table's Avro schema against the real base table: records read from the Iceberg table
(written by Spark) round-trip through fastavro with that schema; casing, enums,
nullability and namespace as the schema file says; the literal lands as the table
property ``avro.schema.literal`` (quoted: the docs hold quotes) once."""

from __future__ import annotations

import io
import json
from pathlib import Path

import fastavro
import pytest
from pyspark.sql import SparkSession

from icetide.artifacts.codegen import avro_schema
from icetide.artifacts.properties import PROPERTY, set_avro_literal
from icetide.artifacts.runtime import read_iceberg, table_metadata
from icetide.artifacts.shape import Naming
from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.contract.names import TableName
from icetide.schema.convert.avro import avro_datum
from icetide.schema.file import schema_from_dict
from tests.integration.harness import Pipeline

USERS = schema_from_dict(
    {
        "table": "users",
        "primary_key": ["Id"],
        "columns": [
            {"id": 1, "name": "Id", "type": "long", "nullable": False, "doc": "the user's key"},
            {"id": 2, "name": "EMail", "type": "string"},
            {"id": 3, "name": "Status", "type": {"enum": ["new", "active"]}, "nullable": False},
            {
                "id": 4,
                "name": "Address",
                "type": {
                    "struct": [
                        {"id": 5, "name": "City", "type": "string", "nullable": False},
                        {"id": 6, "name": "Kind", "type": {"enum": ["home", "work"]}},
                    ]
                },
            },
            {"id": 7, "name": "tags", "type": {"list": {"element_id": 8, "element": "string"}}},
            {
                "id": 9,
                "name": "prefs",
                "type": {"map": {"key_id": 10, "key": "string", "value_id": 11, "value": "long"}},
            },
            {"id": 12, "name": "Balance", "type": "decimal(12,2)"},
            {"id": 13, "name": "seen_at", "type": "timestamptz"},
            {"id": 14, "name": "local_at", "type": "timestamp"},
            {"id": 15, "name": "born", "type": "date"},
            {"id": 16, "name": "wakes", "type": "time"},
            {"id": 17, "name": "ref", "type": "uuid"},
        ],
    }
)

ROWS = """
(1, 'a@x.io', 'active', named_struct('City', 'Oslo', 'Kind', 'work'), array('a', 'b'),
 map('x', 1L), 12.50, TIMESTAMP '2024-05-01 12:00:00.000001 UTC',
 TIMESTAMP_NTZ '2024-05-01 12:00:00.000002', DATE '1990-02-03', '07:30:00.000001',
 '0b5f4d2e-8a51-4d1a-9d7c-0f6c1e3a9b11', 0, TIMESTAMP '2024-05-01 00:00:00 UTC'),
(2, NULL, 'new', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0,
 TIMESTAMP '2024-05-01 00:00:00 UTC')
"""


def test_records_roundtrip_the_property_is_set_a_view_reads_and_the_run_watch_publishes(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    """One base table for the table's and a view's artifacts (one table to create)."""
    pipe = Pipeline.custom(
        tmp_path, warehouse, "artifacts_avro", {"users": USERS}, {"users": "Shop.Users"}, spark
    )
    base = pipe.refs("users").base
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `lake`.`{base.namespace}`")
    spark.sql(TableContract(USERS, TableSettings(2, "merge-on-read")).base_ddl(base))
    spark.sql(f"INSERT INTO {base.sql} VALUES {ROWS}")

    shape = Naming.from_config(pipe.config).table(USERS)
    schema = avro_schema(shape)
    parsed = fastavro.parse_schema(schema)
    assert (schema["namespace"], schema["name"]) == ("Shop", "Users")
    fields = {f["name"]: f for f in schema["fields"]}
    assert list(fields)[:4] == ["Id", "EMail", "Status", "Address"]
    assert fields["Id"]["type"] == "long" and fields["EMail"]["type"] == ["null", "string"]
    assert fields["Status"]["type"]["symbols"] == ["new", "active"]

    location = warehouse / base.namespace / "users"
    table = read_iceberg(table_metadata(str(location)), [c.name for c in USERS.columns])
    rows = sorted(table.to_pylist(), key=lambda r: r["Id"])
    assert len(rows) == 2
    data = [{c.name: avro_datum(row[c.name], c.type) for c in USERS.columns} for row in rows]
    buffer = io.BytesIO()
    fastavro.writer(buffer, parsed, data)
    buffer.seek(0)
    back = list(fastavro.reader(buffer))
    for got, want in zip(back, data, strict=True):
        got["ref"] = None if got["ref"] is None else str(got["ref"])
        assert got == want
    assert back[0]["Status"] == "active" and back[0]["Address"] == {"City": "Oslo", "Kind": "work"}
    assert back[1]["EMail"] is None and back[1]["Address"] is None

    assert set_avro_literal(spark, base, shape) is True
    assert set_avro_literal(spark, base, shape) is False  # already there: no new commit
    (row,) = spark.sql(f"SHOW TBLPROPERTIES {base.sql} ('{PROPERTY}')").collect()
    assert json.loads(row[1]) == schema
    assert "the user's key" in row[1]
    run_watch_publishes(pipe, spark, base)
    view_package_reads(pipe, spark, tmp_path)  # after: no view packages built by the watch


def view_package_reads(pipe: Pipeline, spark: SparkSession, tmp_path: Path) -> None:
    """A view's package has ``read(spark)`` like a table's ``read()``: its SQL runs over
    its inputs (a base table, a view between) in a session of its own, and the rows come
    back as the view's typed records, the enum kept."""
    import importlib
    import sys

    from icetide.artifacts.codegen import package_files
    from icetide.artifacts.refresh import TableChanged, ViewChanged
    from icetide.artifacts.workspace import refresher

    r = refresher(pipe.pipeline, publish=False)
    r.refresh(TableChanged("users", 1))
    r.refresh(ViewChanged("active", "SELECT Id, Status, Address.City AS City FROM users"))
    r.refresh(ViewChanged("active_ids", "SELECT Id, Status, City FROM active WHERE Id < 2"))
    record = r.registry.get("active_ids")
    assert record is not None and record.status == "ready"
    shape = r.view_shape(record)
    assert [kind for _name, kind, _target in shape.relations] == ["table", "view"]
    folder = tmp_path / "pkg"
    for name, text in package_files(shape, "1.0.0").items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module(shape.module)
        rows = module.read(spark)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(shape.module, None)
        sys.modules.pop(f"{shape.module}._runtime", None)
    assert [(r.Id, r.Status, r.City) for r in rows] == [(1, module.ActiveIdsStatus.active, "Oslo")]
    assert all(isinstance(r, module.ActiveIds) for r in rows)
    assert not spark.catalog.tableExists("active")  # not the caller's


def run_watch_publishes(pipe: Pipeline, spark: SparkSession, base: TableName) -> None:
    """``icetide run``'s artifacts task: a base table whose ``data-version`` moves gets
    its new package version (and Avro literal); an unmoved one gets nothing; a watch
    started after a move the artifacts missed catches up."""
    from icetide.artifacts.index import LocalIndex
    from icetide.artifacts.watch import VersionWatch
    from icetide.artifacts.workspace import index_folder
    from icetide.lake.alter import set_properties
    from icetide.schema.contract import phases
    from icetide.schema.types import Column, StringType

    set_properties(spark, base, {phases.DATA_VERSION: "1"})
    index = LocalIndex(index_folder(pipe.config))
    said: list[str] = []
    stages = pipe.pipeline  # one schema store, as in one `icetide run` process
    watch = VersionWatch(spark, stages, lambda _stage, message, **_: said.append(message))

    def versions() -> list[str]:
        return [e.version for e in index.versions("icetide-schema-shop-users")]

    assert watch.step() == [] and versions() == []  # first look: nothing moved yet

    def evolve(version: int) -> None:
        current = stages.schema("users")
        added = Column(current.last_column_id + 1, f"note{version}", StringType())
        new = current.with_columns((*current.columns, added), version=version)
        stages.schemas.record("users", new)
        set_properties(spark, base, {phases.DATA_VERSION: str(version)})

    evolve(2)
    [report] = watch.step()
    assert versions() == ["1.0.0", "1.1.0"]
    assert said and "1.1.0" in said[-1]
    (row,) = spark.sql(f"SHOW TBLPROPERTIES {base.sql} ('{PROPERTY}')").collect()
    assert [f["name"] for f in json.loads(row[1])["fields"]][-1] == "note2"
    assert watch.step() == []  # no move, no publish

    evolve(3)  # while no watch runs; a new one (a restarted run) catches up
    later = VersionWatch(spark, stages, lambda *_a, **_k: None)
    assert len(later.step()) == 1
    assert versions() == ["1.0.0", "1.1.0", "1.2.0"]


def test_the_hadoop_catalog_has_no_iceberg_views(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    """Why views live in icetide's own registry (docs/views.md): Iceberg 1.10's
    HadoopCatalog is not a view catalog. If this starts failing, Iceberg views can be
    stored in the catalog itself."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS `lake`.`artifacts_views`")
    spark.sql("CREATE TABLE IF NOT EXISTS `lake`.`artifacts_views`.`t` (id BIGINT) USING iceberg")
    with pytest.raises(Exception, match="Creating a view is not supported by catalog: lake"):
        spark.sql(
            "CREATE VIEW `lake`.`artifacts_views`.`v` AS "
            "SELECT id FROM `lake`.`artifacts_views`.`t`"
        )
