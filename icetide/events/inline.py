"""The common message with an inline Connect schema, read in one pass.

Kafka Connect's JsonConverter with ``schemas.enable=true`` (its default) wraps every row
envelope as ``{"schema": {…}, "payload": {…}}``: the schema block, about 2 kB for an
eight-column table, comes again with every message, and the values in the payload are in
the schema's forms (a ``Decimal`` as base64 of its unscaled bytes, a ``Timestamp`` as
epoch milliseconds). The general decoder (:mod:`icetide.events.envelope`) reads the whole
schema block of each message to decode its values: on 2026-12-04 such messages went
through the ledger's decode at 7,215 per CPU-second, bare ones at 39,639
(``bench/decode_bench.py``).

A stream repeats very few schema blocks, so here each distinct block is read once
(:class:`InlineSchemas`): its row struct becomes one decoder per field, and the general
path's schema key is computed once. The payload is then the bare envelope
:func:`icetide.events.plain.read_plain` checks, and its images are decoded by the same
functions :func:`icetide.events.logical_types.decode_struct` calls.

The rule of :mod:`icetide.events.plain` holds: this path only *accepts*. A block whose
``before`` and ``after`` structs differ or are missing, a block holding a fractional
number (two parsers may disagree on it), a nested or placeholder value, a fractional
number anywhere but in a ``float32``/``float64`` field, a value its decoder refuses:
the general decoder reads that message from its bytes again and says what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from icetide.events.envelope import image_struct, is_unavailable
from icetide.events.logical_types import LOGICAL_DECODERS, TYPE_DECODERS, integer_range
from icetide.events.plain import PlainRow, Refuse, parse, read_plain
from icetide.schema.convert.connect import DECIMAL, plain_type
from icetide.schema.model import TableSchema
from icetide.schema.types import precision_scale

_FLOAT_DECODER = TYPE_DECODERS["float64"]
_INTEGER_DECODER = TYPE_DECODERS["int64"]
_STRING_DECODER = TYPE_DECODERS["string"]
_MAX_SCHEMAS = 64
"""Distinct schema blocks remembered per worker (a stream has a few per table)."""
SCHEMA_FIRST = b'{"schema"'
"""How a message with its inline schema block first begins (as JsonConverter writes it)."""
_OPENING, _PAYLOAD = SCHEMA_FIRST + b":", b',"payload":'
"""How a compact message begins, and what stands between its block and its payload."""
_AS_ARROW_READS: dict[str, tuple[str, ...]] = {
    "long": ("int64",),
    "int": ("int32",),
    "string": ("string",),
    "boolean": ("boolean",),
    "double": ("float64",),
}
"""A column type read by Arrow's JSON reader itself (ledger/plain_block.py) → the Connect
types whose decoder leaves every value Arrow takes for it as it is: the field's own
range (an ``int16`` field refuses what an ``int`` column takes), no rounding."""
_JSON_TYPES = {
    **dict.fromkeys(("int8", "int16", "int32", "int64"), "integer"),
    "string": "string",
    "bytes": "string",
    "boolean": "boolean",
}
"""A Connect type → the JSON type of its values (base64 text for bytes)."""
_TEXT_NAMES = frozenset(
    name
    for name, decoder in LOGICAL_DECODERS.items()
    if decoder is LOGICAL_DECODERS["io.debezium.data.Json"]
)
"""Logical names of strings decoded as the text they are (Json, Enum, Uuid, ...)."""


class InlineRow(NamedTuple):
    """A ``{"schema", "payload"}`` message whose payload is a bare row envelope."""

    row: PlainRow
    """The payload's envelope, images still in the schema's forms."""
    schema: dict[str, Any]
    """The message's schema block, as parsed."""


def read_inline(doc: Any) -> InlineRow | None:
    """The envelope of a parsed ``{"schema", "payload"}`` row message, checked as
    :func:`icetide.events.envelope.decode_document` checks it; None for any other.

    >>> row = read_inline({"schema": {"name": "s.inv.t.Envelope"}, "payload": {"op": "c",
    ...     "after": {"id": 1}, "source": {"connector": "mysql", "db": "inv", "table": "t",
    ...     "file": "binlog.000003", "pos": 4}}})
    >>> row.row.op, row.schema["name"]
    ('c', 's.inv.t.Envelope')
    """
    if type(doc) is not dict or len(doc) != 2:
        return None
    schema, payload = doc.get("schema"), doc.get("payload")
    if type(schema) is not dict or type(payload) is not dict:
        return None
    name = schema.get("name")
    if type(name) is str and name.endswith("Key"):
        return None  # a key message: the general decoder skips it
    row = read_plain(payload)
    return None if row is None else InlineRow(row, schema)


FieldDecoder = Callable[[Any], Any]


def _field_decoder(field: Mapping[str, Any], path: str) -> tuple[FieldDecoder | None, bool]:
    """``value -> decoded value`` for one field, as
    :func:`~icetide.events.logical_types.decode_value` decodes it (None: the value stays
    as it is), and whether a fractional number may come to it."""
    decoder = LOGICAL_DECODERS.get(str(field.get("name"))) or TYPE_DECODERS.get(
        plain_type(field) or ""
    )
    if decoder is None:
        return None, False
    if decoder is _INTEGER_DECODER:  # the usual values first: what the decoder returns
        low, high = integer_range(field)

        def integer(value: Any) -> Any:
            if type(value) is int and low <= value <= high:
                return value
            return decoder(value, field, path)

        return integer, False
    if decoder is _STRING_DECODER:
        return (lambda value: value if type(value) is str else decoder(value, field, path)), False
    return (lambda value: decoder(value, field, path)), decoder is _FLOAT_DECODER


@dataclass(frozen=True)
class StructReader:
    """A row image decoded by its inline struct (:meth:`image`), built once per block."""

    fields: Mapping[str, tuple[FieldDecoder | None, bool]]
    kinds: Mapping[str, tuple[str | None, str | None, str | None]]
    """Each field's Connect type, logical name and ``scale`` parameter (None: none)."""

    def image(self, values: dict[str, Any] | None) -> dict[str, Any] | None:
        """``values`` decoded as ``decode_struct`` decodes them; raises :class:`Refuse`
        for a value the general decoder must read (see module doc)."""
        if values is None:
            return None
        out: dict[str, Any] = {}
        fields = self.fields
        for name, value in values.items():
            if value is None:
                out[name] = None
                continue
            kind = type(value)
            if kind is dict or kind is list or (kind is str and is_unavailable(value)):
                raise Refuse
            decoder, floats = fields.get(name, (None, False))
            if kind is float and not floats:
                raise Refuse
            if decoder is None:
                out[name] = value
                continue
            try:
                out[name] = decoder(value)
            except Exception:
                raise Refuse from None
        return out


def struct_reader(schema: Mapping[str, Any]) -> StructReader | None:
    """The reader of a schema block's row images, or None when the general decoder must
    read its messages (``before`` and ``after`` not the same struct)."""
    after, before = image_struct(schema, "after"), image_struct(schema, "before")
    if after is None or before is None:
        return None
    inner_after = after["fields"]
    if inner_after != before["fields"]:
        return None
    fields: dict[str, tuple[FieldDecoder | None, bool]] = {}
    kinds: dict[str, tuple[str | None, str | None, str | None]] = {}
    for field in inner_after:
        if type(field) is not dict or type(field.get("field")) is not str:
            return None
        if field["field"] in fields:
            return None  # the general decoder takes the last of two: let it
        fields[field["field"]] = _field_decoder(field, field["field"])
        name, parameters = field.get("name"), field.get("parameters")
        scale = parameters.get("scale") if type(parameters) is dict else None
        kinds[field["field"]] = (
            plain_type(field),
            name if type(name) is str else None,
            scale if type(scale) is str else None,
        )
    return StructReader(fields, kinds)


def _unchanged(value: Any) -> Any:
    return value


class BlockDecoding(NamedTuple):
    """How a block's messages read as bare envelopes (:func:`block_decoders`)."""

    decoders: Mapping[str, FieldDecoder | None]
    """Each column's decoder (None: a column Arrow's reader types, its value as parsed)."""
    json_types: Mapping[str, str]
    """Each decoded column's JSON type, as its field sends it: ``integer``, ``string``
    or ``boolean`` (a value of another type is the field's decoder's to refuse)."""
    arrivals: Mapping[str, str]
    """The decoded columns whose values arrive as a schemaless message's hint of the
    same name says (the field's logical name; a ``Decimal`` only at its column's
    scale): what the block's array converters go by
    (:mod:`icetide.ledger.vector_values`)."""


def block_decoders(reader: StructReader, schema: TableSchema) -> BlockDecoding | None:
    """The decoders that make a message of this block readable as a bare envelope
    (ledger/plain_block.py, whose converters then take the decoded values as typed), or
    None when its messages are read one by one: fields and columns not the same names,
    a column Arrow's reader types itself whose field could decode a value otherwise than
    leaving it as it is (an ``int16`` field's range, a ``float32`` rounding, a logical
    type), a ``float`` column, a fractional or nested field of another column.

    >>> from icetide.schema.types import Column, parse_type
    >>> t = TableSchema("t", (Column(1, "id", parse_type("long"), False),
    ...     Column(2, "d", parse_type("date"))), ("id",))
    >>> def block(id_type):
    ...     fields = [{"field": "id", "type": id_type},
    ...               {"field": "d", "type": "int32", "name": "io.debezium.time.Date"}]
    ...     return struct_reader({"fields": [{"field": f, "fields": fields}
    ...                                      for f in ("before", "after")]})
    >>> decoders, json_types, arrivals = block_decoders(block("int64"), t)
    >>> decoders["id"] is None, decoders["d"](2), json_types, arrivals
    (True, datetime.date(1970, 1, 3), {'d': 'integer'}, {'d': 'io.debezium.time.Date'})
    >>> block_decoders(block("int16"), t) is None
    True
    """
    if set(reader.fields) != set(schema.by_name):
        return None
    out: dict[str, FieldDecoder | None] = {}
    json_types: dict[str, str] = {}
    arrivals: dict[str, str] = {}
    for column in schema.columns:
        kind, logical, scale = reader.kinds[column.name]
        arrow_reads = _AS_ARROW_READS.get(column.type.name)
        if column.type.name == "float":
            return None
        if arrow_reads is not None:
            as_text = kind == "string" and logical in _TEXT_NAMES
            if kind not in arrow_reads or not (logical is None or as_text):
                return None
            out[column.name] = None
        else:
            if kind not in _JSON_TYPES:
                return None  # a float or nested field: its values are read one by one
            # A fraction never reaches the decoder: the block parses the field's JSON type.
            out[column.name] = reader.fields[column.name][0] or _unchanged
            json_types[column.name] = _JSON_TYPES[kind]
            if logical is not None and (
                logical != DECIMAL or scale == str(precision_scale(column.type)[1])
            ):
                arrivals[column.name] = logical
    return BlockDecoding(out, json_types, arrivals)


def _has_float(value: Any) -> bool:
    if type(value) is float:
        return True
    if type(value) is dict:
        return any(_has_float(v) for v in value.values())
    if type(value) is list:
        return any(_has_float(v) for v in value)
    return False


@dataclass(frozen=True)
class InlineSchema:
    """What one distinct schema block gives: its general schema key, and its reader."""

    key: str | None
    reader: StructReader


class InlineMessage(NamedTuple):
    """A row message with an inline schema block: its envelope and its block's reader."""

    row: PlainRow
    block: InlineSchema


class InlineSchemas:
    """The distinct schema blocks a worker has read, by their exact text.

    ``key_of(raw)`` gives the general path's schema key of a message carrying the block,
    computed once per block (raising when the general path cannot parse the message:
    then nothing is remembered). A block is looked up by ``orjson``'s text of it, so
    ``1`` and ``1.0`` are two blocks; a block with a fractional number is never taken.

    A message written compactly (``{"schema":<block>,"payload":<envelope>}``, as Kafka
    Connect and icetide's capture write it) whose block text is one already read is
    split instead (:meth:`known`): only its payload is parsed."""

    def __init__(self, key_of: Callable[[bytes], str | None]) -> None:
        self._key_of = key_of
        self._known: dict[bytes, InlineSchema | None] = {}

    def known(self, raw: bytes) -> InlineMessage | None:
        """A compact message of a block already read: its payload's envelope and the
        block's reader, with the block's text compared, not parsed; None for any other
        (then :meth:`read` parses the message whole).

        When ``raw[10:end]`` is the text of a block read before, that text is a
        complete JSON value, so it is exactly the message's ``schema``; when the rest
        between ``,"payload":`` and the closing brace parses as one object, that is
        exactly its ``payload`` and the message has no other member."""
        found = self.split(raw)
        if found is None:
            return None
        row = read_plain(parse(found[0]))
        return None if row is None else InlineMessage(row, found[1])

    def split(self, raw: bytes) -> tuple[bytes, InlineSchema] | None:
        """A compact message of a block already read, split without parsing: the text
        of its payload, and its block; None for any other. The payload is the message's
        exactly when it is one JSON object (see :meth:`known`)."""
        if raw[:10] != _OPENING or raw[-1:] != b"}":
            return None
        end = raw.find(_PAYLOAD, 10)
        block = self._known.get(raw[10:end]) if end > 0 else None
        if block is None:
            return None
        return raw[end + len(_PAYLOAD) : -1], block

    def read(self, doc: Any, raw: bytes) -> InlineMessage | None:
        """A parsed message's envelope (:func:`read_inline`) and its block's reader, or
        None: the general decoder reads the message."""
        inline = read_inline(doc)
        if inline is None:
            return None
        block = self.get(inline.schema, raw)
        return None if block is None else InlineMessage(inline.row, block)

    def get(self, schema: dict[str, Any], raw: bytes) -> InlineSchema | None:
        """The block's reader and key, or None: the general decoder reads the message."""
        text = orjson.dumps(schema)
        if text in self._known:
            return self._known[text]
        found = None
        if not _has_float(schema) and (reader := struct_reader(schema)) is not None:
            try:
                found = InlineSchema(self._key_of(raw), reader)
            except Exception:  # the general path's error for this message, not the block's
                return None
        if len(self._known) >= _MAX_SCHEMAS:
            self._known.clear()
        self._known[text] = found
        return found
