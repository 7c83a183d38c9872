"""The envelopes of a block of bare row messages, read by Arrow's JSON reader.

Both block reads of the ledger stand on this: the route of a batch's messages
(:func:`route_reader`, here) and the projection of one table's messages
(:mod:`icetide.ledger.plain_block`). The messages of one Arrow batch are joined into one
NDJSON block and parsed once by ``pyarrow.json`` (C++), and
:func:`~icetide.events.plain.read_plain`'s checks of the envelope (operation, source,
position, times, transaction id) run as array operations over it.

Like the one-pass read, a block read only *accepts*: it takes a message only where it
can tell for certain what the per-message read makes of it, and every other message goes
the per-message way, in its place. A block Arrow refuses as a whole (one malformed line,
a field of another JSON type) has its halves read instead (:func:`halving`), and a
reader that takes little of a batch stops trying (:data:`GIVE_UP_AFTER`).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from icetide.events.inline import SCHEMA_FIRST
from icetide.events.plain import MS_RANGE, many_openers
from icetide.events.position import OFFSET_SPAN, ROW_SPAN, binlog_file_number
from icetide.ledger.position_arrays import (
    binlog_texts,
    binlog_words,
    decimal_keys,
    lsn_texts,
    lsn_words,
)

OPS = ("c", "r", "u", "d")
_MYSQL = ("mysql", "mariadb")


GIVE_UP_AFTER = 1_000
"""A reader that took under a tenth of the messages of a batch this large is not used
again (see :class:`Tries`)."""
HALVING_BUDGET = 4
SMALLEST_BLOCK = 64
"""A block Arrow cannot read as a whole is read as two halves, down to this many
messages; a part this small that still cannot be read goes the per-message way."""


class _Taken(Protocol):
    @property
    def taken(self) -> np.ndarray: ...


Taken = TypeVar("Taken", bound=_Taken)


def halving(offered: np.ndarray, read: Callable[[np.ndarray], Taken | None]) -> list[Taken]:
    """``read`` of the messages ``offered`` as one block, or of its halves (recursively)
    when the whole cannot be read: one malformed or unusual message costs about one more
    parse of the block, not the block's speed. The halving stops once it has parsed
    :data:`HALVING_BUDGET` times the block (many unusual messages: the per-message read
    is then the cheaper one for the rest)."""
    budget = HALVING_BUDGET * len(offered)

    def halves(part: np.ndarray) -> list[Taken]:
        nonlocal budget
        if not len(part) or budget < len(part):
            return []
        budget -= len(part)
        found = read(part)
        if found is not None:
            return [found] if len(found.taken) else []
        if len(part) <= SMALLEST_BLOCK:
            return []
        middle = len(part) // 2
        return halves(part[:middle]) + halves(part[middle:])

    return halves(offered)


PAYLOAD = (b'"payload"',)
"""In a message with an inline schema block (read by its own path,
:mod:`icetide.events.inline`), which a stream may mix with bare envelopes."""


class Tries:
    """Whether a block reader goes on trying: not after a batch of at least
    :data:`GIVE_UP_AFTER` messages of which it took under a tenth (for the rest of its
    worker's batches of a micro-batch). A stream of messages the block cannot take (a
    table's decimals sent as fractions, messages with inline schema blocks) pays their
    parse once, not at every batch."""

    def __init__(self) -> None:
        self.stopped = False

    def after(self, count: int, found: Sequence[_Taken]) -> None:
        """Record a batch of ``count`` messages of which the reader took ``found``."""
        if count >= GIVE_UP_AFTER and sum(len(f.taken) for f in found) * 10 < count:
            self.stopped = True


def plain_texts(raws: Sequence[bytes | None], refused: Sequence[bytes] = PAYLOAD) -> np.ndarray:
    r"""The indices of the messages of ``raws`` that may go in a block: each one JSON
    object on one line beginning with ``{`` (as the one-pass read parses it), in valid
    UTF-8 (Arrow reads invalid UTF-8 where ``orjson`` refuses the message), with no text
    Arrow reads where ``orjson`` refuses it (``NaN``, ``Infinity``), no ASCII letter
    written as an escape (:func:`_letter_escape`), and none of the texts ``refused`` (by
    default ``"payload"``: a message with an inline schema block).
    Checked on the joined text first (a few scans in C), message by message only when
    that finds one that may not; a message with an inline schema block first (as
    JsonConverter writes it) is left out before its kilobytes are scanned.

    >>> plain_texts([b'{"a": 1}', b' {"a": 1}', None, b'{"a": NaN}', b'{"b":\n 2}'])
    array([0])
    >>> plain_texts([b'{"a": "\xff"}', b'{"a": "\xc3\xa9"}', b'{"ddl": 1}'], (b'"ddl"',))
    array([1])
    >>> plain_texts([b'{"schema": {}, "payload": {}}', b'{"a": 1}'])
    array([1])
    >>> plain_texts([b'{"fil\\u0065": 1}', b'{"a": "\\u00e9"}'])
    array([1])
    """
    offered = [
        i for i, raw in enumerate(raws) if raw is not None and not raw.startswith(SCHEMA_FIRST)
    ]
    lines: list[bytes] = [raws[i] for i in offered]  # type: ignore[misc]
    count = len(lines)
    if count:
        text = b"\n".join(lines)
        lengths = np.fromiter(map(len, lines), np.int64, count)
        starts = np.cumsum(lengths + 1) - lengths - 1
        if (
            lengths.min() > 0
            and text.count(b"\n") == count - 1
            and (np.frombuffer(text, np.uint8)[starts] == 0x7B).all()
            and b"\r" not in text
            and b"NaN" not in text
            and b"Infinity" not in text
            and not any(refuse in text for refuse in refused)
            and b"\\u00" not in text
            and _utf8(text)
        ):
            return np.array(offered, np.int64)
    plain = np.fromiter((_plain_text(line, refused) for line in lines), bool, count)
    return np.array(offered, np.int64)[plain]


def _plain_text(raw: bytes, refused: Sequence[bytes]) -> bool:
    """:func:`plain_texts` of one message."""
    return (
        raw[:1] == b"{"
        and b"\n" not in raw
        and b"\r" not in raw
        and b"NaN" not in raw
        and b"Infinity" not in raw
        and not any(refuse in raw for refuse in refused)
        and not _letter_escape(raw)
        and _utf8(raw)
    )


def _utf8(text: bytes) -> bool:
    if text.isascii():
        return True
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def mask(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean array as a numpy mask, null as False."""
    filled = pc.fill_null(values, False) if values.null_count else values
    if isinstance(filled, pa.ChunkedArray):
        filled = filled.combine_chunks()
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=bool)


def child(struct: pa.StructArray | None, name: str) -> pa.Array | None:
    if struct is None or struct.type.get_field_index(name) < 0:
        return None
    return struct.field(name)


def is_type(array: pa.Array | None, *kinds: pa.DataType) -> bool:
    """Whether ``array`` is absent, all-null (JSON ``null`` only) or of one of ``kinds``."""
    return array is None or array.type == pa.null() or any(array.type == k for k in kinds)


def envelope_checks(
    doc: pa.Table, keyed: Keyed | None = None, numbered: bool = True
) -> tuple[np.ndarray, pa.Array | None, pa.Array | None, pa.Array, pa.Array] | None:
    """The envelope checks of :func:`~icetide.events.plain.read_plain` over a block:
    where they pass, each message's position (key and text), transaction id and source
    ``ts_ms``; None when the block's envelope fields are not of the types that read
    takes (all its messages then go the per-message way). ``keyed`` tells which messages
    may hold both a ``file`` and a ``pos`` key in ``source`` where a null one is not told
    from an absent one (None: any, when the block has both); positions' keys and texts
    only when ``numbered``."""
    n = doc.num_rows
    if "source" not in doc.column_names:
        return None
    source = doc.column("source").combine_chunks()
    if not pa.types.is_struct(source.type):
        return None
    ok = mask(source.is_valid()) & mask(pc.is_in(doc.column("op"), pa.array(OPS)))
    table = child(source, "table")
    if table is None or table.type != pa.string():
        return None
    ok &= mask(pc.greater(pc.utf8_length(table), 0))
    for key in ("db", "schema", "connector", "name"):
        if not is_type(child(source, key), pa.string()):
            return None
    if not is_type(child(source, "snapshot"), pa.string(), pa.bool_()):
        return None
    source_ms = child(source, "ts_ms")
    doc_ms = doc.column("ts_ms").combine_chunks() if "ts_ms" in doc.column_names else None
    for ms in (source_ms, doc_ms):
        if not is_type(ms, pa.int64()):
            return None
        if ms is not None and ms.type == pa.int64():
            ok &= ~mask(pc.or_(pc.less_equal(ms, MS_RANGE[0]), pc.greater_equal(ms, MS_RANGE[1])))
    seconds = child(source, "ts_sec")
    if seconds is not None and seconds.type != pa.null():
        no_ms = np.ones(n, bool) if source_ms is None else ~mask(source_ms.is_valid())
        ok &= ~(no_ms & mask(seconds.is_valid()))
    tx_id = _transaction_ids(doc, source)
    if tx_id is None:
        return None
    ok &= mask(tx_id[1])
    found = _positions(source, ok, keyed, numbered)
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
            tid = child(transaction, "id")
            if not is_type(tid, pa.string(), pa.int64()):
                return None
            if tid is not None and tid.type != pa.null():
                from_tx = tid.cast(pa.string())
    taken = pa.array(np.ones(n, bool))
    tx = child(source, "txId")
    from_txid = nothing
    if tx is not None and tx.type != pa.null():
        if tx.type == pa.int64():
            from_txid = tx.cast(pa.string())
        else:  # another type: the one-pass read declines such a message unless tx id set
            taken = pc.or_(from_tx.is_valid(), tx.is_null())
    gtid = child(source, "gtid")
    from_gtid = nothing
    if gtid is not None and gtid.type != pa.null():
        if gtid.type != pa.string():
            return None
        from_gtid = pc.if_else(pc.equal(gtid, ""), pa.scalar(None, pa.string()), gtid)
    ids = pc.coalesce(from_tx, from_txid, from_gtid)
    return ids, taken


def _positions(
    source: pa.StructArray, ok: np.ndarray, keyed: Keyed | None, numbered: bool
) -> tuple[np.ndarray, pa.Array | None, pa.Array | None] | None:
    """Each taken message's position (:func:`~icetide.events.plain._position`): the
    binlog's (``file``, ``pos``, ``row``) for MySQL and MariaDB or where both ``file``
    and ``pos`` are set, else the LSN; a message whose position that read would not
    take, or whose ``file``/``pos`` may be present with null, is declined. The keys and
    texts of the positions (:mod:`icetide.ledger.position_arrays`; meaningless where not
    taken) only when ``numbered`` (else None)."""
    n = len(source)
    connector = child(source, "connector")
    mysql = (
        np.zeros(n, bool)
        if connector is None or connector.type == pa.null()
        else mask(pc.is_in(connector, pa.array(_MYSQL)))
    )
    file, pos, row = child(source, "file"), child(source, "pos"), child(source, "row")
    if not is_type(file, pa.string()) or not is_type(pos, pa.int64()):
        return None
    if not is_type(row, pa.int64()):
        return None
    has_file = file is not None and file.type != pa.null()
    file_set = mask(file.is_valid()) if has_file else np.zeros(n, bool)  # type: ignore[union-attr]
    has_pos = pos is not None and pos.type != pa.null()
    pos_set = mask(pos.is_valid()) if has_pos else np.zeros(n, bool)  # type: ignore[union-attr]
    binlog = mysql | (file_set & pos_set)
    if file is not None and pos is not None:
        # Both keys in the block: a message with either null may hold both (binlog, not
        # taken) or lack one (the LSN): ``keyed`` or the per-message read tells.
        unsure = np.flatnonzero(ok & ~mysql & (file_set ^ pos_set | ~file_set & ~pos_set))
        if len(unsure):  # (all of them taken so far)
            ok[unsure] = False if keyed is None else ~keyed(unsure)
    offsets, rows = _filled(pos, n, -1), _filled(row, n, 0)
    names: list[str | None] = []
    number_of: list[int | None] = [None]
    named = np.zeros(n, bool)
    if has_file:
        encoded = file.dictionary_encode()  # type: ignore[union-attr]
        names = encoded.dictionary.to_pylist()
        number_of = [*map(_file_number, names), None]  # the last: no file
        code = pc.fill_null(encoded.indices, -1).to_numpy()
        named = np.array([number is not None for number in number_of])[code]
    in_range = (offsets >= 0) & (offsets < OFFSET_SPAN) & (rows >= 0) & (rows < ROW_SPAN)
    lsns = _filled(child(source, "lsn"), n, -1)
    ok &= np.where(binlog, named & in_range, lsns >= 0)
    if not numbered:
        return ok, None, None
    codes = code if has_file else np.full(n, -1)
    # Each formula only where a taken message needs it: a table's block is all one kind.
    taken_binlog = binlog & ok
    if not (ok & ~binlog).any():
        keys = decimal_keys(*binlog_words(number_of[:-1], codes, offsets, rows))
        texts = binlog_texts(pa.array(names, pa.string()), codes, offsets, rows)
    elif not taken_binlog.any():
        keys, texts = decimal_keys(*lsn_words(lsns)), lsn_texts(lsns)
    else:
        binlog_low, binlog_high = binlog_words(number_of[:-1], codes, offsets, rows)
        lsn_low, lsn_high = lsn_words(lsns)
        keys = decimal_keys(
            np.where(binlog, binlog_low, lsn_low), np.where(binlog, binlog_high, lsn_high)
        )
        texts = pc.if_else(
            pa.array(binlog),
            binlog_texts(pa.array(names, pa.string()), codes, offsets, rows),
            lsn_texts(lsns),
        )
    return ok, keys, texts


Keyed = Callable[[np.ndarray], np.ndarray]
"""Which of the given messages (indices into a block) may hold both a ``file`` and a
``pos`` key in their ``source``."""


def _filled(values: pa.Array | None, n: int, default: int) -> np.ndarray:
    """An ``int64`` child as numbers, ``default`` where null or absent (another type:
    refused by the caller before)."""
    if values is None or values.type != pa.int64():
        return np.full(n, default, np.int64)
    return pc.fill_null(values, default).to_numpy()


def _file_number(name: str | None) -> int | None:
    """A binlog file name's number where the one-pass read takes the name; None where a
    position in it would not be (no number, or one whose positions pass the 38 digits
    a ledger position keeps: the key is below 10**38 exactly when the number is below
    10**19, offsets and rows being in range)."""
    if not name:
        return None
    try:
        number = binlog_file_number(name)
    except ValueError:
        return None
    return number if number < 10**19 else None


_IMAGE = pa.struct([])
ROUTE_FIELDS = pa.schema(
    [
        ("op", pa.string()),
        ("before", _IMAGE),
        ("after", _IMAGE),
        (
            "source",
            pa.struct(
                [
                    *((k, pa.string()) for k in ("table", "db", "schema", "connector", "name")),
                    *((k, pa.string()) for k in ("snapshot", "gtid", "file")),
                    *((k, pa.int64()) for k in ("ts_ms", "ts_sec", "txId", "pos", "row", "lsn")),
                ]
            ),
        ),
        ("ts_ms", pa.int64()),
        ("transaction", pa.struct([("id", pa.string())])),
        ("schema", pa.null()),
    ]
)
"""What the route reads of a message: the envelope fields
:func:`~icetide.events.plain.read_plain` looks at, each in the JSON type that read takes
(a value of another type fails the block: its halves are read). The column values are
not read: ``before`` and ``after`` are objects whose members Arrow skips, so one block
holds the messages of every table. A top-level ``schema`` other than ``null`` fails the
block; one present with ``null`` reads as absent, as the general decoder takes it too."""
ROUTE_REFUSED = (*PAYLOAD, b'"ddl"', b'"tableChanges"')
"""Texts whose message the route leaves to the per-message read: an inline schema block,
and the keys of a schema change event, which the general decoder finds present even with
``null`` (a block does not tell null from absent)."""
_ROUTE_PARSING = pj.ParseOptions(explicit_schema=ROUTE_FIELDS, unexpected_field_behavior="ignore")


@dataclass(frozen=True)
class Routed:
    """What a route block took: the taken messages and the table each names."""

    taken: np.ndarray
    """Indices (into the block's messages) of the messages read here, ascending."""
    identities: list[tuple[str | None, str]]
    """The distinct (server, ``db.table``) the taken messages name (``source.name`` or
    None, and the schema or database with the table), as the one-pass read routes by."""
    codes: np.ndarray
    """Each taken message's identity: an index into :attr:`identities`."""


RouteReader = Callable[[Sequence[bytes | None]], Routed | None]


def route_reader() -> RouteReader:
    """The block route of a worker's batches: for a batch's messages, the bare row
    envelopes :func:`~icetide.events.plain.read_plain` takes, with the (server,
    ``db.table``) each names; None when it took none. Every other message (an inline
    schema block, a registry frame, a tombstone, a schema change, anything unusual) is
    left to the per-message classification."""
    tries = Tries()

    def part(raws: Sequence[bytes | None], offered: np.ndarray) -> Routed | None:
        lines: list[bytes] = [raws[i] for i in offered]
        text = b"\n".join(lines)
        try:
            doc = pj.read_json(io.BytesIO(text), SERIAL, _ROUTE_PARSING).combine_chunks()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None  # a message Arrow refuses, or a field of another type, somewhere
        if doc.num_rows != len(offered):
            return None
        found = envelope_checks(doc, keyed_by_text(text, lines), numbered=False)
        if found is None:
            return None
        ok = found[0]
        ok &= ~np.fromiter(map(many_openers, lines), bool, len(lines))
        before, after = doc.column("before"), doc.column("after")
        deleted = pc.equal(doc.column("op"), "d")
        ok &= mask(pc.if_else(deleted, before.is_valid(), after.is_valid()))
        taken = np.flatnonzero(ok)
        identities, codes = _identities(doc.column("source").combine_chunks().take(taken))
        return Routed(offered[taken], identities, codes)

    def read(raws: Sequence[bytes | None]) -> Routed | None:
        if tries.stopped or not raws:
            return None
        found = halving(plain_texts(raws, ROUTE_REFUSED), lambda offered: part(raws, offered))
        tries.after(len(raws), found)
        if not found:
            return None
        identities: dict[tuple[str | None, str], int] = {}
        codes = []
        for f in found:
            renumber = np.array([identities.setdefault(i, len(identities)) for i in f.identities])
            codes.append(renumber[f.codes] if len(f.codes) else f.codes)
        return Routed(
            np.concatenate([f.taken for f in found]), list(identities), np.concatenate(codes)
        )

    return read


def keyed_by_text(text: bytes, lines: Sequence[bytes]) -> Keyed:
    """:data:`Keyed` told by the messages' text (``text``: ``lines`` joined): only one
    naming both ``"file"`` and ``"pos"`` may hold both keys (:func:`plain_texts` offers no
    message writing a key with escapes)."""
    binlog_keys = _binlog_keys(text)

    def keyed(unsure: np.ndarray) -> np.ndarray:
        if not binlog_keys:
            return np.zeros(len(unsure), bool)
        return np.fromiter((_binlog_keys(lines[i]) for i in unsure), bool, len(unsure))

    return keyed


def _binlog_keys(raw: bytes) -> bool:
    """Whether a message may hold both ``"file"`` and ``"pos"`` keys (one with a key
    written with escapes is not offered: :func:`_letter_escape`)."""
    return b'"file"' in raw and b'"pos"' in raw


def _letter_escape(raw: bytes) -> bool:
    r"""Whether a message writes an ASCII letter as an escape (``\u0064`` is ``d``): a
    key so written (``"dd\u006c"``) escapes every check of its text, so the message is
    left to the per-message read.

    >>> _letter_escape(b'{"dd\\u006c": null}'), _letter_escape(b'{"a": "\\u00e9\\u0001"}')
    (True, False)
    """
    at = raw.find(b"\\u00")
    while at >= 0:
        if raw[at + 4 : at + 5] in _LETTER_ROWS:
            return True
        at = raw.find(b"\\u00", at + 1)
    return False


_LETTER_ROWS = (b"4", b"5", b"6", b"7")
"""The third hex digit of an escaped ASCII letter (``\u0041``–``\u007a``)."""


SERIAL = pj.ReadOptions(use_threads=False)
"""One thread: the ledger's Python workers already use every core."""


def _identities(source: pa.StructArray) -> tuple[list[tuple[str | None, str]], np.ndarray]:
    """The distinct (server, ``db.table``) of ``source`` blocks and each one's index, as
    :func:`~icetide.ledger.decode.classify_one` names a bare envelope's table: the
    schema, else the database, before the table (an empty one: none), and ``name`` as
    the server (empty: none)."""
    if not len(source):
        return [], np.zeros(0, np.int64)
    prefix = pc.coalesce(_nonempty(source.field("schema")), _nonempty(source.field("db")))
    table = source.field("table")
    qualified = pc.if_else(
        prefix.is_valid(), pc.binary_join_element_wise(prefix, table, "."), table
    ).dictionary_encode()
    server = _nonempty(source.field("name")).dictionary_encode()
    servers = server.dictionary.to_pylist()
    tables = qualified.dictionary.to_pylist()
    table_at = qualified.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    server_at = pc.fill_null(pc.add(server.indices, 1), 0).to_numpy().astype(np.int64)
    combined = table_at * (len(servers) + 1) + server_at
    distinct, codes = np.unique(combined, return_inverse=True)
    identities = [
        (servers[s - 1] if s else None, tables[t])
        for t, s in zip(distinct // (len(servers) + 1), distinct % (len(servers) + 1), strict=True)
    ]
    return identities, codes.reshape(-1)


def _nonempty(values: pa.Array) -> pa.Array:
    return pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)
