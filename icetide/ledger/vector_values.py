"""A block's typed column values converted as arrays, for the forms connectors usually send.

The block read (:mod:`icetide.ledger.plain_block`) types a decimal, date or timestamp
column's values one by one with the one-pass read's own converters
(:func:`~icetide.events.plain.value_converter`): on the demo's tables that was most of
its Python time. Here the usual forms are converted as whole arrays: epoch days, epoch
milli-, micro- or nanoseconds, base64 decimals (Debezium's ``precise`` mode, the
unscaled bytes), ISO-8601 UTC instants ending in ``Z`` and JSON text; and in bare
messages, ISO-8601 dates, times of day and local date-times in their canonical form,
UUIDs in their canonical form, and enum symbols.

The rule of the block read holds: a converter here only *takes* a value whose result
it knows is the per-value converter's (the same arithmetic, the same range checks); a
value it does not take is typed one by one as before, so a refused value still goes the
per-message way and its dead letter says why. Which converter applies is decided by how
the column's values arrive: the hint a schemaless message is read by, or the logical
name of a message's own schema field (:class:`~icetide.events.inline.BlockDecoding`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icetide.events.envelope import PLACEHOLDER_TEXTS
from icetide.schema.convert.connect import DECIMAL
from icetide.schema.types import Column, EnumType, precision_scale

VectorConverter = Callable[[pa.Array], tuple[pa.Array, np.ndarray]]
"""Parsed values → (their typed values, where taken): a value not taken is null in the
first and typed one by one by the caller."""

DATES = frozenset({"io.debezium.time.Date", "org.apache.kafka.connect.data.Date"})
"""Hints and logical names of an integer date: days since 1970-01-01."""
TIMESTAMP_UNITS = {
    "org.apache.kafka.connect.data.Timestamp": 1_000,
    "io.debezium.time.Timestamp": 1_000,
    "io.debezium.time.MicroTimestamp": 1,
}
"""Hints and logical names of an integer timestamp → microseconds per unit (a
schemaless integer without a hint is milliseconds, as the per-value read takes it)."""
NANOS = "io.debezium.time.NanoTimestamp"
ZONED = "io.debezium.time.ZonedTimestamp"
JSON = "io.debezium.data.Json"
PLACEHOLDERS = pa.array(PLACEHOLDER_TEXTS, pa.string())
"""Debezium's unchanged-TOAST placeholder in its text forms, as an Arrow array."""
_DAYS = (-719_162, 2_932_896)
"""0001-01-01 and 9999-12-31 in days since 1970-01-01: the dates Python holds."""
_MICROS = (-62_135_596_800_000_000, 253_402_300_799_999_999)
"""0001-01-01T00:00:00 and 9999-12-31T23:59:59.999999 in microseconds since 1970."""
_UTC_TEXT = (
    r"^[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?Z$"
)
"""An instant as Debezium's ``ZonedTimestamp`` sends one in UTC: what Arrow's cast and
``datetime.fromisoformat`` read alike (a day the month lacks fails the cast: then the
column's values are typed one by one)."""
_DATE_TEXT = r"^[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"
"""A date as ``date.fromisoformat`` and Arrow's cast read it alike."""
_LOCAL_TEXT = _UTC_TEXT.removesuffix("Z$") + "$"
"""A date and time without a zone, as a schemaless local timestamp arrives."""
_TIME_TEXT = r"^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{6})?$"
"""A time of day whose text ``time.isoformat`` gives back as it is: seconds, or six
digits of fraction (not ``.000000``, which it drops: :data:`_ZERO_FRACTION`)."""
_ZERO_FRACTION = r"\.000000$"
_UUID_TEXT = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
"""A UUID as ``str(uuid.UUID(text))`` writes it: the text itself."""


def vector_converter(
    column: Column, stored: pa.DataType, arrival: str | None, schemaless: bool
) -> VectorConverter | None:
    """The array converter of ``column``'s values stored as ``stored``, arriving as
    ``arrival`` says (a hint, or the field's logical name; ``schemaless``: a hint, by
    which a plain integer timestamp is milliseconds and a decimal's text is base64),
    or None when its values are typed one by one.

    >>> from icetide.schema.types import Column, parse_type
    >>> day = vector_converter(Column(1, "d", parse_type("date")), pa.date32(),
    ...                        "io.debezium.time.Date", True)
    >>> values, taken = day(pa.array([0, 10**9, None]))
    >>> values.to_pylist(), taken.tolist()
    ([datetime.date(1970, 1, 1), None, None], [True, False, False])
    """
    kind = column.type.name
    unhinted = schemaless and arrival is None
    if kind == "date" and (arrival in DATES or unhinted):
        if not schemaless:
            return _dates
        return _by_type(_matching(_DATE_TEXT, stored), _dates)
    if schemaless and stored == pa.string():  # each text as it is, where these take it
        if kind == "time":
            return _matching(_TIME_TEXT, stored, _ZERO_FRACTION)
        if kind == "uuid":
            return _matching(_UUID_TEXT, stored)
        if isinstance(column.type, EnumType):
            return _symbols(column.type.symbols)
    if kind in ("timestamp", "timestamptz"):
        if arrival == NANOS:
            return _epoch(1, 1_000, stored)
        if kind == "timestamptz" and arrival == ZONED:
            return _utc_texts(stored)
        if arrival in TIMESTAMP_UNITS or unhinted:
            epoch = _epoch(TIMESTAMP_UNITS.get(arrival or "", 1_000), 1, stored)
            if kind == "timestamptz" and unhinted:  # a number or an ISO text, unhinted
                return _by_type(_utc_texts(stored), epoch)
            if kind == "timestamp" and schemaless:  # a number or a local ISO text
                return _by_type(_matching(_LOCAL_TEXT, stored), epoch)
            return epoch
    if kind == "json" and (arrival == JSON or unhinted):
        return _texts
    if kind == "decimal" and (arrival == DECIMAL or unhinted):
        precision, scale = precision_scale(column.type)
        if pa.types.is_decimal(stored) and stored.scale == scale:
            return _base64_decimals(precision, stored)
    return None


def _by_type(texts: VectorConverter, numbers: VectorConverter) -> VectorConverter:
    """``texts`` for a column the reader parsed as text, ``numbers`` otherwise."""
    return lambda values: (texts if values.type == pa.string() else numbers)(values)


def _integers(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    present = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), bool)
    return values.fill_null(0).to_numpy(), present


def _dates(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Epoch days → dates, for days within the years 1 to 9999."""
    if values.type != pa.int64():
        return pa.nulls(len(values), pa.date32()), np.zeros(len(values), bool)
    days, taken = _integers(values)
    taken &= (days >= _DAYS[0]) & (days <= _DAYS[1])
    typed = pa.array(np.where(taken, days, 0).astype(np.int32), mask=~taken).cast(pa.date32())
    return typed, taken


def _epoch(per_unit: int, divisor: int, stored: pa.DataType) -> VectorConverter:
    """Epoch counts → timestamps (microseconds: ``count * per_unit // divisor``, floor
    division as the per-value read cuts nanoseconds), within the years 1 to 9999."""
    low = -(-_MICROS[0] * divisor // per_unit)  # the counts whose microseconds fit
    high = _MICROS[1] * divisor // per_unit + divisor - 1
    low, high = max(low, -(2**63)), min(high, 2**63 - 1)

    def convert(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
        if values.type != pa.int64():
            return pa.nulls(len(values), stored), np.zeros(len(values), bool)
        counts, taken = _integers(values)
        taken &= (counts >= low) & (counts <= high)
        micros = np.where(taken, counts, 0) * per_unit // divisor
        typed = pa.array(micros, pa.int64(), mask=~taken).cast(stored)
        return typed, taken

    return convert


def _utc_texts(stored: pa.DataType) -> VectorConverter:
    """ISO-8601 UTC instants (``…Z``, up to microseconds) → timestamps."""

    def convert(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
        none = pa.nulls(len(values), stored), np.zeros(len(values), bool)
        if values.type != pa.string():
            return none
        matched = pc.fill_null(pc.match_substring_regex(values, _UTC_TEXT), False)
        taken = np.asarray(matched.to_numpy(zero_copy_only=False), bool)
        try:
            typed = pc.if_else(matched, values, pa.scalar(None, pa.string())).cast(stored)
        except pa.ArrowInvalid:  # a day its month lacks: typed one by one
            return none
        return typed, taken

    return convert


def _matching(pattern: str, stored: pa.DataType, unless: str | None = None) -> VectorConverter:
    """Texts matching ``pattern`` (and not ``unless``) → ``stored`` by Arrow's cast (a
    text the cast refuses, a day its month lacks: the column typed one by one)."""

    def convert(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
        none = pa.nulls(len(values), stored), np.zeros(len(values), bool)
        if values.type != pa.string():
            return none
        matched = pc.fill_null(pc.match_substring_regex(values, pattern), False)
        if unless is not None:
            excluded = pc.fill_null(pc.match_substring_regex(values, unless), False)
            matched = pc.and_(matched, pc.invert(excluded))
        try:
            typed = pc.if_else(matched, values, pa.scalar(None, pa.string())).cast(stored)
        except pa.ArrowInvalid:
            return none
        return typed, np.asarray(matched.to_numpy(zero_copy_only=False), bool)

    return convert


def _symbols(symbols: tuple[str, ...]) -> VectorConverter:
    """An enum's symbols, each as it is (never the unchanged-TOAST placeholder)."""
    known = pa.array([s for s in symbols if s not in PLACEHOLDER_TEXTS], pa.string())

    def convert(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
        if values.type != pa.string():
            return pa.nulls(len(values), pa.string()), np.zeros(len(values), bool)
        taken = pc.fill_null(pc.is_in(values, known), False)
        return values, np.asarray(taken.to_numpy(zero_copy_only=False), bool)

    return convert


def _texts(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """JSON text → the column's text as sent (never the unchanged-TOAST placeholder)."""
    if values.type != pa.string():
        return pa.nulls(len(values), pa.string()), np.zeros(len(values), bool)
    taken = pc.and_(values.is_valid(), pc.invert(pc.is_in(values, PLACEHOLDERS)))
    return values, np.asarray(taken.to_numpy(zero_copy_only=False), bool)


def _base64_decimals(precision: int, stored: pa.DataType) -> VectorConverter:
    """Base64 of the unscaled two's-complement bytes (at the column's scale) →
    decimals, for values within the column's precision (each value's bytes decoded
    here, the array built from their 128-bit forms)."""
    bound = 10**precision

    def convert(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
        count = len(values)
        taken = np.zeros(count, bool)
        if values.type != pa.string():
            return pa.nulls(count, stored), taken
        offered = pc.and_(values.is_valid(), pc.invert(pc.is_in(values, PLACEHOLDERS)))
        texts = values.to_pylist()
        words = bytearray(16 * count)
        for i in np.flatnonzero(np.asarray(offered.to_numpy(zero_copy_only=False), bool)):
            try:
                raw = base64.b64decode(texts[i], validate=True)
            except (binascii.Error, ValueError):
                continue
            unscaled = int.from_bytes(raw, "big", signed=True)
            if raw and -bound < unscaled < bound:
                words[16 * i : 16 * i + 16] = unscaled.to_bytes(16, "little", signed=True)
                taken[i] = True
        validity = pa.array(taken).buffers()[1]
        typed = pa.Array.from_buffers(stored, count, [validity, pa.py_buffer(bytes(words))])
        return typed, taken

    return convert
