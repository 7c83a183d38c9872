"""Protobuf message descriptor → Avro (then → model), as StreamNative converts it.

The descriptor is a ``FileDescriptorProto`` (what a registry returns serialized):

===============================  =========================================================
Protobuf                         Avro
===============================  =========================================================
int32, sint32, sfixed32          int
int64, sint64, sfixed64,         long (``uint64`` values above 2⁶³-1 do not fit: use a
uint32, uint64, fixed32/64       string or bytes field for those)
float, double, bool              float, double, boolean
string, bytes                    string, bytes
enum                             enum (symbols kept)
message                          record, nullable (a message field has presence)
``optional`` scalar (proto3)     ``["null", T]``
plain scalar (proto3)            T, required (a missing value reads as the zero value)
repeated T                       array of T
``map<K, V>``                    map (string keys) or, for other keys, an array of
                                 ``{key, value}`` records
google.protobuf.Timestamp        long timestamp-micros
google.protobuf.*Value wrappers  ``["null", T]``
``(confluent.field_meta).params``  ``connect.name`` (and the other params as
                                 ``connect.parameters``) on the Avro type: a Connect
                                 logical type keeps its meaning
===============================  =========================================================

The other way, :func:`avro_to_protobuf` builds the file descriptor of a Connect-shaped
Avro record (what capture registers for ``transport.format: protobuf``), the inverse of
the table above: each record a top-level message (the root first, so its message index
is 0), ``["null", T]`` a proto3 ``optional`` field, Connect names in Confluent's
``field_meta`` option, as the ProtobufConverter writes them.
"""

from __future__ import annotations

from typing import Any

from icetide.errors import SchemaError
from icetide.schema.convert.avro import nullable_branch

CONNECT_NAME = "connect.name"

_SCALARS = {
    1: "double",
    2: "float",
    3: "long",
    4: "long",
    5: "int",
    6: "long",
    7: "long",
    8: "boolean",
    9: "string",
    12: "bytes",
    13: "long",
    15: "int",
    16: "long",
    17: "int",
    18: "long",
}
"""FieldDescriptorProto.Type number → Avro type (group=10, message=11, enum=14 apart)."""
_WRAPPERS = {
    ".google.protobuf.DoubleValue": "double",
    ".google.protobuf.FloatValue": "float",
    ".google.protobuf.Int64Value": "long",
    ".google.protobuf.UInt64Value": "long",
    ".google.protobuf.Int32Value": "int",
    ".google.protobuf.UInt32Value": "long",
    ".google.protobuf.BoolValue": "boolean",
    ".google.protobuf.StringValue": "string",
    ".google.protobuf.BytesValue": "bytes",
}
_TIMESTAMP = ".google.protobuf.Timestamp"
_LABEL_REPEATED = 3
_TYPE_MESSAGE, _TYPE_ENUM = 11, 14


def protobuf_to_avro(file: Any, message: str | None = None) -> dict[str, Any]:
    """The Avro record of ``message`` (default: the file's first) in a
    ``FileDescriptorProto``."""
    package = f".{file.package}" if file.package else ""
    types: dict[str, Any] = {}
    enums: dict[str, Any] = {}

    def index(prefix: str, messages: Any, file_enums: Any) -> None:
        for item in file_enums:
            enums[f"{prefix}.{item.name}"] = item
        for item in messages:
            full = f"{prefix}.{item.name}"
            types[full] = item
            index(full, item.nested_type, item.enum_type)

    index(package, file.message_type, file.enum_type)
    wanted = message or (file.message_type[0].name if file.message_type else None)
    if wanted is None:
        raise SchemaError("the Protobuf schema has no message", hint="register a message type")
    root = types.get(f"{package}.{wanted}") or types.get(wanted)
    if root is None:
        raise SchemaError(f"Protobuf message {wanted!r} is not in the file", hint="check its name")
    defined: set[str] = set()

    def record(full: str, descriptor: Any) -> Any:
        name = descriptor.name
        if full in defined:
            return name
        defined.add(full)
        return {
            "type": "record",
            "name": name,
            "fields": [field(f, full) for f in descriptor.field],
        }

    def value_type(f: Any, scope: str) -> tuple[Any, bool]:
        """(Avro type, nullable) of one field, repeated-ness aside."""
        if f.type == _TYPE_MESSAGE:
            if f.type_name == _TIMESTAMP:
                return {"type": "long", "logicalType": "timestamp-micros"}, True
            if f.type_name in _WRAPPERS:
                return _WRAPPERS[f.type_name], True
            nested = types.get(f.type_name)
            if nested is None:
                raise SchemaError(
                    f"Protobuf field {scope}.{f.name}: type {f.type_name} is not in the file",
                    hint="register the schema with its imports resolved",
                )
            return record(f.type_name, nested), True
        if f.type == _TYPE_ENUM:
            enum = enums.get(f.type_name)
            if enum is None:
                raise SchemaError(f"Protobuf enum {f.type_name} is not in the file", hint="")
            if f.type_name in defined:
                return enum.name, False
            defined.add(f.type_name)
            return {
                "type": "enum",
                "name": enum.name,
                "symbols": [v.name for v in enum.value],
            }, False
        if f.type not in _SCALARS:
            raise SchemaError(
                f"Protobuf field {scope}.{f.name}: type {f.type} (groups) has no column type",
                hint="use a message instead of a group",
            )
        params = _field_meta(f)
        if CONNECT_NAME not in params:
            return _SCALARS[f.type], f.proto3_optional
        named: dict[str, Any] = {"type": _SCALARS[f.type], CONNECT_NAME: params.pop(CONNECT_NAME)}
        if params:
            named["connect.parameters"] = params
        return named, f.proto3_optional

    def field(f: Any, scope: str) -> dict[str, Any]:
        if f.label == _LABEL_REPEATED:
            entry = types.get(f.type_name) if f.type == _TYPE_MESSAGE else None
            if entry is not None and entry.options.map_entry:
                key, value = entry.field[0], entry.field[1]
                value_avro, _ = value_type(value, scope)
                if value.type == _TYPE_MESSAGE:
                    value_avro = ["null", value_avro]
                if key.type == 9:
                    return {"name": f.name, "type": {"type": "map", "values": value_avro}}
                entry_record = {
                    "type": "record",
                    "name": "entry",
                    "fields": [
                        {"name": "key", "type": value_type(key, scope)[0]},
                        {"name": "value", "type": value_avro},
                    ],
                }
                return {"name": f.name, "type": {"type": "array", "items": entry_record}}
            item, _ = value_type(f, scope)
            return {"name": f.name, "type": {"type": "array", "items": item}}
        avro, nullable = value_type(f, scope)
        if nullable:
            return {"name": f.name, "type": ["null", avro], "default": None}
        return {"name": f.name, "type": avro}

    converted = record(f"{package}.{root.name}", root)
    return converted if isinstance(converted, dict) else {"type": "record", "name": converted}


def _field_meta(field: Any) -> dict[str, str]:
    """The params of a field's Confluent ``field_meta`` option (none: ``{}``)."""
    if not field.HasField("options"):
        return {}
    from confluent_kafka.schema_registry.confluent import meta_pb2
    from google.protobuf import descriptor_pb2

    # Re-read the options now that the extension is known to the default pool.
    options = descriptor_pb2.FieldOptions.FromString(field.options.SerializeToString())
    extension = meta_pb2.field_meta  # type: ignore[attr-defined]  # generated at import
    if not options.HasExtension(extension):
        return {}
    return dict(options.Extensions[extension].params)


def _map_entry_name(field: str) -> str:
    """The entry message protoc makes for ``map<K, V> field`` (``my_map``, ``myMap`` →
    ``MyMapEntry``), so a printed and recompiled descriptor names it alike."""
    parts = field.split("_")
    return "".join(p[:1].upper() + p[1:] for p in parts) + "Entry"


_PROTO_SCALARS = {
    "int": 5,  # TYPE_INT32
    "long": 3,  # TYPE_INT64
    "float": 2,
    "double": 1,
    "boolean": 8,
    "string": 9,
    "bytes": 12,
}


def avro_to_protobuf(avro: dict[str, Any], package: str = "") -> Any:
    """The ``FileDescriptorProto`` (proto3) of a Connect-shaped Avro record (see the
    module doc); its first message is ``avro`` itself.

    >>> file = avro_to_protobuf({"type": "record", "name": "s.Value", "fields": [
    ...     {"name": "id", "type": "int"},
    ...     {"name": "d", "default": None, "type": [
    ...         "null", {"type": "int", "connect.name": "io.debezium.time.Date"}]}]})
    >>> [m.name for m in file.message_type], protobuf_to_avro(file)["fields"][1]["type"]
    (['s_Value'], ['null', {'type': 'int', 'connect.name': 'io.debezium.time.Date'}])
    """
    from confluent_kafka.schema_registry.confluent import meta_pb2
    from google.protobuf import descriptor_pb2

    t = descriptor_pb2.FieldDescriptorProto
    root_name = str(avro.get("name", "Value")).replace(".", "_")
    file = descriptor_pb2.FileDescriptorProto(
        name=f"{root_name}.proto", package=package, syntax="proto3"
    )
    prefix = f".{package}." if package else "."
    named: dict[str, str] = {}

    def message_of(record: dict[str, Any]) -> str:
        name = str(record["name"])
        if name in named:
            return named[name]
        short = named[name] = name.replace(".", "_")
        message = file.message_type.add(name=short)
        for number, item in enumerate(record["fields"], 1):
            add_field(message, short, number, str(item["name"]), item["type"])
        return short

    def add_field(message: Any, scope: str, number: int, name: str, avro_type: Any) -> None:
        field = message.field.add(name=name, number=number, label=t.LABEL_OPTIONAL)
        inner, optional = nullable_branch(avro_type, f"{scope}.{name}")
        kind = inner.get("type") if isinstance(inner, dict) else inner
        if kind in ("array", "map"):
            element = inner["items"] if kind == "array" else inner["values"]
            if isinstance(element, list):
                raise SchemaError(
                    f"Avro {kind} at {scope}.{name} holds nulls, which Protobuf cannot",
                    hint="use transport.format avro or json_schema for this table",
                )
            field.label = t.LABEL_REPEATED
            if kind == "array":
                set_type(field, element, f"{scope}.{name}")
                return
            entry = message.nested_type.add(name=_map_entry_name(name))
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, type=t.TYPE_STRING, label=t.LABEL_OPTIONAL)
            value = entry.field.add(name="value", number=2, label=t.LABEL_OPTIONAL)
            set_type(value, element, f"{scope}.{name}")
            field.type = t.TYPE_MESSAGE
            field.type_name = f"{prefix}{scope}.{entry.name}"
            return
        set_type(field, inner, f"{scope}.{name}")
        if optional and field.type != t.TYPE_MESSAGE:  # a message field has presence
            field.proto3_optional = True
            field.oneof_index = len(message.oneof_decl)
            message.oneof_decl.add(name=f"_{name}")

    def set_type(field: Any, avro_type: Any, where: str) -> None:
        if isinstance(avro_type, str) and avro_type in named:
            field.type, field.type_name = t.TYPE_MESSAGE, prefix + named[avro_type]
            return
        kind = avro_type if isinstance(avro_type, str) else avro_type.get("type")
        if kind == "record":
            field.type, field.type_name = t.TYPE_MESSAGE, prefix + message_of(avro_type)
            return
        if kind not in _PROTO_SCALARS:
            raise SchemaError(
                f"Avro type {kind!r} at {where} has no Protobuf form here",
                hint="capture writes Connect-shaped Avro: records, arrays, maps, primitives",
            )
        field.type = _PROTO_SCALARS[kind]
        if isinstance(avro_type, dict) and isinstance(avro_type.get(CONNECT_NAME), str):
            extension = meta_pb2.field_meta  # type: ignore[attr-defined]  # generated
            params = field.options.Extensions[extension].params
            params[CONNECT_NAME] = avro_type[CONNECT_NAME]
            for key, value in (avro_type.get("connect.parameters") or {}).items():
                params[str(key)] = str(value)

    message_of(avro)
    return file
