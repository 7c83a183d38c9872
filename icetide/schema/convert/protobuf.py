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
===============================  =========================================================
"""

from __future__ import annotations

from typing import Any

from icetide.errors import SchemaError

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
        return _SCALARS[f.type], f.proto3_optional

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
