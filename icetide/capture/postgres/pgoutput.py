"""The pgoutput protocol (version 1): the binary logical replication messages, decoded.

Each function reads one message kind from the bytes psycopg2 hands over (``decode=False``)
and returns plain values; what they *mean* for capture (transactions, row images,
offsets) is the reader's business. Message layouts are PostgreSQL's "Logical Replication
Message Formats": a one-byte kind (:data:`BEGIN`, :data:`INSERT` …) then big-endian
fields; column values are text in the server's encoding (:func:`python_codec`).
"""

from __future__ import annotations

import codecs
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from icetide.capture.errors import CaptureError

BEGIN, COMMIT, RELATION, MESSAGE = 0x42, 0x43, 0x52, 0x4D  # B C R M
INSERT, UPDATE, DELETE, TRUNCATE = 0x49, 0x55, 0x44, 0x54  # I U D T
KEY, OLD, NEW = 0x4B, 0x4F, 0x4E
"""An update's or delete's old tuple: the replica-identity columns only (``K``), or the
whole old row (``O``, ``REPLICA IDENTITY FULL``); ``N`` marks the new row."""
UNCHANGED: Any = object()
"""A TupleData value of kind ``u``: an unchanged TOAST value the server did not send."""

_PG_EPOCH_MS = 946_684_800_000  # 2000-01-01 in Unix milliseconds
_BEGIN = struct.Struct(">QqI")
_COMMIT = struct.Struct(">BQQq")
_REL_HEAD = struct.Struct(">I")
_INT16 = struct.Struct(">H")
_INT32 = struct.Struct(">I")
_COL_TAIL = struct.Struct(">Ii")
_TRUNCATE = struct.Struct(">IB")
_MESSAGE = struct.Struct(">BQ")


def python_codec(encoding: str) -> str:
    """The Python codec of a PostgreSQL server encoding (pgoutput sends text in it).

    >>> python_codec("UTF8"), python_codec("WIN1252"), python_codec("LATIN1")
    ('utf-8', 'cp1252', 'latin1')
    """
    name = encoding.strip().upper()
    special = {"UTF8": "utf-8", "SQL_ASCII": "utf-8", "KOI8R": "koi8_r", "KOI8U": "koi8_u"}
    if name in special:
        return special[name]
    candidate = "cp" + name[3:] if name.startswith("WIN") else name.lower()
    try:
        codecs.lookup(candidate)
    except LookupError:
        raise CaptureError(
            f"the database's encoding {encoding} has no Python codec",
            hint="capture supports UTF8 and the common single-byte encodings",
        ) from None
    return candidate


def _cstring(data: bytes, pos: int) -> tuple[str, int]:
    end = data.index(0, pos)
    return data[pos:end].decode(), end + 1


def parse_tuple(data: bytes, pos: int, codec: str = "utf-8") -> tuple[list[Any], int]:
    """A pgoutput TupleData at ``pos``: the column values (text, ``None`` for NULL,
    :data:`UNCHANGED` for ``u``) and the position after it.

    >>> parse_tuple(b"\\x00\\x02t\\x00\\x00\\x00\\x0242n", 0)
    (['42', None], 10)
    """
    (count,) = _INT16.unpack_from(data, pos)
    pos += 2
    values: list[Any] = []
    append = values.append
    unpack = _INT32.unpack_from
    for _ in range(count):
        kind = data[pos]
        pos += 1
        if kind == 0x74:  # 't'
            (size,) = unpack(data, pos)
            pos += 4
            append(data[pos : pos + size].decode(codec))
            pos += size
        elif kind == 0x6E:  # 'n'
            append(None)
        elif kind == 0x75:  # 'u'
            append(UNCHANGED)
        else:
            raise CaptureError(f"pgoutput sent a column value of unknown kind {chr(kind)!r}")
    return values, pos


RowReader = Callable[[bytes, int], "dict[str, Any] | None"]
"""``(message, offset of a TupleData) -> {column: converted value}``, or ``None`` when the
tuple holds a NULL or an unchanged TOAST value (or not the expected columns)."""


def row_reader(
    names: Sequence[str], converters: Sequence[Callable[[str], Any] | None], codec: str
) -> RowReader:
    """A reader of one table's TupleData whose every value is text (``t``): each value
    decoded and converted in one pass, straight into the row's dict.

    That is most rows, and :func:`parse_tuple` followed by a conversion per value costs a
    list, a loop and a lookup per column more. The function is written out for the
    table's columns, as the dataclasses module writes ``__init__``; a converter of
    ``None`` keeps the text. Only generated names (``v0``, ``c0`` …) appear in its code;
    column names and converters are values bound to it.

    >>> read = row_reader(["id", "note"], [int, None], "utf-8")
    >>> read(b"\\x00\\x02t\\x00\\x00\\x00\\x0242t\\x00\\x00\\x00\\x01x", 0)
    {'id': 42, 'note': 'x'}
    >>> read(b"\\x00\\x02t\\x00\\x00\\x00\\x0242n", 0) is None
    True
    """
    count = len(names)
    bound: dict[str, Any] = {"codec": codec}
    lines = [f"if data[pos] != {count >> 8} or data[pos + 1] != {count & 0xFF}:", "    return None"]
    lines.append("pos += 2")
    for i, (name, convert) in enumerate(zip(names, converters, strict=True)):
        bound[f"k{i}"] = name
        text = "data[pos + 5:end].decode(codec)"
        if convert is not None:
            bound[f"c{i}"] = convert
            text = f"c{i}({text})"
        lines += [
            "if data[pos] != 116:",  # 't'
            "    return None",
            'end = pos + 5 + int.from_bytes(data[pos + 1:pos + 5], "big")',
            f"v{i} = {text}",
            "pos = end",
        ]
    image = ", ".join(f"k{i}: v{i}" for i in range(count))
    body = "\n".join(f"        {line}" for line in lines)
    source = (
        f"def make({', '.join(bound)}):\n"
        "    def read_row(data, pos):\n"
        f"{body}\n"
        f"        return {{{image}}}\n"
        "    return read_row\n"
    )
    namespace: dict[str, Any] = {}
    exec(compile(source, "<pgoutput row reader>", "exec"), namespace)  # noqa: S102
    made: RowReader = namespace["make"](**bound)
    return made


@dataclass(frozen=True)
class Begin:
    """A transaction's start: its commit LSN, commit time and id."""

    final_lsn: int
    ts_ms: int
    """Commit time in Unix milliseconds."""
    xid: int


def parse_begin(data: bytes) -> Begin:
    """A Begin message."""
    final_lsn, ts, xid = _BEGIN.unpack_from(data, 1)
    return Begin(final_lsn, ts // 1000 + _PG_EPOCH_MS, xid)


def parse_commit(data: bytes) -> int:
    """A Commit message's end LSN: just after the transaction's commit record."""
    _, _, end_lsn, _ = _COMMIT.unpack_from(data, 1)
    return int(end_lsn)


@dataclass(frozen=True)
class LogicalMessage:
    """A ``pg_logical_emit_message`` record (sent with the ``messages`` option)."""

    transactional: bool
    lsn: int
    prefix: str
    content: bytes


def parse_message(data: bytes) -> LogicalMessage:
    """A logical decoding Message."""
    flags, lsn = _MESSAGE.unpack_from(data, 1)
    prefix, pos = _cstring(data, 10)
    (size,) = _INT32.unpack_from(data, pos)
    return LogicalMessage(bool(flags & 1), lsn, prefix, data[pos + 4 : pos + 4 + size])


@dataclass(frozen=True)
class RelationColumn:
    """One column of a Relation message."""

    name: str
    identity: bool
    """Part of the replica identity (the key flag)."""
    type_oid: int
    typmod: int


@dataclass(frozen=True)
class Relation:
    """A Relation message: a table's id, name, replica identity and columns, sent before
    its first change in a session and again after its columns change."""

    oid: int
    schema: str
    table: str
    identity: str
    """Replica identity: d(efault), n(othing), f(ull), i(ndex)."""
    columns: tuple[RelationColumn, ...]


def parse_relation(data: bytes) -> Relation:
    """A Relation message."""
    (oid,) = _REL_HEAD.unpack_from(data, 1)
    schema, pos = _cstring(data, 5)
    table, pos = _cstring(data, pos)
    identity = chr(data[pos])
    (count,) = _INT16.unpack_from(data, pos + 1)
    pos += 3
    columns = []
    for _ in range(count):
        flags = data[pos]
        name, pos = _cstring(data, pos + 1)
        type_oid, typmod = _COL_TAIL.unpack_from(data, pos)
        pos += 8
        columns.append(RelationColumn(name, bool(flags & 1), type_oid, typmod))
    return Relation(oid, schema, table, identity, tuple(columns))


def relation_oid(data: bytes) -> int:
    """The table id an Insert, Update or Delete message is about (read first, so rows
    of tables capture does not want are never decoded)."""
    (oid,) = _REL_HEAD.unpack_from(data, 1)
    return int(oid)


def parse_insert(data: bytes, codec: str) -> list[Any]:
    """An Insert message's new row."""
    return parse_tuple(data, 6, codec)[0]


def parse_update(data: bytes, codec: str) -> tuple[int, list[Any] | None, list[Any]]:
    """An Update message: the old tuple's kind (:data:`KEY`, :data:`OLD`, or ``N`` when
    none was sent), the old values (``None`` when none) and the new row."""
    old_kind = data[5]
    pos = 5
    old_values: list[Any] | None = None
    if old_kind in (KEY, OLD):
        old_values, pos = parse_tuple(data, pos + 1, codec)
    new_values, _ = parse_tuple(data, pos + 1, codec)
    return old_kind, old_values, new_values


def parse_delete(data: bytes, codec: str) -> tuple[int, list[Any]]:
    """A Delete message: the old tuple's kind (:data:`KEY` or :data:`OLD`) and values."""
    return data[5], parse_tuple(data, 6, codec)[0]


def parse_truncate(data: bytes) -> tuple[int, ...]:
    """A Truncate message's table ids."""
    count, _ = _TRUNCATE.unpack_from(data, 1)
    return tuple(struct.unpack_from(f">{count}I", data, 6))
