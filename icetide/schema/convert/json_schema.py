"""JSON Schema ↔ Avro (then :func:`~icetide.schema.convert.avro.from_avro_schema` → model).

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
``string`` + ``"connect.type":      bytes (the value is base64 text, as JsonConverter
"bytes"``                           writes it)
a primitive's ``title`` and         ``connect.name`` and ``connect.parameters``: a
``connect.parameters``              Connect logical type (``io.debezium.time.Date``)
                                    keeps its meaning, as Confluent's JsonSchemaConverter
                                    writes it
==================================  ======================================================

The other way, :func:`avro_to_json_schema` writes the JSON Schema of a Connect-shaped Avro
record (what capture registers for ``transport.format: json_schema``): the inverse of the
table above, so the registered schema reads back to the same Avro and validates the
envelope's JSON form as it is.
"""

from __future__ import annotations

from typing import Any

from icetide.errors import SchemaError
from icetide.schema.convert.avro import AVRO_NAME, nullable_branch

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
            return _connect_named(
                "int" if connect in ("int8", "int16", "int32") or small else "long", schema
            )
        if kind == "number":
            return _connect_named(
                "float" if schema.get("connect.type") == "float32" else "double", schema
            )
        if kind == "string":
            fmt = schema.get("format")
            symbols = schema.get("enum")
            if (
                isinstance(symbols, list)
                and symbols
                and all(isinstance(s, str) and AVRO_NAME.match(s) for s in symbols)
            ):
                return {"type": "enum", "name": name, "symbols": list(symbols)}
            if schema.get("connect.type") == "bytes":
                return _connect_named("bytes", schema)
            return {
                "date": {"type": "int", "logicalType": "date"},
                "date-time": {"type": "long", "logicalType": "timestamp-micros"},
                "time": {"type": "long", "logicalType": "time-micros"},
                "uuid": {"type": "string", "logicalType": "uuid"},
            }.get(fmt or "", _connect_named("string", schema))
        if kind in ("boolean", "null"):
            return _connect_named(kind, schema)
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


def _connect_named(avro: str, schema: dict[str, Any]) -> Any:
    """A primitive Avro type, with the Connect logical name (``title``) and parameters
    kept as ``connect.name``/``connect.parameters`` when the JSON Schema gives them."""
    title = schema.get("title")
    if not isinstance(title, str) or not title:
        return avro
    out: dict[str, Any] = {"type": avro, "connect.name": title}
    if isinstance(schema.get("connect.parameters"), dict):
        out["connect.parameters"] = dict(schema["connect.parameters"])
    return out


_JSON_PRIMITIVES: dict[str, dict[str, Any]] = {
    "int": {"type": "integer", "connect.type": "int32"},
    "long": {"type": "integer", "connect.type": "int64"},
    "float": {"type": "number", "connect.type": "float32"},
    "double": {"type": "number", "connect.type": "float64"},
    "boolean": {"type": "boolean"},
    "string": {"type": "string"},
    "bytes": {"type": "string", "connect.type": "bytes"},
    "null": {"type": "null"},
}


def avro_to_json_schema(avro: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of an Avro record as :func:`connect_to_avro
    <icetide.schema.convert.connect.connect_to_avro>` writes it (plain types, Connect
    names as ``connect.name``): what Confluent's JsonSchemaConverter registers for the
    same Connect schema. Records other than the root go to ``definitions`` (keyed by
    their name, dots made ``_``) and are referenced with ``$ref``, so a record used twice
    (``before``/``after``) is defined once; :func:`json_schema_to_avro` reads it back to
    the same Avro field types.

    >>> js = avro_to_json_schema({"type": "record", "name": "s.Value", "fields": [
    ...     {"name": "id", "type": "int"},
    ...     {"name": "d", "default": None, "type": [
    ...         "null", {"type": "int", "connect.name": "io.debezium.time.Date"}]}]})
    >>> js["required"], js["properties"]["d"]["oneOf"][1]["title"]
    (['id'], 'io.debezium.time.Date')
    >>> json_schema_to_avro(js)["fields"][1]["type"][1]
    {'type': 'int', 'connect.name': 'io.debezium.time.Date'}
    """
    definitions: dict[str, Any] = {}
    named: dict[str, str] = {}

    def convert(item: Any, root: bool = False) -> dict[str, Any]:
        if isinstance(item, str) and item in named:
            return {"$ref": f"#/definitions/{named[item]}"}
        if isinstance(item, str):
            item = {"type": item}
        if isinstance(item, list):
            inner, _ = nullable_branch(item, str(item))
            return {"oneOf": [{"type": "null"}, convert(inner)]}
        kind = item.get("type")
        if kind == "record":
            key = str(item["name"]).replace(".", "_")
            named[str(item["name"])] = key
            properties = {str(f["name"]): convert(f["type"]) for f in item["fields"]}
            required = [str(f["name"]) for f in item["fields"] if not _nullable(f["type"])]
            out = {"type": "object", "title": key, "properties": properties}
            out["required"] = required
            if root:
                return out
            definitions[key] = out
            return {"$ref": f"#/definitions/{key}"}
        if kind == "array":
            return {"type": "array", "items": convert(item["items"])}
        if kind == "map":
            return {"type": "object", "additionalProperties": convert(item["values"])}
        if kind not in _JSON_PRIMITIVES:
            raise SchemaError(
                f"Avro type {kind!r} has no JSON Schema form here",
                hint="capture writes Connect-shaped Avro: records, arrays, maps, primitives",
            )
        out = dict(_JSON_PRIMITIVES[kind])
        if isinstance(item.get("connect.name"), str):
            out["title"] = item["connect.name"]
        if isinstance(item.get("connect.parameters"), dict):
            out["connect.parameters"] = dict(item["connect.parameters"])
        return out

    schema = convert(avro, root=True)
    if definitions:
        schema["definitions"] = definitions
    return {"$schema": "http://json-schema.org/draft-07/schema#", **schema}


def _nullable(avro: Any) -> bool:
    return isinstance(avro, list) and "null" in avro
