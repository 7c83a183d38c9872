"""icetide schemas ↔ Iceberg's schema JSON (the ``schema`` object of table metadata).

Iceberg and icetide both give every field, list element and map key/value a stable id,
so the conversion keeps every id; ``required`` is ``not nullable``, the primary key is
``identifier-field-ids``, and ``doc`` travels as it is:

==============  ========================================================================
icetide         Iceberg schema JSON
==============  ========================================================================
boolean, int,   ``"boolean"``, ``"int"``, ``"long"``, ``"float"``, ``"double"``,
long, float,    ``"string"``, ``"binary"``, ``"date"``, ``"time"``, ``"timestamp"``,
…, uuid         ``"timestamptz"``, ``"uuid"`` (the same names)
decimal(p,s)    ``"decimal(p, s)"``
json, enum      ``"string"`` (Iceberg has neither; they read back as ``string``)
struct          ``{"type": "struct", "fields": [{"id", "name", "required", "type"}]}``
list            ``{"type": "list", "element-id", "element", "element-required"}``
map             ``{"type": "map", "key-id", "key", "value-id", "value",
                "value-required"}``
==============  ========================================================================

Read back, ``fixed[n]`` is ``binary`` and ``timestamp_ns``/``timestamptz_ns`` are
``timestamp``/``timestamptz`` (icetide keeps microseconds). The tables icetide creates
through Spark 3.5 hold ``time`` and ``uuid`` as ``string`` (see
:mod:`icetide.schema.convert.spark`); this module speaks Iceberg's own type system.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from icetide.errors import SchemaError
from icetide.schema.model import Column, TableSchema
from icetide.schema.types import (
    PRIMITIVES,
    BinaryType,
    DecimalType,
    IcetideType,
    ListType,
    MapType,
    StructType,
    TimestampType,
    TimestamptzType,
    primitive,
)


def _fixed(value: Any) -> Callable[[Any], Any]:
    return lambda _: value


def _fields(columns: tuple[Column, ...]) -> list[dict[str, Any]]:
    out = []
    for column in columns:
        field: dict[str, Any] = {
            "id": column.id,
            "name": column.name,
            "required": not column.nullable,
            "type": iceberg_type(column.type),
        }
        if column.doc is not None:
            field["doc"] = column.doc
        out.append(field)
    return out


ICEBERG_TYPES: dict[str, Callable[[Any], Any]] = {
    **{name: _fixed(name) for name in PRIMITIVES if name != "json"},
    "json": _fixed("string"),
    "decimal": lambda t: f"decimal({t.precision}, {t.scale})",
    "enum": _fixed("string"),
    "struct": lambda t: {"type": "struct", "fields": _fields(t.fields)},
    "list": lambda t: {
        "type": "list",
        "element-id": t.element_id,
        "element": iceberg_type(t.element),
        "element-required": not t.element_nullable,
    },
    "map": lambda t: {
        "type": "map",
        "key-id": t.key_id,
        "key": iceberg_type(t.key),
        "value-id": t.value_id,
        "value": iceberg_type(t.value),
        "value-required": not t.value_nullable,
    },
}
"""Type name → its Iceberg schema JSON type."""


def iceberg_type(ctype: IcetideType) -> Any:
    """The Iceberg JSON type of an icetide type (a string, or an object when nested).

    >>> iceberg_type(DecimalType(12, 2))
    'decimal(12, 2)'
    """
    return ICEBERG_TYPES[ctype.name](ctype)


def schema_json(schema: TableSchema, schema_id: int = 0) -> dict[str, Any]:
    """A table's schema as Iceberg's schema JSON, with schema id ``schema_id``.

    >>> from icetide.schema.types import LongType
    >>> schema_json(TableSchema("t", (Column(1, "id", LongType(), False),), ("id",)))
    ... # doctest: +NORMALIZE_WHITESPACE
    {'type': 'struct', 'schema-id': 0, 'identifier-field-ids': [1],
     'fields': [{'id': 1, 'name': 'id', 'required': True, 'type': 'long'}]}
    """
    return {
        "type": "struct",
        "schema-id": schema_id,
        "identifier-field-ids": list(schema.key_ids),
        "fields": _fields(schema.columns),
    }


_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_FIXED = re.compile(r"^fixed\[\s*\d+\s*\]$")
_READ_AS: dict[str, IcetideType] = {
    "timestamp_ns": TimestampType(),
    "timestamptz_ns": TimestamptzType(),
}


def _fail(found: Any) -> SchemaError:
    return SchemaError(
        f"Iceberg type {found!r} has no icetide type",
        hint="icetide reads Iceberg's primitives, decimal, fixed, struct, list and map",
    )


def from_iceberg(found: Any) -> IcetideType:
    """The icetide type of an Iceberg JSON type.

    >>> from_iceberg({"type": "list", "element-id": 4, "element": "decimal(9, 2)",
    ...               "element-required": False})
    ListType(element_id=4, element=DecimalType(precision=9, scale=2), element_nullable=True)
    """
    if isinstance(found, str):
        text = found.strip()
        if text in PRIMITIVES and text != "json":
            return primitive(text)
        if text in _READ_AS:
            return _READ_AS[text]
        match = _DECIMAL.match(text)
        if match:
            return DecimalType(int(match.group(1)), int(match.group(2)))
        if _FIXED.match(text):
            return BinaryType()
        raise _fail(found)
    if not isinstance(found, Mapping):
        raise _fail(found)
    kind = found.get("type")
    if kind == "struct":
        return StructType(_columns(found.get("fields") or ()))
    if kind == "list":
        return ListType(
            int(found["element-id"]),
            from_iceberg(found["element"]),
            not found.get("element-required", False),
        )
    if kind == "map":
        return MapType(
            int(found["key-id"]),
            from_iceberg(found["key"]),
            int(found["value-id"]),
            from_iceberg(found["value"]),
            not found.get("value-required", False),
        )
    raise _fail(found)


def _columns(fields: Any) -> tuple[Column, ...]:
    return tuple(
        Column(
            int(f["id"]),
            str(f["name"]),
            from_iceberg(f["type"]),
            not f.get("required", False),
            f.get("doc"),
        )
        for f in fields
    )


def table_schema(
    doc: Mapping[str, Any],
    table: str,
    *,
    version: int = 1,
    last_column_id: int | None = None,
) -> TableSchema:
    """The icetide schema of an Iceberg schema JSON; the key is its identifier fields.

    ``last_column_id`` is the table metadata's ``last-column-id`` (a schema alone does not
    know the ids of dropped columns); without it, the highest id in the schema.
    """
    if doc.get("type", "struct") != "struct":
        raise _fail(doc)
    return TableSchema(
        table,
        _columns(doc.get("fields") or ()),
        key_ids=tuple(int(i) for i in doc.get("identifier-field-ids") or ()),
        version=version,
        last_column_id=last_column_id,
    )
