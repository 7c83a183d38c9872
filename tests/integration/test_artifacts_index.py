"""Published schema packages installed from a real index server into a fresh virtualenv.

One module-scoped ``icetide artifacts serve`` (pypiserver) and one virtualenv made by the
test (``python -m venv --system-site-packages --without-pip``: the generated package
needs pyarrow, and reading needs PyIceberg, which the venv takes from the running
interpreter's site packages rather than from PyPI, so no network is needed, and so does
pip; the schema package itself comes only from the local server, ``--index-url
http://127.0.0.1:P/simple/``). The steps build on each other, so they are one test:
version 1 installs and reads typed records from the base table; an additive change
publishes 1.1.0, ``==1.*`` picks it up and code written against 1.0 still runs; a rename
publishes 2.0.0 and ``==1.*`` stays on 1.1.0. The slow test of the artifacts work
(pip + Spark): about 20 s.

A second test reads a package's table through the run's REST catalog, its files on the
object store: ``read(catalog=...)`` with the catalog's properties, as a consumer with no
access to any warehouse folder does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from icetide.artifacts.workspace import publish_all
from icetide.devservers.ports import free_port
from icetide.devservers.rest_catalog import RestCatalogServer
from icetide.schema.contract.alter import alter_plan
from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.contract.names import TableName
from icetide.schema.file import dump_schema_file, schema_from_dict
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, StringType
from tests.integration.harness import REPO, Pipeline

PACKAGE = "icetide-schema-shop-users"
V1 = schema_from_dict(
    {
        "table": "users",
        "primary_key": ["Id"],
        "columns": [
            {"id": 1, "name": "Id", "type": "long", "nullable": False},
            {"id": 2, "name": "EMail", "type": "string"},
            {"id": 3, "name": "Status", "type": {"enum": ["new", "active"]}, "nullable": False},
            {
                "id": 4,
                "name": "Address",
                "type": {"struct": [{"id": 5, "name": "City", "type": "string"}]},
            },
        ],
    }
)

# Code written against version 1.0.0: typed fields, the enum, the nested record.
OLD_CODE = """
import dataclasses, json, sys
import icetide_schema_shop_users as users
records = sorted(users.read(sys.argv[1]), key=lambda r: r.Id)
assert all(isinstance(r, users.Users) for r in records)
assert all(isinstance(r.Status, users.UsersStatus) for r in records)
try:
    records[0].Id = 5
    raise SystemExit("records must be frozen")
except dataclasses.FrozenInstanceError:
    pass
print(json.dumps({
    "version": users.__version__,
    "rows": [[r.Id, r.EMail, r.Status.value, r.Address and r.Address.City] for r in records],
    "fields": [f.name for f in dataclasses.fields(users.Users)],
}))
"""


@pytest.fixture(scope="module")
def index_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """``icetide artifacts serve`` on a free loopback port, over an empty index folder."""
    index = tmp_path_factory.mktemp("index")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "icetide.cli", "artifacts", "serve"]
        + ["--port", str(port), "--index", str(index)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/simple/"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                break
        except (urllib.error.URLError, OSError):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("the index server did not start") from None
            time.sleep(0.2)
    yield index, url
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv's python (system site packages: pyarrow and PyIceberg, and pip,
    which installs into the virtualenv it runs in; without a pip of its own, the
    virtualenv is made in 0.2 s instead of 7)."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(root)],
        check=True,
    )
    return root / "bin" / "python"


def pip_install(python: Path, url: str, requirement: str) -> None:
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        + ["--index-url", url, "--upgrade", requirement],
        check=True,
        capture_output=True,
        text=True,
    )


def run(python: Path, code: str, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [str(python), "-c", code, *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def evolve(pipe: Pipeline, spark: SparkSession, old: TableSchema, new: TableSchema) -> None:
    """Apply the change to the base table and the schema file, as evolution would."""
    refs = pipe.refs("users")
    settings = TableSettings(2, "merge-on-read")
    plan = alter_plan(
        TableContract(old, settings), TableContract(new, settings), refs.base, refs.cdc
    )
    for statement in plan.base:
        spark.sql(statement)
    dump_schema_file(new, pipe.root / "schemas" / "users.yaml")


def test_install_read_minor_and_major_versions(
    tmp_path: Path,
    warehouse: Path,
    spark: SparkSession,
    index_server: tuple[Path, str],
    venv: Path,
) -> None:
    started = time.monotonic()
    index, url = index_server
    pipe = Pipeline.custom(
        tmp_path, warehouse, "artifacts_index", {"users": V1}, {"users": "shop.users"}, spark
    )
    base = pipe.refs("users").base
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `lake`.`{base.namespace}`")
    spark.sql(TableContract(V1, TableSettings(2, "merge-on-read")).base_ddl(base))
    spark.sql(
        f"INSERT INTO {base.sql} VALUES (1, 'a@x.io', 'active', named_struct('City', 'Oslo'), "
        "0, current_timestamp()), (2, NULL, 'new', NULL, 0, current_timestamp())"
    )
    stage = pipe.pipeline  # its SchemaStore keeps the history in the state dir
    report = publish_all(stage, index=index)
    assert [(o.package, o.version) for o in report.published] == [(PACKAGE, "1.0.0")]
    assert publish_all(stage, index=index).published[0].action == "unchanged"

    pip_install(venv, url, f"{PACKAGE}==1.*")
    first = run(venv, OLD_CODE, str(warehouse))
    assert first["version"] == "1.0.0"
    assert first["rows"] == [[1, "a@x.io", "active", "Oslo"], [2, None, "new", None]]
    assert first["fields"] == ["Id", "EMail", "Status", "Address"]

    # Additive: a nullable column → 1.1.0; old code keeps running on the new package.
    v2 = V1.with_columns((*V1.columns, Column(6, "Phone", StringType())), version=2)
    evolve(pipe, spark, V1, v2)
    spark.sql(
        f"INSERT INTO {base.sql} VALUES (3, 'c@x.io', 'new', NULL, '555', 0, current_timestamp())"
    )
    report = publish_all(stage, index=index)
    assert [(o.version, o.action) for o in report.published] == [
        ("1.0.0", "unchanged"),
        ("1.1.0", "published"),
    ]
    pip_install(venv, url, f"{PACKAGE}==1.*")
    second = run(venv, OLD_CODE, str(warehouse))
    assert second["version"] == "1.1.0"
    assert second["fields"] == ["Id", "EMail", "Status", "Address", "Phone"]
    assert second["rows"] == [*first["rows"], [3, "c@x.io", "new", None]]  # type: ignore[misc]

    # Not additive: EMail renamed (same id) → 2.0.0; ==1.* stays on 1.1.0.
    v3 = v2.with_columns(
        tuple(Column(2, "Mail", StringType()) if c.id == 2 else c for c in v2.columns), version=3
    )
    evolve(pipe, spark, v2, v3)
    report = publish_all(stage, index=index)
    assert ("2.0.0", "published") in [(o.version, o.action) for o in report.published]
    pip_install(venv, url, f"{PACKAGE}==1.*")
    assert run(venv, OLD_CODE, str(warehouse))["version"] == "1.1.0"
    pip_install(venv, url, PACKAGE)
    newest = run(
        venv,
        "import json, sys, icetide_schema_shop_users as u; "
        "print(json.dumps({'version': u.__version__, "
        "'mail': [r.Mail for r in sorted(u.read(sys.argv[1]), key=lambda r: r.Id)]}))",
        str(warehouse),
    )
    assert newest == {"version": "2.0.0", "mail": ["a@x.io", None, "c@x.io"]}
    print(f"\nvenv/index test body: {time.monotonic() - started:.1f}s")


def test_a_package_reads_its_table_through_the_rest_catalog_on_the_object_store(
    tmp_path: Path,
    warehouse: Path,
    s3_spark: SparkSession,
    rest_catalog: RestCatalogServer,
    index_server: tuple[Path, str],
    venv: Path,
) -> None:
    index, url = index_server
    namespace = f"pkg_{uuid.uuid4().hex[:8]}"
    pipe = Pipeline.custom(
        tmp_path, warehouse, namespace, {"users": V1}, {"users": f"{namespace}.users"}, s3_spark
    )
    name = "lake_packages"
    for key, value in rest_catalog.spark_catalog_conf(name).items():
        s3_spark.conf.set(key, value)
    table = TableName(name, namespace, "users")
    s3_spark.sql(f"CREATE NAMESPACE `{name}`.`{namespace}`")
    s3_spark.sql(TableContract(V1, TableSettings(2, "merge-on-read")).base_ddl(table))
    s3_spark.sql(
        f"INSERT INTO {table.sql} VALUES (7, 'g@x.io', 'active', named_struct('City', 'Rome'), "
        "0, current_timestamp())"
    )
    report = publish_all(pipe.pipeline, index=index)
    package = f"icetide-schema-{namespace.replace('_', '-')}-users"
    assert [o.package for o in report.published] == [package]
    pip_install(venv, url, package)
    code = (
        "import json, sys, importlib; "
        f"u = importlib.import_module({package.replace('-', '_')!r}); "
        "rows = u.read(catalog=json.loads(sys.argv[1])); "
        "print(json.dumps({'rows': [[r.Id, r.EMail, r.Status.value, r.Address.City] "
        "for r in rows]}))"
    )
    found = run(venv, code, json.dumps(rest_catalog.pyiceberg_properties()))
    assert found == {"rows": [[7, "g@x.io", "active", "Rome"]]}
    # The warehouse folder holds no such table: the rows came through the catalog.
    assert not (warehouse / namespace).exists()
