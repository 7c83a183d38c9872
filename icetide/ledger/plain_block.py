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
instead, down to :data:`SMALLEST_BLOCK` messages and at most :data:`HALVING_BUDGET`
parses of the batch; and a table whose messages the block mostly cannot take stops
trying (:data:`GIVE_UP_AFTER`). Where Arrow cannot tell what the per-message read can,
the message is declined:

* a key present with ``null`` and a key absent read alike here: an update whose after
  image has a null value column (absent: unchanged TOAST, listed in ``_unavailable``)
  or an after image with a null required column is parsed again by ``orjson`` to tell
  which; ``file``/``pos`` in ``source`` being null (their presence picks the binlog
  position) declines the message;
* Arrow reads ``NaN`` where ``orjson`` refuses the message, so a message with the text
  ``NaN`` or ``Infinity`` anywhere is declined;
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
declines its message. Tables with list, map or struct columns, a projection reading
earlier schema versions or renamed columns, and refused bare messages keep the
per-message read.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from icetide.events.envelope import PLACEHOLDER_TEXTS, is_unavailable
from icetide.events.plain import (
    MAX_OPENERS,
    MS_RANGE,
    Converter,
    Refuse,
    long_numbers,
    value_converter,
)
from icetide.events.position import binlog_file_number, lsn_position
from icetide.schema.contract import ledger as c
from icetide.schema.model import TableSchema

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
_NESTED = frozenset({"list", "map", "struct"})
_INT_RANGE = (-(2**31), 2**31 - 1)
_OPS = ("c", "r", "u", "d")
_MYSQL = ("mysql", "mariadb")
_NOT_ENVELOPE = ("payload", "schema", "ddl", "tableChanges")
_OFFSET, _ROW, _MAX = 10**13, 10**6, 10**38 - 1
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
) -> BlockReader | None:
    """The block read of a table whose values ``schema`` projects onto ``layout``, its
    rows typed as ``target`` (:func:`~icetide.ledger.decode.projected_arrow_schema`)
    has them, ``hints`` saying how values arrive (the projection's; None: the schema's
    ``sink.logical``); None when the table is not read this way (see the module)."""
    by_layout = layout.by_name
    if not set(schema.by_name) <= set(by_layout):
        return None
    if any(col.type.name in _NESTED for col in schema.columns):
        return None
    hints = schema.sink.logical if hints is None else hints
    # Declared: the JSON reader types these. ``texts``: typed columns learnt to arrive
    # as text that the reader would otherwise infer as timestamps (losing the text).
    declared = {
        col.name: _JSON_TYPES[col.type.name]
        for col in schema.columns
        if col.type.name in _JSON_TYPES
    }
    texts: set[str] = set()

    def options() -> pj.ParseOptions:
        image = pa.struct([*declared.items(), *((name, pa.string()) for name in sorted(texts))])
        explicit = pa.schema([("before", image), ("after", image), ("op", pa.string())])
        return pj.ParseOptions(explicit_schema=explicit, unexpected_field_behavior="infer")

    parsing = [options()]
    generic = {
        col.name: value_converter(col, hints.get(col.id), by_layout[col.name])
        for col in schema.columns
        if col.type.name not in _JSON_TYPES
    }
    fractions = {
        col.name: value_converter(col, hints.get(col.id), by_layout[col.name], decimal_floats=True)
        for col in schema.columns
        if col.type.name == "decimal"
    }
    key_converters = {
        col.name: (
            value_converter(col, hints.get(col.id)),
            value_converter(col, hints.get(col.id), decimal_floats=True)
            if col.type.name == "decimal"
            else None,
        )
        for col in schema.key_columns
        if col.name in generic
    }
    row_type = target.field(c.AFTER).type
    keys = [col.name for col in schema.key_columns]
    required = [col.name for col in schema.value_columns if not col.nullable]
    values = [col.name for col in schema.value_columns]
    ints = [col.name for col in schema.columns if col.type.name == "int"]
    strings = [col.name for col in schema.columns if col.type.name == "string"]
    names = frozenset(schema.by_name)

    def part(raws: Sequence[bytes | None], offered: np.ndarray) -> BlockRows | None:
        """The messages ``offered`` read as one block; None when the block as a whole
        cannot be read here (then its halves are tried)."""
        text = b"\n".join(raws[i] for i in offered)
        try:
            doc = pj.read_json(io.BytesIO(text), parse_options=parsing[0]).combine_chunks()
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
        envelope = _envelope(doc)
        if envelope is None:
            return None
        ok, position, text_of, tx_id, source_ms = envelope
        op = doc.column("op").combine_chunks()
        before = doc.column("before").combine_chunks()
        after = doc.column("after").combine_chunks()
        deleted = pc.equal(op, "d")
        ok &= _mask(pc.if_else(deleted, before.is_valid(), after.is_valid()))
        typed = []
        longs: dict[int, frozenset[float]] = {}

        def long_numbers_of(i: int) -> frozenset[float]:
            if i not in longs:
                longs[i] = long_numbers(raws[offered[i]])
            return longs[i]

        for img in (before, after):
            ok &= _values_ok(img, ints, strings)
            typed.append(_generic_values(img, generic, fractions, long_numbers_of, ok))
        not_deleted, updated = ~_mask(deleted), _mask(pc.equal(op, "u"))
        unsure = np.zeros(len(ok), bool)
        for name in required:
            unsure |= not_deleted & _absent(after, name)
        for name in values:
            unsure |= updated & _absent(after, name)
        toast = _absent_columns(raws, offered, np.flatnonzero(ok & unsure), ok, required, values)
        deletes = _mask(deleted)
        for name in keys:
            ok &= ~np.where(deletes, _absent(before, name), _absent(after, name))
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
            c.AFTER: _row(after, typed[1], pick, row_type, deleted.take(pick)),
            c.BEFORE: _row(before, typed[0], pick, row_type, None),
            c.UNAVAILABLE: pa.array(
                [toast.get(int(i), []) if updated[i] else [] for i in taken], pa.list_(pa.string())
            ),
            c.POSITION: pa.array([Decimal(position[i]) for i in taken], pa.decimal128(38, 0)),
            c.POSITION_TEXT: pa.array([text_of[i] for i in taken], pa.string()),
            c.SOURCE_TS: pc.if_else(
                pc.equal(ms, 0), pa.scalar(None, pa.int64()), pc.multiply(ms, 1000)
            ).cast(pa.timestamp("us", tz="UTC")),
            c.TX_ID: tx_id.take(pick),
            c.RESCUED: pa.nulls(len(taken), pa.string()),
        }
        return BlockRows(offered[taken], columns)

    given_up = [False]

    def read(raws: Sequence[bytes | None]) -> BlockRows | None:
        if given_up[0]:
            return None
        found = _halving(_plain_texts(raws), partial(part, raws))
        taken = sum(len(f.taken) for f in found)
        if len(raws) >= GIVE_UP_AFTER and taken * 10 < len(raws):
            given_up[0] = True  # this table's messages are mostly not for the block
        if not found:
            return None
        return BlockRows(
            np.concatenate([f.taken for f in found]),
            {name: pa.concat_arrays([f.columns[name] for f in found]) for name in found[0].columns},
        )

    return read


_AS_PARSED = (pa.string(), pa.int64(), pa.bool_())
"""The JSON value types whose Python values Arrow gives exactly as ``orjson`` does (a
double may not keep a decimal's digits; a nested value goes the per-message way)."""


def _generic_values(
    image: pa.StructArray,
    generic: Mapping[str, Converter],
    fractions: Mapping[str, Converter],
    long_numbers_of: Callable[[int], frozenset[float]],
    ok: np.ndarray,
) -> dict[str, list[Any]]:
    """The image's values of the columns typed by the one-pass converters themselves
    (:func:`~icetide.events.plain.value_converter`: decimals, dates, times, ...), value
    by value as that read types them, for the messages still taken (``ok``, which is
    updated): a placeholder, a value a converter refuses, or a value of another JSON type
    declines its message.

    A decimal column's fractions (``fractions``: its converter taking floats) are taken
    as the one-pass read takes them, when the message writes no number of 16 or more
    digits with the value's magnitude (:func:`~icetide.events.plain.exact_decimals`;
    ``long_numbers_of``: a message's :func:`~icetide.events.plain.long_numbers`)."""
    count = len(image)
    out: dict[str, list[Any]] = {}
    for name, convert in generic.items():
        child = _child(image, name)
        converted: list[Any] = [None] * count
        out[name] = converted
        if child is None or child.type == pa.null():
            continue
        present = np.flatnonzero(_mask(child.is_valid()) & ok)
        fraction = fractions.get(name) if child.type == pa.float64() else None
        if child.type not in _AS_PARSED and fraction is None:
            ok[present] = False
            continue
        raw = child.to_pylist()
        for i in present:
            value = raw[i]
            if is_unavailable(value):
                ok[i] = False
                continue
            try:
                if fraction is None:
                    converted[i] = convert(value)
                elif abs(value) in long_numbers_of(int(i)):
                    ok[i] = False  # maybe written with more digits than a double keeps
                else:
                    converted[i] = fraction(value)
            except Refuse:
                ok[i] = False
    return out


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
    child = _child(image, name)
    return [None] * len(image) if child is None else child.to_pylist()


def _absent(image: pa.StructArray, name: str) -> np.ndarray:
    """Where ``image`` has no value for column ``name`` (null or absent alike)."""
    child = _child(image, name)
    if child is None:
        return np.ones(len(image), bool)
    return ~_mask(child.is_valid())


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


GIVE_UP_AFTER = 1_000
"""A reader that took under a tenth of the messages of a batch this large is not used
again (for the rest of the table's part of the micro-batch): a table whose values the
block cannot take (decimals sent as fractions, nested values) pays its parse once."""
HALVING_BUDGET = 4
SMALLEST_BLOCK = 64
"""A block Arrow cannot read as a whole is read as two halves, down to this many
messages; a part this small that still cannot be read goes the per-message way."""


def _halving(
    offered: np.ndarray, read: Callable[[np.ndarray], BlockRows | None]
) -> list[BlockRows]:
    """``read`` of the messages ``offered`` as one block, or of its halves (recursively)
    when the whole cannot be read: one malformed or unusual message costs about one more
    parse of the block, not the block's speed. The halving stops once it has parsed
    :data:`HALVING_BUDGET` times the block (many unusual messages: the per-message read
    is then the cheaper one for the rest)."""
    budget = [HALVING_BUDGET * len(offered)]

    def halves(part: np.ndarray) -> list[BlockRows]:
        if not len(part) or budget[0] < len(part):
            return []
        budget[0] -= len(part)
        found = read(part)
        if found is not None:
            return [found] if len(found.taken) else []
        if len(part) <= SMALLEST_BLOCK:
            return []
        middle = len(part) // 2
        return halves(part[:middle]) + halves(part[middle:])

    return halves(offered)


_PAYLOAD = b'"payload"'
"""In a message with an inline schema block (read by its own path,
:mod:`icetide.events.inline`), which a stream may mix with bare envelopes."""


def _plain_texts(raws: Sequence[bytes | None]) -> np.ndarray:
    r"""The indices of the messages of ``raws`` that may go in the block: each one JSON
    object on one line beginning with ``{`` (as the one-pass read parses it), with no
    text Arrow reads where ``orjson`` refuses the message (``NaN``, ``Infinity``), and
    no ``"payload"`` (a message with an inline schema block).
    Checked on the joined text first (a few scans in C), message by message only when
    that finds one that may not.

    >>> _plain_texts([b'{"a": 1}', b' {"a": 1}', None, b'{"a": NaN}', b'{"b":\n 2}'])
    array([0])
    """
    count = len(raws)
    if None not in raws:
        text = b"\n".join(raws)  # type: ignore[arg-type]
        if (
            text[:1] == b"{"
            and text.count(b"\n") == count - 1
            and text.count(b"\n{") == count - 1
            and b"\r" not in text
            and b"NaN" not in text
            and b"Infinity" not in text
            and _PAYLOAD not in text
        ):
            return np.arange(count)
    return np.flatnonzero(np.fromiter((_plain_text(raw) for raw in raws), bool, count))


def _plain_text(raw: bytes | None) -> bool:
    """:func:`_plain_texts` of one message."""
    return (
        raw is not None
        and raw[:1] == b"{"
        and b"\n" not in raw
        and b"\r" not in raw
        and b"NaN" not in raw
        and b"Infinity" not in raw
        and _PAYLOAD not in raw
    )


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


def _mask(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean array as a numpy mask, null as False."""
    filled = pc.fill_null(values, False)
    if isinstance(filled, pa.ChunkedArray):
        filled = filled.combine_chunks()
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=bool)


def _child(struct: pa.StructArray | None, name: str) -> pa.Array | None:
    if struct is None or struct.type.get_field_index(name) < 0:
        return None
    return struct.field(name)


def _is_type(array: pa.Array | None, *kinds: pa.DataType) -> bool:
    """Whether ``array`` is absent, all-null (JSON ``null`` only) or of one of ``kinds``."""
    return array is None or array.type == pa.null() or any(array.type == k for k in kinds)


def _values_ok(image: pa.StructArray, ints: list[str], strings: list[str]) -> np.ndarray:
    """Where an image's values are taken as the one-pass converters take them: ``int``
    values within 32 bits, no text the unchanged-TOAST placeholder. (A double is always
    finite here: ``NaN`` and ``Infinity`` are declined as text, an overflow fails the
    block.)"""
    ok = np.ones(len(image), bool)
    for name in ints:
        v = image.field(name)
        ok &= ~_mask(pc.or_(pc.less(v, _INT_RANGE[0]), pc.greater(v, _INT_RANGE[1])))
    for name in strings:
        ok &= ~_mask(pc.is_in(image.field(name), pa.array(PLACEHOLDER_TEXTS, pa.string())))
    return ok


def _row(
    image: pa.StructArray,
    typed: Mapping[str, list[Any]],
    pick: pa.Array,
    row_type: pa.StructType,
    dropped: pa.Array | None,
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
            children.append(pa.array([values[i] for i in picked], f.type))
        elif rows.type.get_field_index(f.name) >= 0:
            children.append(rows.field(f.name).cast(f.type))
        else:
            children.append(pa.nulls(len(rows), f.type))
    missing = pc.invert(rows.is_valid())
    if dropped is not None:
        missing = pc.or_(missing, pc.fill_null(dropped, False))
    return pa.StructArray.from_arrays(children, fields=list(row_type), mask=missing)


def _envelope(
    doc: pa.Table,
) -> tuple[np.ndarray, list[int], list[str], pa.Array, pa.Array] | None:
    """The envelope checks of :func:`~icetide.events.plain.read_plain` over a block:
    where they pass, each message's position (key and text), transaction id and source
    ``ts_ms``; None when the block's envelope fields are not of the types that read
    takes (all its messages then go the per-message way)."""
    n = doc.num_rows
    if "source" not in doc.column_names:
        return None
    source = doc.column("source").combine_chunks()
    if not pa.types.is_struct(source.type):
        return None
    ok = _mask(source.is_valid()) & _mask(pc.is_in(doc.column("op"), pa.array(_OPS)))
    table = _child(source, "table")
    if table is None or table.type != pa.string():
        return None
    ok &= _mask(pc.greater(pc.utf8_length(table), 0))
    for key in ("db", "schema", "connector", "name"):
        if not _is_type(_child(source, key), pa.string()):
            return None
    if not _is_type(_child(source, "snapshot"), pa.string(), pa.bool_()):
        return None
    source_ms = _child(source, "ts_ms")
    doc_ms = doc.column("ts_ms").combine_chunks() if "ts_ms" in doc.column_names else None
    for ms in (source_ms, doc_ms):
        if not _is_type(ms, pa.int64()):
            return None
        if ms is not None and ms.type == pa.int64():
            ok &= ~_mask(pc.or_(pc.less_equal(ms, MS_RANGE[0]), pc.greater_equal(ms, MS_RANGE[1])))
    seconds = _child(source, "ts_sec")
    if seconds is not None and seconds.type != pa.null():
        no_ms = np.ones(n, bool) if source_ms is None else ~_mask(source_ms.is_valid())
        ok &= ~(no_ms & _mask(seconds.is_valid()))
    tx_id = _transaction_ids(doc, source)
    if tx_id is None:
        return None
    ok &= _mask(tx_id[1])
    found = _positions(source, ok)
    if found is None:
        return None
    ok, keys, texts = found
    if source_ms is None or source_ms.type != pa.int64():
        source_ms = pa.nulls(n, pa.int64())
    return ok, keys, texts, tx_id[0], source_ms


def _transaction_ids(doc: pa.Table, source: pa.StructArray) -> tuple[pa.Array, pa.Array] | None:
    """Each message's transaction id as :func:`~icetide.events.plain._tx_id` reads it
    (``transaction.id``, else ``source.txId``, else ``source.gtid`` unless empty), and
    where that read takes it; None for a block of other types."""
    n = len(source)
    nothing = pa.nulls(n, pa.string())
    from_tx = nothing
    if "transaction" in doc.column_names:
        transaction = doc.column("transaction").combine_chunks()
        if transaction.type != pa.null():
            if not pa.types.is_struct(transaction.type):
                return None
            tid = _child(transaction, "id")
            if not _is_type(tid, pa.string(), pa.int64()):
                return None
            if tid is not None and tid.type != pa.null():
                from_tx = tid.cast(pa.string())
    taken = pa.array(np.ones(n, bool))
    tx = _child(source, "txId")
    from_txid = nothing
    if tx is not None and tx.type != pa.null():
        if tx.type == pa.int64():
            from_txid = tx.cast(pa.string())
        else:  # another type: the one-pass read declines such a message unless tx id set
            taken = pc.or_(from_tx.is_valid(), tx.is_null())
    gtid = _child(source, "gtid")
    from_gtid = nothing
    if gtid is not None and gtid.type != pa.null():
        if gtid.type != pa.string():
            return None
        from_gtid = pc.if_else(pc.equal(gtid, ""), pa.scalar(None, pa.string()), gtid)
    ids = pc.coalesce(from_tx, from_txid, from_gtid)
    return ids, taken


def _positions(
    source: pa.StructArray, ok: np.ndarray
) -> tuple[np.ndarray, list[int], list[str]] | None:
    """Each taken message's position (:func:`~icetide.events.plain._position`): the
    binlog's (``file``, ``pos``, ``row``) for MySQL and MariaDB or where both ``file``
    and ``pos`` are set, else the LSN; a message whose position that read would not
    take, or whose ``file``/``pos`` may be present with null, is declined."""
    n = len(source)
    connector = _child(source, "connector")
    mysql = (
        np.zeros(n, bool)
        if connector is None or connector.type == pa.null()
        else _mask(pc.is_in(connector, pa.array(_MYSQL)))
    )
    file, pos, row = _child(source, "file"), _child(source, "pos"), _child(source, "row")
    if not _is_type(file, pa.string()) or not _is_type(pos, pa.int64()):
        return None
    if not _is_type(row, pa.int64()):
        return None
    has_file = file is not None and file.type != pa.null()
    has_pos = pos is not None and pos.type != pa.null()
    file_set = _mask(file.is_valid()) if has_file else np.zeros(n, bool)  # type: ignore[union-attr]
    pos_set = _mask(pos.is_valid()) if has_pos else np.zeros(n, bool)  # type: ignore[union-attr]
    binlog = mysql | (file_set & pos_set)
    if file is not None and pos is not None:
        # Both keys in the block: a message with either null may hold both (binlog, not
        # taken) or lack one (the LSN): the per-message read tells.
        ok &= ~(~mysql & (file_set ^ pos_set | ~file_set & ~pos_set))
    lsn = _child(source, "lsn")
    lsn_ints = lsn is not None and lsn.type == pa.int64()
    files = file.to_pylist() if has_file else [None] * n  # type: ignore[union-attr]
    offsets = pos.to_pylist() if has_pos else [None] * n  # type: ignore[union-attr]
    rows = row.to_pylist() if row is not None and row.type != pa.null() else [None] * n
    lsns = lsn.to_pylist() if lsn_ints else [None] * n  # type: ignore[union-attr]
    numbers: dict[str, int | None] = {}
    keys: list[int] = [0] * n
    texts: list[str] = [""] * n
    for i in np.flatnonzero(ok):
        if binlog[i]:
            name, offset, index = files[i], offsets[i], rows[i] or 0
            if not name or offset is None or not (0 <= offset < _OFFSET and 0 <= index < _ROW):
                ok[i] = False
                continue
            if name not in numbers:
                try:
                    numbers[name] = binlog_file_number(name)
                except ValueError:
                    numbers[name] = None
            number = numbers[name]
            key = None if number is None else (number * _OFFSET + offset) * _ROW + index
            if key is None or key > _MAX:
                ok[i] = False
                continue
            keys[i], texts[i] = key, f"{name}:{offset}:{index}"
        else:
            value = lsns[i]
            if value is None or value < 0:
                ok[i] = False
                continue
            found = lsn_position(value)
            keys[i], texts[i] = found.key, found.text
    return ok, keys, texts
