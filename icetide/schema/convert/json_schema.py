"""JSON Schema → Avro (then :func:`~icetide.schema.convert.avro.from_avro_schema` → model).

The path StreamNative takes: one target (Avro) for every registry format, so one set of
rules (compatibility, the model) applies to all of them.

==================================  ======================================================
JSON Schema                         Avro
==================================  ======================================================
``object`` with ``properties``      record; a property not in ``required`` is
                                    ``["null", T]`` with default null
``object`` with only                map (string keys)
``additionalProperties: {schema}``
``array`` with ``items``            array
``integer``                         long (``int`` when ``"connect.type": "int32"`` or a
                                    ``maximum`` ≤ 2³¹-1 and ``minimum`` ≥ -2³¹)
``number``                          double (``float`` with ``"connect.type": "float32"``)
``string`` + ``format``             ``date`` → int date; ``date-time`` → long
                                    timestamp-micros; ``time`` → long time-micros;
                                    ``uuid`` → string uuid
``string`` + ``enum``               enum (symbols kept) when every symbol is an Avro name,
                                    else string
``boolean``, ``null``               boolean, null
``["T", "null"]``, ``oneOf``/       ``["null", T]``
``anyOf`` with ``{"type": "null"}``
``$ref`` to ``#/definitions/X`` or  the referenced schema (a named record, defined once)
``#/$defs/X``
==================================  ======================================================
"""

from __future__ import annotations

from typing import Any

from icetide.errors import SchemaError
from icetide.schema.convert.avro import AVRO_NAME

_INT32 = 2**31


def json_schema_to_avro(schema: dict[str, Any], name: str = "Value") -> dict[str, Any]:
    """The Avro record of an object JSON Schema.

    >>> json_schema_to_avro({"type": "object", "required": ["id"], "properties": {
    ...     "id": {"type": "integer"}, "at": {"type": "string", "format": "date"}}})["fields"]
    [{'name': 'id', 'type': 'long'}, {'name': 'at', 'type': ['null', {'type': 'int', \
'logicalType': 'date'}], 'default': None}]
    """
    converted = _Converter(schema).convert(schema, name)
    if not isinstance(converted, dict) or converted.get("type") != "record":
        raise SchemaError(
            "a table's JSON Schema must be an object with properties",
            hint="register the row object (or Debezium's envelope) as the subject's schema",
        )
    return converted


class _Converter:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.defined: set[str] = set()

    def resolve(self, schema: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return schema, None
        for prefix in ("#/definitions/", "#/$defs/"):
            if ref.startswith(prefix):
                key = ref[len(prefix) :]
                table = self.root.get(prefix[2:-1], {})
                if key in table:
                    return table[key], key
        raise SchemaError(f"JSON Schema $ref {ref!r} is not defined", hint="define it in $defs")

    def nullable(self, schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        kinds = schema.get("type")
        if isinstance(kinds, list) and "null" in kinds:
            rest = [k for k in kinds if k != "null"]
            return {**schema, "type": rest[0] if len(rest) == 1 else rest}, True
        for key in ("oneOf", "anyOf"):
            options = schema.get(key)
            if isinstance(options, list):
                rest = [o for o in options if o.get("type") != "null"]
                if len(rest) == 1:
                    return rest[0], len(rest) != len(options)
        return schema, False

    def convert(self, schema: dict[str, Any], name: str) -> Any:
        schema, ref_name = self.resolve(schema)
        name = ref_name or schema.get("title") or name
        kind = schema.get("type")
        if kind == "object" or "properties" in schema:
            props = schema.get("properties")
            extra = schema.get("additionalProperties")
            if not props and isinstance(extra, dict):
                return {"type": "map", "values": self.field(extra, name + "_value")[0]}
            record_name = name if AVRO_NAME.match(name) else "Record"
            if record_name in self.defined:
                return record_name
            self.defined.add(record_name)
            required = set(schema.get("required", []))
            fields = []
            for prop, sub in (props or {}).items():
                avro, nullable = self.field(sub, prop)
                if nullable or prop not in required:
                    inner = avro[1] if isinstance(avro, list) else avro
                    fields.append({"name": prop, "type": ["null", inner], "default": None})
                else:
                    fields.append({"name": prop, "type": avro})
            return {"type": "record", "name": record_name, "fields": fields}
        if kind == "array":
            items = schema.get("items", {})
            return {"type": "array", "items": self.field(items, name + "_item")[0]}
        if kind == "integer":
            connect = schema.get("connect.type")
            small = (
                schema.get("maximum", _INT32) < _INT32
                and schema.get("minimum", -_INT32 - 1) >= -_INT32
            )
            return "int" if connect in ("int8", "int16", "int32") or small else "long"
        if kind == "number":
            return "float" if schema.get("connect.type") == "float32" else "double"
        if kind == "string":
            fmt = schema.get("format")
            symbols = schema.get("enum")
            if (
                isinstance(symbols, list)
                and symbols
                and all(isinstance(s, str) and AVRO_NAME.match(s) for s in symbols)
            ):
                return {"type": "enum", "name": name, "symbols": list(symbols)}
            return {
                "date": {"type": "int", "logicalType": "date"},
                "date-time": {"type": "long", "logicalType": "timestamp-micros"},
                "time": {"type": "long", "logicalType": "time-micros"},
                "uuid": {"type": "string", "logicalType": "uuid"},
            }.get(fmt or "", "string")
        if kind in ("boolean", "null"):
            return kind
        raise SchemaError(
            f"JSON Schema at {name!r} has type {kind!r}, which has no column type",
            hint="give every property a single type (plus null for an optional one)",
        )

    def field(self, schema: dict[str, Any], name: str) -> tuple[Any, bool]:
        """(Avro type, nullable) of a property."""
        resolved, _ = self.resolve(schema)
        inner, nullable = self.nullable(resolved)
        avro = self.convert(inner, name)
        return (["null", avro] if nullable else avro), nullable
