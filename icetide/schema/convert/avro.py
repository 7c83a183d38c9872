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
from collections.abc import Callable, Sequence
from datetime import datetime, time
from typing import Any

from icetide.errors import SchemaError
from icetide.schema.convert.connect import logical_type
from icetide.schema.model import TableSchema
from icetide.schema.types import (
    Column,
    EnumType,
    IcetideType,
    ListType,
    MapType,
    StringType,
    StructType,
)
from icetide.schema.visitor import PathVisitor, field_paths, visit

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
    "struct": lambda t, p: _nested(t, p),
    "list": lambda t, p: _nested(t, p),
    "map": lambda t, p: _nested(t, p),
}
"""Type name → its Avro schema, given the type and the path naming it (for nested names;
a nested type's is built by :class:`_ToAvro`)."""


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
    path = (*namespace.split("."), name)
    _check_name(name, path)
    record: dict[str, Any] = visit(StructType(columns), _ToAvro(path, doc))
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


def _nested(ctype: IcetideType, path: _Path) -> Any:
    if isinstance(ctype, StructType):
        _check_name(path[-1], path)  # a record is named after where it sits
    return visit(ctype, _ToAvro(path, None))


class _ToAvro(PathVisitor[Any]):
    """A nested type's Avro schema from its parts'; a record, an enum or a map entry is
    named after where it sits (:attr:`path`, which starts at the walk's ``root``); leaves
    come from :data:`AVRO_TYPES`. ``doc`` is the outermost record's."""

    def __init__(self, root: _Path, doc: str | None) -> None:
        super().__init__(root)
        self.depth = len(root)
        self.doc = doc

    def enter(self, field: Column) -> None:
        super().enter(field)
        _check_name(field.name, tuple(self.path))

    def schema(self, schema: TableSchema, struct_result: Any) -> Any:
        return struct_result

    def struct(self, struct: StructType, field_results: Sequence[Any]) -> Any:
        record: dict[str, Any] = {"type": "record", "name": self.path[-1]}
        if len(self.path) > 1:
            record["namespace"] = ".".join(self.path[:-1])
        if self.doc and len(self.path) == self.depth:
            record["doc"] = self.doc
        record["fields"] = list(field_results)
        return record

    def field(self, field: Column, field_result: Any) -> Any:
        entry: dict[str, Any] = {
            "name": field.name,
            "type": _maybe_null(field_result, field.nullable),
        }
        if field.nullable:
            entry["default"] = None
        if field.doc:
            entry["doc"] = field.doc
        entry["field-id"] = field.id
        return entry

    def list(self, list_type: ListType, element_result: Any) -> Any:
        return {"type": "array", "items": _maybe_null(element_result, list_type.element_nullable)}

    def map(self, map_type: MapType, key_result: Any, value_result: Any) -> Any:
        value = _maybe_null(value_result, map_type.value_nullable)
        if isinstance(map_type.key, StringType):
            return {"type": "map", "values": value}
        entry = {
            "type": "record",
            "name": "entry",
            "namespace": ".".join(self.path),
            "fields": [{"name": "key", "type": key_result}, {"name": "value", "type": value}],
        }
        return {"type": "array", "items": entry}

    def primitive(self, primitive: IcetideType) -> Any:
        return AVRO_TYPES[primitive.name](primitive, tuple(self.path))


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


# --- Avro → model ----------------------------------------------------------------------

_LOGICAL = {
    ("int", "date"): "date",
    ("int", "time-millis"): "time",
    ("long", "time-micros"): "time",
    ("long", "timestamp-millis"): "timestamptz",
    ("long", "timestamp-micros"): "timestamptz",
    ("long", "local-timestamp-millis"): "timestamp",
    ("long", "local-timestamp-micros"): "timestamp",
    ("string", "uuid"): "uuid",
}
"""(Avro type, logicalType) → icetide type; a logical type not listed keeps its base type."""
_AVRO_PRIMITIVES = {
    "boolean": "boolean",
    "int": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "bytes": "binary",
}

KnownIds = dict[tuple[str, ...], int]
"""Field path (``("address", "city")``; list elements ``element``, map parts ``key`` and
``value``) → the id an earlier version gave it, so a field keeps its id across versions."""


def known_ids(columns: tuple[Column, ...], path: _Path = ()) -> KnownIds:
    """The :data:`KnownIds` of an existing model (what :func:`from_avro_schema` reuses)."""
    return dict(field_paths(StructType(columns), path))


def nullable_branch(avro: Any, where: str) -> tuple[Any, bool]:
    """(the type, whether null is allowed) of a field's Avro type: ``["null", T]`` is
    ``(T, True)``; a union of two non-null types is refused naming ``where``.

    >>> nullable_branch(["null", "long"], "f"), nullable_branch("int", "f")
    (('long', True), ('int', False))
    """
    if not isinstance(avro, list):
        return avro, False
    branches = [b for b in avro if b != "null"]
    if len(branches) != 1:
        raise SchemaError(
            f"field {where}: a union of {len(branches)} non-null types ({avro!r}) has no "
            "column type",
            hint="use a nullable union ['null', T], or a record with one field per case",
        )
    return branches[0], len(branches) != len(avro)


class _Reader:
    """One conversion: named types seen so far, and where ids come from."""

    def __init__(self, next_id: Callable[[], int], known: KnownIds | None) -> None:
        self.next_id = next_id
        self.known = known or {}
        self.named: dict[str, Any] = {}

    def id_for(self, path: _Path) -> int:
        return self.known[path] if path in self.known else self.next_id()

    def remember(self, schema: dict[str, Any], namespace: str) -> str:
        name = schema["name"]
        space = schema.get("namespace", namespace)
        full = name if "." in name or not space else f"{space}.{name}"
        self.named[full] = schema
        self.named.setdefault(name, schema)
        return space if "." not in name else name.rsplit(".", 1)[0]

    def field_type(self, avro: Any, path: _Path, namespace: str) -> tuple[IcetideType, bool]:
        """(type, nullable) of a field's Avro schema."""
        inner, nullable = nullable_branch(avro, ".".join(path))
        return self.type_of(inner, path, namespace), nullable

    def type_of(self, avro: Any, path: _Path, namespace: str) -> IcetideType:
        from icetide.schema.types import DecimalType, primitive

        if isinstance(avro, str):
            if avro in _AVRO_PRIMITIVES:
                return primitive(_AVRO_PRIMITIVES[avro])
            named = self.named.get(avro) or self.named.get(f"{namespace}.{avro}")
            if named is None:
                raise SchemaError(
                    f"field {'.'.join(path)}: Avro type {avro!r} is not defined before its use",
                    hint="define the named type (record, enum, fixed) earlier in the schema",
                )
            return self.type_of(named, path, namespace)
        if isinstance(avro, list):
            return self.field_type(avro, path, namespace)[0]
        kind = avro.get("type")
        logical = avro.get("logicalType")
        connect = logical_type(avro)  # a Debezium logical type, as AvroConverter marks it
        if connect is not None:
            return connect
        if logical == "decimal" and kind in ("bytes", "fixed"):
            if kind == "fixed":
                self.remember(avro, namespace)
            return DecimalType(int(avro["precision"]), int(avro.get("scale", 0)))
        if (kind, logical) in _LOGICAL:
            return primitive(_LOGICAL[(kind, logical)])
        if kind == "string" and isinstance(avro.get("icetide.symbols"), list):
            return EnumType(tuple(avro["icetide.symbols"]))
        if kind in _AVRO_PRIMITIVES:
            return primitive(_AVRO_PRIMITIVES[kind])
        if kind == "fixed":
            self.remember(avro, namespace)
            return primitive("binary")
        if kind == "enum":
            self.remember(avro, namespace)
            return EnumType(tuple(avro["symbols"]))
        if kind == "record":
            space = self.remember(avro, namespace)
            return StructType(self.columns(avro["fields"], path, space))
        if kind == "array":
            items = avro["items"]
            entry = items if isinstance(items, dict) else None
            if entry is not None and entry.get("type") == "record" and entry.get("name") == "entry":
                names = [f["name"] for f in entry["fields"]]
                if names == ["key", "value"]:  # icetide's own map with non-text keys
                    self.remember(entry, namespace)
                    key = self.type_of(entry["fields"][0]["type"], (*path, "key"), namespace)
                    value, nullable = self.field_type(
                        entry["fields"][1]["type"], (*path, "value"), namespace
                    )
                    return MapType(
                        self.id_for((*path, "key")),
                        key,
                        self.id_for((*path, "value")),
                        value,
                        nullable,
                    )
            element, nullable = self.field_type(items, (*path, "element"), namespace)
            return ListType(self.id_for((*path, "element")), element, nullable)
        if kind == "map":
            value, nullable = self.field_type(avro["values"], (*path, "value"), namespace)
            return MapType(
                self.id_for((*path, "key")),
                StringType(),
                self.id_for((*path, "value")),
                value,
                nullable,
            )
        if isinstance(kind, (dict, list, str)):
            return self.type_of(kind, path, namespace)
        raise SchemaError(
            f"field {'.'.join(path)}: {avro!r} is not an Avro type",
            hint="see the Avro specification's list of types",
        )

    def columns(
        self, fields: list[dict[str, Any]], path: _Path, namespace: str
    ) -> tuple[Column, ...]:
        out = []
        for item in fields:
            here = (*path, item["name"])
            column_id = item["field-id"] if isinstance(item.get("field-id"), int) else None
            column_id = column_id if column_id is not None else self.id_for(here)
            ctype, nullable = self.field_type(item["type"], here, namespace)
            out.append(Column(column_id, item["name"], ctype, nullable, item.get("doc")))
        return tuple(out)


def from_avro_schema(
    schema: dict[str, Any] | str,
    next_id: Callable[[], int],
    known: KnownIds | None = None,
) -> tuple[Column, ...]:
    """The columns of an Avro record schema (the reverse of :func:`to_avro_schema`).

    Ids: a field's ``"field-id"`` when it has one, else the id ``known`` gives its path
    (the previous version's, see :func:`known_ids`), else ``next_id()``: a field keeps its
    id from version to version, and a new field gets a new one. Nullable unions
    ``["null", T]`` are nullable columns; logical types map as the table in this
    module's docstring shows, read backwards (``timestamp-millis`` too).

    >>> from icetide.schema.convert import ids_from
    >>> cols = from_avro_schema({"type": "record", "name": "r", "fields": [
    ...     {"name": "id", "type": "long"},
    ...     {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
    ... ]}, ids_from(1))
    >>> [(c.id, c.name, str(c.type), c.nullable) for c in cols]
    [(1, 'id', 'long', False), (2, 'at', 'timestamptz', True)]
    """
    import json as _json

    parsed = _json.loads(schema) if isinstance(schema, str) else schema
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise SchemaError(
            f"a table's Avro schema must be a record, got {str(parsed)[:80]!r}",
            hint="register the row (or Debezium's Value) record as the subject's schema",
        )
    reader = _Reader(next_id, known)
    space = reader.remember(parsed, "")
    return reader.columns(parsed["fields"], (), space)
