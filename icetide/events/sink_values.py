"""The sink config's conversions and type overrides applied to Arrow arrays.

The declarations (names, input and output types, arguments) are in
:mod:`icetide.schema.sink_functions`; here is what each function does to values. They run
in the ledger's ``mapInArrow`` workers on a whole column at once: with
``pyarrow.compute`` where Arrow has the operation (casts, the epoch conversions, ``mask``,
``lower``/``upper``/``trim``), value by value where it has none (``sha256``, JSON
parsing). A value that cannot be converted does not fail the batch: it is reported by
row (:class:`Converted`), and the ledger dead-letters that row with reason
:data:`CONVERSION_FAILED`.

>>> import pyarrow as pa
>>> from icetide.schema.sink_functions import Conversion
>>> from icetide.schema.types import StringType
>>> convert_values(pa.array(["4111222233334444", None]), StringType(),
...     Conversion("mask", (("keep", 4),))).array.to_pylist()
['************4444', None]
>>> from icetide.schema.types import IntType, LongType
>>> convert_values(pa.array([1, 2], pa.int32()), IntType(), target=LongType()).array.type
DataType(int64)
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from icetide.errors import ConfigError, DecodeError
from icetide.events.project import coerce_value
from icetide.schema.convert.spark import arrow_type, arrow_value
from icetide.schema.sink_functions import Conversion
from icetide.schema.types import Column, IcetideType

CONVERSION_FAILED = "conversion_failed"
"""Dead-letter reason of an event whose value a sink conversion or cast refused."""


@dataclass
class Converted:
    """A converted column, and the rows whose value could not be converted (row index →
    why); those rows hold null in ``array``."""

    array: pa.Array
    failed: dict[int, str] = field(default_factory=dict)


Vectorized = Callable[[pa.Array, Mapping[str, Any], pa.DataType], pa.Array]
"""``(values, arguments, output Arrow type) -> values``; raises on a value it refuses."""
PerValue = Callable[[Any, Mapping[str, Any], IcetideType], Any]
"""``(value, arguments, output type) -> value`` for a non-null value; raises on a bad one."""


def _epoch(unit: str) -> Vectorized:
    def run(values: pa.Array, args: Mapping[str, Any], out: pa.DataType) -> pa.Array:
        whole = pc.cast(values, pa.int64())
        # The safe cast to microseconds refuses a value outside the timestamp range.
        return pc.cast(pc.cast(whole, pa.timestamp(unit, tz="UTC")), out)

    return run


def _mask(values: pa.Array, args: Mapping[str, Any], out: pa.DataType) -> pa.Array:
    keep = int(args["keep"])
    length = pc.utf8_length(values)
    hidden = pc.max_element_wise(pc.subtract(length, keep), 0, skip_nulls=False)
    masked = pc.binary_repeat(pa.scalar(str(args["char"])), hidden)
    tail = (
        pc.utf8_slice_codeunits(values, start=-keep)
        if keep
        else pc.utf8_slice_codeunits(values, start=0, stop=0)
    )
    return pc.binary_join_element_wise(masked, tail, "")


def _unary(function: Callable[[pa.Array], pa.Array]) -> Vectorized:
    return lambda values, args, out: function(values)


def _sha256(value: Any, args: Mapping[str, Any], out: IcetideType) -> str:
    data = value if isinstance(value, bytes) else str(value).encode("utf-8")
    salt = hash_salt(args.get("salt_env") or "")
    if salt is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(salt, data, hashlib.sha256).hexdigest()


def hash_salt(variable: str) -> bytes | None:
    """The salt ``sha256(salt_env=VARIABLE)`` keys its hash with (None: no salt named).

    Read from the environment, so it lives in no file and is never printed; a missing or
    empty variable stops the stage (a config error: hashing unsalted instead would put
    guessable values in the lake) rather than dead-lettering every row."""
    if not variable:
        return None
    value = os.environ.get(variable, "")
    if not value:
        raise ConfigError(
            f"sha256(salt_env={variable}): the environment variable {variable} is not set or empty",
            hint=f"export {variable} with the salt in the environment of the ledger stage",
        )
    return value.encode("utf-8")


def _json_struct(value: Any, args: Mapping[str, Any], out: IcetideType) -> Any:
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if parsed is None:
        return None
    if not isinstance(parsed, dict):
        raise ValueError(f"JSON {type(parsed).__name__}, not an object")
    try:
        return arrow_value(coerce_value(parsed, Column(0, "value", out)), out)
    except DecodeError as exc:
        raise ValueError(exc.message) from None


VECTORIZED: dict[str, Vectorized] = {
    "epoch_millis_to_timestamp": _epoch("ms"),
    "epoch_seconds_to_timestamp": _epoch("s"),
    "mask": _mask,
    "lower": _unary(pc.utf8_lower),
    "upper": _unary(pc.utf8_upper),
    "trim": _unary(pc.utf8_trim_whitespace),
}
"""The functions Arrow computes on a whole array."""
PER_VALUE: dict[str, PerValue] = {"sha256": _sha256, "json_text_to_struct": _json_struct}
"""The functions Arrow has no kernel for, run value by value."""


def _cast(values: pa.Array, args: Mapping[str, Any], out: pa.DataType) -> pa.Array:
    return pc.cast(values, out)  # safe: overflow and lost digits raise


def convert_values(
    values: pa.Array,
    source: IcetideType,
    conversion: Conversion | None = None,
    target: IcetideType | None = None,
) -> Converted:
    """``values`` of a ``source``-typed column as the sink stores them: converted by
    ``conversion``, else cast to ``target`` (a type override), else as they are."""
    if conversion is not None:
        out_type = conversion.output_type(source)
        out, args, what = arrow_type(out_type), conversion.args(), conversion.describe()
        if conversion.function in VECTORIZED:
            return _vectorized(values, VECTORIZED[conversion.function], args, out, what)
        return _per_value(values, PER_VALUE[conversion.function], args, out_type, out, what)
    if target is None or arrow_type(target) == values.type:
        return Converted(values)
    return _vectorized(values, _cast, {}, arrow_type(target), f"cast to {target}")


def _vectorized(
    values: pa.Array, run: Vectorized, args: Mapping[str, Any], out: pa.DataType, what: str
) -> Converted:
    try:
        return Converted(run(values, args, out))
    except (pa.ArrowException, ValueError, OverflowError):
        pass  # some value is refused: find it below, one value at a time
    results: list[Any] = []
    failed: dict[int, str] = {}
    for i in range(len(values)):
        try:
            results.append(run(values.slice(i, 1), args, out)[0].as_py())
        except (pa.ArrowException, ValueError, OverflowError) as exc:
            results.append(None)
            failed[i] = f"{what}: {values[i].as_py()!r}: {exc}"[:300]
    return Converted(pa.array(results, out), failed)


def _per_value(
    values: pa.Array,
    run: PerValue,
    args: Mapping[str, Any],
    out_type: IcetideType,
    out: pa.DataType,
    what: str,
) -> Converted:
    results: list[Any] = []
    failed: dict[int, str] = {}
    for i, value in enumerate(values.to_pylist()):
        if value is None:
            results.append(None)
            continue
        try:
            results.append(run(value, args, out_type))
        except (ValueError, TypeError, UnicodeError) as exc:
            results.append(None)
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            failed[i] = f"{what}: {shown}: {exc}"[:300]
    try:
        return Converted(pa.array(results, out), failed)
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        pass  # some converted value does not fit its Arrow type: find it
    for i, result in enumerate(results):
        try:
            pa.array([result], out)
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
            results[i] = None
            failed[i] = f"{what}: the result does not fit {out}: {exc}"[:300]
    return Converted(pa.array(results, out), failed)
