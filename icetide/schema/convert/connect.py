"""Debezium / Kafka Connect field schemas ↔ icetide types with a logical hint.

A Connect field schema is what JsonConverter writes beside each value
(``{"type": "int64", "name": "io.debezium.time.MicroTimestamp", "optional": true}``).
Its ``name``, when it is a logical type icetide knows, decides the icetide type; the
plain ``type`` decides otherwise. The *hint* is the logical name kept in a table's sink
settings: only the names whose values cannot be read right without it (the time family,
``Bits``, ``MicroDuration``) are hints, the same ones the MySQL and PostgreSQL mappings
give.

=====================================================  ============  =================
Connect schema (``name`` or plain ``type``)            icetide type  hint
=====================================================  ============  =================
int8, int16, int32 / int64                             int / long
float32 (``float``) / float64 (``double``)             float/double
boolean, string, bytes                                 boolean, string, binary
``org.apache.kafka.connect.data.Decimal``              decimal(p,s)  (precision from
  (``scale``, ``connect.decimal.precision``)                         the parameter, else 38)
``io.debezium.data.VariableScaleDecimal``, ``Xml``,    string
  ``EnumSet``
``io.debezium.data.Enum`` (``allowed``)                enum(allowed) (no symbols: string)
``io.debezium.data.Json``, ``…geometry.*``             json
``io.debezium.data.Uuid``                              uuid
``io.debezium.time.Year``                              int
``…time.IsoDate``, ``IsoTime``, ``IsoTimestamp``       date, time,
                                                       timestamp
``io.debezium.time.NanoDuration``                      long
``…time.Date``, ``…connect.data.Date``                 date          the name
``…Time``, ``MicroTime``, ``NanoTime``, ``ZonedTime``  time          the name
``…Timestamp``, ``MicroTimestamp``, ``NanoTimestamp``  timestamp     the name
``io.debezium.time.ZonedTimestamp``                    timestamptz   the name
``io.debezium.data.Bits``                              binary        the name
``io.debezium.time.MicroDuration``                     long          the name
struct (``fields``)                                    struct        (field ``optional``
                                                                     → nullable)
array with ``items`` / without                         list / json   (without: icetide
                                                                     capture's arrays,
                                                                     of any depth; the
                                                                     catalog types them)
map (``keys``, ``values``)                             map
=====================================================  ============  =================

The other way, :func:`connect_schema` writes the schema Debezium would give a column of
an icetide type (:data:`CONNECT_TYPES`; a hint picks its own Connect type, e.g.
``timestamp`` with ``io.debezium.time.Timestamp`` is ``int64`` milliseconds).
A plain type has two spellings: the names of Kafka's ``Schema.Type`` (``float32``,
``float64``: the Connect API, Debezium's documentation, icetide's capture) and those of
``JsonConverter``, which writes ``float`` and ``double`` for the same two types
(:data:`TYPE_NAMES` holds both; every reader here goes through :func:`plain_type`).
Connect has no field ids: reading a nested schema takes a
:data:`~icetide.schema.convert.NextId` callback; a struct's fields take ids first, then
what each holds (a list its element id, a map its key then value id), depth first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from icetide.errors import SchemaError
from icetide.schema.convert import NextId
from icetide.schema.model import TableSchema
from icetide.schema.types import (
    BinaryType,
    BooleanType,
    Column,
    DateType,
    DecimalType,
    DoubleType,
    EnumType,
    FloatType,
    IcetideType,
    IntType,
    JsonType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
    TimeType,
    UUIDType,
    primitive,
)
from icetide.schema.visitor import SchemaVisitor, visit

Schema = Mapping[str, Any]
"""A Kafka Connect field schema as JsonConverter writes it."""
Mapped = tuple[IcetideType, str | None]
"""An icetide type and the Debezium logical name its values need, if any."""

DECIMAL = "org.apache.kafka.connect.data.Decimal"
ENUM = "io.debezium.data.Enum"
PRECISION = "connect.decimal.precision"

HINTED: dict[str, tuple[str, str]] = {
    "io.debezium.time.Date": ("int32", "date"),
    "org.apache.kafka.connect.data.Date": ("int32", "date"),
    "io.debezium.time.Time": ("int32", "time"),
    "org.apache.kafka.connect.data.Time": ("int32", "time"),
    "io.debezium.time.MicroTime": ("int64", "time"),
    "io.debezium.time.NanoTime": ("int64", "time"),
    "io.debezium.time.ZonedTime": ("string", "time"),
    "io.debezium.time.Timestamp": ("int64", "timestamp"),
    "org.apache.kafka.connect.data.Timestamp": ("int64", "timestamp"),
    "io.debezium.time.MicroTimestamp": ("int64", "timestamp"),
    "io.debezium.time.NanoTimestamp": ("int64", "timestamp"),
    "io.debezium.time.ZonedTimestamp": ("string", "timestamptz"),
    "io.debezium.data.Bits": ("bytes", "binary"),
    "io.debezium.time.MicroDuration": ("int64", "long"),
}
"""Logical name kept as a hint → (its Connect type, the icetide type name it reads as)."""

_NAMED: dict[str, IcetideType] = {
    "io.debezium.data.VariableScaleDecimal": StringType(),
    "io.debezium.data.Xml": StringType(),
    "io.debezium.data.EnumSet": StringType(),
    "io.debezium.data.Json": JsonType(),
    "io.debezium.data.geometry.Geometry": JsonType(),
    "io.debezium.data.geometry.Geography": JsonType(),
    "io.debezium.data.geometry.Point": JsonType(),
    "io.debezium.data.Uuid": UUIDType(),
    "io.debezium.time.Year": IntType(),
    "io.debezium.time.NanoDuration": LongType(),
    # time.precision.mode=isostring: ISO-8601 text, read without a hint.
    "io.debezium.time.IsoDate": DateType(),
    "io.debezium.time.IsoTime": TimeType(),
    "io.debezium.time.IsoTimestamp": TimestampType(),
}
"""Logical names read as a type of their own without a hint."""

TYPE_NAMES: dict[str, str] = {
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "float32": "float32",
    "float64": "float64",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
    "array": "array",
    "map": "map",
    "struct": "struct",
    # JsonConverter's own names (org.apache.kafka.connect.json.JsonSchema).
    "float": "float32",
    "double": "float64",
}
"""Every name a converter writes for a Connect type → the type (``Schema.Type``'s name)."""


def plain_type(schema: Schema) -> str | None:
    """The Connect type of a field schema under either spelling; None when unknown.

    >>> plain_type({"type": "double"}), plain_type({"type": "float64"}), plain_type({})
    ('float64', 'float64', None)
    """
    kind = schema.get("type")
    return TYPE_NAMES.get(kind) if isinstance(kind, str) else None


_PLAIN: dict[str, IcetideType] = {
    "int8": IntType(),
    "int16": IntType(),
    "int32": IntType(),
    "int64": LongType(),
    "float32": FloatType(),
    "float64": DoubleType(),
    "boolean": BooleanType(),
    "string": StringType(),
    "bytes": BinaryType(),
}


def icetide_type(schema: Schema, next_id: NextId) -> Mapped:
    """The icetide type (and hint) of a Connect field schema; nested ids from ``next_id``.

    >>> from icetide.schema.convert import ids_from
    >>> icetide_type({"type": "int64", "name": "io.debezium.time.MicroTimestamp"}, ids_from(1))
    (TimestampType(), 'io.debezium.time.MicroTimestamp')
    >>> icetide_type({"type": "array", "items": {"type": "int32"}}, ids_from(7))[0]
    ListType(element_id=7, element=IntType(), element_nullable=False)
    """
    name = str(schema.get("name") or "")
    if name in HINTED:
        return primitive(HINTED[name][1]), name
    if name in _NAMED:
        return _NAMED[name], None
    if name == DECIMAL:
        return _decimal(schema), None
    if name == ENUM:
        allowed = str((schema.get("parameters") or {}).get("allowed") or "")
        return (EnumType(tuple(allowed.split(","))) if allowed else StringType()), None
    kind = plain_type(schema)
    if kind in _PLAIN:
        return _PLAIN[kind], None
    if kind == "struct":
        fields = list(schema.get("fields") or ())
        ids = [next_id() for _ in fields]
        return StructType(
            tuple(_column(i, f, next_id) for i, f in zip(ids, fields, strict=True))
        ), None
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return JsonType(), None  # elements of any depth: kept as JSON text
        element_id = next_id()
        element, _ = icetide_type(items, next_id)
        return ListType(element_id, element, _optional(items)), None
    if kind == "map":
        keys, values = schema.get("keys") or {}, schema.get("values") or {}
        key_id, value_id = next_id(), next_id()
        key, _ = icetide_type(keys, next_id)
        value, _ = icetide_type(values, next_id)
        return MapType(key_id, key, value_id, value, _optional(values)), None
    raise unknown_type(schema.get("field") or schema.get("name") or "?", schema.get("type"))


def unknown_type(where: Any, kind: Any) -> SchemaError:
    """The error of a Connect schema whose ``type`` no converter writes."""
    return SchemaError(
        f"Connect schema of {where}: unknown type {kind!r}",
        hint="Connect types are " + ", ".join(TYPE_NAMES),
    )


def _optional(schema: Schema) -> bool:
    # Connect's default is required; JsonConverter writes "optional" on every field.
    return bool(schema.get("optional", False))


def _column(field_id: int, schema: Schema, next_id: NextId) -> Column:
    ctype, _ = icetide_type(schema, next_id)
    return Column(field_id, str(schema.get("field")), ctype, _optional(schema))


def _decimal(schema: Schema) -> DecimalType:
    parameters = schema.get("parameters") or {}
    scale = int(parameters.get("scale", 0))
    precision = int(parameters.get(PRECISION, 38))
    return DecimalType(max(precision, scale, 1), scale)


def _fixed(kind: str, name: str | None = None) -> Callable[[Any], dict[str, Any]]:
    schema = {"type": kind} if name is None else {"type": kind, "name": name, "version": 1}
    return lambda _: dict(schema)


def _decimal_schema(ctype: Any) -> dict[str, Any]:
    return {
        "type": "bytes",
        "name": DECIMAL,
        "version": 1,
        "parameters": {"scale": str(ctype.scale), PRECISION: str(ctype.precision)},
    }


def _enum_schema(ctype: Any) -> dict[str, Any]:
    return {
        "type": "string",
        "name": ENUM,
        "version": 1,
        "parameters": {"allowed": ",".join(ctype.symbols)},
    }


class _Connect(SchemaVisitor[dict[str, Any]]):
    """A nested type's Connect schema from its parts'; leaves from :data:`CONNECT_TYPES`."""

    def schema(self, schema: TableSchema, struct_result: dict[str, Any]) -> dict[str, Any]:
        return struct_result

    def struct(self, struct: StructType, field_results: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {"type": "struct", "fields": list(field_results)}

    def field(self, field: Column, field_result: dict[str, Any]) -> dict[str, Any]:
        return {**field_result, "optional": field.nullable, "field": field.name}

    def list(self, list_type: ListType, element_result: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "array",
            "items": {**element_result, "optional": list_type.element_nullable},
        }

    def map(
        self, map_type: MapType, key_result: dict[str, Any], value_result: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "type": "map",
            "keys": {**key_result, "optional": False},
            "values": {**value_result, "optional": map_type.value_nullable},
        }

    def primitive(self, primitive: IcetideType) -> dict[str, Any]:
        return CONNECT_TYPES[primitive.name](primitive)


_CONNECT: SchemaVisitor[dict[str, Any]] = _Connect()


CONNECT_TYPES: dict[str, Callable[[Any], dict[str, Any]]] = {
    "boolean": _fixed("boolean"),
    "int": _fixed("int32"),
    "long": _fixed("int64"),
    "float": _fixed("float32"),
    "double": _fixed("float64"),
    "string": _fixed("string"),
    "binary": _fixed("bytes"),
    "date": _fixed("int32", "io.debezium.time.Date"),
    "time": _fixed("int64", "io.debezium.time.MicroTime"),
    "timestamp": _fixed("int64", "io.debezium.time.MicroTimestamp"),
    "timestamptz": _fixed("string", "io.debezium.time.ZonedTimestamp"),
    "uuid": _fixed("string", "io.debezium.data.Uuid"),
    "json": _fixed("string", "io.debezium.data.Json"),
    "decimal": _decimal_schema,
    "enum": _enum_schema,
    "struct": lambda t: visit(t, _CONNECT),
    "list": lambda t: visit(t, _CONNECT),
    "map": lambda t: visit(t, _CONNECT),
}
"""Type name → the Connect schema Debezium writes for it when no hint says otherwise (a
nested type's is written by :class:`_Connect`)."""


def connect_schema(
    ctype: IcetideType, logical: str | None = None, *, optional: bool = True
) -> dict[str, Any]:
    """The Connect field schema (without ``field``) of an icetide type; ``logical``, a
    hint from :data:`HINTED`, picks the Connect form its values arrive in.

    >>> from icetide.schema.types import TimestampType
    >>> connect_schema(TimestampType(), "io.debezium.time.Timestamp")
    {'type': 'int64', 'name': 'io.debezium.time.Timestamp', 'version': 1, 'optional': True}
    >>> connect_schema(DecimalType(12, 2), optional=False)["parameters"]
    {'scale': '2', 'connect.decimal.precision': '12'}
    """
    if logical is None:
        schema = CONNECT_TYPES[ctype.name](ctype)
    elif HINTED.get(logical, ("", ""))[1] == ctype.name:
        schema = {"type": HINTED[logical][0], "name": logical, "version": 1}
    else:
        raise SchemaError(
            f"logical type {logical!r} does not carry {ctype} values",
            hint="hints are " + ", ".join(f"{n} ({t})" for n, (_, t) in HINTED.items()),
        )
    schema["optional"] = optional
    return schema


_AVRO_PLAIN = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "long",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}
_AVRO_NAME = re.compile(r"[^A-Za-z0-9_]")


def avro_name(name: str) -> str:
    """A Connect name as an Avro full name: each dotted part made a valid Avro name (the
    way Debezium's ``SchemaNameAdjuster`` does).

    >>> avro_name("k-1.shop.items.Value")
    'k_1.shop.items.Value'
    """
    parts = [_AVRO_NAME.sub("_", p) or "_" for p in name.split(".")]
    return ".".join(p if not p[0].isdigit() else "_" + p for p in parts)


def connect_to_avro(schema: Schema) -> dict[str, Any]:
    """The Avro schema of a Connect struct schema, as Confluent's ``AvroConverter``
    writes it for Debezium envelopes: plain Avro types, each Connect logical ``name`` and
    ``parameters`` kept as the ``connect.name`` / ``connect.parameters`` attributes (so a
    reader maps them back, :func:`logical_type`), optional fields as ``["null", T]`` with
    a null default, a struct named twice (``before``/``after``) defined once.

    >>> avro = connect_to_avro({"type": "struct", "name": "s.Value", "fields": [
    ...     {"field": "id", "type": "int32"},
    ...     {"field": "d", "type": "int32", "optional": True, "name": "io.debezium.time.Date"}]})
    >>> avro["name"], avro["fields"][1]["type"]
    ('s.Value', ['null', {'type': 'int', 'connect.name': 'io.debezium.time.Date'}])
    """
    defined: set[str] = set()
    converted = _avro_of(schema, ("Envelope",), defined)
    if not isinstance(converted, dict) or converted.get("type") != "record":
        raise SchemaError(
            f"Connect schema {schema.get('name')!r} is not a struct",
            hint="a message value schema is a struct (the Debezium envelope)",
        )
    return converted


def _avro_of(schema: Schema, path: tuple[str, ...], defined: set[str]) -> Any:
    kind = plain_type(schema)
    name = schema.get("name")
    if kind == "struct":
        full = avro_name(str(name) if name else ".".join(path))
        if full in defined:
            return full
        defined.add(full)
        fields = []
        for item in schema.get("fields") or ():
            field_name = str(item.get("field"))
            avro = _avro_of(item, (*path, field_name), defined)
            if _optional(item):
                fields.append({"name": field_name, "type": ["null", avro], "default": None})
            else:
                fields.append({"name": field_name, "type": avro})
        return {"type": "record", "name": full, "fields": fields}
    if kind == "array":
        items = schema.get("items") or {"type": "string"}
        element = _avro_of(items, (*path, "element"), defined)
        return {"type": "array", "items": ["null", element] if _optional(items) else element}
    if kind == "map":
        values = schema.get("values") or {"type": "string"}
        value = _avro_of(values, (*path, "value"), defined)
        return {"type": "map", "values": ["null", value] if _optional(values) else value}
    if kind not in _AVRO_PLAIN:
        raise unknown_type(".".join(path), schema.get("type"))
    if not name:
        return _AVRO_PLAIN[kind]
    out: dict[str, Any] = {"type": _AVRO_PLAIN[kind], "connect.name": str(name)}
    if schema.get("parameters"):
        out["connect.parameters"] = dict(schema["parameters"])
    return out


def logical_type(avro: Mapping[str, Any]) -> IcetideType | None:
    """The icetide type an Avro type's ``connect.name`` (and ``connect.parameters``)
    says, when it is a Connect/Debezium logical type icetide knows; else None.

    >>> logical_type({"type": "int", "connect.name": "io.debezium.time.Date"})
    DateType()
    """
    name = avro.get("connect.name")
    if not isinstance(name, str):
        return None
    if name not in HINTED and name not in _NAMED and name not in (DECIMAL, ENUM):
        return None
    parameters = avro.get("connect.parameters") or {}
    return icetide_type({"type": "", "name": name, "parameters": parameters}, lambda: 0)[0]
