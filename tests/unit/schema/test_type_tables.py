"""Every per-type table covers the one list of types, or says which names it cannot hold.

Adding a name to :data:`icetide.schema.types.TYPE_NAMES` fails here until every table
below learns it (or lists it as unsupported, next to the table, with the reason).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import pytest

from icetide.bootstrap import mysql as bootstrap_mysql
from icetide.bootstrap import postgres as bootstrap_postgres
from icetide.events.project import COERCERS
from icetide.observe import checksum
from icetide.schema.convert import avro, connect, mysql, postgres, spark
from icetide.schema.types import TYPE_NAMES
from tests.type_samples import SAMPLES

TABLES: dict[str, tuple[Mapping[str, Any], Collection[str]]] = {
    "events.project.COERCERS": (COERCERS, ()),
    "observe.checksum.RULES": (checksum.RULES, checksum.UNSUPPORTED),
    "schema.convert.spark.SQL_TYPES": (spark.SQL_TYPES, ()),
    "schema.convert.spark.ARROW_TYPES": (spark.ARROW_TYPES, ()),
    "schema.convert.mysql.DDL_TYPES": (mysql.DDL_TYPES, mysql.DDL_UNSUPPORTED),
    "schema.convert.postgres.DDL_TYPES": (postgres.DDL_TYPES, postgres.DDL_UNSUPPORTED),
    "schema.convert.connect.CONNECT_TYPES": (connect.CONNECT_TYPES, ()),
    "schema.convert.avro.AVRO_TYPES": (avro.AVRO_TYPES, ()),
    "bootstrap.mysql.MYSQL_READ": (bootstrap_mysql.MYSQL_READ, bootstrap_mysql.UNSUPPORTED),
    "bootstrap.postgres.PG_READ": (bootstrap_postgres.PG_READ, bootstrap_postgres.UNSUPPORTED),
}


@pytest.mark.parametrize("name", TABLES)
def test_table_covers_every_type_name(name: str) -> None:
    table, unsupported = TABLES[name]
    keys, declined = set(table), set(unsupported)
    assert not keys & declined, f"{name}: listed both as handled and unsupported"
    assert keys | declined == set(TYPE_NAMES), (
        f"{name}: missing {sorted(set(TYPE_NAMES) - keys - declined)}, "
        f"unknown {sorted((keys | declined) - set(TYPE_NAMES))}"
    )


def test_the_samples_cover_every_type_name() -> None:
    assert set(SAMPLES) == set(TYPE_NAMES)
    assert all(SAMPLES[name].name == name for name in TYPE_NAMES)
