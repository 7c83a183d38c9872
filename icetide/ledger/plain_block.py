"""A table's bare row envelopes read a block at a time by Arrow's JSON reader.

The one-pass read (:mod:`icetide.events.plain`, then
:func:`~icetide.ledger.decode.project_batches`' per-message loop) still spends ~16 µs of
Python per event on the 8-column table of ``bench/decode_bench.py``: a dict per
message, a call per column value. Here the messages of one Arrow batch are joined into
one NDJSON block and parsed by ``pyarrow.json`` (C++) with the table's value columns as
the explicit schema of ``before`` and ``after``; the envelope's checks and the column
values' typing are then array operations.

The same rule as the one-pass read keeps results identical: this path only *accepts*.
It takes a message only where it can tell for certain that the one-pass read takes it
and what row that read makes; every other message of the batch goes the per-message way
as before (:func:`~icetide.ledger.decode.row_projector`), in its place in the batch.
Any doubt about a whole block (Arrow's reader refusing one of its lines, an envelope
field of an unexpected type, a column the value schema lacks) has its halves read
instead (:func:`~icetide.ledger.envelope_block.halving`), and a table whose messages the
block mostly cannot take stops trying
(:data:`~icetide.ledger.envelope_block.GIVE_UP_AFTER`). Where Arrow cannot tell what
the per-message read can, the message is declined:

* a key present with ``null`` and a key absent read alike here: an update whose after
  image has a null value column (absent: unchanged TOAST, listed in ``_unavailable``)
  or an after image with a null required column is parsed again by ``orjson`` to tell
  which; a non-MySQL ``source`` whose ``file``/``pos`` are null or absent picks its
  position by their presence, told from the message's text
  (:func:`~icetide.ledger.envelope_block.keyed_by_text`);
* Arrow reads ``NaN`` where ``orjson`` refuses the message, so a message with the text
  ``NaN`` or ``Infinity`` anywhere is declined;
* Debezium's unchanged-TOAST placeholder in a text column is taken as the general read
  takes it (the one-pass read leaves such a message to that read): the value is null,
  and in an after image the column is listed in ``_unavailable``; in a key, it declines
  the message (the general read's ``missing_key``);
* a message with a line break, not starting with ``{``, or holding ``"payload"`` (an
  inline schema block, read by :mod:`icetide.events.inline`) is not offered to the
  block, and a block nesting deeper than the one-pass read takes is not read here.

Values of ``long``, ``int``, ``string``, ``boolean``, ``double`` and ``float`` columns
are typed by the JSON reader itself (the types whose one-pass converters take a JSON
value as it is). Every other scalar column's values (decimals, dates, timestamps, JSON
text, ...) are left to the reader's own inference and then typed value by value by the
one-pass read's own converters (:func:`~icetide.events.plain.value_converter`), which
take the same Python values from Arrow as from ``orjson`` when they are strings,
integers or booleans; a decimal column's fraction is taken as the one-pass read takes
it (when the message writes no longer number of its magnitude); a value of another JSON
type (a fraction elsewhere, whose digits a double may not keep, or a nested value)
declines its message. A list, map or struct column's values are taken from the message
parsed by ``orjson``, as the one-pass read takes them (:func:`_nested_values`): Arrow's
reader is told their usual shape (:func:`_json_shape`) only so that it infers nothing
inside them. A projection reading earlier schema versions or renamed columns, a key of
a nested type, messages with inline schemas of a table with nested columns, and refused
bare messages keep the per-message read. Arrow's reader may make an invalid array of
an inferred list (``[null, 4]``, Arrow 26): the block is validated after its parse, and
such a block is read by halves around that message.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from icetide.events.envelope import is_unavailable
from icetide.events.inline import BlockDecoding, FieldDecoder
from icetide.events.plain import (
    MAX_OPENERS,
    NESTED_LEAVES,
    Converter,
    Refuse,
    long_numbers,
    many_openers,
    value_converter,
)
from icetide.ledger.envelope_block import (
    ROUTE_FIELDS,
    SERIAL,
    Tries,
    child,
    envelope_checks,
    halving,
    keyed_by_text,
    mask,
    plain_texts,
)
from icetide.ledger.vector_values import PLACEHOLDERS, VectorConverter, vector_converter
from icetide.schema.contract import ledger as c
from icetide.schema.model import TableSchema
from icetide.schema.types import IcetideType, ListType, MapType, StructType

_JSON_TYPES = {
    "long": pa.int64(),
    "int": pa.int64(),
    "string": pa.string(),
    "boolean": pa.bool_(),
    "double": pa.float64(),
    "float": pa.float64(),
}
"""The column types read in a block, as the JSON reader parses their values (a ``float``
column's value as a double first, as ``orjson`` reads it, then rounded)."""
_FROM_JSON = {"integer": pa.int64(), "string": pa.string(), "boolean": pa.bool_()}
"""A column's JSON type as a message's own schema names it → how the reader parses it."""
_NESTED = frozenset({"list", "map", "struct"})
_ENVELOPE_FIELDS = [ROUTE_FIELDS.field(name) for name in ("source", "transaction", "ts_ms")]
"""The envelope fields the checks read, declared as the route declares them: inferred,
a transaction id such as ``861:4294997432`` was read as a time, and the whole block
failed to parse."""
_INT_RANGE = (-(2**31), 2**31 - 1)
_NOT_ENVELOPE = ("payload", "schema", "ddl", "tableChanges")
MAX_DEPTH = MAX_OPENERS
"""A block whose messages nest this deep anywhere goes the per-message way: the one-pass
read leaves a message with more ``[``/``{`` than this to the general decoder, whose
parser fails on deep nesting (a dead letter) where Arrow's and ``orjson`` read it."""


@dataclass(frozen=True)
class BlockRows:
    """What a block read took: the ledger columns of the taken messages, in order."""

    taken: np.ndarray
    """Indices (into the block's messages) of the messages read here, ascending."""
    columns: dict[str, pa.Array]
    """Ledger columns (:data:`~icetide.schema.contract.ledger`) of the taken messages,
    typed as the target schema has them."""


BlockReader = Callable[[Sequence[bytes | None]], BlockRows | None]


def block_reader(
    schema: TableSchema,
    layout: TableSchema,
    target: pa.Schema,
    hints: Mapping[int, str] | None = None,
    decoding: BlockDecoding | None = None,
) -> BlockReader | None:
    """The block read of a table whose values ``schema`` projects onto ``layout``, its
    rows typed as ``target`` (:func:`~icetide.ledger.decode.projected_arrow_schema`)
    has them, ``hints`` saying how values arrive (the projection's; None: the schema's
    ``sink.logical``); None when the table is not read this way (see the module).

    ``decoding``: the messages are the payloads of messages with an inline schema block,
    whose fields decode each column's values first
    (:func:`~icetide.events.inline.block_decoders`); the converters then take them as
    values their schema typed, as the per-message read of such a message does (no
    fraction for a decimal: the block's field decides what a value may be), each column
    parsed as the JSON type its field sends (another fails the block)."""
    by_layout = layout.by_name
    if not set(schema.by_name) <= set(by_layout):
        return None
    nested = [col for col in schema.columns if col.type.name in _NESTED]
    if nested and (decoding is not None or any(k.type.name in _NESTED for k in schema.key_columns)):
        return None
    hints = schema.sink.logical if hints is None else hints
    # Declared: the JSON reader types these. ``texts``: typed columns learnt to arrive
    # as text that the reader would otherwise infer as timestamps (losing the text).
    declared = {
        col.name: _JSON_TYPES[col.type.name]
        for col in schema.columns
        if col.type.name in _JSON_TYPES
    }
    declared.update(
        (col.name, shape) for col in nested if (shape := _json_shape(col.type)) is not None
    )
    texts: set[str] = set()
    if decoding is not None:  # each column as its field sends it: nothing inferred
        declared.update((name, _FROM_JSON[kind]) for name, kind in decoding.json_types.items())

    def options() -> pj.ParseOptions:
        image = pa.struct([*declared.items(), *((name, pa.string()) for name in sorted(texts))])
        explicit = pa.schema(
            [("before", image), ("after", image), ("op", pa.string()), *_ENVELOPE_FIELDS]
        )
        return pj.ParseOptions(explicit_schema=explicit, unexpected_field_behavior="infer")

    parsing = [options()]
    typed = decoding is not None
    decode = {} if decoding is None else decoding.decoders
    generic = {
        col.name: _decoded(
            decode.get(col.name),
            value_converter(col, hints.get(col.id), by_layout[col.name], typed=typed),
        )
        for col in schema.columns
        if col.type.name not in _JSON_TYPES and col.type.name not in _NESTED
    }
    nested_converters = {
        col.name: value_converter(col, hints.get(col.id), by_layout[col.name]) for col in nested
    }
    fractions = {
        col.name: value_converter(col, hints.get(col.id), by_layout[col.name], decimal_floats=True)
        for col in schema.columns
        if col.type.name == "decimal" and not typed
    }
    key_converters = {
        col.name: (
            _decoded(decode.get(col.name), value_converter(col, hints.get(col.id), typed=typed)),
            value_converter(col, hints.get(col.id), decimal_floats=True)
            if col.type.name == "decimal" and not typed
            else None,
        )
        for col in schema.key_columns
        if col.name in generic
    }
    row_type = target.field(c.AFTER).type
    column_order = [col.name for col in schema.columns]
    vectors = {
        col.name: vector
        for col in schema.columns
        if col.name in generic
        and (
            vector := vector_converter(
                col,
                row_type.field(col.name).type,
                decoding.arrivals.get(col.name) if decoding else hints.get(col.id),
                decoding is None,
            )
        )
        is not None
    }
    keys = [col.name for col in schema.key_columns]
    required = [col.name for col in schema.value_columns if not col.nullable]
    values = [col.name for col in schema.value_columns]
    ints = [col.name for col in schema.columns if col.type.name == "int"]
    names = frozenset(schema.by_name)

    def part(raws: Sequence[bytes | None], offered: np.ndarray) -> BlockRows | None:
        """The messages ``offered`` read as one block; None when the block as a whole
        cannot be read here (then its halves are tried)."""
        lines = [raws[i] for i in offered]
        text = b"\n".join(lines)
        try:
            doc = pj.read_json(io.BytesIO(text), SERIAL, parsing[0]).combine_chunks()
            # Arrow 26 infers a list whose first element is null (``[null, 4]``) as an
            # array whose offsets run past its values: reading it would raise, and stop
            # the batch. Its message is read on its own instead.
            doc.validate()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError):
            return None  # a message Arrow refuses (or a type it cannot tell) somewhere
        inferred = _inferred_instants(doc, generic.keys() - texts)
        if inferred:  # read them as the text they are, from now on
            texts.update(inferred)
            parsing[0] = options()
            return part(raws, offered)
        if doc.num_rows != len(offered) or any(k in doc.column_names for k in _NOT_ENVELOPE):
            return None
        if max(_depth(f.type, MAX_DEPTH) for f in doc.schema) >= MAX_DEPTH:
            return None  # nested deeper than the general decoder reads: its dead letter
        for side in ("before", "after"):
            if not {f.name for f in doc.schema.field(side).type} <= names:
                return None  # a column the value schema lacks: rescued per message
        envelope = envelope_checks(doc, keyed_by_text(text, lines))
        if envelope is None:
            return None
        ok, position, text_of, tx_id, source_ms = envelope
        assert position is not None and text_of is not None  # numbered
        op = doc.column("op").combine_chunks()
        before = doc.column("before").combine_chunks()
        after = doc.column("after").combine_chunks()
        deleted = pc.equal(op, "d")
        ok &= mask(pc.if_else(deleted, before.is_valid(), after.is_valid()))
        images = []
        longs: dict[int, frozenset[float]] = {}

        def long_numbers_of(i: int) -> frozenset[float]:
            if i not in longs:
                longs[i] = long_numbers(raws[offered[i]])
            return longs[i]

        holders = []
        for img in (before, after):
            ok &= _values_ok(img, ints)
            holders.append(_placeholders(img, names))
            images.append(_generic_values(img, generic, fractions, long_numbers_of, ok, vectors))
        if nested_converters:
            nested_read = _nested_values(raws, offered, (before, after), nested_converters, ok)
            for typed_image, nested_image in zip(images, nested_read, strict=True):
                typed_image.update(nested_image)
        not_deleted, updated = ~mask(deleted), mask(pc.equal(op, "u"))
        unsure = np.zeros(len(ok), bool)
        for name in required:
            unsure |= not_deleted & _absent(after, name)
        for name in values:
            unsure |= updated & _absent(after, name)
        toast = _absent_columns(raws, offered, np.flatnonzero(ok & unsure), ok, required, values)
        deletes = mask(deleted)
        unheld = np.zeros(len(ok), bool)
        for name in keys:
            ok &= ~np.where(deletes, _absent(before, name), _absent(after, name))
            ok &= ~np.where(deletes, holders[0].get(name, unheld), holders[1].get(name, unheld))
        typed_keys = _typed_keys(before, after, deletes, ok, key_converters, long_numbers_of)
        taken = np.flatnonzero(ok)
        pick = pa.array(taken, pa.int64())
        keys_out = {
            name: pa.array([typed_keys[name][i] for i in taken], target.field(name).type)
            if name in typed_keys
            else pc.if_else(deleted, before.field(name), after.field(name))
            .take(pick)
            .cast(target.field(name).type)
            for name in keys
        }
        ms = source_ms.take(pick)
        columns: dict[str, pa.Array] = {
            **keys_out,
            c.OP: op.take(pick),
            c.AFTER: _row(after, images[1], pick, row_type, deleted.take(pick), holders[1]),
            c.BEFORE: _row(before, images[0], pick, row_type, None, holders[0]),
            c.UNAVAILABLE: _string_lists(
                taken, _unavailable(toast, updated, not_deleted, holders[1], column_order)
            ),
            c.POSITION: position.take(pick),
            c.POSITION_TEXT: text_of.take(pick),
            c.SOURCE_TS: pc.if_else(
                pc.equal(ms, 0), pa.scalar(None, pa.int64()), pc.multiply(ms, 1000)
            ).cast(pa.timestamp("us", tz="UTC")),
            c.TX_ID: tx_id.take(pick),
            c.RESCUED: pa.nulls(len(taken), pa.string()),
        }
        return BlockRows(offered[taken], columns)

    tries = Tries()

    def read(raws: Sequence[bytes | None]) -> BlockRows | None:
        if tries.stopped:
            return None
        found = halving(plain_texts(raws), partial(part, raws))
        tries.after(len(raws), found)
        return joined(found)

    return read


def joined(parts: Sequence[BlockRows]) -> BlockRows | None:
    """The rows of several block reads of one batch as one, in message order (None when
    none took a message)."""
    if len(parts) <= 1:
        return parts[0] if parts else None
    taken = np.concatenate([p.taken for p in parts])
    columns = {
        name: pa.concat_arrays([p.columns[name] for p in parts]) for name in parts[0].columns
    }
    if (np.diff(taken) < 0).any():
        order = pa.array(np.argsort(taken, kind="stable"))
        taken, columns = taken[order.to_numpy()], {n: v.take(order) for n, v in columns.items()}
    return BlockRows(taken, columns)


def _string_lists(taken: np.ndarray, lists: Mapping[int, list[str]]) -> pa.Array:
    """A list-of-strings column over the messages ``taken`` (ascending): each message's
    list in ``lists`` (whose other keys are messages not taken), else empty; built from
    offsets, as most messages have none.

    >>> _string_lists(np.array([2, 5, 9]), {5: ["a", "b"], 7: ["x"]}).to_pylist()
    [[], ['a', 'b'], []]
    """
    lengths = np.zeros(len(taken), np.int32)
    values: list[str] = []
    if lists:
        keys = np.array(sorted(lists), np.int64)
        at = np.searchsorted(taken, keys)
        found = at < len(taken)
        found[found] = taken[at[found]] == keys[found]
        for key, slot in zip(keys[found], at[found], strict=True):
            lengths[slot] = len(lists[int(key)])
            values += lists[int(key)]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.string()))


def _decoded(decode: FieldDecoder | None, convert: Converter) -> Converter:
    """``convert`` of what ``decode`` (a field of the message's own schema) makes of a
    value; a value the decoder refuses goes the per-message way (whose general read
    says why)."""
    if decode is None:
        return convert

    def run(value: Any) -> Any:
        try:
            decoded = decode(value)
        except Exception:
            raise Refuse from None
        return convert(decoded)

    return run


_AS_PARSED = (pa.string(), pa.int64(), pa.bool_())
"""The JSON value types whose Python values Arrow gives exactly as ``orjson`` does (a
double may not keep a decimal's digits; a nested value goes the per-message way)."""


def _generic_values(
    image: pa.StructArray,
    generic: Mapping[str, Converter],
    fractions: Mapping[str, Converter],
    long_numbers_of: Callable[[int], frozenset[float]],
    ok: np.ndarray,
    vectors: Mapping[str, VectorConverter],
) -> dict[str, list[Any] | pa.Array]:
    """The image's values of the columns typed by the one-pass converters themselves
    (:func:`~icetide.events.plain.value_converter`: decimals, dates, times, ...), value
    by value as that read types them, for the messages still taken (``ok``, which is
    updated): a value a converter refuses, or a value of another JSON type, declines its
    message; the unchanged-TOAST placeholder stays null (:func:`_placeholders`).

    A decimal column's fractions (``fractions``: its converter taking floats) are taken
    as the one-pass read takes them, when the message writes no number of 16 or more
    digits with the value's magnitude (:func:`~icetide.events.plain.exact_decimals`;
    ``long_numbers_of``: a message's :func:`~icetide.events.plain.long_numbers`).

    A column with an array converter (``vectors``, :mod:`icetide.ledger.vector_values`)
    has the values it takes typed at once, as an array in the stored type; the others
    one by one, as above."""
    count = len(image)
    out: dict[str, list[Any] | pa.Array] = {}
    for name, convert in generic.items():
        column = child(image, name)
        converted: list[Any] = [None] * count
        out[name] = converted
        if column is None or column.type == pa.null():
            continue
        present = np.flatnonzero(mask(column.is_valid()) & ok)
        vector = vectors.get(name)
        if vector is not None:
            at_once, taken = vector(column)
            present = present[~taken[present]]
        fraction = fractions.get(name) if column.type == pa.float64() else None
        if column.type not in _AS_PARSED and fraction is None:
            ok[present] = False
            continue
        raw = column.to_pylist()
        for i in present:
            value = raw[i]
            if is_unavailable(value):
                continue  # not sent (_placeholders): stored as null
            try:
                if fraction is None:
                    converted[i] = convert(value)
                elif abs(value) in long_numbers_of(int(i)):
                    ok[i] = False  # maybe written with more digits than a double keeps
                else:
                    converted[i] = fraction(value)
            except Refuse:
                ok[i] = False
        if vector is not None:
            out[name] = _completed(at_once, taken, converted, present)
    return out


def _json_shape(ctype: IcetideType) -> pa.DataType | None:
    """How the JSON reader is told to read a nested column's usual values, so that it
    infers nothing inside them (Arrow 26 infers ``[null, "x"]`` as an invalid array, and
    the block would be read by halves around every such value): a list or struct of
    text, integers and booleans in their own shape, and a map as a struct whose fields
    (its keys) the reader finds. None: left to the reader's inference.

    >>> from icetide.schema.types import ListType, StringType
    >>> _json_shape(ListType(2, StringType()))
    ListType(list<item: string>)
    """
    if isinstance(ctype, ListType):
        element = _json_shape(ctype.element)
        return None if element is None else pa.list_(element)
    if isinstance(ctype, StructType):
        fields = [(f.name, _json_shape(f.type)) for f in ctype.fields]
        if any(kind is None for _, kind in fields):
            return None
        return pa.struct(fields)
    if isinstance(ctype, MapType):
        return pa.struct([]) if ctype.value.name in _JSON_LEAVES else None
    return _JSON_LEAVES.get(ctype.name)


_JSON_LEAVES = {name: _JSON_TYPES[name] for name in NESTED_LEAVES}
"""The leaf types a nested converter takes as they are, as the JSON reader parses them."""


def _nested_values(
    raws: Sequence[bytes | None],
    offered: np.ndarray,
    images: tuple[pa.StructArray, pa.StructArray],
    converters: Mapping[str, Converter],
    ok: np.ndarray,
) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """The before and after images' values of the list, map and struct columns
    (``converters``: the one-pass read's own, :func:`~icetide.events.plain.value_converter`),
    for the messages still taken (``ok``, which is updated), each read from the message
    parsed by ``orjson``, as the one-pass read parses it: Arrow's reader takes a map's
    keys as a struct's fields (an absent key and a null value alike, each message gaining
    the others' keys), so its nested values are not the message's. A message with more
    ``[``/``{`` than the one-pass read takes, a value a converter refuses, or the
    unchanged-TOAST placeholder in such a column declines its message (the one-pass read
    leaves each to the general one)."""
    count = len(ok)
    out: tuple[dict[str, list[Any]], dict[str, list[Any]]] = (
        {name: [None] * count for name in converters},
        {name: [None] * count for name in converters},
    )
    held = np.zeros(count, bool)
    for image in images:
        for name in converters:
            column = child(image, name)
            if column is not None and column.type != pa.null():
                held |= mask(column.is_valid())
    for i in np.flatnonzero(ok & held).tolist():
        raw = raws[offered[i]]
        assert raw is not None  # offered: a message's text
        if many_openers(raw):
            ok[i] = False
            continue
        try:
            doc = orjson.loads(raw)
            for side, values in zip(("before", "after"), out, strict=True):
                image = doc.get(side)
                if type(image) is not dict:
                    continue
                for name, convert in converters.items():
                    value = image.get(name)
                    if value is None:
                        continue
                    if is_unavailable(value):
                        raise Refuse
                    values[name][i] = convert(value)
        except (Refuse, orjson.JSONDecodeError):
            ok[i] = False
    return out


def _completed(
    at_once: pa.Array, taken: np.ndarray, converted: list[Any], rest: np.ndarray
) -> pa.Array:
    """A column's values typed at once (where ``taken``) with those typed one by one
    (``converted`` at the indices ``rest``)."""
    if not len(rest):
        return at_once
    return pc.if_else(pa.array(taken), at_once, pa.array(converted, at_once.type))


def _absent_columns(
    raws: Sequence[bytes | None],
    offered: np.ndarray,
    unsure: np.ndarray,
    ok: np.ndarray,
    required: Sequence[str],
    values: Sequence[str],
) -> dict[int, list[str]]:
    """For the messages ``unsure`` (block rows whose after image lacks a value the block
    cannot tell null from absent): which value columns their after image lacks, read
    from the message itself (``orjson``, as the one-pass read does). An update lists
    them as unchanged (``_unavailable``); a required column present and null declines
    its message (``ok`` is updated), as the one-pass read leaves it to the general one."""
    lacking: dict[int, list[str]] = {}
    for i in unsure:
        try:
            image = orjson.loads(raws[offered[i]]).get("after")
        except orjson.JSONDecodeError:
            image = None
        if type(image) is not dict or any(
            name in image and image[name] is None for name in required
        ):
            ok[i] = False
            continue
        lacking[i] = [name for name in values if name not in image]
    return lacking


def _inferred_instants(doc: pa.Table, names: Collection[str]) -> set[str]:
    """The columns of ``names`` the JSON reader inferred as timestamps or dates in either
    image: text it parsed, whose exact characters the converters need."""
    found = set()
    for side in ("before", "after"):
        for field in doc.schema.field(side).type:
            if field.name in names and (
                pa.types.is_timestamp(field.type) or pa.types.is_date(field.type)
            ):
                found.add(field.name)
    return found


def _values(image: pa.StructArray, name: str) -> list[Any]:
    """Column ``name``'s values in ``image`` (None throughout when no message has it)."""
    column = child(image, name)
    return [None] * len(image) if column is None else column.to_pylist()


def _absent(image: pa.StructArray, name: str) -> np.ndarray:
    """Where ``image`` has no value for column ``name`` (null or absent alike)."""
    column = child(image, name)
    if column is None:
        return np.ones(len(image), bool)
    return ~mask(column.is_valid())


def _typed_keys(
    before: pa.StructArray,
    after: pa.StructArray,
    deletes: np.ndarray,
    ok: np.ndarray,
    converters: Mapping[str, tuple[Converter, Converter | None]],
    long_numbers_of: Callable[[int], frozenset[float]],
) -> dict[str, list[Any]]:
    """The key columns typed by their own converters (a delete's from its before image),
    as the one-pass read types a key, for the messages still taken: each converter with
    its decimal twin taking a fraction (as :func:`_generic_values` takes one); a key its
    converter refuses declines its message (``ok`` is updated)."""
    out: dict[str, list[Any]] = {}
    for name, (convert, fraction) in converters.items():
        olds, news = _values(before, name), _values(after, name)
        typed: list[Any] = [None] * len(ok)
        for i in np.flatnonzero(ok):
            value = olds[i] if deletes[i] else news[i]
            try:
                if type(value) is not float or fraction is None:
                    typed[i] = convert(value)
                elif abs(value) in long_numbers_of(int(i)):
                    ok[i] = False
                else:
                    typed[i] = fraction(value)
            except Refuse:
                ok[i] = False
        out[name] = typed
    return out


def _depth(kind: pa.DataType, limit: int) -> int:
    """How deep ``kind`` nests (a scalar: 0), counted up to ``limit`` (without recursion:
    a type may nest a thousand levels).

    >>> _depth(pa.list_(pa.struct([("a", pa.list_(pa.int64()))])), 100)
    3
    """
    deepest, level = 0, [kind]
    while level and deepest < limit:
        below: list[pa.DataType] = []
        for t in level:
            if pa.types.is_struct(t):
                below += [f.type for f in t]
            elif pa.types.is_list(t) or pa.types.is_large_list(t):
                below.append(t.value_type)
        if below:
            deepest += 1
        level = below
    return deepest


def _values_ok(image: pa.StructArray, ints: list[str]) -> np.ndarray:
    """Where an image's values are taken as the one-pass converters take them: ``int``
    values within 32 bits. (A double is always finite here: ``NaN`` and ``Infinity`` are
    declined as text, an overflow fails the block.)"""
    ok = np.ones(len(image), bool)
    for name in ints:
        v = image.field(name)
        ok &= ~mask(pc.or_(pc.less(v, _INT_RANGE[0]), pc.greater(v, _INT_RANGE[1])))
    return ok


def _placeholders(image: pa.StructArray, names: Collection[str]) -> dict[str, np.ndarray]:
    """Where each text column of ``image`` holds Debezium's unchanged-TOAST placeholder
    (in either text form), for the columns that hold one: the general read takes the
    column as not sent (absent from its image; in an after image, listed as
    unavailable)."""
    found = {}
    for field in image.type:
        if field.name in names and field.type == pa.string():
            held = mask(pc.is_in(image.field(field.name), PLACEHOLDERS))
            if held.any():
                found[field.name] = held
    return found


def _unavailable(
    lacking: Mapping[int, list[str]],
    updated: np.ndarray,
    kept: np.ndarray,
    held: Mapping[str, np.ndarray],
    order: Sequence[str],
) -> dict[int, list[str]]:
    """Each message's unavailable columns, in the schema's order, as the general read
    lists them: an update's columns its after image lacks (``lacking``), and the columns
    whose value in the after image is the placeholder (``held``) of every message but
    a delete (``kept``)."""
    out = {i: names for i, names in lacking.items() if updated[i]}
    if not held:
        return out
    for i in np.flatnonzero(np.logical_or.reduce(list(held.values())) & kept).tolist():
        names = set(out.get(i, ())) | {name for name, where in held.items() if where[i]}
        out[i] = [name for name in order if name in names]
    return out


def _row(
    image: pa.StructArray,
    typed: Mapping[str, list[Any] | pa.Array],
    pick: pa.Array,
    row_type: pa.StructType,
    dropped: pa.Array | None,
    held: Mapping[str, np.ndarray],
) -> pa.StructArray:
    """The taken messages' image as the ledger's row struct: every layout column in its
    stored type (a widened column cast; a typed column from its converted values), null
    where the value schema has no such column yet; null where ``dropped`` (a delete's
    after image, which the one-pass read never types)."""
    rows = image.take(pick)
    picked = pick.to_pylist()
    children = []
    for f in row_type:
        if f.name in typed:
            values = typed[f.name]
            if isinstance(values, pa.Array):
                children.append(values.take(pick))
            else:
                children.append(pa.array([values[i] for i in picked], f.type))
        elif f.name in held:
            unsent = pa.array(held[f.name][picked])
            sent = rows.field(f.name).cast(f.type)
            children.append(pc.if_else(unsent, pa.scalar(None, f.type), sent))
        elif rows.type.get_field_index(f.name) >= 0:
            children.append(rows.field(f.name).cast(f.type))
        else:
            children.append(pa.nulls(len(rows), f.type))
    missing = pc.invert(rows.is_valid())
    if dropped is not None:
        missing = pc.or_(missing, pc.fill_null(dropped, False))
    return pa.StructArray.from_arrays(children, fields=list(row_type), mask=missing)
