"""Python steps that run inside Spark workers (``mapInArrow``): classify, then project.

``classify`` decodes every message once to learn its table and whether it is a row
change, something to skip (tombstone, transaction marker) or a dead letter. ``project``
decodes the messages of one table into that table's typed ledger rows; messages that
cannot be mapped come out flagged with a reason instead of raising, so one bad event
never stops the stream.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa

from icetide.errors import DecodeError
from icetide.events.envelope import decode_message
from icetide.events.model import ChangeEvent
from icetide.events.project import project_event
from icetide.ledger import contract as c
from icetide.schema.model import TableSchema
from icetide.schema.spark_types import arrow_struct, arrow_type, arrow_value

ROW, SKIP, DEAD = "row", "skip", "dead"
CLASSIFIED_SCHEMA = (
    "message_id STRING, table STRING, status STRING, reason STRING, error STRING, raw STRING"
)
STATUS, REASON, ERROR, RAW = "_status", "_reason", "_error", "_raw"


def _guess_source(raw: str) -> str | None:
    """Best-effort source name of an undecodable message, to pick its dead-letter table."""
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if isinstance(doc, dict) and isinstance(doc.get("payload"), dict):
        doc = doc["payload"]
    source = doc.get("source") if isinstance(doc, dict) else None
    if not isinstance(source, dict) or not isinstance(source.get("table"), str):
        return None
    prefix = source.get("schema") or source.get("db")
    return f"{prefix}.{source['table']}" if isinstance(prefix, str) and prefix else source["table"]


def classify_one(raw: str, route: Callable[[str], str | None]) -> tuple[str | None, str, str, str]:
    """(table, status, reason, error) of one message; ``route`` maps source → table."""
    try:
        decoded = decode_message(raw)
    except DecodeError as exc:
        guess = _guess_source(raw)
        return (route(guess) if guess else None), DEAD, exc.reason, exc.message
    if not isinstance(decoded, ChangeEvent):
        return None, SKIP, decoded.kind, ""
    if decoded.source is None:
        return None, DEAD, "missing_source", "the event has no source.table to route it by"
    table = route(decoded.source.qualified)
    if table is None:
        return (
            None,
            DEAD,
            "unknown_table",
            f"no table in the config has source {decoded.source.qualified!r}",
        )
    return table, ROW, "", ""


def classify_batches(
    sources: dict[str, str],
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function that classifies raw messages.

    ``sources`` maps lower-cased source names (``inventory.customers``) to table names.
    """

    def route(source: str) -> str | None:
        return sources.get(source.lower())

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            ids = batch.column("message_id").to_pylist()
            raws = batch.column("raw").to_pylist()
            out: dict[str, list[Any]] = {k: [] for k in ("table", "status", "reason", "error")}
            for raw in raws:
                table, status, reason, error = classify_one(raw or "", route)
                out["table"].append(table)
                out["status"].append(status)
                out["reason"].append(reason)
                out["error"].append(error)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(ids, pa.string()),
                    pa.array(out["table"], pa.string()),
                    pa.array(out["status"], pa.string()),
                    pa.array(out["reason"], pa.string()),
                    pa.array(out["error"], pa.string()),
                    pa.array(raws, pa.string()),
                ],
                names=["message_id", "table", "status", "reason", "error", "raw"],
            )

    return run


def projected_arrow_schema(schema: TableSchema) -> pa.Schema:
    """Arrow schema of :func:`project_batches` output: ledger columns + status columns."""
    row = arrow_struct(schema.columns)
    fields = [pa.field(col.name, arrow_type(col.type)) for col in schema.key_columns]
    fields += [
        pa.field(c.OP, pa.string()),
        pa.field(c.AFTER, row),
        pa.field(c.BEFORE, row),
        pa.field(c.UNAVAILABLE, pa.list_(pa.string())),
        pa.field(c.POSITION, pa.decimal128(38, 0)),
        pa.field(c.POSITION_TEXT, pa.string()),
        pa.field(c.SOURCE_TS, pa.timestamp("us", tz="UTC")),
        pa.field(c.TX_ID, pa.string()),
        pa.field(c.MESSAGE_ID, pa.string()),
        pa.field(STATUS, pa.string()),
        pa.field(REASON, pa.string()),
        pa.field(ERROR, pa.string()),
        pa.field(RAW, pa.string()),
    ]
    return pa.schema(fields)


def projected_spark_schema(schema: TableSchema) -> str:
    """The same schema as Spark DDL, for ``mapInArrow``."""
    ledger = [col for col in c.ledger_columns_sql(schema) if not col.startswith(c.INGESTED_AT)]
    return ", ".join(ledger + [f"{n} STRING" for n in (STATUS, REASON, ERROR, RAW)])


def _typed_row(values: dict[str, Any] | None, schema: TableSchema) -> dict[str, Any] | None:
    if values is None:
        return None
    return {col.name: arrow_value(values.get(col.name), col.type) for col in schema.columns}


def project_one(raw: str, schema: TableSchema) -> dict[str, Any]:
    """One message → one ledger row (``_status`` row) or a dead letter (``_status`` dead)."""
    try:
        event = decode_message(raw)
        if not isinstance(event, ChangeEvent):
            raise DecodeError("not_a_row", f"message is a {event.kind}, not a row change")
        if event.position is None:
            raise DecodeError(
                "missing_position",
                "the event's source block has no binlog file/pos, GTID or LSN to order it by",
            )
        projected = project_event(event, schema)
    except DecodeError as exc:
        return {STATUS: DEAD, REASON: exc.reason, ERROR: exc.message, RAW: raw}
    row: dict[str, Any] = {
        col.name: arrow_value(projected.key.get(col.name), col.type) for col in schema.key_columns
    }
    row.update(
        {
            c.OP: projected.op,
            c.AFTER: _typed_row(projected.after, schema),
            c.BEFORE: _typed_row(projected.before, schema),
            c.UNAVAILABLE: list(projected.unavailable),
            c.POSITION: Decimal(event.position.key),
            c.POSITION_TEXT: event.position.text,
            c.SOURCE_TS: event.source_ts,
            c.TX_ID: event.tx_id,
            STATUS: ROW,
        }
    )
    return row


def project_batches(
    schema: TableSchema,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function that turns one table's messages into ledger rows."""
    arrow_schema = projected_arrow_schema(schema)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            ids = batch.column("message_id").to_pylist()
            raws = batch.column("raw").to_pylist()
            rows = []
            for message_id, raw in zip(ids, raws, strict=True):
                row = project_one(raw or "", schema)
                row[c.MESSAGE_ID] = message_id
                rows.append(row)
            yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)

    return run
