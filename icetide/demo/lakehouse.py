"""``icetide demo --lakehouse``: the live demo's tables on a REST catalog and an S3 store.

The production shape on one machine: the demo starts a private object store (SeaweedFS)
and Iceberg's REST catalog server with its warehouse on that store
(:mod:`icetide.devservers`), the way it starts its MariaDB, and writes a pipeline whose
``catalog:`` is that catalog. The store's keys reach the config only as ``${VAR}``
references to this process's environment (:data:`ACCESS_KEY_ENV`,
:data:`SECRET_KEY_ENV`), so the config file, ``config show`` and every line printed
carry no key; ``lakehouse.env`` (readable by its owner only) holds them for other
commands and for PyIceberg while the servers run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from icetide.devservers.objectstore import S3Endpoint

ACCESS_KEY_ENV = "ICETIDE_DEMO_S3_ACCESS_KEY"
SECRET_KEY_ENV = "ICETIDE_DEMO_S3_SECRET_KEY"
ENV_FILE = "lakehouse.env"
DEMO_WAREHOUSE = "s3://warehouse/demo"


@dataclass(frozen=True)
class Lakehouse:
    """Where the demo's tables go: a REST catalog's URI, the store it writes to, and the
    warehouse (``s3://bucket/prefix``) the catalog server puts new tables under."""

    catalog_uri: str
    store: S3Endpoint
    warehouse: str

    def catalog_section(self, name: str, namespace: str) -> dict[str, Any]:
        """The config's ``catalog:`` on this lakehouse, the keys as ``${VAR}``."""
        from icetide.spark.jars import S3_FILE_IO

        return {
            "name": name,
            "type": "rest",
            "uri": self.catalog_uri,
            # The server places the tables; named here, the check before Spark starts
            # also reaches the bucket with the key.
            "warehouse": self.warehouse,
            "namespace": namespace,
            "properties": {
                "io-impl": S3_FILE_IO,
                "s3.endpoint": self.store.url,
                "s3.path-style-access": "true",
                "s3.access-key-id": "${" + ACCESS_KEY_ENV + "}",
                "s3.secret-access-key": "${" + SECRET_KEY_ENV + "}",
                "client.region": self.store.region,
            },
        }

    def export_keys(self) -> None:
        """Put the store's key into this process's environment, where the config's
        ``${VAR}`` references find it."""
        os.environ[ACCESS_KEY_ENV] = self.store.access_key
        os.environ[SECRET_KEY_ENV] = self.store.secret_key

    def write_env_file(self, workdir: Path) -> Path:
        """``lakehouse.env`` in ``workdir``, readable by its owner only: the key, for
        ``set -a; . lakehouse.env`` before another command or PyIceberg."""
        path = workdir / ENV_FILE
        path.unlink(missing_ok=True)
        path.touch(mode=0o600)
        path.write_text(
            f"{ACCESS_KEY_ENV}={self.store.access_key}\n{SECRET_KEY_ENV}={self.store.secret_key}\n"
        )
        return path

    def pyiceberg_lines(self, catalog: str, table: str) -> list[str]:
        """Python that reads ``table`` (``namespace.name``) with PyIceberg, the keys read
        from the environment."""
        return [
            "import os",
            "from pyiceberg.catalog import load_catalog",
            f"catalog = load_catalog({catalog!r}, **{{",
            f'    "type": "rest", "uri": {self.catalog_uri!r},',
            f'    "s3.endpoint": {self.store.url!r}, "s3.region": {self.store.region!r},',
            f'    "s3.access-key-id": os.environ[{ACCESS_KEY_ENV!r}],',
            f'    "s3.secret-access-key": os.environ[{SECRET_KEY_ENV!r}],',
            "})",
            f"print(catalog.load_table({table!r}).scan().to_arrow().num_rows)",
        ]


def aws_bundle_jars() -> list[Path]:
    """The fetched AWS SDK bundle Iceberg's ``S3FileIO`` needs on Spark's classpath, or a
    :class:`~icetide.devservers.errors.LocalServerError` saying how to fetch it."""
    from icetide.devservers.errors import LocalServerError
    from icetide.spark.jars import ICEBERG_AWS_BUNDLE, Coordinate, default_jars_dir, fetched

    jars = fetched(default_jars_dir(), Coordinate.parse(ICEBERG_AWS_BUNDLE))
    if not jars:
        raise LocalServerError(
            f"{ICEBERG_AWS_BUNDLE} (the AWS SDK of Iceberg's S3FileIO) is not fetched",
            hint="run `icetide jars fetch --dev` once on this machine",
        )
    return jars


def preflight() -> None:
    """Fail before anything starts when a part the lakehouse demo needs is missing: the
    ``weed`` binary, the REST catalog server's jars, the AWS SDK bundle."""
    from icetide.devservers.objectstore import weed_program
    from icetide.devservers.rest_catalog import server_classpath

    weed_program()
    server_classpath()
    aws_bundle_jars()


@contextmanager
def private_lakehouse(log: Callable[[str], None] = print) -> Iterator[Lakehouse]:
    """Start a private object store and a REST catalog on it; stop both on exit."""
    from icetide.devservers.objectstore import ObjectStoreServer
    from icetide.devservers.rest_catalog import RestCatalogServer

    preflight()
    log("demo: starting a private S3 object store (SeaweedFS) …")
    with ObjectStoreServer() as store:
        log(f"demo: starting Iceberg's REST catalog server, warehouse {DEMO_WAREHOUSE} …")
        with RestCatalogServer(store.endpoint, DEMO_WAREHOUSE) as catalog:
            yield Lakehouse(catalog.url, store.endpoint, catalog.warehouse)
