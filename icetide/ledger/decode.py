"""Python steps that run inside Spark workers (``mapInArrow``): classify, then project.

``classify`` parses every message and reads its envelope to learn its table and whether
it is a row change, something to skip (tombstone, transaction marker) or a dead letter.
``project`` decodes the messages of one table, column values too, into that table's
typed ledger rows; a value that cannot be read makes its message a dead letter there.

Both passes read the usual message — a bare JSON row envelope — in one go with code built
once per batch (:mod:`icetide.events.plain`: ``orjson``, then per-table typing); any
other message, and any the one-pass read declines, goes through the general decoder
(:mod:`icetide.events.envelope`, :mod:`icetide.events.project`), which alone says why a
message is a dead letter.

Messages arrive as the exact bytes the transport delivered. The rule is structural: any
failure while decoding or projecting one message — invalid UTF-8, JSON nested too deep
for Python, a bug in a decoder — makes that message a dead letter with a reason; nothing
about one message can raise out of these functions and stop the stage. Only failures of
the infrastructure (catalog, storage, permissions) happen outside them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icetide.errors import DecodeError
from icetide.events.envelope import decode_document, parse_json
from icetide.events.inline import InlineSchema, InlineSchemas, block_decoders
from icetide.events.model import ChangeEvent
from icetide.events.plain import (
    PlainRow,
    Refuse,
    decimal_names,
    exact_decimals,
    image_projector,
    parse,
    read_plain,
    source_ts,
)
from icetide.events.project import project_event
from icetide.events.raw import BOM, Wire, message_text, read_document
from icetide.events.rescue import rescue_json
from icetide.events.sink_values import CONVERSION_FAILED, convert_values
from icetide.events.wire import not_text
from icetide.events.wire_prepared import read_framed
from icetide.ledger.envelope_block import RouteReader, route_reader
from icetide.ledger.plain_block import BlockReader, BlockRows, block_reader, joined
from icetide.schema.connector import typed_hints
from icetide.schema.contract import ledger as c
from icetide.schema.contract.builder import TableContract
from icetide.schema.convert.spark import arrow_value
from icetide.schema.model import SinkSettings, TableSchema
from icetide.schema.types import Column

ROW, SKIP, DEAD, FILE = "row", "skip", "dead", "file"
"""Classified statuses; ``file`` marks a landing-file receipt, not a message."""
DECODE_FAILED = "decode_failed"
"""Reason of a message whose decoding failed in an unforeseen way (see module doc)."""
CLASSIFIED_SCHEMA = (
    "message_id STRING, table STRING, status STRING, reason STRING, error STRING, raw BINARY, "
    "schema_key STRING"
)
"""``schema_key``: which message-carried schema a row event was written with (see
:func:`schema_key`), so the stage can walk new versions before projecting."""
STATUS, REASON, ERROR, RAW, EXTRA = "_status", "_reason", "_error", "_raw", "_extra"
SCHEMA_CHANGE = "schema_change"
_MAX_ERROR = 500


@dataclass(frozen=True)
class Routes:
    """Which table takes an event, by its ``db.table`` and Debezium server name.

    ``tables`` maps a lower-cased ``db.table`` (or ``schema.table``) to its candidates:
    (lower-cased server name or ``None`` for any server, table name). The config refuses
    overlapping candidates, so at most one matches.

    >>> routes = Routes({"inventory.customers": [("pg", "pg_customers"), (None, "other")]})
    >>> routes.table("PG", "Inventory.Customers"), routes.table("mysql", "inventory.customers")
    ('pg_customers', 'other')
    """

    tables: dict[str, list[tuple[str | None, str]]] = field(default_factory=dict)

    def table(self, server: str | None, qualified: str) -> str | None:
        """The table for an event of ``server`` about ``qualified``, or ``None``."""
        candidates = self.tables.get(qualified.lower(), [])
        wanted = server.lower() if server else None
        for own, table in candidates:
            if own is not None and own == wanted:
                return table
        return next((table for own, table in candidates if own is None), None)

    def describe(self, server: str | None, qualified: str) -> str:
        """Why no table takes the event: the dead letter's error text."""
        candidates = self.tables.get(qualified.lower(), [])
        origin = f"is from server {server!r}" if server else "has no source.name"
        if candidates:
            servers = ", ".join(sorted(repr(own) for own, _ in candidates if own))
            fix = f"; a table with source '{server}.{qualified}' would take it" if server else ""
            return (
                f"source {qualified!r} is configured for server {servers} only; "
                f"this event {origin}{fix}"
            )
        return f"no table in the config has source {qualified!r} (the event {origin})"


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= _MAX_ERROR else text[: _MAX_ERROR - 3] + "..."


def _source_block(doc: Any) -> dict[str, Any] | None:
    if isinstance(doc, dict) and isinstance(doc.get("payload"), dict):
        doc = doc["payload"]
    source = doc.get("source") if isinstance(doc, dict) else None
    return source if isinstance(source, dict) else None


def _identity(doc: Any) -> tuple[str | None, str] | None:
    """(server, ``db.table``) named by a parsed message's source block, if it has one."""
    source = _source_block(doc)
    if source is None or not isinstance(source.get("table"), str) or not source["table"]:
        return None
    prefix = source.get("schema") or source.get("db")
    table = source["table"]
    qualified = f"{prefix}.{table}" if isinstance(prefix, str) and prefix else table
    server = source.get("name")
    return (server if isinstance(server, str) and server else None), qualified


def _guess_table(doc: Any, routes: Routes) -> str | None:
    """Best-effort table of an undecodable message, to pick its dead-letter table."""
    try:
        identity = _identity(doc)
        return routes.table(*identity) if identity else None
    except Exception:  # a guess must never turn a dead letter into a crash
        return None


def _guess_from_bytes(raw: bytes, routes: Routes) -> str | None:
    try:
        doc = json.loads(raw.decode("utf-8", "replace").lstrip(BOM))
    except Exception:  # unparseable after all: the unrouted dead-letter table takes it
        return None
    return _guess_table(doc, routes)


Classified = tuple[str | None, str, str, str]
"""(table, status, reason, error) of one message."""
REGISTRY_KEY, INLINE_KEY = "registry:", "inline:"


def schema_key(raw: bytes, doc: Any, wire: Wire | None = None) -> str | None:
    """The key of the schema a row event carries: ``registry:<id>`` for a
    registry-tagged message, ``inline:<digest>`` of the row struct of an inline Debezium
    ``schema`` block, or None (schemaless JSON). Never raises.

    >>> schema_key(b"{}", {"schema": {"fields": [{"field": "after", "type": "struct",
    ...     "fields": []}]}, "payload": {}})
    'inline:f0bc728907275d01'
    """
    try:
        if wire is not None and (framed := wire.framed(raw)) is not None:
            return _registry_key(framed)
        row = inline_row_schema(doc)
        if row is None:
            return None
        for seen, key in _RECENT:  # a stream repeats few schemas: compare before hashing
            if seen == row:
                return key
        text = json.dumps(row, sort_keys=True, separators=(",", ":"))
        key = INLINE_KEY + hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]
        _RECENT.insert(0, (row, key))
        del _RECENT[16:]
        return key
    except Exception:  # a key is an optimisation's input, never a reason to fail
        return None


_RECENT: list[tuple[dict[str, Any], str]] = []
"""The inline row schemas this worker keyed last, newest first."""


def inline_row_schema(doc: Any) -> dict[str, Any] | None:
    """The Connect struct of the row (``after``, else ``before``) in an inline Debezium
    ``schema`` block, or None."""
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if not isinstance(schema, dict):
        return None
    fields = {f.get("field"): f for f in schema.get("fields") or () if isinstance(f, dict)}
    for name in ("after", "before"):
        found = fields.get(name)
        if isinstance(found, dict) and found.get("type") == "struct":
            return found
    return None


def _route_plain(row: PlainRow, routes: Routes) -> Classified:
    """:func:`_route` of a bare row envelope :func:`~icetide.events.plain.read_plain` read."""
    source = row.source
    prefix = source.get("schema") or source.get("db")
    table = source["table"]
    qualified = f"{prefix}.{table}" if prefix else table
    return _route_identity((source.get("name") or None, qualified), routes)


def _route_identity(identity: tuple[str | None, str], routes: Routes) -> Classified:
    """The classification of a row event that names (server, ``db.table``)."""
    found = routes.table(*identity)
    if found is None:
        return None, DEAD, "unknown_table", routes.describe(*identity)
    return found, ROW, "", ""


def _general_key(raw: bytes) -> str | None:
    """:func:`schema_key` of a JSON message as the general path reads it (raises when
    that path cannot parse it)."""
    return schema_key(raw, parse_json(message_text(raw)))


_INLINE = InlineSchemas(_general_key)
"""The inline schema blocks this worker has read (:mod:`icetide.events.inline`)."""


def _classify(
    raw: bytes, routes: Routes, wire: Wire | None = None
) -> tuple[Classified, str | None]:
    # The usual messages, read once: a bare envelope (icetide.events.plain: no schema, so
    # no schema key) or one with an inline schema block (icetide.events.inline: the
    # block's key found once). A registry frame read by its prepared reader
    # (icetide.events.wire_prepared) to a bare envelope is routed the same way. Anything
    # else: the general path below.
    inline = _INLINE.known(raw)
    if inline is None:
        doc = parse(raw)
        plain = read_plain(doc)
        if plain is not None:
            return _route_plain(plain, routes), None
        inline = _INLINE.read(doc, raw)
    if inline is not None:
        classified = _route_plain(inline.row, routes)
        return classified, inline.block.key if classified[1] == ROW else None
    framed = wire.framed(raw) if wire is not None else None
    if framed is not None and wire is not None:
        plain = read_plain(read_framed(framed, wire.schemas))
        if plain is not None:
            classified = _route_plain(plain, routes)
            return classified, _registry_key(framed) if classified[1] == ROW else None
    return _classify_read(raw, routes, wire)


def _envelopes(raws: list[bytes | None]) -> tuple[list[bytes | None], dict[int, str | None]]:
    """The messages as the block route reads them: a compact message with an inline
    schema block already read (:meth:`~icetide.events.inline.InlineSchemas.split`) as
    its payload, with the block's schema key by its index; any other as it is."""
    lines: list[bytes | None] = []
    blocks: dict[int, str | None] = {}
    for raw in raws:
        split = _INLINE.split(raw) if raw is not None else None
        if split is not None:
            blocks[len(lines)] = split[1].key
            raw = split[0]
        lines.append(raw)
    return lines, blocks


def _registry_key(framed: bytes) -> str:
    """:func:`schema_key` of a registry frame."""
    return f"{REGISTRY_KEY}{int.from_bytes(framed[1:5], 'big')}"


def _classify_read(
    raw: bytes, routes: Routes, wire: Wire | None = None
) -> tuple[Classified, str | None]:
    """:func:`_classify` by the general decoder: any message, any form."""
    if wire is not None and wire.framed(raw) is not None:
        try:
            doc = read_document(raw, wire)
        except DecodeError as exc:
            return (None, DEAD, exc.reason, exc.message), None
        return _keyed(_route(doc, routes), raw, doc, wire)
    binary = not_text(raw, registry=wire is not None)
    if binary is not None:
        return (_guess_from_bytes(raw, routes), DEAD, binary.reason, binary.message), None
    try:
        text = message_text(raw)
    except DecodeError as exc:
        return (_guess_from_bytes(raw, routes), DEAD, exc.reason, exc.message), None
    try:
        doc = parse_json(text)
    except DecodeError as exc:
        return (None, DEAD, exc.reason, exc.message), None
    return _keyed(_route(doc, routes), raw, doc, None)


def _keyed(
    classified: Classified, raw: bytes, doc: Any, wire: Wire | None
) -> tuple[Classified, str | None]:
    return classified, schema_key(raw, doc, wire) if classified[1] == ROW else None


def _route(doc: Any, routes: Routes) -> Classified:
    try:
        # Routing needs the envelope, not the column values: ``project`` decodes those
        # (and dead-letters a bad one to the same table), so they are decoded once.
        decoded = decode_document(doc, images=False)
    except DecodeError as exc:
        return _guess_table(doc, routes), DEAD, exc.reason, exc.message
    if not isinstance(decoded, ChangeEvent):
        if decoded.kind == SCHEMA_CHANGE:  # routed: the stage acts on its table's changes
            return _guess_table(doc, routes), SKIP, decoded.kind, ""
        return None, SKIP, decoded.kind, ""
    identity = _identity(doc)
    if decoded.source is None or identity is None:
        return None, DEAD, "missing_source", "the event has no source.table to route it by"
    table = routes.table(*identity)
    if table is None:
        return None, DEAD, "unknown_table", routes.describe(*identity)
    return table, ROW, "", ""


def classify_one(raw: bytes | None, routes: Routes, wire: Wire | None = None) -> Classified:
    """(table, status, reason, error) of one message; never raises (see module doc).

    ``wire`` reads registry-tagged messages (:mod:`icetide.ledger.registry_decode`)."""
    return classify_keyed(raw, routes, wire)[0]


def classify_keyed(
    raw: bytes | None, routes: Routes, wire: Wire | None = None
) -> tuple[Classified, str | None]:
    """:func:`classify_one` and the :func:`schema_key` of a row event."""
    try:
        return _classify(raw or b"", routes, wire)
    except Exception as exc:  # one message must never stop the stage: dead-letter it
        return (_guess_from_bytes(raw or b"", routes), DEAD, DECODE_FAILED, _error_text(exc)), None


def classify_batches(
    routes: Routes, wire: Wire | None = None
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function that classifies raw messages.

    Input: ``message_id``, ``raw`` (bytes) and ``receipt`` (set only on the one row per
    landing file that says what was read; it comes out with status ``file``).
    """

    route_block = route_reader()

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield classified_batch(batch, routes, wire, route_block)

    return run


def classified_batch(
    batch: pa.RecordBatch, routes: Routes, wire: Wire | None, route_block: RouteReader
) -> pa.RecordBatch:
    """One Arrow batch of :func:`classify_batches` (and of the one-pass job,
    :func:`~icetide.ledger.table_files.classify_and_write`): the usual envelopes routed as one
    block (:func:`~icetide.ledger.envelope_block.route_reader`), every other message by
    :func:`classify_keyed`, in their places."""
    raws = batch.column("raw").to_pylist()
    receipts = (
        batch.column("receipt").to_pylist()
        if "receipt" in batch.schema.names
        else [None] * len(raws)
    )
    # Each message's (table, status, reason, error, schema key) as an index into
    # ``kinds``, the batch's distinct ones (a batch has few).
    kinds: dict[tuple[Any, ...], int] = {}
    at = np.full(len(raws), -1, np.int64)
    messages = [i for i, receipt in enumerate(receipts) if receipt is None]
    lines, blocks = _envelopes([raws[i] for i in messages])
    routed = route_block(lines)
    if routed is not None:
        found = [_route_identity(one, routes) for one in routed.identities]
        taken = np.array(messages, np.int64)[routed.taken]
        if not blocks:  # bare envelopes only: no schema key
            kind = np.array([kinds.setdefault((*k, None), len(kinds)) for k in found])
            at[taken] = kind[routed.codes]
        else:  # a row event's schema key is its inline schema block's
            for i, line, code in zip(
                taken.tolist(), routed.taken.tolist(), routed.codes.tolist(), strict=True
            ):
                key = blocks.get(line) if found[code][1] == ROW else None
                at[i] = kinds.setdefault((*found[code], key), len(kinds))
    for i in np.flatnonzero(at < 0).tolist():
        receipt = receipts[i]
        if receipt is not None:
            one: tuple[Any, ...] = (None, FILE, receipt, "", None)
        else:
            classified, key = classify_keyed(raws[i], routes, wire)
            one = (*classified, key)
        at[i] = kinds.setdefault(one, len(kinds))
    pick = pa.array(at)
    table, status, reason, error, key = (
        (pa.array(values, pa.string()).take(pick) for values in zip(*kinds, strict=True))
        if kinds
        else (pa.nulls(0, pa.string()),) * 5
    )
    return pa.RecordBatch.from_arrays(
        [
            batch.column("message_id").cast(pa.string()),
            table,
            status,
            reason,
            error,
            batch.column("raw").cast(pa.binary()),
            key,
        ],
        names=["message_id", "table", "status", "reason", "error", "raw", "schema_key"],
    )


@dataclass(frozen=True)
class Era:
    """One earlier schema version, as events written under it are read: ``until`` the
    source position the next version starts at, its column names → the current names
    (by id), its hints, and the names of its columns dropped since, whose values such
    an event still carries: they belong to no current column (one added again under the
    name is another), so they are left out, neither projected nor rescued."""

    until: int
    names: Mapping[str, str]
    hints: Mapping[int, str] | None
    dropped: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Projection:
    """How one table's events become ledger rows while its schema may be changing.

    ``layout`` is the shape of the ledger table now (every column of the newest applied
    schema version); ``values`` the schema whose columns get values (the version the
    merge can apply: a column it does not know yet stays null and its value goes to
    ``_rescued``); ``aliases`` maps an old column name to its current one (a rename: an
    event written before it still carries the old name); ``hints`` say how each column's
    values arrive in a schemaless message (:meth:`icetide.pipeline.Pipeline.read_hints`;
    None: the layout's ``sink.logical`` alone).
    """

    layout: TableSchema
    values: TableSchema | None = None
    aliases: Mapping[str, str] = field(default_factory=dict)
    hints: Mapping[int, str] | None = None
    earlier: tuple[Era, ...] = ()
    """The schema versions before the current one, by the source position each next
    version starts at, oldest first: an event written before a change (still in flight
    when it is applied) is read under the version it was written with, its column names
    (a swap of two columns) and its hints (a ``DATETIME(3)`` value still in milliseconds
    after ``→ DATETIME(6)``) included."""
    switch_to: int | None = None
    """The version whose columns this batch projects for the first time, when the
    switch is not recorded yet (:func:`icetide.ledger.phases.projection`)."""

    def era_at(self, position: int | None) -> Era | None:
        """The earlier version an event at source ``position`` was written under, or None
        when it was written under the current one (or its version is not known)."""
        chosen = None
        if position is not None:
            for era in reversed(self.earlier):
                if position < era.until:
                    chosen = era
        return chosen

    @property
    def value_schema(self) -> TableSchema:
        """The schema values are projected onto."""
        return self.values if self.values is not None else self.layout

    @classmethod
    def of(cls, projection: Projection | TableSchema) -> Projection:
        """A projection, from a plain schema (no change in progress) too."""
        return projection if isinstance(projection, Projection) else cls(projection)


def projected_arrow_schema(projection: Projection | TableSchema) -> pa.Schema:
    """Arrow schema of :func:`project_batches` output: ledger columns + status columns
    (the ledger's Iceberg names and types, after the sink config)."""
    fields = TableContract(Projection.of(projection).layout).ledger_arrow()
    fields += [
        pa.field(STATUS, pa.string()),
        pa.field(REASON, pa.string()),
        pa.field(ERROR, pa.string()),
        pa.field(RAW, pa.binary()),
        pa.field(EXTRA, pa.list_(pa.string())),
    ]
    return pa.schema(fields)


def projected_spark_schema(projection: Projection | TableSchema) -> str:
    """The schema of :func:`project_batches` output as Spark DDL, for ``mapInArrow``:
    :func:`projected_arrow_schema`, then the batch's ingestion time (``_ingested_at``)."""
    ledger = TableContract(Projection.of(projection).layout).ledger_written_columns()
    status = [f"{n} STRING" for n in (STATUS, REASON, ERROR)]
    stamp = f"{c.INGESTED_AT} TIMESTAMP"
    return ", ".join([*ledger, *status, f"{RAW} BINARY", f"{EXTRA} ARRAY<STRING>", stamp])


def _typed_row(values: dict[str, Any] | None, schema: TableSchema) -> dict[str, Any] | None:
    if values is None:
        return None
    return {col.name: arrow_value(values.get(col.name), col.type) for col in schema.columns}


def _renamed(
    image: Mapping[str, Any] | None,
    aliases: Mapping[str, str],
    exact: bool,
    dropped: frozenset[str] = frozenset(),
) -> Any:
    """An image with old column names turned into current ones: all at once when the
    event's own version is known (``exact``: a swap swaps), else unless both are there;
    without the ``dropped`` ones."""
    if image is not None and dropped and any(k in dropped for k in image):
        image = {k: v for k, v in image.items() if k not in dropped}
    if image is None or not aliases or not any(k in aliases for k in image):
        return image
    if exact:
        return {aliases.get(k, k): v for k, v in image.items()}
    out = {}
    for name, value in image.items():
        new = aliases.get(name)
        out[new if new is not None and new not in image else name] = value
    return out


Refused = Mapping[str, tuple[str, str]]
"""Schema key (:func:`schema_key`) → (dead-letter reason, error text): the message-carried
schema versions the table does not take (incompatible, held, evolution off);
:data:`ALL_MESSAGES` refuses every message of the table (its ledger could not take its
new schema version this batch)."""
ALL_MESSAGES = "*"
SCHEMA_CHANGE_FAILED = "schema_change_failed"
"""Dead-letter reason of a table's messages while its ledger cannot take its schema change."""


def _project(
    raw: bytes, projection: Projection, wire: Wire | None = None, refused: Refused | None = None
) -> dict[str, Any]:
    doc = read_document(raw, wire)
    if refused:
        why = refused.get(ALL_MESSAGES) or refused.get(schema_key(raw, doc, wire) or "")
        if why is not None:
            raise DecodeError(*why)
    event = decode_document(doc)
    if not isinstance(event, ChangeEvent):
        raise DecodeError("not_a_row", f"message is a {event.kind}, not a row change")
    if wire is not None and wire.framed(raw) is not None:
        event = replace(event, typed=True)  # its registry schema typed every value
    if event.position is None:
        raise DecodeError(
            "missing_position",
            "the event's source block has no binlog file/pos, GTID or LSN to order it by",
        )
    position = event.position
    era = projection.era_at(position.key)  # once per message: the hot path
    aliases = projection.aliases if era is None else era.names
    dropped = frozenset() if era is None else era.dropped
    if aliases or dropped:
        exact = era is not None  # its own version's names: all at once (a swap swaps)
        event = replace(
            event,
            after=_renamed(event.after, aliases, exact, dropped),
            before=_renamed(event.before, aliases, exact, dropped),
            unavailable=frozenset(aliases.get(n, n) for n in event.unavailable if n not in dropped),
        )
    schema, layout = projection.value_schema, projection.layout
    hints = projection.hints if era is None else era.hints
    projected = project_event(event, schema, hints)
    row: dict[str, Any] = {
        col.name: arrow_value(projected.key.get(col.name), col.type) for col in schema.key_columns
    }
    row.update(
        {
            c.OP: projected.op,
            c.AFTER: _typed_row(projected.after, layout),
            c.BEFORE: _typed_row(projected.before, layout),
            c.UNAVAILABLE: list(projected.unavailable),
            c.POSITION: Decimal(position.key),
            c.POSITION_TEXT: position.text,
            c.SOURCE_TS: event.source_ts,
            c.TX_ID: event.tx_id,
            c.RESCUED: rescue_json(event.after, event.before, schema.by_name)
            if projected.extra_columns
            else None,
            STATUS: ROW,
            EXTRA: list(projected.extra_columns),
        }
    )
    return row


def _plain_rows(
    projection: Projection, refused: Refused | None
) -> Callable[[bytes], dict[str, Any] | None] | None:
    """The ledger row of a bare row envelope (:mod:`icetide.events.plain`) or of one with
    an inline schema block (:mod:`icetide.events.inline`), exactly as :func:`_project`
    makes it, or None for a message it must read: built once per table and batch. None
    when this projection needs the general path for every message (renames in progress,
    every message refused)."""
    if refused and ALL_MESSAGES in refused:
        return None
    bare = None if refused and "" in refused else _document_rows(projection, typed=False)
    # The same, its decimal columns taking floats: for a message whose digits allow it.
    decimals = decimal_names(projection.value_schema)
    floats = (
        _document_rows(projection, typed=False, decimal_floats=True)
        if bare is not None and decimals
        else None
    )
    typed = _document_rows(projection, typed=True)
    if bare is None and typed is None:
        return None

    def run(raw: bytes) -> dict[str, Any] | None:
        inline = _INLINE.known(raw)
        if inline is None:
            doc = parse(raw)
            plain = read_plain(doc)
            if plain is not None:  # a bare envelope has no schema key: only "" refuses it
                if floats is not None and exact_decimals(plain, decimals, raw):
                    return floats(plain)
                return None if bare is None else bare(plain)
            inline = _INLINE.read(doc, raw)
        if inline is None or typed is None:
            return None
        row, block = inline
        if refused and (block.key or "") in refused:
            return None  # a refused version: said by the general path
        try:
            decoded = row._replace(
                before=block.reader.image(row.before), after=block.reader.image(row.after)
            )
        except Refuse:
            return None
        return typed(decoded)

    return run


def _framed_rows(
    projection: Projection, wire: Wire | None, refused: Refused | None
) -> Callable[[bytes], dict[str, Any] | None] | None:
    """The ledger row of a registry frame whose prepared reader
    (:mod:`icetide.events.wire_prepared`) gives a bare row envelope, exactly as
    :func:`_project` makes it (its values typed by their schema: :func:`typed_hints`),
    or None for a message the general path must read: built once per table and batch."""
    if wire is None or (refused and ALL_MESSAGES in refused):
        return None
    rows = _document_rows(projection, typed=True)
    if rows is None:
        return None
    schemas = wire.schemas

    def run(raw: bytes) -> dict[str, Any] | None:
        framed = wire.framed(raw)
        if framed is None or (refused and _registry_key(framed) in refused):
            return None  # not a frame, or a refused version: said by the general path
        plain = read_plain(read_framed(framed, schemas))
        return None if plain is None else rows(plain)

    return run


def _document_rows(
    projection: Projection, typed: bool, decimal_floats: bool = False
) -> Callable[[PlainRow], dict[str, Any] | None] | None:
    """The ledger row of a read row envelope (``typed``: its values typed by the
    message's own schema, inline or in the registry; ``decimal_floats``: its decimal
    columns take floats, :func:`~icetide.events.plain.exact_decimals`), or None: what
    :func:`_plain_rows` and :func:`_framed_rows` share."""
    schema, layout = projection.value_schema, projection.layout
    if projection.aliases:
        return None
    if not set(schema.by_name) <= set(layout.by_name):
        return None
    hints = projection.hints
    if typed:  # as project_event reads an event its own schema typed
        hints = typed_hints(schema, schema.sink.logical if hints is None else hints)
    images = image_projector(schema, layout, hints, typed=typed, decimal_floats=decimal_floats)
    project, names, keys = images.project, images.names, images.keys
    required, values, earlier = images.required, images.values, projection.earlier

    def run(plain: PlainRow) -> dict[str, Any] | None:
        position = plain.position
        if earlier and projection.era_at(position.key) is not None:
            return None  # written under an earlier version: its names and hints
        before, after, op = plain.before, plain.after, plain.op
        if (before is not None and not before.keys() <= names) or (
            after is not None and not after.keys() <= names
        ):
            return None  # columns the schema lacks: rescued by the general path
        try:
            typed_before = None if before is None else project(before)
            image: dict[str, Any]
            if op == "d":
                assert before is not None  # read_plain: a delete has a before image
                typed_after, image, toast = None, before, []
            else:
                assert after is not None  # read_plain: c/r/u have an after image
                typed_after, image = project(after), after
                for name in required:
                    if typed_after[name] is None and name in after:
                        return None  # null_in_required: said by the general path
                toast = [n for n in values if n not in after] if op == "u" else []
            row: dict[str, Any] = {}
            for name, convert in keys:
                value = image.get(name)
                if value is None:
                    return None  # missing_key: said by the general path
                row[name] = convert(value)
        except Refuse:
            return None
        row[c.OP] = op
        row[c.AFTER] = typed_after
        row[c.BEFORE] = typed_before
        row[c.UNAVAILABLE] = toast
        row[c.POSITION] = Decimal(position.key)
        row[c.POSITION_TEXT] = position.text
        row[c.SOURCE_TS] = source_ts(plain)
        row[c.TX_ID] = plain.tx_id
        row[c.RESCUED] = None
        row[STATUS] = ROW
        row[EXTRA] = []
        return row

    return run


def row_projector(
    projection: Projection | TableSchema, wire: Wire | None = None, refused: Refused | None = None
) -> Callable[[bytes], dict[str, Any]]:
    """``raw message -> ledger row`` for one table and batch: a row (``_status`` row) or
    a dead letter (``_status`` dead). Never raises: a failure of any kind on a message
    makes it a dead letter; so does a schema version in ``refused``.

    The usual message (a bare row envelope) is read in one pass by code built here once
    (:func:`_plain_rows`); every other one, and every one that path declines, by the
    general decoder (:func:`_project`)."""
    projection = Projection.of(projection)
    plain = _plain_rows(projection, refused)
    framed = _framed_rows(projection, wire, refused)

    def run(raw: bytes) -> dict[str, Any]:
        try:
            row = plain(raw) if plain is not None else None
            if row is None and framed is not None:
                row = framed(raw)
            if row is not None:
                return row
            return _project(raw, projection, wire, refused)
        except DecodeError as exc:
            return {STATUS: DEAD, REASON: exc.reason, ERROR: exc.message, RAW: raw}
        except Exception as exc:  # one message must never stop the stage: dead-letter it
            return {STATUS: DEAD, REASON: DECODE_FAILED, ERROR: _error_text(exc), RAW: raw}

    return run


def project_one(
    raw: bytes,
    projection: Projection | TableSchema,
    wire: Wire | None = None,
    refused: Refused | None = None,
) -> dict[str, Any]:
    """One message → one ledger row (``_status`` row) or a dead letter (``_status`` dead):
    :func:`row_projector` for a single message (a batch builds it once)."""
    return row_projector(projection, wire, refused)(raw)


def unmapped(schema: TableSchema) -> TableSchema:
    """``schema`` without its sink mappings: the shape events are projected in before
    :func:`to_sink` converts them."""
    if not schema.sink.maps:
        return schema
    return schema.with_columns(schema.columns, sink=SinkSettings(schema.sink.logical))


def project_batches(
    projection: Projection | TableSchema,
    ingested_at: datetime,
    wire: Wire | None = None,
    refused: Refused | None = None,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function that turns one table's messages into ledger rows.

    Each message is typed by the source schema (:func:`project_one`); when the table's
    sink config maps, renames or converts columns, the whole batch is then converted at
    once (:func:`to_sink`). Every row carries ``ingested_at``, the batch's ingestion
    time, made here rather than as a literal in the append's query: Spark writes a
    timestamp literal's value into the code it generates, so a new value every batch
    compiled the append's code anew, and the JVM's JIT compiler had to start over on it
    at every micro-batch (docs/merge-performance.md, "Where a busy run's CPU goes, and a
    literal that recompiled the ledger's appends").
    """
    projection = Projection.of(projection)
    layout = projection.layout
    arrow_schema = projected_arrow_schema(projection)
    contract = TableContract(layout)
    source_arrow = projected_arrow_schema(unmapped(layout))
    stamp = pa.field(c.INGESTED_AT, pa.timestamp("us", tz="UTC"))
    at = pa.scalar(ingested_at, stamp.type)
    project = row_projector(projection, wire, refused)
    shape = source_arrow if layout.sink.maps else arrow_schema
    block = _block_reader(projection, refused, shape)

    def stamped(batch: pa.RecordBatch) -> pa.RecordBatch:
        columns = [*batch.columns, pa.repeat(at, batch.num_rows)]
        return pa.RecordBatch.from_arrays(columns, schema=batch.schema.append(stamp))

    def projected(ids: list[Any], raws: list[bytes | None]) -> pa.RecordBatch:
        rows = []
        for message_id, raw in zip(ids, raws, strict=True):
            row = project(raw or b"")
            row[c.MESSAGE_ID] = message_id
            rows.append(row)
        return to_arrow(rows, raws, shape)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            ids = batch.column("message_id").to_pylist()
            raws = batch.column("raw").to_pylist()
            read = block(raws) if block is not None else None
            if read is None:
                out = projected(ids, raws)
            else:
                out = _with_rest(read, batch.column("message_id"), shape, ids, raws, projected)
            if layout.sink.maps:
                yield stamped(to_sink(out, contract, raws, arrow_schema))
            else:
                yield stamped(out)

    return run


BLOCK_SMALLEST = 320
"""A table's batch of fewer messages is projected message by message: a block read
costs about 10 ms whatever its size (a few hundred array operations over the table's
columns), so below about 300 messages of the generated tables of
``bench/tables_bench.py`` the per-message read was the cheaper (64 messages: 293 against
135 µs of CPU a message; 256: 114 against 95; 512: 83 against 121). A task of many
tables meets mostly such slices (docs/architecture.md)."""


def _block_reader(
    projection: Projection, refused: Refused | None, shape: pa.Schema
) -> BlockReader | None:
    """The block read (:mod:`icetide.ledger.plain_block`) of a batch's bare envelopes and
    of its compact messages whose inline schema block this worker has read
    (:meth:`~icetide.events.inline.InlineSchemas.split`), each block's payloads read as
    one more block with its fields' decoders
    (:func:`~icetide.events.inline.block_decoders`), where the one-pass read would take
    them: not while earlier versions or renames are read, nor for messages refused."""
    if projection.aliases or projection.earlier or (refused and ALL_MESSAGES in refused):
        return None
    schema, layout = projection.value_schema, projection.layout
    bare = (
        None if refused and "" in refused else block_reader(schema, layout, shape, projection.hints)
    )
    hints = typed_hints(
        schema, schema.sink.logical if projection.hints is None else projection.hints
    )
    readers: dict[int, tuple[InlineSchema, BlockReader | None]] = {}

    def reader_of(block: InlineSchema) -> BlockReader | None:
        made = readers.get(id(block))
        if made is None or made[0] is not block:
            decoding = block_decoders(block.reader, schema)
            usable = decoding is not None and not (refused and (block.key or "") in refused)
            reader = block_reader(schema, layout, shape, hints, decoding) if usable else None
            made = readers[id(block)] = (block, reader)
        return made[1]

    def read(raws: Sequence[bytes | None]) -> BlockRows | None:
        if len(raws) < BLOCK_SMALLEST:
            return None
        found = [] if bare is None else [bare(raws)]
        groups: dict[int, tuple[BlockReader, list[int], list[bytes]]] = {}
        for i, raw in enumerate(raws):
            split = _INLINE.split(raw) if raw is not None else None
            if split is not None and (reader := reader_of(split[1])) is not None:
                group = groups.setdefault(id(reader), (reader, [], []))
                group[1].append(i)
                group[2].append(split[0])
        for reader, indices, payloads in groups.values():
            rows = reader(payloads)
            if rows is not None:
                found.append(BlockRows(np.asarray(indices)[rows.taken], rows.columns))
        return joined([f for f in found if f is not None])

    return read


def _with_rest(
    read: BlockRows,
    message_ids: pa.Array,
    shape: pa.Schema,
    ids: list[Any],
    raws: list[bytes | None],
    projected: Callable[[list[Any], list[bytes | None]], pa.RecordBatch],
) -> pa.RecordBatch:
    """The block's rows and the other messages' (read one by one), in message order."""
    count = len(read.taken)
    given = {
        **read.columns,
        c.MESSAGE_ID: message_ids.take(pa.array(read.taken)),
        STATUS: pa.array([ROW] * count, pa.string()),
        EXTRA: pa.array([[]] * count, pa.list_(pa.string())),
    }
    fast = pa.RecordBatch.from_arrays(
        [given[f.name] if f.name in given else pa.nulls(count, f.type) for f in shape],
        schema=shape,
    )
    if count == len(ids):
        return fast
    rest = np.setdiff1d(np.arange(len(ids)), read.taken, assume_unique=True)
    slow = projected([ids[i] for i in rest], [raws[i] for i in rest])
    order = np.argsort(np.concatenate([read.taken, rest]), kind="stable")
    both = pa.Table.from_batches([fast, slow]).take(pa.array(order))
    return both.combine_chunks().to_batches()[0]


def to_sink(
    batch: pa.RecordBatch, contract: TableContract, raws: list[bytes | None], out: pa.Schema
) -> pa.RecordBatch:
    """A projected batch in the source's names and types → the ledger's (the contract's
    target schema): key columns and both row images renamed, cast or converted column by
    column (:func:`icetide.events.sink_values.convert_values`), ``_unavailable`` renamed.

    A row with a value the sink cannot convert becomes a dead letter
    (:data:`~icetide.events.sink_values.CONVERSION_FAILED`) naming the column and value.
    """
    source, target, sink = contract.schema, contract.target, contract.schema.sink
    failed: dict[int, str] = {}

    def column(values: pa.Array, src: Column, stored: Column) -> pa.Array:
        converted = convert_values(values, src.type, sink.conversions.get(src.id), stored.type)
        for row, why in converted.failed.items():
            failed.setdefault(row, f"column {src.name} of table {source.table}: {why}")
        return converted.array

    stored_by_id = {col.id: col for col in target.columns}
    arrays: dict[str, pa.Array] = {}
    for src in source.key_columns:
        stored = stored_by_id[src.id]
        arrays[stored.name] = column(batch.column(src.name), src, stored)
    for image in c.ROW_IMAGES:
        struct = batch.column(image)
        children = [
            column(child, src, stored_by_id[src.id])
            for child, src in zip(struct.flatten(), source.columns, strict=True)
        ]
        arrays[image] = pa.StructArray.from_arrays(
            children, fields=list(out.field(image).type), mask=pc.is_null(struct)
        )
    names = {src.name: stored_by_id[src.id].name for src in source.columns}
    unavailable = batch.column(c.UNAVAILABLE).to_pylist()
    arrays[c.UNAVAILABLE] = pa.array(
        [None if u is None else [names.get(n, n) for n in u] for u in unavailable],
        out.field(c.UNAVAILABLE).type,
    )
    converted = pa.RecordBatch.from_arrays(
        [arrays[f.name] if f.name in arrays else batch.column(f.name) for f in out],
        schema=out,
    )
    if not failed:
        return converted
    rows = converted.to_pylist()
    for row, why in failed.items():
        if rows[row][STATUS] == ROW:
            rows[row] = {
                STATUS: DEAD,
                REASON: CONVERSION_FAILED,
                ERROR: why,
                RAW: raws[row],
                c.MESSAGE_ID: rows[row][c.MESSAGE_ID],
            }
    return pa.RecordBatch.from_pylist(rows, schema=out)


def to_arrow(
    rows: list[dict[str, Any]], raws: list[bytes | None], arrow_schema: pa.Schema
) -> pa.RecordBatch:
    """Rows → one Arrow batch; a row Arrow refuses becomes a dead letter, not a failure.

    The whole batch is converted at once; only when that fails is each row tried alone
    (the slow path is for the rare batch that holds such a row).
    """
    try:
        return pa.RecordBatch.from_pylist(rows, schema=arrow_schema)
    except Exception:  # find the row(s) at fault below
        pass
    kept = []
    for row, raw in zip(rows, raws, strict=True):
        try:
            pa.RecordBatch.from_pylist([row], schema=arrow_schema)
            kept.append(row)
        except Exception as exc:  # this message's values do not fit its columns
            kept.append(
                {
                    STATUS: DEAD,
                    REASON: DECODE_FAILED,
                    ERROR: _error_text(exc),
                    RAW: raw,
                    c.MESSAGE_ID: row.get(c.MESSAGE_ID),
                }
            )
    return pa.RecordBatch.from_pylist(kept, schema=arrow_schema)
