"""The common message read in one pass: a bare (schemaless) JSON envelope of a row change.

Nearly every message a ledger reads is the same shape: ``{"before": …, "after": …,
"source": {…}, "op": "c", "ts_ms": …}`` with scalar column values. Reading it through the
general decoder (:mod:`icetide.events.envelope`, then :mod:`icetide.events.project`)
cost ~80 µs of Python per event beyond parsing on 2026-12-02 (bench/decode_bench.py),
ten times the parse itself. Here such a message is parsed with ``orjson`` and its
envelope and values are checked and typed by code built once per table
(:func:`image_projector`).

The rule that keeps results identical: this path only *accepts*. Whatever it does not
recognise for certain — another JSON shape, a float where the exact digits matter (only
``orjson`` floats in ``float``/``double`` columns are taken, where both parsers round the
same digits to the same double, and in ``decimal`` columns those written with at most 15
significant digits: :func:`exact_decimals`), a nested value holding a float anywhere, a
placeholder value, a column the schema lacks, a value its column refuses, anything
unusual in the envelope — makes it return ``None``, and the general decoder reads that
message from its bytes again, so every dead letter and every unusual value still comes
from one place with the same reason and text. A nested value (a list, map or struct
column's) of strings, integers, booleans and nulls only is taken: both parsers read it
alike, and the same coercer types it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import orjson

from icetide.events.envelope import is_unavailable
from icetide.events.position import Position, binlog_position, lsn_position, parse_lsn
from icetide.events.project import COERCERS, Slot
from icetide.schema.convert.spark import arrow_value
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, IcetideType, ListType, MapType, StructType

_OPS = frozenset({"c", "r", "u", "d"})
_MYSQL = ("mysql", "mariadb")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Epoch milliseconds well inside datetime's range (years 2..9998): nearer the edges the
# general decoder decides (it reports an out-of-range value).
MS_RANGE = (-62_100_000_000_000, 253_370_000_000_000)
MAX_OPENERS = 256
"""More ``[``/``{`` than this and the general decoder reads the message: ``orjson`` reads
deeper nesting than Python's ``json`` (which fails near 1,000 levels, fewer inside a
worker's stack), and such a message must be the dead letter the general decoder says."""
_SHORT = 2 * MAX_OPENERS + 1
"""A message this long or shorter cannot hold more ``{`` and ``[`` than the one-pass read
takes (each opener has its closer): only longer ones are counted."""


def many_openers(raw: bytes) -> bool:
    """Whether message ``raw`` holds more ``{`` and ``[`` than the one-pass read takes
    (:data:`MAX_OPENERS`): it leaves such a message to the general read.

    >>> many_openers(b"[" * 600), many_openers(b"[" * 300), many_openers(b"[" + b"a" * 600)
    (True, False, False)
    """
    return len(raw) > _SHORT and raw.count(b"{") + raw.count(b"[") > MAX_OPENERS


_LONG_NUMBER = re.compile(rb"[0-9.]{16,}(?:[eE][+-]?[0-9]+)?")
"""A run of 16 or more digits and dots, with its exponent: every number written with
more than 15 significant digits is one (so are some runs inside strings, and long
integers)."""


def long_numbers(raw: bytes) -> frozenset[float]:
    """The magnitudes, as doubles, of the numbers message ``raw`` writes with 16 or more
    digits and dots (whatever reads as one: runs inside strings too).

    >>> sorted(long_numbers(b'{"a": -0.30000000000000004, "b": 1.5, "c": "1.2.3.4.5.6.7.8"}'))
    [0.30000000000000004]
    """
    # The usual message: each maximal run of digits and dots found in C (the regular
    # expression spent ~20 µs on a 1.5-kB message, restarting inside every shorter run).
    # A match is such a run unless an exponent follows one: then the expression decides.
    runs = [run for run in raw.translate(_NUMERIC_ONLY).split() if len(run) >= 16]
    if not runs:
        return frozenset()
    if any(run + b"e" in raw or run + b"E" in raw for run in runs):
        runs = [match.group() for match in _LONG_NUMBER.finditer(raw)]
    found = set()
    for run in runs:
        try:
            found.add(float(run))
        except ValueError:  # text in a string, such as a version "1.2.3.4…"
            continue
    return frozenset(found)


_NUMERIC_ONLY = bytes(b if b in b"0123456789." else 0x20 for b in range(256))
"""A translation keeping digits and dots and making every other byte a space."""


def exact_decimals(row: PlainRow, names: tuple[str, ...], raw: bytes) -> bool:
    """Whether every float in decimal columns ``names`` of ``row`` (read from ``raw``) was
    written with at most 15 significant digits, so that ``Decimal(repr(float))`` has the
    value of the digits as written.

    Any decimal of at most 15 significant digits is the one such decimal its nearest
    double rounds back to, and ``repr`` gives the shortest text that rounds to that
    double, which can be no longer: the general parse (``Decimal`` of the digits) and
    this one then type the value alike, to the same value or the same refusal. (Below
    the normal doubles, near 1e-308, fewer digits survive, but there any value but zero
    has more fraction digits than a decimal's scale, at most 38, and both refuse it.) A
    float equal to any long number's double (:func:`long_numbers`) may have been written
    long, and is not taken.

    >>> row = PlainRow("c", {}, None, {"id": 1, "d": 2.5}, None, None, None)
    >>> exact_decimals(row, ("d",), b'{"d": 2.5}')
    True
    >>> exact_decimals(row, ("d",), b'{"d": 2.5000000000000000001}')
    False
    """
    taken = [
        value
        for image in (row.before, row.after)
        if image
        for name in names
        if type(value := image.get(name)) is float
    ]
    if not taken:
        return True
    long = long_numbers(raw)
    return not any(abs(value) in long for value in taken)


class PlainRow(NamedTuple):
    """A bare row envelope whose envelope the general decoder would accept as is."""

    op: str
    source: dict[str, Any]
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    position: Position
    source_ms: int | None
    """``source.ts_ms``: :func:`source_ts` makes it the event's source time."""
    tx_id: str | None


def source_ts(row: PlainRow) -> datetime | None:
    """The event's source commit time, as the general decoder reads it (0: none)."""
    ms = row.source_ms
    return None if not ms else _EPOCH + timedelta(milliseconds=ms)


def parse(raw: bytes) -> Any:
    """``raw`` parsed by ``orjson`` when it is a JSON object that parses, else ``None``
    (then the general decoder reads it, and says why it is not an event).

    >>> parse(b'{"a": 1}'), parse(b'\\xef\\xbb\\xbf{"a": 1}'), parse(b'{"a": NaN}')
    ({'a': 1}, None, None)
    """
    if raw[:1] != b"{":  # a BOM, blank, registry frame or not an object: the general path
        return None
    if many_openers(raw):
        return None  # maybe nested deeper than Python's json reads: its error, not a row
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _is_int(value: Any) -> bool:
    return type(value) is int


def _millis(value: Any) -> bool:
    """Whether the decoder reads ``value`` as epoch milliseconds (or none) without fail;
    False also near the range's edges, where the general decoder decides."""
    return value is None or (type(value) is int and MS_RANGE[0] < value < MS_RANGE[1])


def _position(source: dict[str, Any]) -> Position | None:
    """The decoder's position for the usual forms (binlog file/pos, LSN); None for any other."""
    connector = source.get("connector")
    if connector in _MYSQL or ("file" in source and "pos" in source):
        file, pos, row = source.get("file"), source.get("pos"), source.get("row")
        if type(file) is not str or not file or type(pos) is not int:
            return None
        if row is None or row == 0 and type(row) is int:
            row = 0
        elif type(row) is not int:
            return None
        try:
            return binlog_position(file, pos, row)
        except ValueError:
            return None
    lsn = source.get("lsn")
    try:
        if type(lsn) is int:
            return lsn_position(lsn)
        if type(lsn) is str and "/" in lsn:
            return lsn_position(parse_lsn(lsn))
    except ValueError:
        return None
    return None


def _tx_id(doc: dict[str, Any], source: dict[str, Any]) -> str | None | bool:
    """The decoder's transaction id; False when the general decoder must decide."""
    transaction = doc.get("transaction")
    if transaction is not None and type(transaction) is not dict:
        return False
    if transaction and transaction.get("id") is not None:
        tid = transaction["id"]
        return str(tid) if type(tid) in (str, int) else False
    tx = source.get("txId")
    if tx is not None:
        return str(tx) if type(tx) is int else False
    gtid = source.get("gtid")
    if gtid is None or type(gtid) is str:
        return gtid or None
    return False


def read_plain(doc: Any) -> PlainRow | None:
    """The envelope of a parsed bare row message (op c/r/u/d with a source position),
    checked as :func:`icetide.events.envelope.decode_document` checks it; None for any
    other document. Column values are not looked at here.

    >>> row = read_plain({"op": "c", "after": {"id": 1}, "source": {"connector": "mysql",
    ...     "db": "inv", "table": "t", "file": "binlog.000003", "pos": 4, "ts_ms": 0}})
    >>> row.op, row.position.text, source_ts(row), row.tx_id
    ('c', 'binlog.000003:4:0', None, None)
    """
    if (
        type(doc) is not dict
        or "payload" in doc
        or "schema" in doc
        or "ddl" in doc
        or "tableChanges" in doc
    ):
        return None
    op, source = doc.get("op"), doc.get("source")
    if op not in _OPS or type(op) is not str or type(source) is not dict:
        return None
    before, after = doc.get("before"), doc.get("after")
    if (before is not None and type(before) is not dict) or (
        after is not None and type(after) is not dict
    ):
        return None
    if (after is None and op != "d") or (before is None and op == "d"):
        return None
    table = source.get("table")
    if type(table) is not str or not table:
        return None
    for key in ("db", "schema", "connector", "name"):
        value = source.get(key)
        if value is not None and type(value) is not str:
            return None
    snapshot = source.get("snapshot")
    if snapshot is not None and type(snapshot) not in (bool, str):
        return None
    if source.get("ts_ms") is None and source.get("ts_sec") is not None:
        return None
    source_ms = source.get("ts_ms")
    if not _millis(source_ms) or not _millis(doc.get("ts_ms")):
        return None
    tx_id = _tx_id(doc, source)
    if tx_id is False or tx_id is True:
        return None
    position = _position(source)
    if position is None:
        return None
    return PlainRow(op, source, before, after, position, source_ms, tx_id)


def _holds_float(value: Any) -> bool:
    """Whether a parsed JSON value holds a fractional number anywhere in it (where the
    general parse has a ``Decimal`` of its digits and ``orjson`` a ``float``)."""
    kind = type(value)
    if kind is float:
        return True
    if kind is list:
        return any(_holds_float(v) for v in value)
    if kind is dict:
        return any(_holds_float(v) for v in value.values())
    return False


class Refuse(Exception):
    """Internal: the value is not for this path; the general decoder reads the message."""


Converter = Callable[[Any], Any]


def value_converter(
    column: Column,
    logical: str | None,
    stored: Column | None = None,
    typed: bool = False,
    decimal_floats: bool = False,
) -> Converter:
    """``value -> typed value in Arrow's form`` for one column, as
    :func:`icetide.events.project.coerce_value` then
    :func:`icetide.schema.convert.spark.arrow_value` type it; raises :class:`Refuse`
    for a value that path must read (a value the column refuses; unless ``typed``, a
    float outside float columns, alone or inside a nested value, whose digits only the
    general parse keeps). ``stored``: the layout's column, whose type gives the Arrow
    form (the column itself when not given). ``typed``: values already decoded by the
    message's own schema (a ``Decimal``, a ``datetime``), taken as they are.
    ``decimal_floats``: a ``decimal`` column takes a float (checked by
    :func:`exact_decimals` first)."""
    ctype = column.type
    arrow = (stored or column).type
    slot = Slot(column.name, ctype, logical)
    coercer = COERCERS[ctype.name]

    def general(value: Any) -> Any:
        kind = type(value)
        if not typed and kind is not str and kind is not int and kind is not bool:
            if (kind is not list and kind is not dict) or _holds_float(value):
                raise Refuse
        try:
            return arrow_value(coercer(value, slot), arrow)
        except Exception:
            raise Refuse from None

    name = ctype.name
    if name in ("long", "int"):
        low, high = (-(2**63), 2**63 - 1) if name == "long" else (-(2**31), 2**31 - 1)

        def integer(value: Any) -> Any:
            if type(value) is int and low <= value <= high:
                return value
            return general(value)

        return integer
    if name == "string":
        return lambda value: value if type(value) is str else general(value)
    if name in ("double", "float"):

        def floating(value: Any) -> Any:
            kind = type(value)
            if kind is float:
                return value
            if kind is int:
                return float(value)
            return general(value)

        return floating
    if name == "boolean":
        return lambda value: value if value is True or value is False else general(value)
    if name == "decimal" and decimal_floats:

        def decimal(value: Any) -> Any:
            if type(value) is not float:
                return general(value)
            try:
                return arrow_value(coercer(value, slot), arrow)
            except Exception:
                raise Refuse from None

        return decimal
    if not typed and (stored is None or stored.type == ctype):
        nested = _nested_converter(ctype, general)
        if nested is not None:
            return nested
    return general


NESTED_LEAVES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: type(v) is str,
    "long": lambda v: type(v) is int and -(2**63) <= v <= 2**63 - 1,
    "int": lambda v: type(v) is int and -(2**31) <= v <= 2**31 - 1,
    "boolean": lambda v: v is True or v is False,
}
"""Element, value and field types whose JSON values a nested converter takes as they
are: the values their coercers return unchanged (and :func:`arrow_value` too)."""


def _nested_converter(ctype: IcetideType, general: Converter) -> Converter | None:
    """A list, map or struct column's converter for its usual values, each as
    ``general`` types it without walking it three times (for floats, then coercing, then
    into Arrow's form): a list of, a text-keyed map to, or a struct of strings, integers
    in range, booleans and nulls (:data:`NESTED_LEAVES`) is already that form (a map's as its
    pairs). Any other value goes to ``general``. None for another type.

    >>> from icetide.schema.types import ListType, StringType
    >>> convert = _nested_converter(ListType(2, StringType()), lambda v: "general")
    >>> convert(["a", None]), convert(["a", 1.5]), convert("a")
    (['a', None], 'general', 'general')
    """
    if isinstance(ctype, ListType):
        element = NESTED_LEAVES.get(ctype.element.name)
        if element is None:
            return None

        def a_list(value: Any) -> Any:
            if type(value) is list and all(v is None or element(v) for v in value):
                return value
            return general(value)

        return a_list
    if isinstance(ctype, MapType):
        item = NESTED_LEAVES.get(ctype.value.name)
        if item is None or ctype.key.name != "string":
            return None

        def a_map(value: Any) -> Any:
            if type(value) is dict and all(v is None or item(v) for v in value.values()):
                return list(value.items())  # JSON's keys are text
            return general(value)

        return a_map
    if isinstance(ctype, StructType):
        if any(f.type.name not in NESTED_LEAVES for f in ctype.fields):
            return None
        fields = tuple((f.name, NESTED_LEAVES[f.type.name]) for f in ctype.fields)
        names = frozenset(name for name, _ in fields)

        def a_struct(value: Any) -> Any:
            if type(value) is not dict or not value.keys() <= names:
                return general(value)  # another field may hold a float: refused there
            out = {}
            for name, check in fields:
                v = value.get(name)
                if v is not None and not check(v):
                    return general(value)
                out[name] = v
            return out

        return a_struct
    return None


@dataclass(frozen=True)
class ImageProjector:
    """A table's row images typed in one call each (:func:`image_projector`)."""

    project: Callable[[dict[str, Any]], dict[str, Any]]
    """A raw image → every layout column typed (None where absent); raises :class:`Refuse`."""
    names: frozenset[str]
    """The value schema's column names: an image with any other goes the general way."""
    required: tuple[str, ...]
    """Value columns that may not be null in an after image."""
    values: tuple[str, ...]
    """The value columns, in order (an update's image lacking one keeps it stored)."""
    keys: tuple[tuple[str, Converter], ...]
    """Primary-key columns and their converters."""


def image_projector(
    schema: TableSchema,
    layout: TableSchema,
    hints: Mapping[int, str] | None,
    typed: bool = False,
    decimal_floats: bool = False,
) -> ImageProjector:
    """The typing of ``schema``'s columns into ``layout``'s row shape (a layout column
    the value schema does not have yet stays None), built once per table and batch
    (``typed`` and ``decimal_floats``: see :func:`value_converter`)."""
    hints = schema.sink.logical if hints is None else hints
    by_name = schema.by_name
    slots = tuple(
        (
            c.name,
            value_converter(
                by_name[c.name], hints.get(by_name[c.name].id), c, typed, decimal_floats
            ),
        )
        if c.name in by_name
        else (c.name, None)
        for c in layout.columns
    )

    def project(image: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        get = image.get
        for name, convert in slots:
            value = get(name)
            if value is None or convert is None:
                out[name] = None
                continue
            if is_unavailable(value):  # text, or a list for an array column
                raise Refuse
            out[name] = convert(value)
        return out

    return ImageProjector(
        project,
        frozenset(schema.by_name),
        tuple(c.name for c in schema.value_columns if not c.nullable),
        tuple(c.name for c in schema.value_columns),
        tuple(
            (
                c.name,
                value_converter(c, hints.get(c.id), typed=typed, decimal_floats=decimal_floats),
            )
            for c in schema.key_columns
        ),
    )


def decimal_names(schema: TableSchema) -> tuple[str, ...]:
    """``schema``'s ``decimal`` columns (not those inside a nested type)."""
    return tuple(c.name for c in schema.columns if c.type.name == "decimal")
