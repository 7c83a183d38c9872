"""One visitor walks every schema: a visitor that rebuilds what it walks gives back an
equal schema, and the indexes reach every id, list elements and map keys/values too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from icetide.errors import SchemaError
from icetide.schema.model import TableSchema
from icetide.schema.types import (
    LEAF_NAMES,
    Column,
    DoubleType,
    IcetideType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
)
from icetide.schema.visitor import (
    SchemaVisitor,
    find_by_name,
    index_by_id,
    index_by_name,
    visit,
)


class Rebuild(SchemaVisitor[Any]):
    """Builds each node again from its children's results."""

    def schema(self, schema: TableSchema, struct_result: Any) -> TableSchema:
        return TableSchema(
            schema.table,
            struct_result.fields,
            key_ids=schema.key_ids,
            version=schema.version,
            last_column_id=schema.last_column_id,
            sink=schema.sink,
        )

    def struct(self, struct: StructType, field_results: Sequence[Any]) -> StructType:
        return StructType(tuple(field_results))

    def field(self, field: Column, field_result: Any) -> Column:
        return Column(field.id, field.name, field_result, field.nullable, field.doc)

    def list(self, list_type: ListType, element_result: Any) -> ListType:
        return ListType(list_type.element_id, element_result, list_type.element_nullable)

    def map(self, map_type: MapType, key_result: Any, value_result: Any) -> MapType:
        return MapType(
            map_type.key_id, key_result, map_type.value_id, value_result, map_type.value_nullable
        )

    def primitive(self, primitive: IcetideType) -> IcetideType:
        # A fresh value, so equality is by value and not by identity.
        return type(primitive)(**vars(primitive))


class Trace(SchemaVisitor[None]):
    """Records the hooks and the leaf types, in the order the walk meets them."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.leaves: list[str] = []

    def before_field(self, field: Column) -> None:
        self.events.append(f"+{field.name}")

    def after_field(self, field: Column) -> None:
        self.events.append(f"-{field.name}")

    def before_list_element(self, field: Column) -> None:
        self.events.append(f"+{field.name}")

    def after_list_element(self, field: Column) -> None:
        self.events.append(f"-{field.name}")

    def before_map_key(self, field: Column) -> None:
        self.events.append(f"+{field.name}")

    def after_map_key(self, field: Column) -> None:
        self.events.append(f"-{field.name}")

    def before_map_value(self, field: Column) -> None:
        self.events.append(f"+{field.name}")

    def after_map_value(self, field: Column) -> None:
        self.events.append(f"-{field.name}")

    def schema(self, schema: TableSchema, struct_result: None) -> None:
        self.events.append("schema")

    def struct(self, struct: StructType, field_results: Sequence[None]) -> None:
        self.events.append(f"struct/{len(field_results)}")

    def field(self, field: Column, field_result: None) -> None:
        self.events.append(f"field {field.name}")

    def list(self, list_type: ListType, element_result: None) -> None:
        self.events.append("list")

    def map(self, map_type: MapType, key_result: None, value_result: None) -> None:
        self.events.append("map")

    def primitive(self, primitive: IcetideType) -> None:
        self.leaves.append(primitive.name)


def test_a_rebuilding_visitor_returns_an_equal_schema(every_type: TableSchema) -> None:
    rebuilt = visit(every_type, Rebuild())
    assert rebuilt == every_type
    assert rebuilt is not every_type
    for column in every_type.columns:
        assert visit(column.type, Rebuild()) == column.type


def test_a_visitor_without_hooks_walks_the_same_as_one_with_them(every_type: TableSchema) -> None:
    # A walk skips the hooks (and the stand-in fields) of a visitor that overrides none.
    class Hooked(Rebuild):
        def after_map_value(self, field: Column) -> None:
            pass

    assert (Rebuild._hooked, Hooked._hooked, Trace._hooked) == (False, True, True)
    assert visit(every_type, Hooked()) == visit(every_type, Rebuild()) == every_type
    for column in every_type.columns:
        assert visit(column.type, Hooked()) == visit(column.type, Rebuild()) == column.type


def test_the_walk_meets_every_leaf_type_once_per_use(every_type: TableSchema) -> None:
    trace = Trace()
    visit(every_type, trace)
    assert set(trace.leaves) == set(LEAF_NAMES)
    assert len(trace.leaves) == 25


def test_hooks_surround_each_child_and_results_come_children_first() -> None:
    orders = Column(
        2,
        "orders",
        MapType(3, StringType(), 4, ListType(5, StructType((Column(6, "sku", StringType()),)))),
    )
    schema = TableSchema("t", (Column(1, "id", LongType(), False), orders), ("id",))
    trace = Trace()
    visit(schema, trace)
    assert trace.events == [
        "+id",
        "-id",
        "field id",
        "+orders",
        "+key",
        "-key",
        "+value",
        "+element",
        "+sku",
        "-sku",
        "field sku",
        "struct/1",
        "-element",
        "list",
        "-value",
        "map",
        "-orders",
        "field orders",
        "struct/2",
        "schema",
    ]


def test_index_by_name_uses_iceberg_dotted_names(every_type: TableSchema) -> None:
    assert index_by_name(every_type) == {
        "id": 1,
        "flag": 2,
        "small": 3,
        "ratio": 4,
        "score": 5,
        "email": 6,
        "photo": 7,
        "born": 8,
        "opens": 9,
        "updated_at": 10,
        "paid_at": 11,
        "token": 12,
        "extra": 13,
        "amount": 14,
        "status": 15,
        "address": 16,
        "address.city": 17,
        "address.zip": 18,
        "tags": 19,
        "tags.element": 20,
        "orders": 21,
        "orders.key": 22,
        "orders.value": 23,
        "orders.value.element": 24,
        "orders.value.element.sku": 25,
        "orders.value.element.qty": 26,
        "orders.value.element.dims": 27,
        "orders.value.element.dims.w": 28,
        "scores": 29,
        "scores.key": 30,
        "scores.value": 31,
        "matrix": 32,
        "matrix.element": 33,
        "matrix.element.element": 34,
    }


def test_index_by_id_reaches_every_id_with_its_field(every_type: TableSchema) -> None:
    index = index_by_id(every_type)
    assert set(index) == set(every_type.field_ids()) == set(range(1, 35))
    # Columns and struct fields are the schema's own; find() agrees.
    for field_id in (1, 16, 17, 18, 25, 27, 28):
        assert index[field_id] is every_type.find(field_id)
    orders = every_type.by_name["orders"].type
    assert isinstance(orders, MapType) and isinstance(orders.value, ListType)
    assert index[22] == Column(22, "key", StringType(), nullable=False)
    assert index[23] == Column(23, "value", orders.value, nullable=True)
    assert index[24] == Column(24, "element", orders.value.element, nullable=True)
    assert index[28] == Column(28, "w", DoubleType())
    assert index[31].nullable is False and index[34].nullable is False
    assert index[34] == Column(34, "element", LongType(), nullable=False)


def test_the_indexes_work_on_a_type_alone() -> None:
    tags = ListType(3, StructType((Column(4, "name", StringType()),)))
    assert index_by_name(tags) == {"element": 3, "element.name": 4}
    assert sorted(index_by_id(tags)) == [3, 4]


def test_find_by_name(every_type: TableSchema) -> None:
    assert find_by_name(every_type, "orders.value.element.dims.w").id == 28
    assert find_by_name(every_type, "tags.element").type == StringType()
    assert find_by_name(every_type, "Address.CITY", case_sensitive=False).id == 17
    with pytest.raises(SchemaError) as info:
        find_by_name(every_type, "Address.CITY")
    assert info.value.message == (
        "table everything: no field named 'Address.CITY'; did you mean 'address.city'?"
    )
    assert info.value.hint is not None and "tags.element" in info.value.hint
    with pytest.raises(
        SchemaError, match="no field named 'orders.val'; did you mean 'orders.value'"
    ):
        find_by_name(every_type, "orders.val")


def test_a_dotted_column_name_that_clashes_with_a_nested_path_is_an_error() -> None:
    address = Column(2, "address", StructType((Column(3, "city", StringType()),)))
    dotted = Column(4, "address.city", StringType())
    schema = TableSchema("t", (Column(1, "id", LongType(), False), address, dotted), ("id",))
    with pytest.raises(SchemaError, match=r"two fields are named 'address.city' \(ids 3 and 4\)"):
        index_by_name(schema)
    # Without the clash a dotted name is just a name.
    alone = TableSchema("t", (Column(1, "id", LongType(), False), dotted), ("id",))
    assert index_by_name(alone) == {"id": 1, "address.city": 4}


def test_only_schemas_and_types_can_be_visited() -> None:
    with pytest.raises(SchemaError, match="cannot visit str: not a schema or a column type"):
        visit("long", Rebuild())
