"""icetide schema model → Avro schema (the ``avro.schema.literal`` of a table version).

One table, keyed by the names in :data:`~icetide.schema.types.TYPE_NAMES`:

==============  ===========================================================================
icetide         Avro
==============  ===========================================================================
boolean, int,   ``"boolean"``, ``"int"``, ``"long"``, ``"float"``, ``"double"``,
long, float,    ``"string"``
double, string
binary          ``"bytes"``
date            ``{"type": "int", "logicalType": "date"}``
time            ``{"type": "long", "logicalType": "time-micros"}``
timestamp       ``{"type": "long", "logicalType": "local-timestamp-micros"}`` (wall clock)
timestamptz     ``{"type": "long", "logicalType": "timestamp-micros"}`` (an instant)
uuid            ``{"type": "string", "logicalType": "uuid"}``
json            ``"string"``
decimal(p,s)    ``{"type": "bytes", "logicalType": "decimal", "precision": p, "scale": s}``
enum(…)         ``{"type": "enum", "name": <field>, "symbols": [...]}``; symbols that are
                not Avro names (``"in progress"``) make it a ``"string"`` carrying the
                symbols as ``"icetide.symbols"``, since Avro cannot spell them
struct          ``{"type": "record", "name": <field>, "fields": [...]}``
list            ``{"type": "array", "items": ...}``
map             ``{"type": "map", "values": ...}`` for text keys; other keys become an
                array of ``{key, value}`` records (Avro map keys are strings)
==============  ===========================================================================

Nullability is exact: a nullable field is the union ``["null", T]`` with ``"default":
null``, a required one is ``T``. Names keep the source's casing; every field carries its
stable id as ``"field-id"`` (Iceberg's own Avro convention) and its doc. The record is
named after the source table in the namespace of the source database, and each nested
record or enum is named after its field inside ``<database>.<table>[.<parent>…]``, so
the full names are unique and readable. Reading Avro into the model is another
direction and another function of this module.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, time
from typing import Any

from icetide.errors import SchemaError
from icetide.schema.model import Column
from icetide.schema.types import EnumType, IcetideType, ListType, MapType, StringType, StructType

AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
"""What Avro accepts as a record, enum or field name (and enum symbol)."""

_Path = tuple[str, ...]


def _fixed(value: Any) -> Callable[[Any, _Path], Any]:
    return lambda _type, _path: value


AVRO_TYPES: dict[str, Callable[[Any, _Path], Any]] = {
    "boolean": _fixed("boolean"),
    "int": _fixed("int"),
    "long": _fixed("long"),
    "float": _fixed("float"),
    "double": _fixed("double"),
    "string": _fixed("string"),
    "binary": _fixed("bytes"),
    "date": _fixed({"type": "int", "logicalType": "date"}),
    "time": _fixed({"type": "long", "logicalType": "time-micros"}),
    "timestamp": _fixed({"type": "long", "logicalType": "local-timestamp-micros"}),
    "timestamptz": _fixed({"type": "long", "logicalType": "timestamp-micros"}),
    "uuid": _fixed({"type": "string", "logicalType": "uuid"}),
    "json": _fixed("string"),
    "decimal": lambda t, _p: {
        "type": "bytes",
        "logicalType": "decimal",
        "precision": t.precision,
        "scale": t.scale,
    },
    "enum": lambda t, p: _enum(t, p),
    "struct": lambda t, p: _record(p, t.fields, None),
    "list": lambda t, p: {
        "type": "array",
        "items": _maybe_null(avro_type(t.element, (*p, "element")), t.element_nullable),
    },
    "map": lambda t, p: _map(t, p),
}
"""Type name → its Avro schema, given the type and the path naming it (for nested names)."""


def avro_type(ctype: IcetideType, path: _Path) -> Any:
    """The Avro schema of one type; ``path`` is ``(namespace…, field…)`` naming it.

    >>> avro_type(StringType(), ("shop", "users", "email"))
    'string'
    """
    return AVRO_TYPES[ctype.name](ctype, path)


def to_avro_schema(
    name: str,
    namespace: str,
    columns: tuple[Column, ...],
    *,
    doc: str | None = None,
    properties: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The Avro record schema of a table (or view) version.

    ``name`` is the source table's name as the source spells it, ``namespace`` the source
    database; ``properties`` are extra top-level attributes (icetide's version stamps).
    Raises :class:`SchemaError` naming the column when a name cannot be an Avro name.

    >>> from icetide.schema.types import LongType
    >>> cols = (Column(1, "Id", LongType(), False), Column(2, "Email", StringType()))
    >>> schema = to_avro_schema("Users", "shop", cols)
    >>> schema["namespace"], schema["name"], [f["name"] for f in schema["fields"]]
    ('shop', 'Users', ['Id', 'Email'])
    >>> schema["fields"][1]["type"], schema["fields"][1]["default"]
    (['null', 'string'], None)
    """
    for part in namespace.split("."):
        if not AVRO_NAME.match(part):
            raise SchemaError(
                f"Avro namespace {namespace!r}: {part!r} is not an Avro name",
                hint="Avro names are letters, digits and _, not starting with a digit",
            )
    record = _record((*namespace.split("."), name), columns, doc)
    record["namespace"] = namespace
    record.update(properties or {})
    return record


def _check_name(name: str, path: _Path) -> None:
    if not AVRO_NAME.match(name):
        raise SchemaError(
            f"column {'.'.join(path)}: {name!r} cannot be an Avro name (letters, digits and "
            "_, not starting with a digit)",
            hint="rename the column in the schema file (its id stays the same) or in a view",
        )


def _record(path: _Path, columns: tuple[Column, ...], doc: str | None) -> dict[str, Any]:
    """A record named ``path[-1]`` whose nested types are named under ``path``."""
    _check_name(path[-1], path)
    fields = []
    for column in columns:
        here = (*path, column.name)
        _check_name(column.name, here)
        field: dict[str, Any] = {
            "name": column.name,
            "type": _maybe_null(avro_type(column.type, here), column.nullable),
        }
        if column.nullable:
            field["default"] = None
        if column.doc:
            field["doc"] = column.doc
        field["field-id"] = column.id
        fields.append(field)
    record: dict[str, Any] = {"type": "record", "name": path[-1]}
    if len(path) > 1:
        record["namespace"] = ".".join(path[:-1])
    if doc:
        record["doc"] = doc
    record["fields"] = fields
    return record


def _maybe_null(avro: Any, nullable: bool) -> Any:
    return ["null", avro] if nullable else avro


def _enum(ctype: EnumType, path: _Path) -> Any:
    if all(AVRO_NAME.match(s) for s in ctype.symbols) and len(set(ctype.symbols)) == len(
        ctype.symbols
    ):
        return {
            "type": "enum",
            "name": path[-1],
            "namespace": ".".join(path[:-1]),
            "symbols": list(ctype.symbols),
        }
    return {"type": "string", "icetide.symbols": list(ctype.symbols)}


def _map(ctype: MapType, path: _Path) -> Any:
    value = _maybe_null(avro_type(ctype.value, (*path, "value")), ctype.value_nullable)
    if isinstance(ctype.key, StringType):
        return {"type": "map", "values": value}
    entry = {
        "type": "record",
        "name": "entry",
        "namespace": ".".join(path),
        "fields": [
            {"name": "key", "type": avro_type(ctype.key, (*path, "key"))},
            {"name": "value", "type": value},
        ],
    }
    return {"type": "array", "items": entry}


def avro_datum(value: Any, ctype: IcetideType) -> Any:
    """A value as read from the base table (Arrow's Python form) in the form Avro writers
    take for :func:`avro_type`: ``time`` text becomes a ``time``, maps become dicts (or
    ``{key, value}`` entries), structs recurse.

    >>> from icetide.schema.types import primitive
    >>> avro_datum("12:30:00.000001", primitive("time"))
    datetime.time(12, 30, 0, 1)
    """
    if value is None:
        return None
    if isinstance(ctype, StructType):
        return {f.name: avro_datum(value.get(f.name), f.type) for f in ctype.fields}
    if isinstance(ctype, ListType):
        return [avro_datum(v, ctype.element) for v in value]
    if isinstance(ctype, MapType):
        pairs = value.items() if isinstance(value, dict) else value
        if isinstance(ctype.key, StringType):
            return {k: avro_datum(v, ctype.value) for k, v in pairs}
        return [
            {"key": avro_datum(k, ctype.key), "value": avro_datum(v, ctype.value)} for k, v in pairs
        ]
    if ctype.name == "time" and isinstance(value, str):
        return time.fromisoformat(value)
    if ctype.name == "timestamp" and isinstance(value, datetime) and value.tzinfo is not None:
        return value.replace(tzinfo=None)
    return value
