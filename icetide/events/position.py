"""Typed, totally ordered source positions.

Every change event carries the place in the source's log where it happened. icetide
orders events of one table by that place, so it must compare as a number, never as a
string (``mysql-bin.000010`` sorts before ``mysql-bin.000009`` as text). A position is
packed into one non-negative integer that fits ``DECIMAL(38,0)``:

* MySQL/MariaDB binlog: ``(file number, offset, row)`` → ``(file * 10**13 + offset) * 10**6 + row``
* MySQL/MariaDB GTID only (no file): ``(sequence, row)`` → ``sequence * 10**6 + row``
* PostgreSQL: the LSN as a 64-bit number → ``lsn * 10**6 + index``

A table takes all its events from one source, so only positions of one kind are compared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

PositionKind = Literal["binlog", "gtid", "lsn"]

ROW_SPAN = 10**6
"""Rows (or indices) one log place holds: the last factor of every packed key."""
OFFSET_SPAN = 10**13
"""Byte offsets one binlog file holds in a packed key."""
_MAX = 10**38 - 1
_BINLOG_NAME = re.compile(r"^(?P<base>.*?)\.?(?P<num>\d+)$")


@dataclass(frozen=True, order=True)
class Position:
    """A comparable source position; ``key`` carries the order, ``text`` is for people."""

    key: int
    kind: PositionKind
    text: str

    def __post_init__(self) -> None:
        if not 0 <= self.key <= _MAX:
            raise ValueError(f"position {self.text} does not fit DECIMAL(38,0)")


@lru_cache(maxsize=256)  # per event, and a stream names few files
def binlog_file_number(name: str) -> int:
    """The numeric suffix of a binlog file name.

    >>> binlog_file_number("mysql-bin.000010")
    10
    """
    match = _BINLOG_NAME.match(name.strip())
    if not match:
        raise ValueError(f"binlog file name {name!r} has no numeric suffix")
    return int(match.group("num"))


def binlog_position(file: str, offset: int, row: int = 0) -> Position:
    """The position of row ``row`` of the binlog event at ``file``:``offset``.

    >>> binlog_position("binlog.000009", 4) < binlog_position("binlog.000010", 4)
    True
    """
    if offset < 0 or offset >= OFFSET_SPAN or row < 0 or row >= ROW_SPAN:
        raise ValueError(f"binlog offset {offset} or row {row} out of range")
    number = binlog_file_number(file)
    return Position(
        (number * OFFSET_SPAN + offset) * ROW_SPAN + row, "binlog", f"{file}:{offset}:{row}"
    )


def gtid_position(gtid: str, row: int = 0) -> Position:
    """The position of a GTID (``uuid:seq`` for MySQL, ``domain-server-seq`` for MariaDB)."""
    match = re.search(r"(\d+)\s*$", gtid)
    if not match:
        raise ValueError(f"GTID {gtid!r} has no sequence number")
    return Position(int(match.group(1)) * ROW_SPAN + row, "gtid", f"{gtid}:{row}")


def parse_lsn(text: str) -> int:
    """Parse a PostgreSQL LSN written ``XXXXXXXX/XXXXXXXX``.

    >>> parse_lsn("0/16B3748")
    23803720
    >>> parse_lsn("1/0") > parse_lsn("0/FFFFFFFF")
    True
    """
    high, _, low = text.strip().partition("/")
    if not low:
        raise ValueError(f"LSN {text!r} is not of the form X/Y")
    return (int(high, 16) << 32) | int(low, 16)


def format_lsn(lsn: int) -> str:
    """Render an LSN the way PostgreSQL does (``0/16B3748``)."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def lsn_position(lsn: int, index: int = 0) -> Position:
    """The position of a PostgreSQL change at ``lsn``; ``index`` orders events at one LSN."""
    if lsn < 0 or lsn >= 2**64 or not 0 <= index < ROW_SPAN:
        raise ValueError(f"LSN {lsn} or index {index} out of range")
    return Position(lsn * ROW_SPAN + index, "lsn", f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}:{index}")


_LSN_TEXT = re.compile(r"^(?P<lsn>[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8})(?::(?P<index>\d+))?$")
_BINLOG_TEXT = re.compile(r"^(?P<file>[^:\s]*\.\d+):(?P<offset>\d+)(?::(?P<row>\d+))?$")


def parse_position(text: str) -> Position:
    """A position as people write it: ``mysql-bin.000010:1234`` (binlog file and offset),
    ``0/16B3748`` (PostgreSQL LSN), or the packed number icetide stores (``_position``).

    Without a row (``:row``) or an index the position is that of the *last* row of the
    event, so a target position includes every row the event at that place wrote.

    >>> parse_position("mysql-bin.000010:1234") == binlog_position("mysql-bin.000010", 1234, 999999)
    True
    >>> parse_position("mysql-bin.000010:1234:0").text
    'mysql-bin.000010:1234:0'
    >>> parse_position("0/16B3748:2") == lsn_position(0x16B3748, 2)
    True
    >>> parse_position("10000000001234000000").key
    10000000001234000000
    >>> parse_position("yesterday")
    Traceback (most recent call last):
    ...
    ValueError: position 'yesterday' is neither a binlog position (mysql-bin.000010:1234[:row]), ...
    """
    written = text.strip()
    lsn = _LSN_TEXT.match(written)
    if lsn:
        index = lsn.group("index")
        return lsn_position(
            parse_lsn(lsn.group("lsn")), ROW_SPAN - 1 if index is None else int(index)
        )
    binlog = _BINLOG_TEXT.match(written)
    if binlog:
        row = binlog.group("row")
        offset = int(binlog.group("offset"))
        return binlog_position(
            binlog.group("file"), offset, ROW_SPAN - 1 if row is None else int(row)
        )
    if written.isdigit():
        # The number does not say its kind; only its order is used.
        return Position(int(written), "binlog", written)
    raise ValueError(
        f"position {text!r} is neither a binlog position (mysql-bin.000010:1234[:row]), an "
        "LSN (0/16B3748[:index]) nor a stored position (digits only)"
    )
