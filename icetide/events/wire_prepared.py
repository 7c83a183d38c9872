"""Registry frames read by code prepared once per writer schema: the usual message fast.

:func:`icetide.events.wire.decode_framed` reads any registry frame, and alone says why
one cannot be read. For the usual one it does more than needed per message: it walks
every decoded Avro value again (:func:`~icetide.events.wire.json_form`) though most
schemas hold no value that needs it, validates JSON through ``jsonschema``'s general
machinery (two thirds of the ~200 µs a JSON Schema message cost per core on 2026-12-02,
bench/results/ingest.md), and turns Protobuf into a dict through ``MessageToDict`` and
back.

:func:`read_framed` gives the same value from a reader prepared once per writer schema:

* Avro: the parsed schema cached, and the ``json_form`` walk done only down the fields
  whose type it changes (``bytes``, ``fixed``, a ``logicalType``), none for most
  schemas;
* JSON Schema: the yes/no check made by ``fastjsonschema``, which compiles a schema to
  Python code once, for schemas acting only with the keywords Debezium's converter
  writes (``type``, ``properties``, ``required``, ``oneOf``/``anyOf``/``allOf``,
  ``items``, ``additionalProperties``, a local ``$ref``), whose meaning the two
  libraries and the drafts share; a schema with any other keyword ``jsonschema`` acts
  on gets no compiled check (``format`` is an annotation: the general decoder validates
  without a format checker), and ``jsonschema`` words every refusal;
* Protobuf: the fields read straight from the message, as ``MessageToDict`` then
  :func:`~icetide.events.wire._proto_values` give them, for messages of scalar, bytes
  and (non-recursive, non-well-known) message fields; any other message gets no reader.

The rule that keeps results identical (as in :mod:`icetide.events.plain`): this path
only *accepts*. ``None`` — no prepared reader for the schema, a payload it fails on, a
JSON document its checker does not find valid, a double that is not finite — means
"ask the general decoder", which reads the message again and gives the value or the
dead-letter reason and text.
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Callable
from typing import Any

from icetide.events.wire import (
    AVRO,
    JSON_SCHEMA,
    PROTOBUF,
    WriterSchema,
    WriterSchemas,
    _connect_form,
    _varint,
    _with_digits,
    json_form,
    protobuf_class,
)

Reader = Callable[[bytes], Any]
"""``payload -> decoded value``, or ``None`` when the general decoder must read it."""
_READERS: dict[tuple[WriterSchema, tuple[int, ...]], Reader | None] = {}


def read_framed(frame: bytes, schemas: WriterSchemas) -> Any:
    """What :func:`~icetide.events.wire.decode_framed` returns for ``frame``, or ``None``
    when only it can say (then it reads the message again). Never raises.

    >>> from icetide.events.wire import frame as framed
    >>> schema = {"type": "record", "name": "E", "fields": [{"name": "op", "type": "string"}]}
    >>> schemas = {1: WriterSchema(AVRO, json.dumps(schema))}
    >>> read_framed(framed(1, b"\\x02c"), schemas), read_framed(framed(2, b"\\x02c"), schemas)
    ({'op': 'c'}, None)
    """
    try:
        writer = schemas.get(int.from_bytes(frame[1:5], "big"))
        if writer is None or len(frame) < 5 or frame[0] != 0:
            return None
        payload: bytes = frame[5:]
        indexes: tuple[int, ...] = ()
        if writer.format == PROTOBUF:
            if frame[5:6] == b"\x00":
                payload, indexes = frame[6:], (0,)
            else:
                payload, indexes = _indexes(frame)
        key = (writer, indexes)
        if key in _READERS:
            reader = _READERS[key]
        else:
            reader = _READERS[key] = _prepare(writer, indexes)
        return None if reader is None else reader(payload)
    except Exception:  # the general decoder reads it again and says why
        return None


def _indexes(frame: bytes) -> tuple[bytes, tuple[int, ...]]:
    """The Protobuf message indexes after the schema id (as ``split_frame`` reads them)."""
    count, at = _varint(frame, 5)
    if count <= 0 or count > 100:
        raise ValueError("an unusual index count: the general decoder says why")
    indexes = []
    for _ in range(count):
        index, at = _varint(frame, at)
        indexes.append(index)
    return frame[at:], tuple(indexes)


def _prepare(writer: WriterSchema, indexes: tuple[int, ...]) -> Reader | None:
    try:
        if writer.format == AVRO:
            return _avro_reader(writer)
        if writer.format == JSON_SCHEMA:
            return _json_reader(writer)
        if writer.format == PROTOBUF:
            return _protobuf_reader(writer, indexes)
    except Exception:  # a schema the general decoder must read messages of
        return None
    return None


# --- Avro ---------------------------------------------------------------------------


_PRIMITIVE = frozenset({"null", "boolean", "int", "long", "float", "double", "string"})
Form = Callable[[Any], Any] | None
"""``value -> value in the JSON converter's form``; None where that is the value itself."""


def _form(schema: Any, named: dict[str, Any], open_: frozenset[str] = frozenset()) -> Form:
    """What :func:`~icetide.events.wire.json_form` does to a value fastavro read with
    ``schema``, done only where it changes something: a record walks only the fields
    whose schema holds bytes, fixed or a logical type (``json_form`` of any other value
    is the value). A schema not recognised here gets ``json_form`` itself.

    >>> _form({"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}, {})
    >>> _form({"type": "record", "name": "R", "fields": [{"name": "b", "type": "bytes"}]},
    ...       {})({"b": b"\x01"})
    {'b': 'AQ=='}
    """
    if isinstance(schema, str):
        if schema in _PRIMITIVE:
            return None
        if schema in named and schema not in open_:
            return _form(named[schema], named, open_ | {schema})
        return json_form  # bytes, fixed, an enum or a name not resolved here
    if isinstance(schema, list):
        forms = [_form(branch, named, open_) for branch in schema]
        if all(f is None for f in forms):
            return None
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            return json_form
        inner = forms[schema.index(branches[0])]
        assert inner is not None
        return lambda v: inner(v) if type(v) is dict else json_form(v)
    if not isinstance(schema, dict) or "logicalType" in schema:
        return json_form
    kind = schema.get("type")
    if kind == "enum":
        return None
    if kind in ("array", "map"):
        items = _form(schema.get("items") if kind == "array" else schema.get("values"), named)
        return None if items is None else json_form
    if kind != "record":
        return (
            _form(kind, named, open_) if isinstance(kind, str) and kind in _PRIMITIVE else json_form
        )
    fields: dict[str, Form] = {}
    for field in schema.get("fields") or ():
        if not isinstance(field, dict) or "logicalType" in field:
            return json_form
        fields[str(field.get("name"))] = _form(field.get("type"), named, open_)
    walks = {k: f for k, f in fields.items() if f is not None}
    if not walks:
        return None

    def record(value: Any) -> Any:
        if type(value) is not dict or not value.keys() <= fields.keys():
            return json_form(value)
        out = {}
        for key, item in value.items():
            walk = walks.get(key)
            out[key] = item if walk is None or item is None else walk(item)
        return out

    return record


def _named(schema: Any) -> dict[str, Any]:
    """The records of ``schema`` by the names a reference may use (name, full name); a
    name two records share is left out (its references get ``json_form`` itself)."""
    found: dict[str, list[Any]] = {}

    def visit(item: Any) -> None:
        if isinstance(item, list):
            for branch in item:
                visit(branch)
        elif isinstance(item, dict):
            kind = item.get("type")
            if kind == "record" and isinstance(item.get("name"), str):
                name, space = item["name"], item.get("namespace")
                names = {name, name.rsplit(".", 1)[-1]}
                if isinstance(space, str) and space and "." not in name:
                    names.add(f"{space}.{name}")
                for each in names:
                    found.setdefault(each, []).append(item)
                for field in item.get("fields") or ():
                    if isinstance(field, dict):
                        visit(field.get("type"))
            elif kind in ("array", "map"):
                visit(item.get("items") if kind == "array" else item.get("values"))
            elif isinstance(kind, (dict, list)):
                visit(kind)

    visit(schema)
    return {name: records[0] for name, records in found.items() if len(records) == 1}


def _avro_reader(writer: WriterSchema) -> Reader:
    from fastavro import parse_schema, schemaless_reader

    schema = json.loads(writer.text)
    form = _form(schema, _named(schema))
    parsed = parse_schema(json.loads(writer.text))
    digits = _connect_form(writer, ())

    def read(payload: bytes) -> Any:
        buffer = io.BytesIO(payload)
        value = schemaless_reader(buffer, parsed, None)
        if buffer.tell() != len(payload):
            return None  # bytes left over: the general decoder's dead letter
        return _with_digits(value if form is None else form(value), digits)

    return read


# --- JSON Schema --------------------------------------------------------------------

Check = Callable[[Any], bool]
_CHECKED = frozenset(
    {"$ref", "type", "properties", "required", "oneOf", "anyOf", "allOf", "items"}
    | {"additionalProperties", "definitions", "$defs"}
)
"""The keywords a schema may act with to get a compiled check: the ones Debezium's
converter writes, whose meaning no draft from 4 to 2020-12 changes (``items`` as one
schema, ``$ref`` with no sibling that acts). ``enum`` and ``const`` are not among them:
``fastjsonschema`` compares with ``==`` (``True == 1``), ``jsonschema`` does not."""
_ANNOTATIONS = frozenset({"format", "default", "title", "description", "examples", "$comment"})
"""Keywords that validate nothing here (the general decoder has no format checker)."""
_CODE_DRAFT = {
    "Draft4Validator": "http://json-schema.org/draft-04/schema#",
    "Draft6Validator": "http://json-schema.org/draft-06/schema#",
}
"""The draft the code is compiled for, by the schema's own draft: 4 and 6 as they are,
7 for 7 and later (2019-09 and 2020-12 mean the same by the keywords allowed here; in
draft 4 alone 1.0 is not an ``integer``)."""


def _checkable(schema: Any, known: frozenset[str]) -> bool:
    """Whether every subschema of ``schema`` acts only with :data:`_CHECKED` keywords
    (any other keyword ``known`` to the validator sends the schema to ``jsonschema``),
    every ``$ref`` is local and alone, and no ``$id`` moves the base URI."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or "$id" in schema or isinstance(schema.get("id"), str):
        return False
    acting = (known & schema.keys()) - _ANNOTATIONS
    if acting - _CHECKED:
        return False
    if "$ref" in schema:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#") or acting - {"$ref"}:
            return False
    subschemas: list[Any] = []
    for keyword in ("properties", "definitions", "$defs"):
        children = schema.get(keyword, {})
        if not isinstance(children, dict):
            return False
        subschemas += children.values()
    for keyword in ("oneOf", "anyOf", "allOf"):
        branches = schema.get(keyword, [])
        if not isinstance(branches, list):
            return False
        subschemas += branches
    for keyword in ("items", "additionalProperties"):
        if keyword in schema:
            subschemas.append(schema[keyword])  # a list of items is not a schema: refused
    return all(_checkable(child, known) for child in subschemas)


def _without_defaults(schema: Any) -> Any:
    """``schema`` without ``default`` annotations: ``fastjsonschema`` writes a default
    into the document it checks, and the decoded value must stay as sent."""
    if isinstance(schema, list):
        return [_without_defaults(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "default":
            continue
        if key in ("properties", "definitions", "$defs") and isinstance(value, dict):
            out[key] = {name: _without_defaults(child) for name, child in value.items()}
        else:
            out[key] = _without_defaults(value)
    return out


def _json_checker(schema: Any, validator: Any) -> Check | None:
    """``instance -> valid`` answered by ``fastjsonschema``'s code compiled from
    ``schema``, for a schema :func:`_checkable` finds acting only with keywords whose
    meaning both libraries and every draft share; None sends the schema's messages to
    ``validator`` (``jsonschema``), which also words every refusal."""
    import fastjsonschema

    known = frozenset(type(validator).VALIDATORS)
    if not _checkable(schema, known):
        return None
    draft = _CODE_DRAFT.get(type(validator).__name__, "http://json-schema.org/draft-07/schema#")
    document = {**_without_defaults(schema), "$schema": draft}
    try:
        compiled = fastjsonschema.compile(document, use_formats=False)
    except fastjsonschema.JsonSchemaDefinitionException:
        return None
    invalid = fastjsonschema.JsonSchemaValueException

    def check(instance: Any) -> bool:
        try:
            compiled(instance)
        except invalid:
            return False
        return True

    return check


def _json_reader(writer: WriterSchema) -> Reader | None:
    from jsonschema.validators import validator_for

    schema = json.loads(writer.text)
    validator = validator_for(schema)(schema)  # as the general decoder builds it
    if validator.format_checker is not None or type(validator).__name__ == "Draft3Validator":
        return None
    check = _json_checker(schema, validator)
    if check is None:
        return None
    digits = _connect_form(writer, ())

    def read(payload: bytes) -> Any:
        value = json.loads(payload.decode("utf-8"))
        if not check(value):
            return None  # invalid: the general decoder words the error
        return _with_digits(value, digits)

    return read


# --- Protobuf -----------------------------------------------------------------------

Fields = tuple[tuple[str, bool, Callable[[Any], Any]], ...]
"""Per field, in declaration order: name, whether it has presence, value converter."""


class _NotFinite(Exception):
    """A float MessageToDict writes as text: the general decoder reads the message."""


def _fields(descriptor: Any, seen: frozenset[str]) -> Fields | None:
    """How to read each field of ``descriptor`` as ``MessageToDict`` then
    ``_proto_values`` give it, or None for a message with a field read otherwise."""
    from google.protobuf.descriptor import FieldDescriptor as F

    if descriptor.full_name.startswith("google.protobuf.") or descriptor.full_name in seen:
        return None  # well-known types have their own JSON form; recursion: keep it simple
    scalars = {
        F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_SINT32, F.TYPE_FIXED32, F.TYPE_SFIXED32,
        F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_SINT64, F.TYPE_FIXED64, F.TYPE_SFIXED64,
    }  # fmt: skip
    out = []
    for field in descriptor.fields:
        if field.is_repeated or field.is_extension:
            return None
        convert: Callable[[Any], Any]
        if field.type in scalars:
            convert = int
        elif field.type == F.TYPE_BOOL:
            convert = bool
        elif field.type == F.TYPE_STRING:
            convert = str
        elif field.type == F.TYPE_BYTES:
            convert = _base64
        elif field.type == F.TYPE_DOUBLE:
            convert = _finite
        elif field.type == F.TYPE_FLOAT:
            convert = _shortest
        elif field.type == F.TYPE_MESSAGE:
            nested = _fields(field.message_type, seen | {descriptor.full_name})
            if nested is None:
                return None
            convert = _nested(nested)
        else:
            return None  # enums, groups: the general decoder
        out.append((field.name, field.has_presence, convert))
    return tuple(out)


def _shortest(value: float) -> float:
    """A 32-bit float as MessageToDict writes it: the shortest digits that read back."""
    from google.protobuf.internal.type_checkers import ToShortestFloat

    return float(ToShortestFloat(_finite(value)))


def _nested(fields: Fields) -> Callable[[Any], Any]:
    return lambda message: _message(message, fields)


def _base64(value: bytes) -> str:
    return base64.b64encode(value).decode("utf-8")


def _finite(value: float) -> float:
    if math.isinf(value) or math.isnan(value):
        raise _NotFinite
    return value


def _message(message: Any, fields: Fields) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, presence, convert in fields:
        if presence and not message.HasField(name):
            out[name] = None
        else:
            out[name] = convert(getattr(message, name))
    return out


def _protobuf_reader(writer: WriterSchema, indexes: tuple[int, ...]) -> Reader | None:
    cls = protobuf_class(writer.text, indexes)
    fields = _fields(cls.DESCRIPTOR, frozenset())
    if fields is None:
        return None
    digits = _connect_form(writer, indexes)
    parse = cls.FromString

    def read(payload: bytes) -> Any:
        return _with_digits(_message(parse(payload), fields), digits)

    return read
