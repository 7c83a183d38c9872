"""A source table without a primary key is said as such, with the fix, by the one catalog
reader every command uses (``schema plan``, onboarding, the live detector), never as the
schema check's ``primary_key: needs at least one column``."""

from __future__ import annotations

import pytest

from icetide.config.tables import TableConfig
from icetide.evolution.source_schema import (
    Catalog,
    CatalogColumn,
    KeylessTable,
    schema_from_catalog,
)

COLUMNS = (
    CatalogColumn("id", "int", False, False, None, "mysql"),
    CatalogColumn("v", "int", True, False, None, "mysql"),
)


def test_a_keyless_source_table_names_itself_and_the_fix() -> None:
    table = TableConfig(name="items", source="shop.items")
    with pytest.raises(KeylessTable) as info:
        schema_from_catalog(table, Catalog(COLUMNS, ()))
    assert info.value.message == "the source table shop.items has no primary key"
    assert info.value.hint is not None and "tables[items].primary_key" in info.value.hint


def test_a_configured_key_or_a_source_key_is_enough() -> None:
    pinned = TableConfig(name="items", source="shop.items", primary_key=["id"])
    assert schema_from_catalog(pinned, Catalog(COLUMNS, ())).primary_key == ("id",)
    plain = TableConfig(name="items", source="shop.items")
    assert schema_from_catalog(plain, Catalog(COLUMNS, ("id",))).primary_key == ("id",)
