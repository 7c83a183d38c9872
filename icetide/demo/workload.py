"""A seeded generator of realistic Debezium change streams, with the expected end state.

End-to-end tests and the demo need a change stream whose correct result is known without
trusting any icetide code. :func:`generate` plays a small source database forward in plain
Python (:class:`SourceModel`), writes every change the way Debezium puts it on the wire, and
keeps the final rows as the answer. :func:`deliver` then lands the stream the way a real
pipeline does: split over files, duplicated, reordered, redelivered, with tombstones and
transaction markers mixed in.

Three tables cover the hard cases: ``customers`` and ``order_lines`` share one MySQL binlog
that starts at ``mysql-bin.000008`` and rotates every hundred rows or so, so the offset falls
back to ~154 at each rotation (ordering by offset, or by the text ``file:offset`` whose
offsets change digit count, goes wrong) and several rows of one statement share an offset
(``row`` orders them). ``order_lines`` has a composite key, and ``products`` comes from
PostgreSQL with an LSN that starts just below ``0/FFFFFFFF`` and crosses it, and, with
``toast=True``, REPLICA IDENTITY DEFAULT: updates carry no ``before``, an unchanged large
``description`` arrives as ``__debezium_unavailable_value``, and deletes carry only the key
columns in ``before``. Primary-key updates come both as delete + create (Debezium) and, for
tables with full row images, as one update whose ``before`` holds the old key.

>>> w = generate(seed=7, events=50)
>>> len(w.events), sorted(w.expected)
(50, ['customers', 'order_lines', 'products'])
>>> w.events[0].message == generate(seed=7, events=50).events[0].message
True
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Context, Decimal, Inexact, InvalidOperation
from pathlib import Path
from typing import Any

from icetide.events.model import UNAVAILABLE
from icetide.events.position import binlog_position, lsn_position
from icetide.schema.model import SinkSettings, TableSchema
from icetide.schema.types import Column, parse_type, precision_scale

Key = tuple[Any, ...]
Row = dict[str, Any]

DEBEZIUM_VERSION = "2.7.3.Final"
MYSQL_SERVER = "mysql-server-1"
POSTGRES_SERVER = "pg-server-1"
TOMBSTONE = {"schema": None, "payload": None}
"""What JsonConverter with schemas enabled writes for a Kafka tombstone."""

_MYSQL_UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
_POSTGRES_DB = "shop"
_TOAST_THRESHOLD = 2000  # PostgreSQL moves values over ~2 kB out of line
_EPOCH = datetime(1970, 1, 1)
_EPOCH_DATE = date(1970, 1, 1)
_MICRO = timedelta(microseconds=1)
_START_MS = 1_709_251_200_000  # 2024-03-01T00:00:00Z
_ENUM_ALLOWED = "true,last,false,incremental"


def _col(cid: int, name: str, type_: str, nullable: bool = True) -> Column:
    return Column(cid, name, parse_type(type_), nullable=nullable)


def demo_schemas() -> list[TableSchema]:
    """The three demo tables with stable column ids.

    Every non-key ``products`` column is nullable because a REPLICA IDENTITY DEFAULT delete
    carries nulls for them in ``before``.
    """
    return [
        TableSchema(
            "customers",
            (
                _col(1, "id", "long", False),
                _col(2, "first_name", "string", False),
                _col(3, "email", "string"),
                _col(4, "balance", "decimal(12,2)"),
                _col(5, "active", "boolean", False),
                _col(6, "created", "date"),
                _col(7, "updated_at", "timestamp", False),
            ),
            ("id",),
            sink=SinkSettings({6: "io.debezium.time.Date", 7: "io.debezium.time.MicroTimestamp"}),
        ),
        TableSchema(
            "order_lines",
            (
                _col(1, "order_id", "long", False),
                _col(2, "line_no", "int", False),
                _col(3, "sku", "string", False),
                _col(4, "quantity", "int", False),
                _col(5, "price", "decimal(10,2)", False),
                _col(6, "note", "string"),
            ),
            ("order_id", "line_no"),
        ),
        TableSchema(
            "products",
            (
                _col(1, "sku", "string", False),
                _col(2, "name", "string"),
                _col(3, "description", "string"),
                _col(4, "price", "decimal(10,2)"),
                _col(5, "tags", "json"),
                _col(6, "modified", "timestamptz"),
            ),
            ("sku",),
            sink=SinkSettings({5: "io.debezium.data.Json", 6: "io.debezium.time.ZonedTimestamp"}),
        ),
    ]


# table -> (connector, namespace (MySQL db / PostgreSQL schema), source table)
_SOURCES: dict[str, tuple[str, str, str]] = {
    "customers": ("mysql", "inventory", "customers"),
    "order_lines": ("mysql", "inventory", "order_lines"),
    "products": ("postgresql", "public", "products"),
}


def demo_sources() -> dict[str, str]:
    """Table name → Debezium source name (``db.table`` for MySQL, ``schema.table`` for PG).

    >>> demo_sources()["products"]
    'public.products'
    """
    return {t: f"{ns}.{name}" for t, (_, ns, name) in _SOURCES.items()}


# --------------------------------------------------------------------------- values


def encode_decimal(value: Decimal, scale: int) -> str:
    """Kafka Connect ``Decimal``: base64 of the big-endian two's-complement unscaled value,
    in as few bytes as Java's ``BigInteger.toByteArray`` uses.

    >>> encode_decimal(Decimal("12.50"), 2), encode_decimal(Decimal("-0.01"), 2)
    ('BOI=', '/w==')
    """
    exact = Context(prec=80, traps=[Inexact, InvalidOperation])  # never round silently
    try:
        unscaled = int(value.scaleb(scale, context=exact).to_integral_exact(context=exact))
    except (Inexact, InvalidOperation):
        raise ValueError(f"{value} does not fit a decimal of scale {scale}") from None
    bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    raw = unscaled.to_bytes(bits // 8 + 1, "big", signed=True)
    return base64.b64encode(raw).decode("ascii")


def _zoned(value: datetime) -> str:
    # Debezium formats with ISO_OFFSET_DATE_TIME: fraction only as long as needed, UTC as Z.
    v = value.astimezone(UTC)
    text = v.strftime("%Y-%m-%dT%H:%M:%S")
    if v.microsecond:
        text += "." + f"{v.microsecond:06d}".rstrip("0")
    return text + "Z"


def _money(rng: random.Random, precision: int, lo: int, hi: int) -> Decimal:
    # Mostly everyday amounts; now and then the largest magnitude the column holds, so the
    # encoded byte length and the sign bit get exercised.
    if rng.random() < 0.03:
        unscaled = 10 ** (precision) - 1 - rng.randint(0, 99)
        if lo < 0 and rng.random() < 0.5:
            unscaled = -unscaled
    else:
        unscaled = rng.randint(lo, hi)
    return Decimal(unscaled).scaleb(-2)


_FIRST_NAMES = (
    "Anne", "Sally", "George", "Edward", "Zoë", "Łukasz", "José", "Marie-Claire",
    "Ngozi", "Hiroshi", "Siobhán", "Ahmed", "Priya", "Olaf", "Chen", "Dmitri",
)  # fmt: skip
_DOMAINS = ("example.com", "noanswer.org", "mail.test", "acme.io")
_WORDS = (
    "durable", "stainless", "ergonomic", "handcrafted", "lightweight", "waterproof",
    "compact", "premium", "recycled", "adjustable", "wireless", "vintage", "modular",
    "insulated", "reinforced", "breathable", "foldable", "certified", "polished",
    "weatherproof", "ceramic", "aluminium", "walnut", "organic", "titanium", "cotton",
)  # fmt: skip
_NOUNS = ("kettle", "lamp", "chair", "backpack", "mug", "speaker", "desk", "jacket")
_NOTES = (
    "gift wrap",
    "leave at door — thanks",
    'fragile "glass"',
    "deliver after 5pm\nring twice",
    "backslash \\ test",
    "emoji 📦",
)


def _email(rng: random.Random) -> str | None:
    if rng.random() < 0.1:
        return None
    name = rng.choice(_FIRST_NAMES).encode("ascii", "ignore").decode().lower() or "user"
    return f"{name}.{rng.randint(1, 9999)}@{rng.choice(_DOMAINS)}"


def _created(rng: random.Random) -> date | None:
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.08:  # before the epoch: negative day numbers
        return date(1950, 1, 1) + timedelta(days=rng.randint(0, 7300))
    return date(2015, 1, 1) + timedelta(days=rng.randint(0, 3650))


def _description(rng: random.Random) -> str | None:
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.45:  # large enough that PostgreSQL TOASTs it
        return " ".join(rng.choices(_WORDS, k=420))
    return " ".join(rng.choices(_WORDS, k=rng.randint(3, 25)))


def _tags(rng: random.Random) -> str | None:
    if rng.random() < 0.1:
        return None
    doc = {
        "color": rng.choice(("red", "green", "blue", "schwarz", "漆黒")),
        "labels": sorted(rng.sample(_WORDS, rng.randint(0, 3))),
        "weight_g": rng.randint(10, 25_000),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


Gen = Callable[[random.Random], Any]
_GENERATORS: dict[str, dict[str, Gen]] = {
    "customers": {
        "first_name": lambda r: r.choice(_FIRST_NAMES),
        "email": _email,
        "balance": lambda r: None if r.random() < 0.05 else _money(r, 12, -50_000, 10_000_000),
        "active": lambda r: r.random() < 0.8,
        "created": _created,
    },
    "order_lines": {
        "sku": lambda r: f"SKU-{r.randint(1, 250):05d}",
        "quantity": lambda r: r.randint(1, 50),
        "price": lambda r: _money(r, 10, 1, 2_000_000),
        "note": lambda r: None if r.random() < 0.5 else r.choice(_NOTES),
    },
    "products": {
        "name": lambda r: f"{r.choice(_WORDS).title()} {r.choice(_NOUNS)}",
        "description": _description,
        "price": lambda r: None if r.random() < 0.05 else _money(r, 10, 1, 500_000),
        "tags": _tags,
    },
}
# The column the database sets to "now" on every write.
_CLOCK_COLUMN = {"customers": "updated_at", "products": "modified"}


def _key_space(table: str, size: int) -> list[Key]:
    if table == "customers":
        return [(1000 + i,) for i in range(1, size + 1)]
    if table == "order_lines":
        return [(50_000 + o, n) for o in range(1, max(1, size // 4) + 1) for n in range(1, 5)]
    return [(f"SKU-{i:05d}",) for i in range(1, size + 1)]


# --------------------------------------------------------------------------- source model


class SourceModel:
    """The source database as plain Python: per table, key tuple → row of typed values.

    Values are ``Decimal``, ``date``, naive ``datetime`` (``timestamp``), UTC-aware
    ``datetime`` (``timestamptz``) and compact sorted JSON text (``json``). Rows are
    replaced, never mutated, so rows already emitted stay as they were.
    """

    def __init__(self, schemas: Sequence[TableSchema]) -> None:
        self.schemas = {s.table: s for s in schemas}
        self.rows: dict[str, dict[Key, Row]] = {s.table: {} for s in schemas}
        self.journal: list[Change] = []
        """Every change, in source order, with the position and commit time of the event
        that wrote it (:meth:`mark`): the table at any instant is a replay of it."""
        self._pending: list[tuple[str, Key, Row | None]] = []

    def key(self, table: str, row: Row) -> Key:
        """The primary-key tuple of ``row``."""
        return tuple(row[k] for k in self.schemas[table].primary_key)

    def get(self, table: str, key: Key) -> Row | None:
        """The current row at ``key``, or None."""
        return self.rows[table].get(key)

    def put(self, table: str, row: Row) -> None:
        """Insert or replace ``row``."""
        key = self.key(table, row)
        self.rows[table][key] = row
        self._pending.append((table, key, row))

    def delete(self, table: str, key: Key) -> Row:
        """Remove and return the row at ``key``."""
        self._pending.append((table, key, None))
        return self.rows[table].pop(key)

    def mark(self, position: int, ts_ms: int) -> None:
        """The changes since the last mark were written by the event at ``position``,
        committed at ``ts_ms``: journal them (a key change's update form is two changes
        at one position)."""
        self.journal += [Change(t, k, r, position, ts_ms) for t, k, r in self._pending]
        self._pending.clear()

    def state(self) -> dict[str, dict[Key, Row]]:
        """A copy of every table's rows."""
        return {t: {k: dict(r) for k, r in rows.items()} for t, rows in self.rows.items()}


@dataclass(frozen=True)
class Change:
    """One row change of the source: ``row`` None for a delete."""

    table: str
    key: Key
    row: Row | None
    position: int
    """The packed position (:mod:`icetide.events.position`) of the event that wrote it."""
    ts_ms: int
    """Its source commit time (the envelope's ``source.ts_ms``)."""


def state_at(journal: Sequence[Change], table: str, position: int) -> dict[Key, Row]:
    """``table`` as the source had it at ``position``: the journal replayed up to it.

    >>> j = [Change("t", (1,), {"id": 1}, 10, 0), Change("t", (1,), None, 20, 0)]
    >>> state_at(j, "t", 19), state_at(j, "t", 20)
    ({(1,): {'id': 1}}, {})
    """
    rows: dict[Key, Row] = {}
    for change in journal:
        if change.table != table or change.position > position:
            continue
        if change.row is None:
            rows.pop(change.key, None)
        else:
            rows[change.key] = dict(change.row)
    return rows


@dataclass(frozen=True)
class Interval:
    """One version of one source row: ``row`` held from ``from_position`` (the event
    that wrote it, committed at ``from_ms``) up to ``to_position`` (the event that
    replaced or deleted it), open (None) while it is the row's present."""

    key: Key
    row: Row
    from_position: int
    from_ms: int
    to_position: int | None
    to_ms: int | None


def intervals(journal: Sequence[Change], table: str) -> list[Interval]:
    """Every version of ``table``'s rows, from the journal: the SCD type 2 history a
    table keeps (``history: scd2``), sorted by key and start.

    >>> j = [Change("t", (1,), {"v": 1}, 10, 5), Change("t", (1,), {"v": 2}, 20, 6),
    ...      Change("t", (1,), None, 30, 7)]
    >>> [(i.row["v"], i.from_position, i.to_position) for i in intervals(j, "t")]
    [(1, 10, 20), (2, 20, 30)]
    """
    done: list[Interval] = []
    open_: dict[Key, Interval] = {}
    for change in journal:
        if change.table != table:
            continue
        was = open_.pop(change.key, None)
        if was is not None:
            done.append(replace(was, to_position=change.position, to_ms=change.ts_ms))
        if change.row is not None:
            open_[change.key] = Interval(
                change.key, dict(change.row), change.position, change.ts_ms, None, None
            )
    return sorted([*done, *open_.values()], key=lambda i: (repr(i.key), i.from_position))


# --------------------------------------------------------------------------- positions


class _Binlog:
    """One MySQL server's binlog: increasing offsets, several rows per rows event, and file
    rotation once a file passes ``max_binlog_size`` (kept small so that even a few hundred
    events cross ``mysql-bin.000009`` → ``000010`` and the offset restarts near 154)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.number = 8
        self.pos = rng.randint(154, 400)
        self.max_size = rng.randint(25_000, 50_000)
        self.seq = rng.randint(1000, 5000)
        self.thread: int | None = None
        self.gtid: str | None = None
        # The open rows event: (table/op, offset, rows so far); None between statements.
        self.event: tuple[str, int, int] | None = None

    @property
    def file(self) -> str:
        return f"mysql-bin.{self.number:06d}"

    def begin(self, snapshot: bool = False) -> str:
        self.seq += 1
        self.pos += self.rng.randint(140, 180)  # GTID + BEGIN query events
        self.thread = None if snapshot else self.rng.choice((7, 8, 11, 23))
        self.gtid = None if snapshot else f"{_MYSQL_UUID}:{self.seq}"
        self.event = None
        return f"{_MYSQL_UUID}:{self.seq}"

    def next(self, statement: str, same_statement: bool = False) -> tuple[int, int]:
        """The ``(offset, row)`` of the next row. A rows event holds one table and one op
        (``statement`` names both); ``same_statement`` puts the row in the open event of the
        same kind if there is one (a statement touching several rows), as ``row`` counts."""
        if same_statement and self.event is not None and self.event[0] == statement:
            _, pos, rows = self.event
            self.event = (statement, pos, rows + 1)
            return pos, rows
        pos = self.pos
        self.pos += self.rng.randint(90, 700)  # size of this rows event
        self.event = (statement, pos, 1)
        return pos, 0

    def commit(self) -> None:
        self.pos += 31  # XID event
        self.event = None
        if self.pos >= self.max_size:  # MySQL rotates only between transactions
            self.number += 1
            self.pos = self.rng.randint(154, 200)
            self.max_size = self.rng.randint(25_000, 50_000)


class _Wal:
    """A PostgreSQL WAL: LSNs start just below 2**32 so a run crosses ``0/FFFFFFFF``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lsn = 0xFFFFF000 + 8 * rng.randint(0, 32)
        self.txid = rng.randint(600, 900)
        self.last_commit: int | None = None

    def begin(self) -> str:
        self.txid += 1
        self.lsn += 8 * self.rng.randint(3, 8)
        return f"{self.txid}:{self.lsn}"

    def next(self, snapshot: bool = False) -> int:
        lsn = self.lsn
        self.lsn += 8 if snapshot else 8 * self.rng.randint(7, 35)
        return lsn

    def commit(self) -> None:
        self.last_commit = self.lsn
        self.lsn += 8 * self.rng.randint(5, 15)


# --------------------------------------------------------------------------- encoding


def _field_schema(col: Column) -> dict[str, Any]:
    t = col.type
    out: dict[str, Any]
    if t.name == "decimal":
        out = {
            "type": "bytes",
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {
                "scale": str(precision_scale(t)[1]),
                "connect.decimal.precision": str(precision_scale(t)[0]),
            },
        }
    elif t.name == "date":
        out = {"type": "int32", "name": "io.debezium.time.Date", "version": 1}
    elif t.name == "timestamp":
        out = {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1}
    elif t.name == "timestamptz":
        out = {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1}
    elif t.name == "json":
        out = {"type": "string", "name": "io.debezium.data.Json", "version": 1}
    else:
        kinds = {"long": "int64", "int": "int32", "string": "string", "boolean": "boolean"}
        out = {"type": kinds[t.name]}
    return {**out, "optional": col.nullable, "field": col.name}


def _f(type_: str, name: str, optional: bool = False) -> dict[str, Any]:
    return {"type": type_, "optional": optional, "field": name}


def _source_schema(connector: str) -> dict[str, Any]:
    snapshot = {
        "type": "string",
        "optional": True,
        "name": "io.debezium.data.Enum",
        "version": 1,
        "parameters": {"allowed": _ENUM_ALLOWED},
        "default": "false",
        "field": "snapshot",
    }
    common = [
        _f("string", "version"),
        _f("string", "connector"),
        _f("string", "name"),
        _f("int64", "ts_ms"),
        _f("int64", "ts_us", True),
        _f("int64", "ts_ns", True),
        snapshot,
        _f("string", "db"),
        _f("string", "sequence", True),
    ]
    if connector == "mysql":
        rest = [
            _f("string", "table", True),
            _f("int64", "server_id"),
            _f("string", "gtid", True),
            _f("string", "file"),
            _f("int64", "pos"),
            _f("int32", "row"),
            _f("int64", "thread", True),
            _f("string", "query", True),
        ]
        name = "io.debezium.connector.mysql.Source"
    else:
        rest = [
            _f("string", "schema"),
            _f("string", "table"),
            _f("int64", "txId", True),
            _f("int64", "lsn", True),
            _f("int64", "xmin", True),
        ]
        name = "io.debezium.connector.postgresql.Source"
    return {"type": "struct", "fields": common + rest, "optional": False, "name": name,
            "field": "source"}  # fmt: skip


def _envelope_schema(schema: TableSchema, server: str, namespace: str, table: str) -> Any:
    prefix = f"{server}.{namespace}.{table}"
    columns = [_field_schema(c) for c in schema.columns]
    value = {"type": "struct", "fields": columns, "optional": True, "name": f"{prefix}.Value"}
    block = {
        "type": "struct",
        "fields": [
            _f("string", "id"),
            _f("int64", "total_order"),
            _f("int64", "data_collection_order"),
        ],
        "optional": True,
        "name": "event.block",
        "version": 1,
        "field": "transaction",
    }
    connector = _SOURCES[schema.table][0]
    return {
        "type": "struct",
        "fields": [
            {**value, "field": "before"},
            {**value, "field": "after"},
            _source_schema(connector),
            _f("string", "op"),
            _f("int64", "ts_ms", True),
            _f("int64", "ts_us", True),
            _f("int64", "ts_ns", True),
            block,
        ],
        "optional": False,
        "name": f"{prefix}.Envelope",
        "version": 1,
    }


@dataclass(frozen=True)
class _TableInfo:
    schema: TableSchema
    mysql: bool
    namespace: str
    source_table: str
    envelope_schema: dict[str, Any]
    spec: tuple[tuple[str, str, int], ...]  # (column, encoding kind, decimal scale)


def _table_info(schema: TableSchema) -> _TableInfo:
    connector, namespace, name = _SOURCES[schema.table]
    kinds = {"decimal": "decimal", "date": "date", "timestamp": "micros", "timestamptz": "zoned"}
    spec = tuple(
        (c.name, kinds.get(c.type.name, "plain"), precision_scale(c.type)[1])
        for c in schema.columns
    )
    server = MYSQL_SERVER if connector == "mysql" else POSTGRES_SERVER
    return _TableInfo(
        schema=schema,
        mysql=connector == "mysql",
        namespace=namespace,
        source_table=name,
        # Shared by every schema-form message of the table: treat messages as read-only.
        envelope_schema=_envelope_schema(schema, server, namespace, name),
        spec=spec,
    )


def _encode_row(
    spec: tuple[tuple[str, str, int], ...],
    row: Row | None,
    with_schema: bool,
    unavailable: frozenset[str],
) -> Row | None:
    if row is None:
        return None
    out: Row = {}
    for name, kind, scale in spec:
        v = row[name]
        if v is None or kind == "plain":
            out[name] = v
        elif kind == "decimal":
            # Debezium's default decimal.handling.mode=precise, with or without a schema.
            out[name] = encode_decimal(v, scale)
        elif kind == "date":
            out[name] = (v - _EPOCH_DATE).days
        elif kind == "micros":
            out[name] = (v - _EPOCH) // _MICRO
        else:
            out[name] = _zoned(v)
    for name in unavailable:
        out[name] = UNAVAILABLE
    return out


# --------------------------------------------------------------------------- generation


@dataclass(frozen=True)
class Envelope:
    """One Debezium message as it appears on the wire.

    ``position_key`` is the packed :mod:`icetide.events.position` key (for debugging and
    ordering checks); ``tx_id`` groups the events of one source transaction (None for
    snapshot reads) and is the ``transaction.id`` the message carries (the GTID for
    MySQL, ``txId:LSN`` for PostgreSQL).
    """

    table: str
    message: dict[str, Any]
    position_key: int
    op: str
    tx_id: str | None


@dataclass
class Workload:
    """A generated change stream and the source rows it must produce.

    ``events`` are in generation (= commit) order. ``expected`` maps table name → primary
    key tuple in key-column order (``(id,)``, ``(order_id, line_no)``, ``(sku,)``) → row,
    a dict of every schema column in schema order. Values have the types
    :func:`icetide.events.project.project_event` gives (the unit tests check that a replay
    of the decoded stream equals ``expected`` exactly, types included):

    * ``long``/``int`` → ``int``, ``boolean`` → ``bool``, ``string``/``json`` → ``str``
      (``json`` as compact text with sorted keys, byte-for-byte what the source sent);
    * ``decimal(p,s)`` → :class:`~decimal.Decimal` with exponent ``-s`` (``Decimal('0.00')``);
    * ``date`` → :class:`~datetime.date`;
    * ``timestamp`` → naive :class:`~datetime.datetime` (wall clock, as Spark's
      ``TIMESTAMP_NTZ`` returns it);
    * ``timestamptz`` → UTC-aware :class:`~datetime.datetime`. PySpark returns Iceberg
      ``timestamptz`` as a *naive local* time, so compare through ``astimezone(UTC)``
      (:func:`icetide.observe.compare.normalize` does).

    ``None`` is SQL NULL. Treat rows as read-only; :func:`expected_rows` returns copies.
    """

    events: list[Envelope]
    expected: dict[str, dict[Key, Row]]
    schemas: list[TableSchema]
    seed: int
    journal: list[Change] = field(default_factory=list)
    """The source's every row change with its position (:meth:`SourceModel.mark`)."""

    def state_at(self, table: str, position: int) -> dict[Key, Row]:
        """``table`` as the source had it at ``position`` (:func:`state_at`)."""
        return state_at(self.journal, table, position)

    def intervals(self, table: str) -> list[Interval]:
        """Every version of ``table``'s rows (:func:`intervals`)."""
        return intervals(self.journal, table)


class _Generator:
    def __init__(
        self,
        seed: int,
        tables: list[str],
        key_space: int,
        with_schema_ratio: float,
        key_changes: bool,
        toast: bool,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        # A separate stream for the envelope form, so the data does not depend on the ratio.
        self.enc_rng = random.Random(f"icetide-demo-encoding-{seed}")
        self.with_schema_ratio = with_schema_ratio
        self.key_changes = key_changes
        self.toast = toast
        self.schemas = [s for s in demo_schemas() if s.table in tables]
        self.tables = [s.table for s in self.schemas]
        self.info = {s.table: _table_info(s) for s in self.schemas}
        self.model = SourceModel(self.schemas)
        self.keys = {t: _key_space(t, key_space) for t in self.tables}
        self.binlog = _Binlog(self.rng)
        self.wal = _Wal(self.rng)
        self.clock_ms = _START_MS + self.rng.randint(0, 86_400_000)
        self.clock_micros = self.rng.randint(0, 999)
        self.processed_ms = self.clock_ms
        self.tx_id: str | None = None
        # Debezium's transaction block: events so far in the open transaction, in all and
        # per data collection.
        self.tx_total = 0
        self.tx_per_collection: dict[str, int] = {}
        self.out: list[Envelope] = []

    # -- rows

    def _now_us(self) -> int:
        # NOW() is fixed for a transaction (PostgreSQL) or statement (MySQL): every write of
        # one transaction gets the same stamp, and a later transaction a later one.
        return self.clock_ms * 1000 + self.clock_micros

    def _stamp(self, table: str, row: Row) -> None:
        column = _CLOCK_COLUMN.get(table)
        if column == "updated_at":
            row[column] = _EPOCH + timedelta(microseconds=self._now_us())
        elif column == "modified":
            row[column] = datetime.fromtimestamp(0, UTC) + timedelta(microseconds=self._now_us())

    def _new_row(self, table: str, key: Key) -> Row:
        schema = self.info[table].schema
        row: Row = dict(zip(schema.primary_key, key, strict=True))
        for name, gen in _GENERATORS[table].items():
            row[name] = gen(self.rng)
        self._stamp(table, row)
        return {c.name: row[c.name] for c in schema.columns}

    def _changed(self, table: str, old: Row, key: Key | None = None) -> Row:
        new = dict(old)
        if key is not None:
            new.update(zip(self.info[table].schema.primary_key, key, strict=True))
        gens = _GENERATORS[table]
        for _ in range(10):  # MySQL logs no row for an update that changes nothing
            for name in self.rng.sample(list(gens), self.rng.randint(1, 3)):
                new[name] = gens[name](self.rng)
            self._stamp(table, new)
            if new != old:
                break
        return new

    # -- emitting

    def _emit(
        self,
        table: str,
        op: str,
        before: Row | None,
        after: Row | None,
        *,
        snapshot: str = "false",
        unavailable: frozenset[str] = frozenset(),
    ) -> None:
        info = self.info[table]
        rng = self.rng
        ts_ms = self.clock_ms
        source: dict[str, Any] = {
            "version": DEBEZIUM_VERSION,
            "connector": "mysql" if info.mysql else "postgresql",
            "name": MYSQL_SERVER if info.mysql else POSTGRES_SERVER,
            "ts_ms": ts_ms,
            "ts_us": ts_ms * 1000,
            "ts_ns": ts_ms * 1_000_000,
            "snapshot": snapshot,
        }
        if info.mysql:
            # Now and then one statement changes several rows: one rows event, rows 0, 1, …
            multi_row = op != "r" and rng.random() < 0.3
            pos, row = self.binlog.next(f"{table}/{op}", same_statement=multi_row)
            source.update(
                db=info.namespace,
                sequence=None,
                table=info.source_table,
                server_id=0 if snapshot != "false" else 223344,
                gtid=self.binlog.gtid,
                file=self.binlog.file,
                pos=pos,
                row=row,
                thread=self.binlog.thread,
                query=None,
            )
            position_key = binlog_position(self.binlog.file, pos, row).key
        else:
            lsn = self.wal.next(snapshot != "false")
            source.update(
                db=_POSTGRES_DB,
                sequence=_dumps([_str_or_none(self.wal.last_commit), str(lsn)]),
                schema=info.namespace,
                table=info.source_table,
                txId=self.wal.txid,
                lsn=lsn,
                xmin=None,
            )
            position_key = lsn_position(lsn).key
        self.model.mark(position_key, ts_ms)
        self.processed_ms = max(self.processed_ms + rng.randint(0, 3), ts_ms + rng.randint(3, 80))
        ts_us = self.processed_ms * 1000 + rng.randint(0, 999)
        with_schema = self.enc_rng.random() < self.with_schema_ratio
        payload = {
            "before": _encode_row(info.spec, before, with_schema, frozenset()),
            "after": _encode_row(info.spec, after, with_schema, unavailable),
            "source": source,
            "transaction": self._transaction_block(table),
            "op": op,
            "ts_ms": self.processed_ms,
            "ts_us": ts_us,
            "ts_ns": ts_us * 1000 + rng.randint(0, 999),
        }
        message = {"schema": info.envelope_schema, "payload": payload} if with_schema else payload
        self.out.append(Envelope(table, message, position_key, op, self.tx_id))

    def _begin(self, mysql: bool) -> None:
        self.tx_id = self.binlog.begin() if mysql else self.wal.begin()
        self.tx_total = 0
        self.tx_per_collection = {}

    def _transaction_block(self, table: str) -> dict[str, Any] | None:
        """``provide.transaction.metadata``: the transaction id and the event's order in it
        (overall and within its data collection); None outside transactions (snapshot)."""
        if self.tx_id is None:
            return None
        info = self.info[table]
        collection = f"{info.namespace}.{info.source_table}"
        self.tx_total += 1
        self.tx_per_collection[collection] = self.tx_per_collection.get(collection, 0) + 1
        return {
            "id": self.tx_id,
            "total_order": self.tx_total,
            "data_collection_order": self.tx_per_collection[collection],
        }

    def _key_only(self, table: str, row: Row) -> Row:
        pk = self.info[table].schema.primary_key
        return {name: (v if name in pk else None) for name, v in row.items()}

    def _default_identity(self, table: str) -> bool:
        return self.toast and not self.info[table].mysql

    # -- operations

    def _insert(self, table: str, key: Key) -> None:
        row = self._new_row(table, key)
        self.model.put(table, row)
        self._emit(table, "c", None, row)

    def _delete(self, table: str, key: Key) -> None:
        old = self.model.delete(table, key)
        before = self._key_only(table, old) if self._default_identity(table) else old
        self._emit(table, "d", before, None)

    def _update(self, table: str, old: Row) -> None:
        new = self._changed(table, old)
        self.model.put(table, new)
        if not self._default_identity(table):
            self._emit(table, "u", old, new)
            return
        desc = old["description"]
        toasted = desc is not None and len(desc) > _TOAST_THRESHOLD and new["description"] == desc
        unavailable = frozenset({"description"}) if toasted else frozenset()
        self._emit(table, "u", None, new, unavailable=unavailable)

    def _rekey(self, table: str, old: Row) -> int:
        """A primary-key update; returns the events emitted (0 when no free key was found).

        Debezium emits it as a delete of the old key and a create of the new one. A capture
        that reads the row images itself (binlog UPDATE_ROWS, or REPLICA IDENTITY FULL)
        emits one update whose ``before`` holds the old key: about half the key changes of
        such tables take that form, so consumers must delete the old key on an update too.
        """
        for _ in range(8):
            key = self.rng.choice(self.keys[table])
            if self.model.get(table, key) is None:
                break
        else:
            return 0
        old_key = self.model.key(table, old)
        as_update = not self._default_identity(table) and self.rng.random() < 0.5
        if as_update:
            self.model.delete(table, old_key)
        else:
            self._delete(table, old_key)
        new = self._changed(table, old, key)
        self.model.put(table, new)
        if as_update:
            self._emit(table, "u", old, new)
            return 1
        self._emit(table, "c", None, new)
        return 2

    def _change(self, table: str, budget: int) -> int:
        """Apply one random statement to ``table``; return how many events it emitted."""
        key = self.rng.choice(self.keys[table])
        old = self.model.get(table, key)
        if old is None:
            self._insert(table, key)
            return 1
        roll = self.rng.random()
        if budget >= 2 and 0.75 <= roll < 0.86:
            self._delete(table, key)
            self._insert(table, key)
            return 2
        if budget >= 2 and 0.86 <= roll < 0.97 and self.key_changes:
            emitted = self._rekey(table, old)
            if emitted:
                return emitted
        if 0.60 <= roll < 0.75:
            self._delete(table, key)
            return 1
        self._update(table, old)
        return 1

    # -- phases

    def _snapshot(self, per_table: int) -> None:
        """Initial snapshot reads, one connector after the other, each ending with "last"."""
        for mysql in (True, False):
            tables = [t for t in self.tables if self.info[t].mysql is mysql]
            rows: list[tuple[str, Row]] = []
            for table in tables:
                keys = sorted(self.rng.sample(self.keys[table], per_table))
                for key in keys:
                    rows.append((table, self._new_row(table, key)))
            if not rows:
                continue
            if mysql:
                self.binlog.begin(snapshot=True)
            else:
                self.wal.begin()
            self.tx_id = None
            for i, (table, row) in enumerate(rows):
                self.clock_ms += self.rng.randint(0, 2)
                mark = "last" if i == len(rows) - 1 else "true"
                self.model.put(table, row)  # journaled at its own read's position
                self._emit(table, "r", None, row, snapshot=mark)
            if mysql:
                self.binlog.commit()
            else:
                self.wal.commit()

    def run(self, events: int) -> Workload:
        tables = self.tables
        per_table = min(len(self.keys[t]) for t in tables) // 2 if tables else 0
        per_table = min(per_table, events // (5 * len(tables))) if tables else 0
        self._snapshot(per_table)
        remaining = events - len(self.out)
        while remaining > 0:
            mysql = self.info[self.rng.choice(tables)].mysql
            group = [t for t in tables if self.info[t].mysql is mysql]
            size = 1 if self.rng.random() < 0.65 else self.rng.randint(2, 6)
            self.clock_ms += self.rng.randint(1, 1500)
            self.clock_micros = self.rng.randint(0, 999)
            self._begin(mysql)
            done = 0
            while done < size and remaining > 0:
                n = self._change(self.rng.choice(group), remaining)
                done += n
                remaining -= n
            if mysql:
                self.binlog.commit()
            else:
                self.wal.commit()
        return Workload(self.out, self.model.state(), self.schemas, self.seed, self.model.journal)


def _str_or_none(value: int | None) -> str | None:
    return None if value is None else str(value)


def generate(
    seed: int,
    events: int,
    tables: list[str] | None = None,
    *,
    key_space: int = 200,
    with_schema_ratio: float = 0.5,
    key_changes: bool = True,
    toast: bool = True,
) -> Workload:
    """Generate ``events`` Debezium messages over ``tables`` (default: all three).

    Keys come from ``key_space`` values per table, so each key sees many events. A
    snapshot of up to half the key space (at most a fifth of ``events``) comes first.
    ``with_schema_ratio`` is the share of messages in the ``{"schema", "payload"}`` form
    (decimals as base64 Connect ``Decimal``); the rest are bare envelopes (decimals as
    text, ``decimal.handling.mode=string``); the ratio changes only the encoding, never the
    data. ``key_changes`` enables primary-key updates; ``toast`` makes ``products`` REPLICA
    IDENTITY DEFAULT (else FULL). Exactly ``events`` messages come out, and the same
    arguments always give the same messages.
    """
    wanted = list(_SOURCES) if tables is None else tables
    unknown = sorted(set(wanted) - set(_SOURCES))
    if unknown or not wanted:
        raise ValueError(f"unknown or no tables {unknown}; choose from {list(_SOURCES)}")
    if events < 0 or key_space < 4 or not 0 <= with_schema_ratio <= 1:
        raise ValueError("events must be >= 0, key_space >= 4, with_schema_ratio in [0, 1]")
    gen = _Generator(seed, wanted, key_space, with_schema_ratio, key_changes, toast)
    return gen.run(events)


def expected_rows(workload: Workload, table: str) -> list[Row]:
    """The expected final rows of ``table`` (copies), sorted by primary key; the value types
    are those listed on :class:`Workload`.

    >>> w = generate(seed=3, events=40, tables=["order_lines"], key_space=8)
    >>> rows = expected_rows(w, "order_lines")
    >>> list(rows[0]) == ["order_id", "line_no", "sku", "quantity", "price", "note"]
    True
    >>> [(r["order_id"], r["line_no"]) for r in rows] == sorted(w.expected["order_lines"])
    True
    """
    rows = workload.expected[table]
    return [dict(rows[k]) for k in sorted(rows)]


# --------------------------------------------------------------------------- delivery


def _dumps(message: Any) -> str:
    return json.dumps(message, separators=(",", ":"))


def _payload(message: dict[str, Any]) -> dict[str, Any]:
    inner = message.get("payload")
    return inner if isinstance(inner, dict) else message


_MARKER_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        _f("string", "status"),
        _f("string", "id"),
        _f("int64", "event_count", True),
        {
            "type": "array",
            "items": {
                "type": "struct",
                "fields": [_f("string", "data_collection"), _f("int64", "event_count")],
                "optional": False,
            },
            "optional": True,
            "field": "data_collections",
        },
        _f("int64", "ts_ms"),
    ],
    "optional": False,
    "name": "io.debezium.connector.common.TransactionMetadataValue",
    "version": 1,
}


def _stream(workload: Workload, noise: random.Random | None) -> tuple[list[str], list[int]]:
    """Lines in source order, and the index of each event's line among them.

    With ``noise`` (the random stream that picks each noise line's form), each transaction
    is wrapped in BEGIN/END markers and each delete is followed by a tombstone, as Debezium
    writes them (markers on their own topic, here interleaved as if a consumer read both
    topics into one landing folder). Markers and tombstones come both bare (``null`` for a
    tombstone) and in the ``{"schema", "payload"}`` form.
    """
    sources = demo_sources()
    lines: list[str] = []
    where: list[int] = []
    events = workload.events
    i = 0
    while i < len(events):
        tx = events[i].tx_id
        j = i + 1
        while tx is not None and j < len(events) and events[j].tx_id == tx:
            j += 1
        group = events[i:j]
        if noise is not None and tx is not None:
            lines.append(_noise_line(noise, _marker("BEGIN", tx, group[0], None, sources)))
        for e in group:
            where.append(len(lines))
            lines.append(_dumps(e.message))
            if noise is not None and e.op == "d":
                lines.append(_dumps(TOMBSTONE if noise.random() < 0.5 else None))
        if noise is not None and tx is not None:
            lines.append(_noise_line(noise, _marker("END", tx, group[-1], group, sources)))
        i = j
    return lines, where


def _noise_line(rng: random.Random, marker: dict[str, Any]) -> str:
    return _dumps({"schema": _MARKER_SCHEMA, "payload": marker} if rng.random() < 0.5 else marker)


def _marker(
    status: str,
    tx: str,
    event: Envelope,
    group: list[Envelope] | None,
    sources: dict[str, str],
) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for e in group or []:
        counts[sources[e.table]] = counts.get(sources[e.table], 0) + 1
    return {
        "status": status,
        "id": tx,
        "ts_ms": _payload(event.message)["source"]["ts_ms"],
        "event_count": None if group is None else len(group),
        "data_collections": None
        if group is None
        else [{"data_collection": k, "event_count": v} for k, v in counts.items()],
    }


_FILE_NAME = re.compile(r"^events-(\d{6,})\.json$")


def _file_name(index: int) -> str:
    return f"events-{index:06d}.json"


def next_index(landing: Path) -> int:
    """The number after the highest ``events-NNNNNN.json`` in ``landing`` (1 if none)."""
    found = [m for p in landing.glob("events-*.json") if (m := _FILE_NAME.match(p.name))]
    return max((int(m.group(1)) for m in found), default=0) + 1


def _write(landing: Path, name: str, lines: list[str]) -> Path:
    final = landing / name
    # Dot prefix: Spark's file source ignores hidden files, so a half-written file is
    # never read; the rename makes it appear whole.
    tmp = landing / f".{name}.tmp"
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, final)
    return final


def _chunks(lines: list[str], files: int) -> list[list[str]]:
    size, extra = divmod(len(lines), files)
    out, start = [], 0
    for i in range(files):
        end = start + size + (1 if i < extra else 0)
        out.append(lines[start:end])
        start = end
    return out


def deliver(
    workload: Workload,
    landing: Path | str,
    *,
    seed: int,
    files: int = 4,
    duplicate_rate: float = 0.1,
    shuffle: bool = True,
    redeliver_all: bool = False,
    noise: bool = False,
    start_index: int | None = None,
) -> list[Path]:
    """Write the stream into ``landing`` as NDJSON files named in arrival order.

    ``duplicate_rate`` × events random events are delivered twice (a duplicate lands after
    its original unless ``shuffle`` reorders everything across files); ``redeliver_all``
    adds ``files`` more files holding the whole stream again; ``noise`` mixes in tombstones
    and transaction BEGIN/END markers. Files are numbered ``events-NNNNNN.json`` from
    ``start_index`` (default: after the highest number already in ``landing``); nothing
    is written if a name is taken. Each file is written under a hidden ``.tmp`` name and
    renamed, so a reader never sees it half-written. Returns the paths in arrival order.
    """
    if files < 1 or not 0 <= duplicate_rate <= 1 or (start_index is not None and start_index < 1):
        raise ValueError("files and start_index must be >= 1, duplicate_rate in [0, 1]")
    landing = Path(landing)
    rng = random.Random(f"icetide-demo-deliver-{seed}")
    landing.mkdir(parents=True, exist_ok=True)
    noise_rng = random.Random(f"icetide-demo-noise-{seed}") if noise else None
    stream, where = _stream(workload, noise_rng)
    events = workload.events
    picks = rng.sample(range(len(events)), round(len(events) * duplicate_rate))
    slotted = [(float(i), line) for i, line in enumerate(stream)]
    for e in picks:
        slot = rng.uniform(where[e], len(stream))
        slotted.append((slot, stream[where[e]]))
    first = [line for _, line in sorted(slotted, key=lambda s: s[0])]
    passes = [first]
    if redeliver_all:
        passes.append(list(stream))
    chunks: list[list[str]] = []
    for lines in passes:
        if shuffle:
            rng.shuffle(lines)
        chunks += _chunks(lines, files)
    first_index = next_index(landing) if start_index is None else start_index
    names = [_file_name(first_index + i) for i in range(len(chunks))]
    taken = [n for n in names if (landing / n).exists()]
    if taken:
        raise FileExistsError(
            f"{landing / taken[0]} already exists; pass start_index= to number after earlier "
            "deliveries, or leave it out to continue after the highest number"
        )
    return [_write(landing, name, chunk) for name, chunk in zip(names, chunks, strict=True)]
