"""Source identifier quoting: any name survives, quote characters inside are doubled."""

from __future__ import annotations

import pytest

from icetide.sources.quoting import (
    mysql_qualified,
    mysql_quote,
    postgres_qualified,
    postgres_quote,
)

HOSTILE = ["order", "dot.ted", "sp ace", "we`ird", 'dou"ble', "it's", "", "``", '""', "Ünï"]


@pytest.mark.parametrize("name", HOSTILE)
def test_mysql_quoting_round_trips_any_name(name: str) -> None:
    quoted = mysql_quote(name)
    assert quoted.startswith("`") and quoted.endswith("`")
    assert quoted[1:-1].replace("``", "`") == name
    assert "`" not in quoted[1:-1].replace("``", "")  # no lone backtick ends it early


@pytest.mark.parametrize("name", HOSTILE)
def test_postgres_quoting_round_trips_any_name(name: str) -> None:
    quoted = postgres_quote(name)
    assert quoted.startswith('"') and quoted.endswith('"')
    assert quoted[1:-1].replace('""', '"') == name
    assert '"' not in quoted[1:-1].replace('""', "")


def test_each_dialect_leaves_the_other_quote_alone() -> None:
    assert mysql_quote('a"b') == '`a"b`'
    assert postgres_quote("a`b") == '"a`b"'


def test_qualified_names_quote_every_part() -> None:
    assert mysql_qualified("shop", "dot.ted") == "`shop`.`dot.ted`"
    assert postgres_qualified("sales", 'q"t') == '"sales"."q""t"'
