"""Project a decoded change event onto a table's schema, with every value typed.

The envelope decoder keeps values as the source sent them (already typed when the message
carried a schema, raw JSON otherwise). Here each value is coerced to its column's
:class:`~icetide.schema.model.IcetideType` through one table, :data:`COERCERS`, so the
merge stage gets the same Python type for a column whatever the source sent.

>>> from icetide.schema.file import schema_from_dict
>>> schema = schema_from_dict({"table": "t", "primary_key": ["id"], "columns": [
...     {"id": 1, "name": "id", "type": "long"},
...     {"id": 2, "name": "price", "type": "decimal(6,2)"}]})
>>> row = project_row({"id": "7", "price": 3.5}, schema)
>>> row
{'id': 7, 'price': Decimal('3.50')}
"""

from __future__ import annotations

import functools
import json
import math
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Context, Decimal, Inexact, InvalidOperation
from typing import Any

from icetide.errors import DecodeError
from icetide.events import logical_types as lt
from icetide.events.model import UNAVAILABLE, ChangeEvent, Op
from icetide.events.wire import json_form
from icetide.schema.connector import typed_hints
from icetide.schema.convert.connect import DECIMAL
from icetide.schema.model import TableSchema
from icetide.schema.types import (
    Column,
    DecimalType,
    EnumType,
    IcetideType,
    ListType,
    MapType,
    StructType,
)


@dataclass(frozen=True)
class ProjectedEvent:
    """A change event in the table's own columns and types, ready to merge."""

    op: Op
    key: dict[str, Any]
    """Primary-key column → typed value (``{}`` for ``t``)."""
    after: dict[str, Any] | None
    """Every schema column → typed value (``None`` if missing/unavailable); ``None`` for d/t."""
    before: dict[str, Any] | None
    """Same shape for the before image when the event has one (missing columns ``None``)."""
    unavailable: tuple[str, ...]
    """Schema columns whose after value is the unchanged-TOAST placeholder: keep stored."""
    extra_columns: tuple[str, ...]
    """Event columns the schema does not know (schema drift), sorted."""


TYPE_MISMATCH = "type_mismatch"
"""The dead-letter reason of a value that does not fit its column's type."""


class _Mismatch(Exception):
    """Internal: a value does not fit the column type; turned into a ``type_mismatch``
    (an argument, when given, says why)."""


@dataclass(frozen=True)
class Slot:
    """Where a value goes: the column or nested field's name and type, and the logical
    type hint of the table's sink settings (how the source encodes it; a list's hint is
    its elements', at every depth: a PostgreSQL array's element type)."""

    name: str
    type: IcetideType
    logical: str | None = None


Coercer = Callable[[Any, Slot], Any]
"""``(value, slot) -> typed value``; raises :class:`_Mismatch` when the value does not fit."""


def _decimal(ctype: IcetideType) -> tuple[int, int]:
    assert isinstance(ctype, DecimalType)
    return ctype.precision, ctype.scale


_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_INTEGER_TEXT = re.compile(r"^\s*[+-]?\d+\s*$")
# Unit of an integer time/timestamp by the column's logical hint (defaults: time µs, ts ms).
_TIME_UNITS = {
    "org.apache.kafka.connect.data.Time": "ms",
    "io.debezium.time.Time": "ms",
    "io.debezium.time.MicroTime": "us",
    "io.debezium.time.NanoTime": "ns",
}
_TIMESTAMP_UNITS = {
    "org.apache.kafka.connect.data.Timestamp": "ms",
    "io.debezium.time.Timestamp": "ms",
    "io.debezium.time.MicroTimestamp": "us",
    "io.debezium.time.NanoTimestamp": "ns",
}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _integral(value: Any) -> int:
    if _is_int(value):
        return int(value)
    if isinstance(value, Decimal | float) and math.isfinite(value) and value == int(value):
        return int(value)
    if isinstance(value, str) and _INTEGER_TEXT.match(value):
        return int(value)
    raise _Mismatch


def _in_range(value: Any, bounds: tuple[int, int]) -> int:
    number = _integral(value)
    if not bounds[0] <= number <= bounds[1]:
        raise _Mismatch
    return number


def _to_boolean(value: Any, slot: Slot) -> bool:
    if isinstance(value, bool):
        return value
    if _is_int(value) and value in (0, 1):
        return bool(value)
    raise _Mismatch


def _to_int(value: Any, slot: Slot) -> int:
    return _in_range(value, _INT32)


def _to_long(value: Any, slot: Slot) -> int:
    return _in_range(value, _INT64)


def _to_float(value: Any, slot: Slot) -> float:
    if isinstance(value, float | int | Decimal) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in lt.FLOAT_WORDS:
            return lt.FLOAT_WORDS[word]
        try:
            return float(value)
        except ValueError:
            pass
    raise _Mismatch


def _to_decimal(value: Any, slot: Slot) -> Decimal:
    precision, scale = _decimal(slot.type)
    if isinstance(value, Decimal):
        number = value
    elif _is_int(value):
        number = Decimal(value)
    elif isinstance(value, float):
        number = Decimal(repr(value))  # the shortest text that round-trips, not binary noise
    elif isinstance(value, str):
        number = _decimal_text(value, slot, scale)
    else:
        raise _Mismatch
    if not number.is_finite():
        raise _Mismatch
    # Rounding would silently change the stored value, so a value with more fraction
    # digits than the column's scale does not fit (Inexact is trapped).
    context, quantum = _quantizing(precision, scale)
    try:
        quantized = number.quantize(quantum, context=context)
    except (Inexact, InvalidOperation):
        raise _Mismatch from None
    if len(quantized.as_tuple().digits) > precision:
        raise _Mismatch
    return quantized


@functools.cache
def _quantizing(precision: int, scale: int) -> tuple[Context, Decimal]:
    """The context and quantum :func:`_to_decimal` quantizes a column's values with, made
    once per column type (a ``Context`` costs more to make than the quantize itself; its
    sticky flags, which a trapped signal sets, change no later result)."""
    context = Context(prec=max(precision, 1) + 40, traps=[Inexact, InvalidOperation])
    return context, Decimal((0, (1,), -scale))


def _decimal_text(value: str, slot: Slot, scale: int) -> Decimal:
    """A decimal column's string, read the one way its hint says (never guessed: base64
    ``"1234"`` is -26588.24 at scale 2, not 1234; icetide.schema.connector)."""
    hint = slot.logical or DECIMAL
    if hint == DECIMAL:
        try:
            return lt.connect_decimal(value, scale, slot.name)
        except DecodeError:
            raise _Mismatch from None
    if hint == "string":
        try:
            return Decimal(value.strip())
        except InvalidOperation:
            raise _Mismatch from None
    raise _Mismatch  # float64 (decimal.handling.mode=double): a number, not a string


def _to_string(value: Any, slot: Slot) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Decimal) and value.is_finite():
        return format(value, "f")  # a numeric its schema typed (too wide for a decimal)
    if slot.logical == lt.VARIABLE_SCALE and isinstance(value, dict):
        return format(_wrap(lt.variable_scale_decimal, value, {}, slot.name), "f")
    if slot.logical == "float64" and isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)  # decimal.handling.mode=double
    raise _Mismatch


def _to_binary(value: Any, slot: Slot) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)  # decoded by an inline schema already (Bits reordered there)
    if isinstance(value, str):
        try:
            raw = lt.decode_base64(value, slot.name)
        except DecodeError:
            raise _Mismatch from None
        # Schemaless Bits: the column's logical hint says the bytes are Debezium's
        # little-endian form; the base stores the source's own order.
        return lt.bits_bytes(raw) if slot.logical == lt.BITS else raw
    raise _Mismatch


def _to_date(value: Any, slot: Slot) -> date:
    if isinstance(value, datetime):
        raise _Mismatch  # a datetime is a date subclass; silently dropping its time is wrong
    if isinstance(value, date):
        return value
    if _is_int(value):
        return _wrap(lt.days_to_date, value)
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            raise _Mismatch from None
    raise _Mismatch


def _to_time(value: Any, slot: Slot) -> time:
    if isinstance(value, time):
        parsed = value
    elif _is_int(value):
        parsed = _wrap(lt.time_of_day, value, _TIME_UNITS.get(slot.logical or "", "us"))
    elif isinstance(value, str):
        parsed = _wrap(lt.parse_time, value)
    else:
        raise _Mismatch
    # A time column is a wall-clock time of day: an offset (ZonedTime) is moved to UTC.
    return lt.time_to_utc(parsed).replace(tzinfo=None)


def _instant(value: Any, slot: Slot) -> datetime:
    """Any accepted timestamp form as a datetime (naive or aware, as given)."""
    if isinstance(value, datetime):
        return value
    if _is_int(value):
        unit = _TIMESTAMP_UNITS.get(slot.logical or "", "ms")
        return _wrap(lt.epoch_to_datetime, value, unit)
    if isinstance(value, str):
        return _wrap(lt.parse_datetime, value)
    raise _Mismatch


def _to_timestamp(value: Any, slot: Slot) -> datetime:
    moment = _instant(value, slot)
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)


def _to_timestamptz(value: Any, slot: Slot) -> datetime:
    moment = _instant(value, slot)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _to_uuid(value: Any, slot: Slot) -> str:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value.strip()))
        except ValueError:
            raise _Mismatch from None
    raise _Mismatch


def _to_json(value: Any, slot: Slot) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list | int | float | Decimal | bool):
        return dump_json(_as_sent(value))
    raise _Mismatch


def _as_sent(value: Any) -> Any:
    """A value its inline schema typed (an array of dates, of bytes) back in the form the
    JSON converter sends it without a schema (days, base64), so a JSON column holds the
    same text whichever way the message came; numbers and text stay as they are."""
    if isinstance(value, dict):
        return {k: _as_sent(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_sent(v) for v in value]
    if isinstance(value, date | time | bytes | uuid.UUID):
        return json_form(value)
    if isinstance(value, float):
        # As the number was written (what parsing it as a Decimal keeps); a non-finite
        # one as Debezium writes it, a word.
        return Decimal(repr(value)) if math.isfinite(value) else _FLOAT_WORDS[repr(value)]
    return value


_FLOAT_WORDS = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _wrap(func: Callable[..., Any], *args: Any) -> Any:
    try:
        return func(*args)
    except DecodeError:
        raise _Mismatch from None


def dump_json(value: Any) -> str:
    """Compact JSON text that keeps :class:`~decimal.Decimal` digits exactly.

    >>> dump_json({"a": [1, Decimal("2.50")], "b": None})
    '{"a":[1,2.50],"b":null}'
    """
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k))}:{dump_json(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(dump_json(v) for v in value) + "]"
    if isinstance(value, Decimal):
        return str(value) if value.is_finite() else json.dumps(float(value))
    return json.dumps(value)


def _to_enum(value: Any, slot: Slot) -> str:
    assert isinstance(slot.type, EnumType)
    if isinstance(value, str) and value in slot.type.symbols:
        return value
    raise _Mismatch


def _to_struct(value: Any, slot: Slot) -> dict[str, Any]:
    assert isinstance(slot.type, StructType)
    if not isinstance(value, dict):
        raise _Mismatch
    return {f.name: _coerce(value.get(f.name), Slot(f.name, f.type)) for f in slot.type.fields}


def _to_list(value: Any, slot: Slot) -> list[Any]:
    """A list, element by element with the list's hint. A value nesting lists deeper or
    shallower than the type is a list of another depth: a PostgreSQL array with other
    dimensions than the column declares (said so, not just "a mismatch")."""
    assert isinstance(slot.type, ListType)
    if not isinstance(value, list):
        raise _Mismatch
    want, (got, exact) = _type_levels(slot.type), _levels(value)
    if got > want or (exact and got != want):
        raise _Mismatch(
            f"the value nests {got} level(s) of lists where the type has {want} "
            "(a PostgreSQL array of other dimensions than the column declares)"
        )
    element = Slot(f"{slot.name}.element", slot.type.element, slot.logical)
    return [_coerce(v, element) for v in value]


def _levels(value: Any) -> tuple[int, bool]:
    """How many lists a value nests along its first non-null elements, and whether that
    is exact (it ends at a value, not at an empty or all-null list, which fits deeper)."""
    levels = 0
    while isinstance(value, list):
        levels += 1
        value = next((v for v in value if v is not None), None)
        if value is None:
            return levels, False
    return levels, True


def _type_levels(ctype: IcetideType) -> int:
    levels = 0
    while isinstance(ctype, ListType):
        ctype, levels = ctype.element, levels + 1
    return levels


def _to_map(value: Any, slot: Slot) -> list[tuple[Any, Any]]:
    """A JSON object (text keys) as Arrow's map form: a list of (key, value) pairs."""
    assert isinstance(slot.type, MapType)
    if not isinstance(value, dict):
        raise _Mismatch
    key = Slot(f"{slot.name}.key", slot.type.key)
    item = Slot(f"{slot.name}.value", slot.type.value)
    return [(_coerce(k, key), _coerce(v, item)) for k, v in value.items()]


def _coerce(value: Any, slot: Slot) -> Any:
    return None if value is None else COERCERS[slot.type.name](value, slot)


COERCERS: dict[str, Coercer] = {
    "boolean": _to_boolean,
    "int": _to_int,
    "long": _to_long,
    "float": _to_float,
    "double": _to_float,
    "decimal": _to_decimal,
    "string": _to_string,
    "binary": _to_binary,
    "date": _to_date,
    "time": _to_time,
    "timestamp": _to_timestamp,
    "timestamptz": _to_timestamptz,
    "uuid": _to_uuid,
    "json": _to_json,
    "enum": _to_enum,
    "struct": _to_struct,
    "list": _to_list,
    "map": _to_map,
}
"""Type name → coercer, for every name in :data:`icetide.schema.types.TYPE_NAMES`."""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def coerce_value(value: Any, column: Column, table: str = "?", logical: str | None = None) -> Any:
    """Coerce one value to ``column``'s type (``logical``: the sink's hint for it);
    ``None`` stays ``None``.

    >>> from icetide.schema.model import Column

    >>> from icetide.schema.types import parse_type
    >>> coerce_value("2024-02-29T10:00:00+01:00", Column(1, "at", parse_type("timestamp")))
    datetime.datetime(2024, 2, 29, 9, 0)
    """
    if value is None:
        return None
    try:
        return _coerce(value, Slot(column.name, column.type, logical))
    except _Mismatch as exc:
        why = f": {exc.args[0]}" if exc.args else ""
        raise DecodeError(
            TYPE_MISMATCH,
            f"column {column.name} of table {table}: expected {column.type}, "
            f"got {_show(value)}{why}",
            column=column.name,
        ) from None


def project_row(
    row: Mapping[str, Any], schema: TableSchema, hints: Mapping[int, str] | None = None
) -> dict[str, Any]:
    """Every schema column of one row image, typed; columns missing from ``row`` are ``None``.

    ``hints`` (column id → how its values arrive: :func:`icetide.schema.connector.read_hints`)
    default to the schema's ``sink.logical``. No nullability check: a before image may
    hold only the key (REPLICA IDENTITY DEFAULT).
    """
    hints = schema.sink.logical if hints is None else hints
    return {
        c.name: coerce_value(row.get(c.name), c, schema.table, hints.get(c.id))
        for c in schema.columns
    }


def _check_key(image: dict[str, Any], schema: TableSchema, which: str) -> dict[str, Any]:
    key = {}
    for column in schema.key_columns:
        if image.get(column.name) is None:
            raise DecodeError(
                "missing_key",
                f"table {schema.table}: primary-key column {column.name} is missing or null "
                f"in the {which} image",
                column=column.name,
            )
        key[column.name] = image[column.name]
    return key


def _check_required(
    after: dict[str, Any], present: Mapping[str, Any], unavailable: set[str], schema: TableSchema
) -> None:
    for column in schema.value_columns:
        if column.nullable or column.name in unavailable or after[column.name] is not None:
            continue
        if column.name not in present:
            continue  # written before the column existed: it holds no value for it
        state = "null"
        raise DecodeError(
            "null_in_required",
            f"table {schema.table}: column {column.name} is not nullable but is {state} "
            "in the after image",
            column=column.name,
        )


def project_event(
    event: ChangeEvent, schema: TableSchema, hints: Mapping[int, str] | None = None
) -> ProjectedEvent:
    """Type an event's images by ``schema``; raises ``DecodeError`` with reason
    ``type_mismatch``, ``missing_key`` or ``null_in_required`` for an event that cannot
    be stored (it then goes to the dead-letter table).

    ``hints`` say how the values of a schemaless event arrive (:func:`project_row`); an
    event its own schema typed (``event.typed``) reads its decimal strings as text."""
    hints = schema.sink.logical if hints is None else hints
    if event.typed:
        hints = typed_hints(schema, hints)
    if event.op == "t":
        return ProjectedEvent("t", {}, None, None, (), ())
    raw_after = dict(event.after or {})
    unavailable = set(event.unavailable)
    # A placeholder left in the image (an event built by hand) means the same thing.
    unavailable |= {k for k, v in raw_after.items() if v == UNAVAILABLE}
    for name in unavailable:
        raw_after.pop(name, None)
    raw_before = {k: v for k, v in (event.before or {}).items() if v != UNAVAILABLE}
    seen = set(raw_after) | unavailable | set(raw_before)
    extra = tuple(sorted(seen - set(schema.by_name)))

    before = project_row(raw_before, schema, hints) if event.before is not None else None
    if event.op == "d":
        if before is None:
            raise DecodeError("missing_key", f"table {schema.table}: delete without before image")
        return ProjectedEvent("d", _check_key(before, schema, "before"), None, before, (), extra)

    if event.after is None:
        raise DecodeError(
            "missing_key", f"table {schema.table}: op {event.op!r} event without after image"
        )
    after = project_row(raw_after, schema, hints)
    key = _check_key(after, schema, "after")
    if event.op == "u":
        # A full row image lacks a column only when the row was written before the
        # column existed (an event still in flight across an ADD COLUMN): it holds no
        # value for it, so the stored one stays, as for an unchanged-TOAST value.
        unavailable |= {c.name for c in schema.value_columns if c.name not in raw_after}
    _check_required(after, raw_after, unavailable, schema)
    toast = tuple(c.name for c in schema.columns if c.name in unavailable)
    return ProjectedEvent(event.op, key, after, before, toast, extra)
