"""Source connection settings and the one wording of a failed connection (no server:
the port is one nothing listens on)."""

from __future__ import annotations

import pytest

from icetide.config.sections import SourceConfig
from icetide.devservers.ports import free_port
from icetide.errors import Transient
from icetide.sources.connect import (
    connect_mysql,
    connect_postgres,
    jdbc_url,
    mysql_settings,
    open_mysql,
    open_postgres,
    postgres_dsn,
)
from icetide.sources.errors import SourceError, SourceUnavailableError


def mysql_source(**extra: object) -> SourceConfig:
    return SourceConfig.model_validate(
        {"name": "shop", "type": "mysql", "host": "127.0.0.1", "server_id": 7, **extra}
    )


def postgres_source(**extra: object) -> SourceConfig:
    return SourceConfig.model_validate(
        {"name": "app", "type": "postgres", "host": "127.0.0.1", "database": "app", **extra}
    )


def test_settings_in_each_drivers_form() -> None:
    shop = mysql_source(port=3307, user="cdc", password="pw")
    assert mysql_settings(shop) == {
        "host": "127.0.0.1",
        "port": 3307,
        "user": "cdc",
        "password": "pw",
    }
    assert mysql_settings(shop, "shop")["database"] == "shop"
    assert jdbc_url(shop, "shop") == "jdbc:mysql://127.0.0.1:3307/shop?permitMysqlScheme"
    app = postgres_source(user="cdc", password="p'w")
    assert postgres_dsn(app) == (
        "host='127.0.0.1' port='5432' user='cdc' dbname='app' password='p\\'w'"
    )
    assert jdbc_url(app) == "jdbc:postgresql://127.0.0.1:5432/app"


def test_a_configured_source_that_is_down_is_named_with_what_to_check() -> None:
    port = free_port()
    for source, connect in (
        (mysql_source(port=port), connect_mysql),
        (postgres_source(port=port), connect_postgres),
    ):
        with pytest.raises(SourceUnavailableError) as err:
            connect(source)
        error = err.value
        where = f"source {source.name!r} ({source.type} at 127.0.0.1:{port})"
        assert error.message.startswith(f"cannot connect to {where}: ")
        assert error.where == where and error.detail and error.detail in error.message
        assert error.hint and f"source {source.name!r} in sources:" in error.hint
        assert isinstance(error, SourceError) and isinstance(error, Transient)


def test_bare_settings_name_the_server_by_its_address() -> None:
    port = free_port()
    with pytest.raises(SourceUnavailableError) as mysql:
        open_mysql({"host": "127.0.0.1", "port": port, "user": "u", "connect_timeout": 5})
    assert mysql.value.message.startswith(
        f"cannot connect to the MySQL/MariaDB server at 127.0.0.1:{port}: "
    )
    assert mysql.value.hint and "server runs" in mysql.value.hint
    with pytest.raises(SourceUnavailableError) as postgres:
        open_postgres({"host": "127.0.0.1", "port": port, "dbname": "app"}, connect_timeout=5)
    assert postgres.value.message.startswith(
        f"cannot connect to the PostgreSQL server at 127.0.0.1:{port}/app: "
    )
    assert postgres.value.hint and "pg_hba.conf" in postgres.value.hint
