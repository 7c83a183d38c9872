"""A block's source positions as Arrow arrays: the packed keys and their texts.

The packed key of :mod:`icetide.events.position` needs up to 127 bits (``DECIMAL(38,0)``),
more than a NumPy integer holds, so the block read built each message's key and text as
Python objects (~2 µs a message, a tenth of a demo table's projection). Here the keys
are built as the two 64-bit words of a 128-bit decimal with carries done by hand, and
the texts with Arrow's string kernels, for whole blocks at once. The formulas are
:func:`~icetide.events.position.binlog_position`'s and
:func:`~icetide.events.position.lsn_position`'s (index 0), which the unit tests check
them against.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icetide.events.position import OFFSET_SPAN, ROW_SPAN

_LOW = (1 << 64) - 1
_HEX = np.frombuffer(b"0123456789ABCDEF", np.uint8)
_NIBBLES = np.arange(28, -4, -4, dtype=np.uint64)
KEY_TYPE = pa.decimal128(38, 0)


def binlog_words(
    numbers: Sequence[int | None], codes: np.ndarray, offsets: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The low and high words of ``(number * 10**13 + offset) * 10**6 + row`` for each
    message (``codes``: an index into ``numbers``, the file numbers of the block's
    distinct file names), for offsets below 10**13 and rows below 10**6 (a message
    outside those, or without a number, gets words that mean nothing)."""
    bases = [(n or 0) * OFFSET_SPAN * ROW_SPAN for n in numbers] or [0]
    base = np.array([(b & _LOW, b >> 64) for b in bases], np.uint64)
    at = np.clip(codes, 0, len(base) - 1)
    low0, high0 = base[at, 0], base[at, 1]
    small = np.clip(offsets, 0, None).astype(np.uint64) * np.uint64(ROW_SPAN)
    small += np.clip(rows, 0, None).astype(np.uint64)
    low = low0 + small  # wraps: the carry is where it came out smaller
    return low, high0 + (low < low0)


def lsn_words(lsns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The low and high words of ``lsn * 10**6`` for each LSN (non-negative int64s)."""
    lsn = np.clip(lsns, 0, None).astype(np.uint64)
    upper = (lsn >> np.uint64(32)) * np.uint64(ROW_SPAN)
    lower = (lsn & np.uint64(0xFFFFFFFF)) * np.uint64(ROW_SPAN)
    low0 = (upper & np.uint64(0xFFFFFFFF)) << np.uint64(32)
    low = low0 + lower
    return low, (upper >> np.uint64(32)) + (low < low0)


def decimal_keys(low: np.ndarray, high: np.ndarray) -> pa.Array:
    """The keys whose words are given, as ``DECIMAL(38,0)`` (little-endian 128 bits).

    >>> decimal_keys(*lsn_words(np.array([2**40 + 5]))).to_pylist()
    [Decimal('1099511627781000000')]
    """
    words = np.empty(2 * len(low), np.uint64)
    words[0::2], words[1::2] = low, high
    return pa.Array.from_buffers(KEY_TYPE, len(low), [None, pa.py_buffer(words.tobytes())])


def binlog_texts(
    names: pa.Array, codes: np.ndarray, offsets: np.ndarray, rows: np.ndarray
) -> pa.Array:
    """``file:offset:row`` for each message (``codes``: an index into ``names``).

    >>> binlog_texts(pa.array(["b.000002"]), np.array([0]), np.array([4]), np.array([1]))
    <pyarrow.lib.StringArray object at ...>
    [
      "b.000002:4:1"
    ]
    """
    if not len(names):  # no file named in the block: no binlog position either
        return pa.nulls(len(codes), pa.string())
    files = names.take(pa.array(np.clip(codes, 0, len(names) - 1)))
    return pc.binary_join_element_wise(
        files, pa.array(offsets).cast(pa.string()), pa.array(rows).cast(pa.string()), ":"
    )


def lsn_texts(lsns: np.ndarray) -> pa.Array:
    """``XXX/XXXXXXXX:0`` (PostgreSQL's text of an LSN, index 0) for each LSN.

    >>> lsn_texts(np.array([0x16B3748, 2**40])).to_pylist()
    ['0/16B3748:0', '100/0:0']
    """
    lsn = np.clip(lsns, 0, None).astype(np.uint64)
    upper = _hex(lsn >> np.uint64(32))
    lower = _hex(lsn & np.uint64(0xFFFFFFFF))
    return pc.binary_join_element_wise(pc.binary_join_element_wise(upper, lower, "/"), "0", ":")


def _hex(words: np.ndarray) -> pa.Array:
    """32-bit values as upper-case hexadecimal text without leading zeros."""
    nibbles = ((words[:, None] >> _NIBBLES) & np.uint64(15)).astype(np.intp)
    leading = np.minimum(np.cumprod(nibbles == 0, axis=1).sum(axis=1), 7)
    kept = np.arange(8)[None, :] >= leading[:, None]
    offsets = np.concatenate([[0], np.cumsum(8 - leading)]).astype(np.int32)
    data = _HEX[nibbles][kept]
    return pa.StringArray.from_buffers(
        len(words), pa.py_buffer(offsets.tobytes()), pa.py_buffer(data.tobytes())
    )
