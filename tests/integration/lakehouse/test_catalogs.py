"""icetide's stages on each kind of catalog and storage: a Hadoop catalog on a local
folder, the REST catalog with its tables on the object store, and Iceberg's JDBC catalog
on PostgreSQL with its tables on the object store.

Each catalog is configured by its example in docs/deploy.md, as written there (only
its name and namespace are the test's own, and its ``${VAR}`` values point at the run's
servers), and added to the run's Spark session at runtime with the settings icetide's
session factory derives from it: no new JVM. PyIceberg, a second client, reads every
table back through the same catalog (on the Hadoop catalog, from the metadata file the
catalog names) and sees what Spark sees.
"""

from __future__ import annotations

import itertools
import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyarrow import fs
from pyiceberg.catalog import load_catalog
from pyiceberg.table import StaticTable, Table
from pyspark.sql import SparkSession

from icetide.artifacts.refresh import ViewChanged
from icetide.artifacts.workspace import refresher, sync_catalog_views
from icetide.config import load_config, load_table_schemas
from icetide.config.sections import SourceConfig
from icetide.devservers.objectstore import ObjectStoreServer
from icetide.devservers.relay import CountingRelay, difference
from icetide.devservers.rest_catalog import RestCatalogServer
from icetide.evolution.apply import apply_plan
from icetide.evolution.plan import build_plan
from icetide.lake.progress import read_watermark
from icetide.lake.tables import current_snapshot_id, iceberg_table, table_exists
from icetide.ledger.phases import retire_ledger
from icetide.ledger.replay import replay
from icetide.maintenance.run import maintain_table
from icetide.merge.stage import MergeResult, MergeStage
from icetide.merge.strategy import staging_table
from icetide.observe.status import pipeline_status
from icetide.observe.verify import run_verify
from icetide.pipeline import Pipeline as StagePipeline
from icetide.pipeline import SchemaStore
from icetide.schema.contract.base import WATERMARK_PROPERTY
from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.contract.ledger import MESSAGE_ID
from icetide.schema.contract.names import TableName
from icetide.schema.file import dump_schema_file, schema_from_dict
from icetide.schema.model import TableSchema
from icetide.spark.session import spark_conf
from tests.deploy_examples import documented_catalogs
from tests.devservers.postgres import PostgresServer
from tests.integration import events
from tests.integration.harness import Pipeline, run_sql, with_merge_strategy

CATALOG_DB = "icetide_catalog"
"""The PostgreSQL database that holds the JDBC catalog's own tables."""
ITEMS = {
    "table": "items",
    "primary_key": ["id"],
    "columns": [
        {"id": 1, "name": "id", "type": "int", "nullable": False},
        {"id": 2, "name": "name", "type": "string", "nullable": False},
        {"id": 3, "name": "qty", "type": "long"},
    ],
}
_catalogs = itertools.count(1)


@dataclass
class Lake:
    """One catalog and the storage under it, as a test reaches them."""

    kind: str
    spark: SparkSession
    pyiceberg: dict[str, str] | None
    """``load_catalog`` properties of the same catalog (None: the Hadoop catalog, which
    PyIceberg reads through the metadata file it names)."""
    store: ObjectStoreServer | None = None

    def files(self, location: str) -> set[str]:
        """Every file under a table's ``location``, as the storage lists it."""
        if self.store is None:
            return {str(p) for p in Path(local(location)).rglob("*") if p.is_file()}
        s3 = self.store.endpoint.filesystem()
        selector = fs.FileSelector(location.removeprefix("s3://"), recursive=True)
        infos = s3.get_file_info(selector)
        return {f"s3://{i.path}" for i in infos if i.type == fs.FileType.File}

    def put(self, location: str, data: bytes) -> None:
        """Write a file no table knows of at ``location``."""
        if self.store is None:
            Path(local(location)).write_bytes(data)
            return
        with self.store.endpoint.filesystem().open_output_stream(
            location.removeprefix("s3://")
        ) as out:
            out.write(data)

    def table(self, name: TableName) -> Table:
        """``name`` as PyIceberg loads it through the catalog."""
        if self.pyiceberg is None:
            loaded = iceberg_table(self.spark, name)
            return StaticTable.from_metadata(loaded.operations().current().metadataFileLocation())
        catalog = load_catalog(name.catalog, **self.pyiceberg)
        return catalog.load_table((name.namespace, name.name))


@pytest.fixture(scope="module")
def jdbc_database(postgres: PostgresServer) -> str:
    """A database of the run's PostgreSQL for the JDBC catalog's tables."""
    postgres.create_database(CATALOG_DB)
    return CATALOG_DB


@pytest.fixture(params=["hadoop", "rest", "jdbc"])
def lake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lake]:
    """The catalog of ``request.param``, its documented ``${VAR}`` values set to the run's
    servers; the object store and the catalog servers start only for the kinds that use
    them."""
    kind = request.param
    if kind == "hadoop":
        yield Lake(kind, request.getfixturevalue("spark"), None)
        return
    spark: SparkSession = request.getfixturevalue("s3_spark")
    store: ObjectStoreServer = request.getfixturevalue("object_store")
    endpoint = store.endpoint
    env = {
        "ICETIDE_S3_ENDPOINT": endpoint.url,
        "ICETIDE_S3_ACCESS_KEY": endpoint.access_key,
        "ICETIDE_S3_SECRET_KEY": endpoint.secret_key,
    }
    if kind == "rest":
        server: RestCatalogServer = request.getfixturevalue("rest_catalog")
        env["ICETIDE_CATALOG_URI"] = server.url
        pyiceberg = server.pyiceberg_properties()
    else:
        postgres: PostgresServer = request.getfixturevalue("postgres")
        database = request.getfixturevalue("jdbc_database")
        env["ICETIDE_CATALOG_URI"] = f"jdbc:postgresql://127.0.0.1:{postgres.port}/{database}"
        env["ICETIDE_CATALOG_USER"] = postgres.user
        env["ICETIDE_CATALOG_PASSWORD"] = "unused-the-test-server-trusts-loopback"
        pyiceberg = {
            "type": "sql",
            "uri": f"postgresql+psycopg2://{postgres.user}@127.0.0.1:{postgres.port}/{database}",
            **endpoint.pyiceberg_properties(),
        }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    yield Lake(kind, spark, pyiceberg, store)


def lake_pipeline(
    root: Path,
    lake: Lake,
    schema: TableSchema,
    source: str,
    table_settings: dict[str, Any] | None = None,
    **extra: Any,
) -> Pipeline:
    """A pipeline of one table (``schema``, captured from ``source``, with
    ``table_settings`` added to its entry) whose catalog is docs/deploy.md's example for
    ``lake``, added to the running session with the settings icetide derives from it.
    Written to the config file, so a child ``icetide`` process runs the same pipeline."""
    catalog = dict(documented_catalogs()[lake.kind])
    number = next(_catalogs)
    catalog["name"] = f"lake_{lake.kind}_{number}"
    catalog["namespace"] = f"cat{number}_{uuid.uuid4().hex[:6]}"
    dump_schema_file(schema, root / "schemas" / f"{schema.table}.yaml")
    table = {
        "name": schema.table,
        "source": source,
        "schema": f"schemas/{schema.table}.yaml",
        "buckets": 2,
        "mode": "merge-on-read",
        **(table_settings or {}),
    }
    doc = {
        "pipeline": "catalogs",
        "state_dir": "./state",
        "catalog": catalog,
        "spark": {"master": "local[2]", "shuffle_partitions": 4},
        "transport": {"type": "files", "path": "./landing"},
        "tables": [table],
        **extra,
    }
    path = root / "icetide.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    config = load_config(path)
    prefix = f"spark.sql.catalog.{config.catalog.name}"
    for key, value in spark_conf(config).items():
        if key == prefix or key.startswith(prefix + "."):
            lake.spark.conf.set(key, value)
    return Pipeline(root, path, config, load_table_schemas(config), lake.spark)


def event(op: str, key: int, name: str | None, pos: int) -> str:
    """A Debezium row event of ``inv.items`` at binlog position ``pos``."""
    row = {"id": key, "name": name, "qty": key * 10}
    return json.dumps(
        {
            "before": None if op == "c" else {"id": key, "name": "old", "qty": 0},
            "after": None if op == "d" else row,
            "source": {"name": "shop", "db": "inv", "table": "items", "file": "b.1", "pos": pos},
            "op": op,
            "ts_ms": pos,
        }
    )


def local(location: str) -> str:
    """A location as a local path where it is one (the Hadoop catalog writes both forms:
    a table location without a scheme, data files as ``file:`` URIs)."""
    return location.removeprefix("file:")


def live_files(table: Table) -> set[str]:
    """Every file ``table``'s metadata reaches: its metadata file, each snapshot's
    manifest list, manifests, and the data and delete files they hold."""
    files = {table.metadata_location}
    for snapshot in table.metadata.snapshots:
        files.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            files.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                files.add(entry.data_file.file_path)
    return {local(f) for f in files}


def items(table: Table) -> list[tuple[Any, ...]]:
    """``(id, name, qty)`` of every row, by id, as PyIceberg reads them."""
    arrow = table.scan(selected_fields=("id", "name", "qty")).to_arrow().sort_by("id")
    return list(zip(*(arrow[c].to_pylist() for c in ("id", "name", "qty")), strict=True))


def spark_items(p: Pipeline, table: TableName) -> list[tuple[Any, ...]]:
    return [(r["id"], r["name"], r["qty"]) for r in p.rows(table, order="id")]


def test_stages_commit_maintain_verify_and_report_through_the_catalog(
    tmp_path: Path, lake: Lake, postgres: PostgresServer
) -> None:
    aggressive: dict[str, Any] = {
        "maintenance": {"snapshots": {"max_age": "1ms", "keep_last": 1}},
        "merge": {"tombstone_retention": "1ms"},
    }
    p = lake_pipeline(tmp_path, lake, schema_from_dict(ITEMS), "inv.items", **aggressive)
    spark = p.session
    refs = p.refs("items")
    unrouted = p.refs(p.config.dead_letter.unrouted_table).dead_letters

    # Round one: three rows, one with a NULL in a required column (a dead letter), and a
    # line that is no JSON (an unrouted dead letter). The bucket join stages the batch in
    # a table of its own, created through the catalog.
    p.land([event("c", 1, "a", 1), event("c", 2, "b", 2), event("c", 3, "c", 3)])
    p.land([event("c", 4, None, 4), "{not json"])
    p.stream()
    p.config = with_merge_strategy(p.config, "bucket_join")
    [first] = MergeStage(spark, p.pipeline).run_once()
    assert first.strategy == "bucket_join", first.render()
    staging = staging_table(refs.base)
    assert table_exists(spark, staging)
    base = lake.table(refs.base)
    ledger = lake.table(refs.cdc)
    assert items(base) == spark_items(p, refs.base) == [(1, "a", 10), (2, "b", 20), (3, "c", 30)]
    # The watermark is in the merge's own snapshot, the one that added the rows, and
    # names the ledger snapshot it read up to, as the second client sees both.
    head = base.current_snapshot()
    assert head is not None and head.summary is not None
    assert int(head.summary["added-records"]) == 3
    assert head.summary[WATERMARK_PROPERTY] == str(ledger.current_snapshot().snapshot_id)
    assert read_watermark(spark, refs.base) == current_snapshot_id(spark, refs.cdc)
    if lake.store is not None:  # every table on the object store, under the warehouse
        for table in (refs.base, refs.cdc, refs.dead_letters, staging, unrouted):
            loaded = lake.table(table)
            assert loaded.metadata.location.startswith("s3://warehouse/"), loaded.location()
            assert live_files(loaded) <= lake.files(loaded.metadata.location), table
    assert [r["reason"] for r in p.dead_letters(refs.dead_letters)] == ["null_in_required"]
    assert [r["reason"] for r in p.dead_letters(unrouted)] == ["malformed_json"]

    # Round two, newer than the base: delete_insert writes the batch's deletes and
    # rows on a branch and fast-forwards main to it, so main moves once.
    p.land([event("u", 1, "A", 5), event("d", 2, None, 6), event("c", 5, "e", 7)])
    p.stream()
    p.config = with_merge_strategy(p.config, "delete_insert")
    before = base.current_snapshot().snapshot_id
    [second] = MergeStage(spark, p.pipeline).run_once()
    assert second.strategy == "delete_insert", second.render()
    base = lake.table(refs.base)
    head = base.current_snapshot()
    parent = base.snapshot_by_id(head.parent_snapshot_id)
    assert parent is not None and parent.parent_snapshot_id == before
    heads = [entry.snapshot_id for entry in base.metadata.snapshot_log]
    assert heads[-2:] == [before, head.snapshot_id] and parent.snapshot_id not in heads
    ledger_head = lake.table(refs.cdc).current_snapshot().snapshot_id
    assert head.summary[WATERMARK_PROPERTY] == str(ledger_head)
    rows = [(1, "A", 10), (3, "c", 30), (5, "e", 50)]
    assert items(base) == spark_items(p, refs.base) == rows

    # The fix: name becomes optional, an ALTER of the base and the ledger through the
    # catalog; then the dead letter is replayed into the ledger (for the next merge).
    store = SchemaStore(p.config)
    old = store.current("items")
    optional = [c if c.name != "name" else type(c)(c.id, c.name, c.type, True) for c in old.columns]
    plan = build_plan(old, old.with_columns(optional, version=2), base=refs.base, ledger=refs.cdc)
    apply_plan(plan, store, run_ddl=run_sql(spark))
    p.schemas = store.all()
    assert not lake.table(refs.base).schema().find_field("name").required
    assert not lake.table(refs.cdc).schema().find_field("_after.name").required
    assert replay(spark, p.pipeline, "items").applied == ["events-000002.json:1"]
    assert p.rows(refs.dead_letters) == []

    # Maintenance: a file no snapshot references, under the base's data prefix, is
    # removed; every file any table of the pipeline still reaches stays; the tables read
    # the same.
    orphan = f"{base.metadata.location.rstrip('/')}/data/orphan-{uuid.uuid4().hex}.parquet"
    lake.put(orphan, b"not a table's file")
    tables = (refs.base, refs.cdc, refs.dead_letters, staging, unrouted)
    ledger_rows = p.rows(refs.cdc, order=MESSAGE_ID)
    unrouted_rows = p.rows(unrouted, order="message_id")
    assert orphan in lake.files(base.metadata.location)
    result = maintain_table(
        spark, p.pipeline, "items", orphans_older_than=datetime.now(UTC) + timedelta(seconds=2)
    )
    assert orphan not in lake.files(base.metadata.location)
    # (A loaded machine may leave more: a commit attempt that lost a race leaves files
    # of its own that nothing references.)
    assert result.part("base").orphans_removed >= 1, result.render()
    assert result.part("base").expired_snapshots > 0, result.render()
    assert result.part("base").after.data_files < result.part("base").before.data_files
    for table in tables:
        loaded = lake.table(table)
        assert live_files(loaded) <= lake.files(loaded.metadata.location), table
    assert items(lake.table(refs.base)) == spark_items(p, refs.base) == rows
    assert p.rows(refs.cdc, order=MESSAGE_ID) == ledger_rows
    assert p.rows(unrouted, order="message_id") == unrouted_rows

    # Status reads every table through the catalog: nothing left to merge.
    [status] = pipeline_status(spark, p.config).tables
    # The replayed event waits for the next merge.
    assert (status.base_rows, status.lag_events, status.dead_letters) == (3, 1, 0)
    assert status.ledger_events == 7
    assert status.watermark == read_watermark(spark, refs.base)
    assert status.merge_strategy is not None and status.merge_strategy.startswith("delete_insert")

    # Verify reads the base through the catalog and the source database beside it.
    database = f"src_{p.config.catalog.namespace}"
    postgres.create_database(database)
    postgres.execute(
        "CREATE SCHEMA inv; CREATE TABLE inv.items (id int PRIMARY KEY, name text, qty bigint);"
        "INSERT INTO inv.items VALUES (1, 'A', 10), (3, 'c', 30), (5, 'e', 50)",
        database,
    )
    source = SourceConfig(
        name="shop",
        type="postgres",
        port=postgres.port,
        user=postgres.user,
        database=database,
        tables=("items",),
    )
    checked = StagePipeline(p.config.model_copy(update={"sources": (source,)}), p.schemas)
    [verdict] = run_verify(checked, spark)
    assert verdict.matches and verdict.base_rows == verdict.source_rows == 3, verdict

    # A change no ALTER expresses keeps the ledger as a generation: a catalog that renames
    # tables renames it (the same table, its files where they were); the Hadoop catalog
    # cannot, and copies it.
    ledger_uuid = lake.table(refs.cdc).metadata.table_uuid
    ledger_rows = p.rows(refs.cdc, order=MESSAGE_ID)
    generation = retire_ledger(spark, refs.cdc)
    assert not table_exists(spark, refs.cdc)
    assert p.rows(generation, order=MESSAGE_ID) == ledger_rows
    renamed = lake.table(generation).metadata.table_uuid == ledger_uuid
    assert renamed == (lake.kind != "hadoop")


TABLE_LOAD = "GET /v1/namespaces/{}/tables/{}"
"""A table load through the REST catalog, as :class:`CountingRelay` counts it."""


@pytest.mark.parametrize("lake", ["rest"], indirect=True)
def test_a_merge_loads_each_table_from_the_rest_catalog_a_bounded_number_of_times(
    tmp_path: Path, lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every table load is a round trip to a REST catalog, and icetide's catalogs cache
    none, so the loads of a merge bound how fast a round of many tables goes. Counted
    behind a relay: a bucket-join merge of a batch loads the ledger and the base once
    each before its MERGE (the stage's own reads), the ledger once more for Spark's read
    of the batch, the staging table once, the base once after the commit for the race
    check; the rest are Spark's and Iceberg's own (the MERGE's and the staging
    overwrite's analysis, scans and commit refreshes). A visit with nothing to merge
    loads three times."""
    with CountingRelay(os.environ["ICETIDE_CATALOG_URI"]) as relay:
        monkeypatch.setenv("ICETIDE_CATALOG_URI", relay.url)
        p = lake_pipeline(tmp_path, lake, schema_from_dict(ITEMS), "inv.items")
        p.config = with_merge_strategy(p.config, "bucket_join")
        p.land([event("c", 1, "a", 1), event("c", 2, "b", 2), event("c", 3, "c", 3)])
        p.stream()
        p.merge()  # creates the base and the staging table
        p.land([event("u", 1, "A", 5), event("d", 2, None, 6), event("c", 5, "e", 7)])
        p.stream()

        def loads(merge: Callable[[], list[MergeResult]]) -> tuple[MergeResult, int]:
            before = relay.snapshot()
            [result] = merge()
            return result, difference(relay.snapshot(), before).get(TABLE_LOAD, (0, 0.0))[0]

        merged, batch_loads = loads(p.merge)
        idle, idle_loads = loads(p.merge)
    assert (merged.strategy, merged.events) == ("bucket_join", 3), merged.render()
    assert idle.events == 0, idle.render()
    assert spark_items(p, p.refs("items").base) == [(1, "A", 10), (3, "c", 30), (5, "e", 50)]
    assert batch_loads <= 16, batch_loads
    # The ledger, the base, and the base's properties for phase 3.
    assert idle_loads <= 3, idle_loads


@pytest.mark.parametrize("lake", ["rest"], indirect=True)
def test_a_key_change_merged_apart_takes_its_values_from_a_snapshot_read_back_in_time(
    tmp_path: Path, lake: Lake
) -> None:
    """PostgreSQL's key change under REPLICA IDENTITY DEFAULT: the old key's delete is
    merged, its new key's create (without the unchanged TOASTed body) comes a merge
    later, and the body is read from the base as of before the delete, a snapshot the
    catalog still holds."""
    p = lake_pipeline(tmp_path, lake, events.DOCS, events.SOURCES["docs"])
    body = "body " + "x" * 3000
    for lines in (
        [events.postgres("c", 0x100, after={"id": 22, "title": "t", "body": body})],
        [events.postgres("d", 0x200, before={"id": 22})],
        [events.postgres("c", 0x200, after={"id": 23, "title": "t", "body": events.TOAST})],
    ):
        p.land(lines)
        p.stream()
        p.merge()
    base = p.refs("docs").base
    assert [(r["id"], r["title"], r["body"]) for r in p.base("docs")] == [(23, "t", body)]
    arrow = lake.table(base).scan().to_arrow()
    assert (arrow["id"].to_pylist(), arrow["body"].to_pylist()) == ([23], [body])
    assert p.rows(p.refs("docs").dead_letters) == []


@pytest.mark.parametrize("lake", ["rest", "jdbc"], indirect=True)
def test_views_become_iceberg_views_that_spark_sql_reads_from_the_catalog(
    tmp_path: Path, lake: Lake
) -> None:
    p = lake_pipeline(tmp_path, lake, schema_from_dict(ITEMS), "inv.items")
    spark = p.session
    base = p.refs("items").base
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{base.catalog}`.`{base.namespace}`")
    spark.sql(TableContract(p.schemas["items"], TableSettings(2, "merge-on-read")).base_ddl(base))
    spark.sql(
        f"INSERT INTO {base.sql} VALUES (1, 'a', 10, 0, current_timestamp()), "
        "(2, 'b', 20, 0, current_timestamp()), (3, 'c', 30, 0, current_timestamp())"
    )
    r = refresher(p.pipeline, publish=False)
    r.adopt_tables(["items"])
    # A view over a view: the catalog gets them in that order, each naming what it reads
    # in full (the bare names mean nothing to another engine).
    r.refresh(ViewChanged("Big", "SELECT id, qty FROM items WHERE qty > 15"))
    r.refresh(ViewChanged("big_names", "SELECT i.name, b.qty FROM BIG b JOIN items i USING (id)"))
    assert sync_catalog_views(p.pipeline, spark) == ["Big", "big_names"]
    names = TableName(base.catalog, base.namespace, "big_names")
    rows = spark.sql(f"SELECT name, qty FROM {names.sql} ORDER BY qty").collect()
    assert [(r["name"], r["qty"]) for r in rows] == [("b", 20), ("c", 30)]
    # SHOW VIEWS lists the session's temporary views too (other tests' in this session).
    listed = {
        r["viewName"]
        for r in spark.sql(f"SHOW VIEWS IN `{base.catalog}`.`{base.namespace}`").collect()
        if not r["isTemporary"]
    }
    assert listed == {"Big", "big_names"}
    if lake.pyiceberg is not None and lake.kind == "rest":
        # PyIceberg 0.12's SQL catalog has no list_views; its REST client has.
        catalog = load_catalog(base.catalog, **lake.pyiceberg)
        assert {v[-1] for v in catalog.list_views(base.namespace)} == {"Big", "big_names"}
    # Altered in the registry, the view is replaced in the catalog.
    r.refresh(ViewChanged("Big", "SELECT id, qty FROM items WHERE qty > 25"))
    sync_catalog_views(p.pipeline, spark)
    rows = spark.sql(f"SELECT name FROM {names.sql}").collect()
    assert [r["name"] for r in rows] == ["c"]
