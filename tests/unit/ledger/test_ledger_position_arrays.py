"""Positions built as arrays against the per-message formulas of icetide.events.position,
at the edges of every component (128-bit carries included)."""

from __future__ import annotations

import random
from decimal import Decimal

import numpy as np
import pyarrow as pa

from icetide.events.position import binlog_position, lsn_position
from icetide.ledger.position_arrays import (
    binlog_texts,
    binlog_words,
    decimal_keys,
    lsn_texts,
    lsn_words,
)


def test_binlog_keys_and_texts_are_the_per_message_ones() -> None:
    rnd = random.Random(4)
    names = ["mysql-bin.000001", "b.9999999999999999999", "log.1000000000000000007", "x.0"]
    numbers = [1, 10**19 - 1, 10**18 + 7, 0]
    count = 3000
    codes = np.array([rnd.randrange(len(names)) for _ in range(count)])
    offsets = np.array(
        [rnd.choice([0, 4, 10**13 - 1, 2**32, rnd.randrange(10**13)]) for _ in range(count)]
    )
    rows = np.array([rnd.choice([0, 1, 10**6 - 1, rnd.randrange(10**6)]) for _ in range(count)])
    keys = decimal_keys(*binlog_words(numbers, codes, offsets, rows)).to_pylist()
    texts = binlog_texts(pa.array(names), codes, offsets, rows).to_pylist()
    for i in range(count):
        expected = binlog_position(names[codes[i]], int(offsets[i]), int(rows[i]))
        assert keys[i] == Decimal(expected.key), i
        assert texts[i] == expected.text, i


def test_lsn_keys_and_texts_are_the_per_message_ones() -> None:
    rnd = random.Random(5)
    # An LSN whose upper half times 10**6 ends just under 2**32: its low word carries.
    upper = (2**26 - 1) * pow(15625, -1, 2**26) % 2**26
    edges = [0, 1, 2**32 - 1, 2**32, 2**63 - 1, 0x16B3748, (upper << 32) | 0xFFFFFFFF]
    lsns = np.array([rnd.choice([*edges, rnd.randrange(2**63)]) for _ in range(3000)])
    keys = decimal_keys(*lsn_words(lsns)).to_pylist()
    texts = lsn_texts(lsns).to_pylist()
    for i, lsn in enumerate(lsns.tolist()):
        expected = lsn_position(lsn)
        assert keys[i] == Decimal(expected.key), lsn
        assert texts[i] == expected.text, lsn
