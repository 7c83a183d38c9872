"""Turn one Debezium message value (JSON text) into a :class:`ChangeEvent` or a :class:`Skipped`.

Two shapes are accepted: JsonConverter with ``schemas.enable=true`` (``{"schema": …,
"payload": …}``), where column values are decoded through
:mod:`icetide.events.logical_types` using the ``before``/``after`` field schemas, and the
bare envelope, where column values stay as parsed JSON (numbers with a fraction become
:class:`decimal.Decimal` so no digit is lost; :mod:`icetide.events.project` coerces them).

Messages that are valid but carry no row change come back as ``Skipped(kind)`` with
``kind`` one of ``tombstone``, ``transaction``, ``schema_change``, ``message``, ``key``,
``heartbeat``. Anything else that is wrong raises :class:`~icetide.errors.DecodeError`
with reason ``malformed_json``, ``missing_op``, ``unknown_op``, ``bad_envelope`` or
``bad_logical_value``.

>>> event = decode_message('{"op": "c", "after": {"id": 1}, "source": '
...                        '{"connector": "postgresql", "db": "shop", "schema": "public",'
...                        ' "table": "orders", "lsn": 23803720, "txId": 7}}')
>>> event.op, event.source.qualified, event.position.text, event.tx_id
('c', 'public.orders', '0/16B3748:0', '7')
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, cast

from icetide.errors import DecodeError
from icetide.events.logical_types import decode_struct
from icetide.events.model import (
    ROW_OPS,
    UNAVAILABLE,
    ChangeEvent,
    Decoded,
    Op,
    Skipped,
    SourceTable,
)
from icetide.events.position import (
    Position,
    binlog_position,
    gtid_position,
    lsn_position,
    parse_lsn,
)

REASONS = ("malformed_json", "missing_op", "unknown_op", "bad_envelope", "bad_logical_value")
"""Every ``DecodeError.reason`` this module (and the logical-type decoders) can raise."""

SKIP_KINDS = ("tombstone", "transaction", "schema_change", "message", "key", "heartbeat")
"""Every ``Skipped.kind`` :func:`decode_message` returns."""

_MYSQL_CONNECTORS = ("mysql", "mariadb")
_ENVELOPE_FIELDS = frozenset(
    {"op", "before", "after", "source", "transaction", "ts_ms", "ts_us", "ts_ns", "message"}
)
_TRANSACTION_FIELDS = frozenset({"status", "id", "ts_ms", "event_count", "data_collections"})
_NOT_SNAPSHOT = ("false", "")
_PLACEHOLDER_BYTES = UNAVAILABLE.encode()
# Debezium's PostgreSQL connector writes the unchanged-TOAST placeholder in the column's
# own shape: text, base64 bytes (bytea), [text] (text[]) or the bytes as ints (int[]).
_PLACEHOLDERS: tuple[Any, ...] = (
    UNAVAILABLE,
    base64.b64encode(_PLACEHOLDER_BYTES).decode(),
    [UNAVAILABLE],
    list(_PLACEHOLDER_BYTES),
)
_PLACEHOLDERS_BY_TYPE: dict[type, tuple[Any, ...]] = {
    kind: tuple(p for p in _PLACEHOLDERS if type(p) is kind) for kind in (str, list)
}
PLACEHOLDER_TEXTS: tuple[str, ...] = _PLACEHOLDERS_BY_TYPE[str]
"""The placeholder's text shapes (text, base64 bytes): what a string value is compared to."""


def is_unavailable(value: Any) -> bool:
    """Whether a raw JSON column value is Debezium's unchanged-TOAST placeholder.

    >>> is_unavailable("__debezium_unavailable_value"), is_unavailable("x")
    (True, False)
    """
    candidates = _PLACEHOLDERS_BY_TYPE.get(type(value))  # called for every column value
    return candidates is not None and value in candidates


def _bad(message: str, *, column: str | None = None) -> DecodeError:
    return DecodeError("bad_envelope", message, column=column)


def _kind(value: Any) -> str:
    text = repr(value)
    short = text if len(text) <= 60 else text[:57] + "..."
    return f"{type(value).__name__} {short}"


def parse_json(raw: str | bytes | bytearray | None) -> Any:
    """Parse a message value; ``None`` for a tombstone (null, empty or blank value).

    Fractional numbers become :class:`decimal.Decimal` so decimals stay exact.
    """
    if raw is None:
        return None
    if isinstance(raw, bytes | bytearray):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(
                "malformed_json", f"message is not UTF-8 text: {exc.reason} at byte {exc.start}"
            ) from None
    if not isinstance(raw, str):
        raise DecodeError("malformed_json", f"message must be text or bytes, got {_kind(raw)}")
    if not raw.strip():
        return None
    try:
        return json.loads(raw, parse_float=Decimal)
    except json.JSONDecodeError as exc:
        raise DecodeError(
            "malformed_json",
            f"message is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
        ) from None
    except RecursionError:
        raise DecodeError("malformed_json", "message JSON is nested too deeply") from None


def decode_message(raw: str | bytes | bytearray | None) -> Decoded:
    """Decode one Kafka message value (Debezium JSON) into a change event or a skip.

    ``None``, an empty value and ``{"schema": null, "payload": null}`` are tombstones.
    """
    return decode_document(parse_json(raw))


def decode_document(doc: Any, *, images: bool = True) -> Decoded:
    """Like :func:`decode_message` for a value already parsed from JSON.

    ``images=False`` checks the envelope but leaves the ``before``/``after`` column values
    as parsed (no logical-type decoding, placeholders kept): for routing a message, where
    decoding every value would be thrown away. A bad column value then surfaces when the
    event is decoded in full.
    """
    if doc is None:
        return Skipped("tombstone")
    if not isinstance(doc, dict):
        raise DecodeError(
            "malformed_json", f"message must be a JSON object, got {type(doc).__name__}"
        )
    payload: Any = doc
    schema: Mapping[str, Any] | None = None
    if "payload" in doc and set(doc) <= {"schema", "payload"}:
        payload, raw_schema = doc["payload"], doc.get("schema")
        if payload is None:
            return Skipped("tombstone")
        if not isinstance(payload, dict):
            raise _bad(f"field 'payload' must be an object or null, got {_kind(payload)}")
        if raw_schema is not None and not isinstance(raw_schema, dict):
            raise _bad(f"field 'schema' must be an object or null, got {_kind(raw_schema)}")
        schema = raw_schema
    return _decode_payload(payload, schema or {}, images)


def _decode_payload(payload: dict[str, Any], schema: Mapping[str, Any], images: bool) -> Decoded:
    schema_name = schema.get("name")
    schema_name = schema_name if isinstance(schema_name, str) else ""
    if schema_name.endswith("Key"):
        return Skipped("key", {"key": payload})
    if "ddl" in payload or "tableChanges" in payload:
        return _schema_change(payload)
    if "op" in payload:
        return _row_event(payload, schema, images)
    status = payload.get("status")
    if isinstance(status, str) and status.upper() in ("BEGIN", "END") and "id" in payload:
        if schema_name.endswith("TransactionMetadataValue") or set(payload) <= _TRANSACTION_FIELDS:
            return Skipped("transaction", {k: payload.get(k) for k in sorted(_TRANSACTION_FIELDS)})
    if schema_name.endswith(".Heartbeat") or set(payload) == {"ts_ms"}:
        return Skipped("heartbeat", {"ts_ms": payload.get("ts_ms")})
    if payload and not set(payload) & _ENVELOPE_FIELDS:
        return Skipped("key", {"key": payload})
    fields = ", ".join(sorted(payload)) or "none"
    raise DecodeError(
        "missing_op",
        f"message has no 'op' field and is not a known non-row message (fields: {fields})",
    )


def _schema_change(payload: dict[str, Any]) -> Skipped:
    source = _source_dict(payload)
    table = _opt_str(source, "table", "source.table")
    changes = payload.get("tableChanges") or []
    if not isinstance(changes, list):
        raise _bad(f"field 'tableChanges' must be an array, got {_kind(changes)}")
    return Skipped(
        "schema_change",
        {
            "ddl": payload.get("ddl"),
            "databaseName": payload.get("databaseName") or _opt_str(source, "db", "source.db"),
            "schemaName": payload.get("schemaName"),
            "table": table or None,
            "tableChanges": changes,
            "position": _position(source),
            "source_ts": _epoch_ms(source.get("ts_ms"), "source.ts_ms"),
        },
    )


def _row_event(payload: dict[str, Any], schema: Mapping[str, Any], images: bool) -> Decoded:
    op = payload["op"]
    if not isinstance(op, str):
        raise _bad(f"field 'op' must be a string, got {_kind(op)}")
    if op == "m":
        message = payload.get("message")
        message = message if isinstance(message, dict) else {}
        return Skipped(
            "message", {"prefix": message.get("prefix"), "content": message.get("content")}
        )
    if op not in ROW_OPS:
        raise DecodeError(
            "unknown_op", f"field 'op' is {op!r}; expected one of {', '.join(ROW_OPS)} or 'm'"
        )
    source = _source_dict(payload)
    table = _source_table(source)
    where = f" (table {table.qualified})" if table else ""
    before, _ = _image(payload, "before", schema, where, images)
    after, unavailable = _image(payload, "after", schema, where, images)
    typed = bool(images and (image_struct(schema, "after") or image_struct(schema, "before")))
    if op in ("c", "r", "u") and after is None:
        raise _bad(f"op {op!r} event has no 'after' object{where}")
    if op == "d" and before is None:
        raise _bad(f"op 'd' event has no 'before' object{where}")
    if op == "t":
        before, after, unavailable = None, None, frozenset()
    return ChangeEvent(
        op=cast(Op, op),
        source=table,
        before=before,
        after=after,
        position=_position(source),
        source_ts=_source_ts(source),
        event_ts=_epoch_ms(payload.get("ts_ms"), "ts_ms"),
        tx_id=_tx_id(payload, source),
        unavailable=unavailable,
        connector=_opt_str(source, "connector", "source.connector"),
        snapshot=_snapshot(source.get("snapshot")),
        typed=typed,
    )


def _image(
    payload: dict[str, Any], name: str, schema: Mapping[str, Any], where: str, decode: bool
) -> tuple[dict[str, Any] | None, frozenset[str]]:
    """The decoded ``before``/``after`` image without placeholders, and the placeholders
    (the raw image, placeholders and all, unless ``decode``)."""
    raw = payload.get(name)
    if raw is None:
        return None, frozenset()
    if not isinstance(raw, dict):
        raise _bad(f"field {name!r} must be an object or null, got {_kind(raw)}{where}")
    if not decode:
        return raw, frozenset()
    missing = frozenset(k for k, v in raw.items() if is_unavailable(v))
    kept = {k: v for k, v in raw.items() if k not in missing}
    struct = image_struct(schema, name)
    return (decode_struct(kept, struct, name) if struct else kept), missing


def image_struct(schema: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """The struct field ``name`` (``before``/``after``) of an envelope's Connect schema,
    when it lists its fields; None otherwise (its image is then left as it is)."""
    fields = schema.get("fields")
    if not isinstance(fields, list):
        return None
    for field in fields:
        if isinstance(field, dict) and field.get("field") == name:
            return field if isinstance(field.get("fields"), list) else None
    return None


def _source_dict(payload: dict[str, Any]) -> dict[str, Any]:
    source = payload.get("source")
    if source is None:
        return {}
    if not isinstance(source, dict):
        raise _bad(f"field 'source' must be an object, got {_kind(source)}")
    return source


def _opt_str(source: Mapping[str, Any], key: str, where: str) -> str | None:
    value = source.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _bad(f"field {where!r} must be a string, got {_kind(value)}")


def _source_table(source: Mapping[str, Any]) -> SourceTable | None:
    table = _opt_str(source, "table", "source.table")
    if not table:
        return None
    return SourceTable(
        database=_opt_str(source, "db", "source.db") or None,
        schema=_opt_str(source, "schema", "source.schema") or None,
        table=table,
    )


def _integer(value: Any, where: str) -> int:
    """An integer field; doc examples sometimes quote numbers ("ts_ms": "158…")."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise _bad(f"field {where!r} must be an integer, got {_kind(value)}")


def _epoch_ms(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    millis = _integer(value, where)
    if millis == 0:
        return None
    try:
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=millis)
    except OverflowError:
        raise _bad(f"field {where!r} is out of range: {millis}") from None


def _source_ts(source: Mapping[str, Any]) -> datetime | None:
    if source.get("ts_ms") is not None:
        return _epoch_ms(source["ts_ms"], "source.ts_ms")
    if source.get("ts_sec") is not None:  # Debezium before 0.7
        return _epoch_ms(_integer(source["ts_sec"], "source.ts_sec") * 1000, "source.ts_sec")
    return None


def _position(source: Mapping[str, Any]) -> Position | None:
    """The binlog, GTID or LSN position named by ``source``; ``None`` when it has none."""
    connector = _opt_str(source, "connector", "source.connector")
    try:
        if connector in _MYSQL_CONNECTORS or ("file" in source and "pos" in source):
            file = _opt_str(source, "file", "source.file")
            row = _integer(source.get("row") or 0, "source.row")
            if file and source.get("pos") is not None:
                return binlog_position(file, _integer(source["pos"], "source.pos"), row)
            gtid = _opt_str(source, "gtid", "source.gtid")
            return gtid_position(gtid, row) if gtid else None
        lsn = source.get("lsn")
        if lsn is None:
            return None
        if isinstance(lsn, str) and "/" in lsn:
            return lsn_position(parse_lsn(lsn))
        return lsn_position(_integer(lsn, "source.lsn"))
    except ValueError as exc:
        raise _bad(f"field 'source' has an unusable position: {exc}") from None


def _tx_id(payload: Mapping[str, Any], source: Mapping[str, Any]) -> str | None:
    transaction = payload.get("transaction")
    if transaction is not None and not isinstance(transaction, dict):
        raise _bad(f"field 'transaction' must be an object or null, got {_kind(transaction)}")
    if transaction and transaction.get("id") is not None:
        return str(transaction["id"])
    if source.get("txId") is not None:
        return str(_integer(source["txId"], "source.txId"))
    return _opt_str(source, "gtid", "source.gtid") or None


def _snapshot(value: Any) -> bool:
    """Docs write a boolean; real connectors an Enum string (true/last/incremental …)."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() not in _NOT_SNAPSHOT
    raise _bad(f"field 'source.snapshot' must be a boolean or string, got {_kind(value)}")
