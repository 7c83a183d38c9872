"""Nested types survive the schema file both ways, and a bad nested type is reported at
its place in the file (YAML path, and line when read from disk)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from icetide.config.loader import load_schema_file
from icetide.errors import ConfigError, SchemaError
from icetide.schema.file import dump_schema_file, schema_from_dict, schema_to_dict
from icetide.schema.model import TableSchema


def test_schema_to_dict_and_back_is_the_same_schema(
    every_type: TableSchema, every_type_data: dict[str, Any]
) -> None:
    data = schema_to_dict(every_type)
    assert data == every_type_data
    assert schema_from_dict(data) == every_type


def test_a_nested_schema_file_round_trips_on_disk(tmp_path: Path, every_type: TableSchema) -> None:
    path = tmp_path / "schemas" / "everything.yaml"
    dump_schema_file(every_type, path)
    assert load_schema_file(path) == every_type


def _columns(*extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "table": "t",
        "primary_key": ["id"],
        "columns": [{"id": 1, "name": "id", "type": "long"}, *extra],
    }


def _message(*extra: dict[str, Any]) -> str:
    with pytest.raises(SchemaError) as info:
        schema_from_dict(_columns(*extra), "t.yaml")
    return info.value.message


def test_duplicate_nested_ids_are_named_where_they_are() -> None:
    inner = {"struct": [{"id": 5, "name": "x", "type": "int"}]}
    orders = {
        "id": 2,
        "name": "orders",
        "type": {
            "map": {
                "key_id": 3,
                "key": "string",
                "value_id": 4,
                "value": {"list": {"element_id": 3, "element": inner}},
            }
        },
    }
    assert _message(orders) == (
        "t.yaml: columns[1].type.map.value.list.element_id: duplicate id 3 (as "
        "columns[1].type.map); ids are unique and never reused"
    )
    address = {
        "id": 2,
        "name": "address",
        "type": {"struct": [{"id": 1, "name": "city", "type": "string"}]},
    }
    assert _message(address) == (
        "t.yaml: columns[1].type.struct[0].id: duplicate id 1 (as columns[0]); ids are "
        "unique and never reused"
    )


def test_an_unknown_nested_type_is_named_where_it_is() -> None:
    tags = {
        "id": 2,
        "name": "tags",
        "type": {
            "list": {
                "element_id": 3,
                "element": {"struct": [{"id": 4, "name": "n", "type": "integr"}]},
            }
        },
    }
    assert _message(tags) == (
        "t.yaml: columns[1].type.list.element.struct[0].type: unknown column type 'integr'; "
        "did you mean 'int'?"
    )
    odd = {"id": 2, "name": "odd", "type": {"tuple": ["int", "int"]}}
    assert _message(odd) == (
        "t.yaml: columns[1].type: must be a type name such as long, string or decimal(12,2), "
        "or {enum|struct|list|map: ...}"
    )


def test_a_nested_map_key_is_refused() -> None:
    attrs = {
        "id": 2,
        "name": "attrs",
        "type": {
            "map": {
                "key_id": 3,
                "key": {"list": {"element_id": 5, "element": "string"}},
                "value_id": 4,
                "value": "string",
            }
        },
    }
    assert _message(attrs) == "t.yaml: columns[1].type.map.key: a map key must be a value type"


def test_bad_nested_files_on_disk_give_path_and_line(tmp_path: Path) -> None:
    path = tmp_path / "orders.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            table: orders
            primary_key: [id]
            columns:
              - {id: 1, name: id, type: long}
              - id: 2
                name: lines
                type:
                  map:
                    key_id: 3
                    key: {struct: [{id: 6, name: k, type: string}]}
                    value_id: 4
                    value:
                      list:
                        element_id: 4
                        element: {struct: [{id: 5, name: qty, type: integr}]}
            """
        )
    )
    with pytest.raises(ConfigError) as info:
        load_schema_file(path)
    rows = info.value.message.splitlines()[1:]
    assert rows == [
        "  columns[1].type.map.value.list.element.struct[0].type: unknown column type "
        "'integr'; did you mean 'int'? (line 15)",
    ]
    path.write_text(path.read_text().replace("integr", "int"))
    with pytest.raises(ConfigError) as info:
        load_schema_file(path)
    rows = info.value.message.splitlines()[1:]
    assert rows == [
        "  columns[1].type.map.key: a map key must be a value type (line 10)",
        "  columns[1].type.map.value.list.element_id: duplicate id 4 (as "
        "columns[1].type.map); ids are unique and never reused (line 14)",
    ]
    assert info.value.message.startswith(f"invalid schema file {path}")
