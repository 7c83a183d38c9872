"""``icetide demo --lakehouse`` through its Python entry point, on the run's REST catalog
and object store: the live shop captured into tables that live on the store, verified
against MariaDB, read back by PyIceberg, and no key in the demo's files or lines.

The CLI starts servers of its own; this test hands the demo the session's REST catalog,
object store and MariaDB (their start is the one part the CLI adds, and
tests/unit/demo/test_demo_lakehouse.py checks what it does first). A small shop and a
one-second, slower workload keep it short: the demo still bootstraps while the shop
writes, captures every write, streams, merges, verifies.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pyarrow import fs
from pyiceberg.catalog import load_catalog
from pyspark.sql import SparkSession

from icetide.demo.lakehouse import ACCESS_KEY_ENV, SECRET_KEY_ENV, Lakehouse
from icetide.demo.live import run_live_demo
from icetide.devservers.mariadb import MariaDBServer
from icetide.devservers.objectstore import ObjectStoreServer
from icetide.devservers.rest_catalog import RestCatalogServer


def test_the_lakehouse_demo_mirrors_the_live_shop_into_tables_on_the_store(
    tmp_path: Path,
    s3_spark: SparkSession,
    rest_catalog: RestCatalogServer,
    object_store: ObjectStoreServer,
    mariadb: MariaDBServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (ACCESS_KEY_ENV, SECRET_KEY_ENV):
        monkeypatch.delenv(name, raising=False)  # the demo exports them; restored after
    namespace = f"demo_{uuid.uuid4().hex[:8]}"
    lakehouse = Lakehouse(rest_catalog.url, object_store.endpoint, rest_catalog.warehouse)
    lines: list[str] = []
    heard: set[str] = set()
    ok = run_live_demo(
        tmp_path,
        seconds=1,
        seed=5,
        log=lines.append,
        lakehouse=lakehouse,
        catalog="lakedemo",  # the run's session already has a Hadoop catalog named lake
        namespace=namespace,
        orders=600,
        secrets=heard.update,
        mariadb=mariadb,
        database=namespace,
        pause=0.05,
    )
    text = "\n".join(lines)
    assert ok, text
    assert f"demo: check: the REST catalog at {rest_catalog.url} answers" in lines
    assert (
        f"demo: check: bucket 'warehouse' on the object store at {object_store.url} is readable"
        in lines
    )
    assert s3_spark.conf.get("spark.sql.catalog.lakedemo.type") == "rest"

    # Where the tables live, said and true: the store holds each table's files.
    s3 = object_store.endpoint.filesystem()
    catalog = load_catalog("check", **rest_catalog.pyiceberg_properties())
    for table in ("customers", "orders"):
        location = f"{rest_catalog.warehouse}/{namespace}/{table}"
        assert f"demo: {table} lives in {location}" in lines
        stored = s3.get_file_info(fs.FileSelector(location.removeprefix("s3://"), recursive=True))
        assert any(info.path.endswith(".parquet") for info in stored)
        rows = catalog.load_table((namespace, table)).scan().to_arrow().num_rows
        assert f"{table} {rows:,} rows" in text  # the demo's own PyIceberg read agrees
    assert "PyIceberg reads the same tables through the REST catalog" in text
    assert f"os.environ[{SECRET_KEY_ENV!r}]" in text

    # The key: heard by the scrubber, in the owner-only env file, nowhere else.
    secret = object_store.endpoint.secret_key
    assert secret in heard
    assert secret not in text and object_store.endpoint.access_key not in text
    assert secret not in (tmp_path / "icetide.yaml").read_text()
    assert f"{SECRET_KEY_ENV}={secret}" in (tmp_path / "lakehouse.env").read_text()
