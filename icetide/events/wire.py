"""Registry-tagged messages: the Confluent wire format, decoded to the Debezium JSON shape.

A producer using a schema registry (Debezium's ``AvroConverter``, ``JsonSchemaConverter``
or ``ProtobufConverter``, or any Confluent serializer) writes each message as::

    byte 0      magic byte, always 0
    bytes 1-4   the schema id in the registry, big-endian
    Protobuf    the message indexes (zig-zag varints: a count, then one index per
                nesting level; a single 0 byte means "the first message")
    rest        the payload: Avro binary, JSON text, or Protobuf binary

:func:`split_frame` reads that frame; :func:`decode_framed` turns the payload into the
same Python value the JSON form of the envelope parses to (``{"before", "after",
"source", "op", "ts_ms"}``), so everything after it — routing, projection, the ledger
rows — is the JSON path unchanged. Values are given the JSON form Debezium's
``JsonConverter`` writes for the same column: bytes as base64 text, Avro ``date`` as days
since the epoch, ``time-*`` and ``timestamp-*`` as microseconds, ``decimal`` as text,
``uuid`` as text.

Old-version messages: an Avro payload is read with its **writer** schema and, when a
reader schema is given (the table's current one), resolved onto it by Avro's schema
resolution rules (fields the reader added get their default, fields it dropped are
skipped, ``int`` widens to ``long``), so a message written before the table moved on
still applies. Writer schemas come from a :class:`WriterSchemas` lookup (id → schema);
the ledger fetches the ids a batch needs once on the driver and ships the texts to the
workers, so workers never call the registry.

Landing files carry registry-tagged messages as one base64 line each (see
docs/registry.md): :func:`unbase64_line` undoes that.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID

from icetide.errors import DecodeError

MAGIC = 0
AVRO, JSON_SCHEMA, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
DESERIALIZATION = "deserialization"
"""Dead-letter reason: the frame or its payload cannot be read with the writer schema."""
UNKNOWN_SCHEMA = "unknown_schema_id"
"""Dead-letter reason: the frame names a schema id the registry does not have."""
_EPOCH = date(1970, 1, 1)
_EPOCH_DT = datetime(1970, 1, 1)


@dataclass(frozen=True)
class Frame:
    """One framed message: schema id, Protobuf message indexes, payload bytes."""

    schema_id: int
    payload: bytes
    indexes: tuple[int, ...] = ()


@dataclass(frozen=True)
class WriterSchema:
    """A registry schema: its format (AVRO, JSON, PROTOBUF) and text.

    For Protobuf the text is the base64 of a serialized ``FileDescriptorProto`` (what
    Confluent returns for ``?format=serialized``, or ``.proto`` text compiled by protoc,
    :func:`~icetide.events.registry.descriptor_text`): the descriptor is what decoding
    needs, and Python's protobuf has no ``.proto`` parser.
    """

    format: str
    text: str
    version: int | None = None


WriterSchemas = Mapping[int, WriterSchema]
"""Schema id → writer schema, fetched once per batch on the driver."""


UNKNOWN_MAGIC = "unknown_magic_byte"
"""Dead-letter reason: a binary message that is neither JSON text nor a registry frame."""
_TEXT_CONTROLS = frozenset(b"\t\n\r")


def not_text(raw: bytes, registry: bool) -> DecodeError | None:
    """Why a message that starts with a control byte is no JSON text (JSON text never
    does, whitespace apart), or None: a registry frame without a registry to read it, or
    another serializer's frame (a magic byte that is not the Confluent wire format's 0).

    >>> not_text(b"\\x01\\x00\\x00\\x00\\x07x", registry=True).reason
    'unknown_magic_byte'
    >>> not_text(b'{"op": "c"}', registry=False) is None
    True
    """
    if not raw or raw[0] >= 0x20 or raw[0] in _TEXT_CONTROLS:
        return None
    if raw[0] == MAGIC and not registry:
        schema_id = int.from_bytes(raw[1:5], "big") if len(raw) >= 5 else None
        return DecodeError(
            DESERIALIZATION,
            f"message is a schema-registry frame (magic byte 0, schema id {schema_id}) and "
            "the pipeline has no transport.registry to read it: set transport.registry.url",
        )
    return DecodeError(
        UNKNOWN_MAGIC,
        f"message starts with byte 0x{raw[0]:02x}: not JSON text, and not the Confluent "
        "wire format (magic byte 0x00) either; it was written by another serializer",
    )


def is_framed(raw: bytes) -> bool:
    """Whether ``raw`` starts like a registry frame (JSON text never starts with 0x00).

    >>> is_framed(b"\\x00\\x00\\x00\\x00\\x07abc"), is_framed(b'{"op": "c"}')
    (True, False)
    """
    return len(raw) >= 5 and raw[0] == MAGIC


def _varint(data: bytes, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if at >= len(data):
            raise DecodeError(DESERIALIZATION, "the Protobuf message indexes are cut short")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at  # zig-zag
        shift += 7
        if shift > 63:
            raise DecodeError(DESERIALIZATION, "a Protobuf message index is too long")


def split_frame(raw: bytes, *, protobuf: bool = False) -> Frame:
    """Read the frame of ``raw``; ``protobuf`` reads the message indexes too.

    >>> split_frame(b"\\x00\\x00\\x00\\x01\\x2ahello")
    Frame(schema_id=298, payload=b'hello', indexes=())
    >>> split_frame(b"\\x00\\x00\\x00\\x00\\x05\\x00pb", protobuf=True).indexes
    (0,)
    >>> split_frame(b"\\x00\\x00\\x00\\x00\\x05\\x04\\x02\\x06pb", protobuf=True).indexes
    (1, 3)
    """
    if not is_framed(raw):
        raise DecodeError(
            DESERIALIZATION,
            "message is not in the registry wire format (magic byte 0, then a 4-byte schema id)",
        )
    schema_id = int.from_bytes(raw[1:5], "big")
    if not protobuf:
        return Frame(schema_id, raw[5:])
    count, at = _varint(raw, 5)
    if count == 0:
        return Frame(schema_id, raw[at:], (0,))
    if count < 0 or count > 100:
        raise DecodeError(DESERIALIZATION, f"bad Protobuf message-index count {count}")
    indexes = []
    for _ in range(count):
        index, at = _varint(raw, at)
        indexes.append(index)
    return Frame(schema_id, raw[at:], tuple(indexes))


def frame(schema_id: int, payload: bytes, indexes: tuple[int, ...] | None = None) -> bytes:
    """The wire bytes of a payload (``indexes`` for Protobuf): what producers write.

    >>> frame(1, b"x")
    b'\\x00\\x00\\x00\\x00\\x01x'
    >>> frame(1, b"x", (0,))
    b'\\x00\\x00\\x00\\x00\\x01\\x00x'
    """
    head = bytes([MAGIC]) + schema_id.to_bytes(4, "big")
    if indexes is None:
        return head + payload
    if indexes == (0,):
        return head + b"\x00" + payload
    out = bytearray(_zigzag(len(indexes)))
    for index in indexes:
        out += _zigzag(index)
    return head + bytes(out) + payload


def _zigzag(value: int) -> bytes:
    number = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = number & 0x7F
        number >>= 7
        if number:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def unbase64_line(line: bytes) -> bytes:
    """A landing-file line holding one framed message in base64 → the message bytes.

    >>> unbase64_line(b"AAAAAAF4\\r")
    b'\\x00\\x00\\x00\\x00\\x01x'
    """
    try:
        return base64.b64decode(line.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise DecodeError(DESERIALIZATION, f"landing line is not base64: {exc}") from None


def json_form(value: Any) -> Any:
    """A decoded payload value in the form Debezium's JSON converter writes.

    >>> json_form({"d": date(1970, 1, 3), "b": b"\\x01", "n": Decimal("1.50")})
    {'d': 2, 'b': 'AQ==', 'n': '1.50'}
    """
    if isinstance(value, dict):
        return {k: json_form(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_form(v) for v in value]
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return json_form(value[1])  # fastavro's (record name, value) for a named union
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        epoch = _EPOCH_DT if value.tzinfo is None else _EPOCH_DT.replace(tzinfo=UTC)
        delta = value - epoch
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, date):
        return (value - _EPOCH).days
    if isinstance(value, time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + (
            value.microsecond
        )
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, UUID):
        return str(value)
    return value


def decode_framed(
    raw: bytes, schemas: WriterSchemas, *, reader: Mapping[str, Any] | None = None
) -> Any:
    """The payload of a framed message as the JSON form's Python value.

    ``reader`` (Avro only) is the schema to resolve onto (the table's current version).
    Raises :class:`DecodeError` (``deserialization`` or ``unknown_schema_id``) naming the
    schema id; never anything else for bad input.
    """
    schema_id = int.from_bytes(raw[1:5], "big") if is_framed(raw) else -1
    writer = schemas.get(schema_id)
    if writer is None:
        if schema_id < 0:
            split_frame(raw)  # raises the not-framed error
        raise DecodeError(UNKNOWN_SCHEMA, f"schema id {schema_id} is not in the registry")
    try:
        if writer.format == AVRO:
            value = json_form(_avro(split_frame(raw).payload, writer.text, reader))
            return _with_digits(value, _connect_form(writer, ()))
        if writer.format == JSON_SCHEMA:
            value = _json(split_frame(raw).payload, writer.text)
            return _with_digits(value, _connect_form(writer, ()))
        if writer.format == PROTOBUF:
            framed = split_frame(raw, protobuf=True)
            value = _protobuf(framed.payload, writer.text, framed.indexes)
            return _with_digits(value, _connect_form(writer, framed.indexes))
    except DecodeError:
        raise
    except Exception as exc:  # any reader failure is this message's fault, not ours
        raise DecodeError(
            DESERIALIZATION,
            f"cannot read the {writer.format} payload with schema id {schema_id}: "
            f"{type(exc).__name__}: {exc}",
        ) from None
    raise DecodeError(DESERIALIZATION, f"schema id {schema_id} has format {writer.format!r}")


_CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_FORMS: dict[tuple[str, str, tuple[int, ...]], Prepared | None] = {}


Prepared = tuple[Any, dict[str, Any]]
"""A writer schema in its Avro form with its named records: what :func:`_walk` needs."""


def _connect_form(writer: WriterSchema, indexes: tuple[int, ...]) -> Prepared | None:
    """The writer schema as Avro with its Connect names (``connect.name``), whatever the
    format, prepared once per schema; None when no value of it needs turning into digits
    (no Connect Decimal in it, or a schema the converters do not take)."""
    key = (writer.format, writer.text, indexes[:1])
    if key not in _FORMS:
        try:
            if writer.format == AVRO:
                form: Any = json.loads(writer.text)
            elif writer.format == JSON_SCHEMA:
                from icetide.schema.convert.json_schema import json_schema_to_avro

                form = json_schema_to_avro(json.loads(writer.text))
            else:
                from google.protobuf import descriptor_pb2

                from icetide.schema.convert.protobuf import protobuf_to_avro

                file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(writer.text))
                top = file.message_type[indexes[0] if indexes else 0].name
                form = protobuf_to_avro(file, top)
        except Exception:  # a schema the converters do not take: values stay as decoded
            form = None
        _FORMS[key] = _prepare(form)
    return _FORMS[key]


def _prepare(schema: Any) -> Prepared | None:
    if schema is None or _CONNECT_DECIMAL not in json.dumps(schema):
        return None  # nothing to turn into digits: decoding skips the walk
    named: dict[str, Any] = {}
    _collect(schema, named)
    return schema, named


def decimal_texts(value: Any, schema: Any) -> Any:
    """``value`` with each Connect ``Decimal`` its writer schema carries as bytes (a
    ``connect.name`` without Avro's ``decimal`` logical type, so still base64 text here)
    turned into its decimal text: every registry decimal reaches the projection as the
    digits its schema means, never as a string that could be read two ways.

    >>> dec = {"type": "bytes", "connect.name": _CONNECT_DECIMAL,
    ...        "connect.parameters": {"scale": "2"}}
    >>> decimal_texts({"after": {"p": "/4U="}}, {"type": "record", "name": "E", "fields": [
    ...     {"name": "after", "type": ["null", {"type": "record", "name": "V", "fields": [
    ...         {"name": "p", "type": dec}]}]}]})
    {'after': {'p': '-1.23'}}
    """
    prepared = _prepare(schema)
    return value if prepared is None else _walk(value, *prepared)


def _with_digits(value: Any, prepared: Prepared | None) -> Any:
    return value if prepared is None else _walk(value, *prepared)


def _collect(schema: Any, named: dict[str, Any]) -> None:
    if isinstance(schema, list):
        for branch in schema:
            _collect(branch, named)
    elif isinstance(schema, dict):
        if schema.get("type") == "record" and isinstance(schema.get("name"), str):
            named.setdefault(schema["name"], schema)
            for item in schema.get("fields") or ():
                _collect(item.get("type"), named)
        elif schema.get("type") == "array":
            _collect(schema.get("items"), named)
        elif schema.get("type") == "map":
            _collect(schema.get("values"), named)


def _walk(value: Any, schema: Any, named: dict[str, Any]) -> Any:
    if value is None:
        return None
    if isinstance(schema, str):
        schema = named.get(schema, schema)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        return _walk(value, branches[0], named) if len(branches) == 1 else value
    if not isinstance(schema, dict):
        return value
    kind = schema.get("type")
    if kind == "record" and isinstance(value, dict):
        fields = {f.get("name"): f.get("type") for f in schema.get("fields") or ()}
        return {k: _walk(v, fields[k], named) if k in fields else v for k, v in value.items()}
    if kind == "array" and isinstance(value, list):
        return [_walk(v, schema.get("items"), named) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: _walk(v, schema.get("values"), named) for k, v in value.items()}
    if (
        schema.get("connect.name") == _CONNECT_DECIMAL
        and schema.get("logicalType") != "decimal"
        and isinstance(value, str)
    ):
        from icetide.events.logical_types import connect_decimal

        scale = int((schema.get("connect.parameters") or {}).get("scale", 0))
        return str(connect_decimal(value, scale, "decimal"))
    return value


_AVRO_CACHE: dict[tuple[str, str | None], Any] = {}


def _avro(payload: bytes, text: str, reader: Mapping[str, Any] | None) -> Any:
    import fastavro

    reader_text = json.dumps(reader, sort_keys=True) if reader is not None else None
    key = (text, reader_text)
    parsed = _AVRO_CACHE.get(key)
    if parsed is None:
        writer_schema = fastavro.parse_schema(json.loads(text))
        reader_schema = fastavro.parse_schema(dict(reader)) if reader is not None else None
        parsed = _AVRO_CACHE[key] = (writer_schema, reader_schema)
    writer_schema, reader_schema = parsed
    buffer = io.BytesIO(payload)
    value = fastavro.schemaless_reader(buffer, writer_schema, reader_schema)
    if buffer.tell() != len(payload):
        raise DecodeError(
            DESERIALIZATION,
            f"{len(payload) - buffer.tell()} byte(s) left after the Avro record: "
            "the writer schema does not match the payload",
        )
    return value


_VALIDATORS: dict[str, Any] = {}


def _json(payload: bytes, text: str) -> Any:
    import jsonschema

    validator = _VALIDATORS.get(text)
    if validator is None:
        schema = json.loads(text)
        cls = jsonschema.validators.validator_for(schema)
        validator = _VALIDATORS[text] = cls(schema)
    value = json.loads(payload.decode("utf-8"))
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise DecodeError(
            DESERIALIZATION, f"payload does not match its JSON Schema at {where}: {error.message}"
        )
    return value


_PROTO_CACHE: dict[tuple[str, tuple[int, ...]], Any] = {}


def protobuf_class(text: str, indexes: tuple[int, ...]) -> Any:
    """The message class that ``indexes`` name in the serialized file descriptor ``text``."""
    key = (text, indexes)
    cls = _PROTO_CACHE.get(key)
    if cls is not None:
        return cls
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text))
    pool = descriptor_pool.DescriptorPool()
    _add_with_imports(pool, proto)
    top = proto.message_type[indexes[0] if indexes else 0].name
    message = pool.FindMessageTypeByName(f"{proto.package}.{top}" if proto.package else top)
    for index in indexes[1:]:
        message = message.nested_types[index]
    cls = _PROTO_CACHE[key] = message_factory.GetMessageClass(message)
    return cls


def _add_with_imports(pool: Any, proto: Any) -> None:
    """Add ``proto`` to ``pool`` after the files it imports, taken from protobuf's default
    pool: the well-known types and Confluent's ``confluent/meta.proto`` (a descriptor
    compiled from ``.proto`` text names them as dependencies)."""
    # Importing meta_pb2 and the well-known types' modules loads them into the default pool.
    from confluent_kafka.schema_registry.confluent import meta_pb2  # noqa: F401
    from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2, wrappers_pb2

    del timestamp_pb2, wrappers_pb2  # imported for their side effect only

    for name in proto.dependency:
        try:
            pool.FindFileByName(name)
        except KeyError:
            imported = descriptor_pb2.FileDescriptorProto()
            descriptor_pool.Default().FindFileByName(name).CopyToProto(imported)
            _add_with_imports(pool, imported)
    pool.Add(proto)


def _protobuf(payload: bytes, text: str, indexes: tuple[int, ...]) -> Any:
    from google.protobuf.json_format import MessageToDict

    message = protobuf_class(text, indexes).FromString(payload)
    return _proto_values(
        MessageToDict(
            message,
            preserving_proto_field_name=True,
            # proto3 scalars without presence omit zero values; 0 is a value (an id, a pos).
            always_print_fields_with_no_presence=True,
        ),
        message,
    )


def _proto_values(value: Any, message: Any) -> Any:
    """MessageToDict's dict in the JSON converter's form: 64-bit integers as numbers (it
    writes them as text, JSON's number limit), and a field with presence that is unset
    (a message, a proto3 ``optional``) as null, which MessageToDict leaves out."""
    from google.protobuf.descriptor import FieldDescriptor

    wide = {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
    }
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        if field.name not in value:
            if field.has_presence:
                out[field.name] = None
            continue
        item = value[field.name]
        if field.type == FieldDescriptor.TYPE_MESSAGE and not field.is_repeated:
            item = _proto_values(item, getattr(message, field.name))
        elif field.type in wide and isinstance(item, str):
            item = int(item)
        out[field.name] = item
    return out
