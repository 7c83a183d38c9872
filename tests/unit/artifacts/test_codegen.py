"""The generated package, imported from its generated sources: records from Arrow
columns (nested, lists, maps, nulls, enums), names made safe, versions from the history."""

from __future__ import annotations

import dataclasses
import enum
import importlib
import sys
from collections.abc import Iterator
from datetime import time
from pathlib import Path
from types import ModuleType
from uuid import UUID

import pyarrow as pa
import pytest

from icetide.artifacts.codegen import package_files
from icetide.artifacts.shape import Shape
from icetide.artifacts.versioning import table_bump, table_history_versions
from icetide.schema.model import TableSchema
from icetide.schema.types import (
    Column,
    EnumType,
    IntType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    primitive,
)

COLUMNS = (
    Column(1, "Id", LongType(), False),
    Column(2, "class", StringType(), doc='a "keyword" name'),
    Column(3, "State", EnumType(("in progress", "done", "1st")), False),
    Column(
        4,
        "Address",
        StructType((Column(5, "City", StringType(), False), Column(6, "Kind", EnumType(("a",))))),
    ),
    Column(7, "Tags", ListType(8, StructType((Column(9, "v", IntType()),)))),
    Column(10, "scores", MapType(11, StringType(), 12, LongType())),
    Column(13, "clock", primitive("time")),
    Column(14, "ref", primitive("uuid")),
    Column(15, "address_kind", EnumType(("b",))),  # its class name clashes with Address.Kind's
)


@pytest.fixture
def generated(tmp_path: Path) -> Iterator[ModuleType]:
    shape = Shape("table", "users", "Users", "shop", COLUMNS, 3, iceberg=("cdc", "users"))
    for name, text in package_files(shape, "2.1.0").items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(shape.module)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith(shape.module)]:
            del sys.modules[name]


def test_records_from_arrow_columns(generated: ModuleType) -> None:
    table = pa.table(
        {
            "Id": [1, 2],
            "class": ["x", None],
            "State": ["in progress", "1st"],
            "Address": pa.array(
                [{"City": "Oslo", "Kind": "a"}, None],
                pa.struct([("City", pa.string()), ("Kind", pa.string())]),
            ),
            "Tags": [[{"v": 1}, None], None],
            "scores": pa.array([[("x", 1)], []], pa.map_(pa.string(), pa.int64())),
            "clock": ["07:30:00.000001", None],
            "ref": ["0b5f4d2e-8a51-4d1a-9d7c-0f6c1e3a9b11", None],
            "not_in_the_package": [0, 0],
        }
    )
    first, second = generated.from_arrow(table)
    assert generated.__version__ == "2.1.0" and generated.SCHEMA_VERSION == 3
    assert isinstance(first, generated.Users) and first.Id == 1 and first.class_ == "x"
    assert first.State is generated.UsersState.in_progress
    assert second.State.value == "1st" and second.State.name == "_1st"
    assert first.Address == generated.UsersAddress(City="Oslo", Kind=generated.UsersAddressKind.a)
    assert first.Tags == [generated.UsersTagsElement(v=1), None]
    assert first.scores == {"x": 1} and second.scores == {}
    assert first.clock == time(7, 30, 0, 1) and first.ref == UUID(
        "0b5f4d2e-8a51-4d1a-9d7c-0f6c1e3a9b11"
    )
    assert second.Address is None and second.Tags is None and second.clock is None
    assert first.address_kind is None  # the table lacks it: None
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.Id = 3  # type: ignore[misc]
    assert issubclass(generated.UsersAddressKind, enum.Enum)
    assert [m.value for m in generated.UsersAddressKind_2] == ["b"]  # no clash


def test_an_unknown_symbol_names_the_field_and_says_to_upgrade(generated: ModuleType) -> None:
    table = pa.table({"Id": [1], "State": ["archived"]})
    with pytest.raises(ValueError, match="State: 'archived' is not a symbol.*upgrade"):
        generated.from_arrow(table)


def test_the_module_carries_avro_and_spark_schemas(generated: ModuleType) -> None:
    assert generated.AVRO_SCHEMA["namespace"] == "shop"
    assert generated.AVRO_SCHEMA["icetide.version"] == 3
    spark = generated.spark_schema()
    assert spark.fieldNames()[:3] == ["Id", "class", "State"]
    assert not spark["Id"].nullable and spark["class"].metadata == {"comment": 'a "keyword" name'}


V1 = TableSchema("t", (Column(1, "id", LongType(), False), Column(2, "n", IntType())), ("id",))


@pytest.mark.parametrize(
    ("columns", "bump"),
    [
        ((*V1.columns, Column(3, "x", StringType())), "minor"),
        ((V1.columns[0], Column(2, "n", IntType(), doc="now documented")), "minor"),
        (
            (
                V1.columns[0],
                Column(2, "n", StructType((Column(3, "a", IntType()),))),
            ),
            "major",
        ),
        ((V1.columns[0], Column(2, "renamed", IntType())), "major"),
        ((V1.columns[0], Column(2, "n", LongType())), "major"),
        ((V1.columns[0], Column(2, "n", IntType(), nullable=False)), "major"),
        ((V1.columns[0],), "major"),
    ],
    ids=["add", "doc", "retype", "rename", "widen", "required", "drop"],
)
def test_versions_follow_the_kind_of_change(columns: tuple[Column, ...], bump: str) -> None:
    assert table_bump(V1, V1.with_columns(columns, version=2)) == bump


def test_enum_symbols_and_a_new_key_are_major() -> None:
    e1 = V1.with_columns((*V1.columns, Column(3, "s", EnumType(("a",)))), version=2)
    e2 = e1.with_columns((*V1.columns, Column(3, "s", EnumType(("a", "b")))), version=3)
    assert table_bump(e1, e2) == "major"
    rekeyed = TableSchema("t", V1.columns[:1] + (Column(2, "n", IntType(), False),), ("n",))
    assert table_bump(V1, rekeyed) == "major"
    assert table_history_versions([V1, e1, e2]) == [(1, 0), (1, 1), (2, 0)]
