"""The Debezium envelope both readers write, assembled here once.

Every Debezium connector writes the same envelope — ``before``/``after`` images, a
connector's own ``source`` block, ``op``, ``ts_ms`` and the ``transaction`` block — and,
with ``schemas.enable``, the Kafka Connect schema describing it. Downstream (the decoder,
Kafka consumers, landing files already written) reads these bytes, so their shape lives
in one place: a connector declares its ``source`` block once as a :class:`SourceBlock`,
and that one declaration gives both the block's values (:meth:`SourceBlock.values`, in
declared order) and its Connect struct (:meth:`SourceBlock.schema`).

>>> block = SourceBlock("demo", "io.example.Source", (*COMMON_FIELDS, SourceField("pos", "int64")))
>>> block.values(name="srv", ts_ms=1, db="d", pos=7)["pos"], block.schema()["fields"][-1]
(7, {'type': 'int64', 'optional': False, 'field': 'pos'})
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from icetide import __version__
from icetide.capture.json_text import dumps, string


@dataclass(frozen=True)
class SourceField:
    """One field of a connector's ``source`` block: its name, Connect type, optionality."""

    name: str
    type: str
    optional: bool = False

    def schema(self) -> dict[str, Any]:
        """The field in the ``source`` struct of the Connect schema."""
        return {"type": self.type, "optional": self.optional, "field": self.name}


COMMON_FIELDS: tuple[SourceField, ...] = (
    SourceField("version", "string"),
    SourceField("connector", "string"),
    SourceField("name", "string"),
    SourceField("ts_ms", "int64"),
    SourceField("snapshot", "string", optional=True),
    SourceField("db", "string"),
    SourceField("sequence", "string", optional=True),
)
"""The fields every Debezium connector's ``source`` block starts with."""


@dataclass(frozen=True)
class SourceBlock:
    """A connector's ``source`` block, declared once: its Connect struct and its fields."""

    connector: str
    """What ``source.connector`` says (``mysql``, ``postgresql``)."""
    struct: str
    """The Connect struct's name (``io.debezium.connector.mysql.Source``)."""
    fields: tuple[SourceField, ...]

    def values(self, **given: Any) -> dict[str, Any]:
        """The block's values in declared order. ``version``, ``connector`` and
        ``snapshot`` (``"false"``: streamed, not snapshotted) are filled in; an optional
        field not given is ``null``, a required one not given is a programming error."""
        given.setdefault("version", __version__)
        given.setdefault("connector", self.connector)
        given.setdefault("snapshot", "false")
        values: dict[str, Any] = {}
        for field in self.fields:
            if field.name in given:
                values[field.name] = given.pop(field.name)
            elif field.optional:
                values[field.name] = None
            else:
                raise TypeError(f"source field {field.name!r} of {self.connector} not given")
        if given:
            raise TypeError(f"{self.connector} has no source fields {sorted(given)}")
        return values

    def schema(self) -> dict[str, Any]:
        """The ``source`` field of the envelope's Connect schema."""
        return {
            "type": "struct",
            "name": self.struct,
            "optional": False,
            "field": "source",
            "fields": [field.schema() for field in self.fields],
        }


def envelope_schema(
    prefix: str, fields: Sequence[dict[str, Any]], source: SourceBlock
) -> dict[str, Any]:
    """The Connect schema of topic ``prefix``'s (``server.db.table``) envelopes;
    ``fields`` are the row's Connect fields (each with its ``field`` name)."""

    def image(name: str) -> dict[str, Any]:
        return {
            "type": "struct",
            "fields": list(fields),
            "optional": True,
            "name": f"{prefix}.Value",
            "field": name,
        }

    return {
        "type": "struct",
        "name": f"{prefix}.Envelope",
        "optional": False,
        "version": 1,
        "fields": [
            image("before"),
            image("after"),
            source.schema(),
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
            {
                "type": "struct",
                "name": "event.block",
                "version": 1,
                "optional": True,
                "field": "transaction",
                "fields": [
                    {"type": "string", "optional": False, "field": "id"},
                    {"type": "int64", "optional": False, "field": "total_order"},
                    {"type": "int64", "optional": False, "field": "data_collection_order"},
                ],
            },
        ],
    }


def now_ms() -> int:
    """The envelope's ``ts_ms``: when capture wrote it, in Unix milliseconds."""
    return int(time.time() * 1000)


def change_value(
    op: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    source: dict[str, Any],
    transaction: tuple[str, int, int],
    schema: dict[str, Any] | None = None,
    ts_ms: int | None = None,
) -> dict[str, Any]:
    """A change event's envelope: ``op`` (``c``/``u``/``d``/``t``), the row images, the
    ``source`` block and ``transaction`` as ``(id, total order, order in the table)``;
    wrapped as ``{"schema", "payload"}`` when the Connect ``schema`` is given. ``ts_ms``
    is :func:`now_ms` unless given (the same instant as the record's text)."""
    tx_id, total, in_table = transaction
    payload: dict[str, Any] = {
        "before": before,
        "after": after,
        "source": source,
        "op": op,
        "ts_ms": now_ms() if ts_ms is None else ts_ms,
        "transaction": {"id": tx_id, "total_order": total, "data_collection_order": in_table},
    }
    return payload if schema is None else {"schema": schema, "payload": payload}


def change_json(
    op: str,
    before: str,
    after: str,
    source: str,
    ts_ms: int,
    transaction: tuple[str, int, int],
    schema: str | None = None,
) -> str:
    """The text of :func:`change_value`'s envelope from its parts' texts (``before``,
    ``after``: :func:`image_json`; ``source``, ``schema``: their JSON text), byte for byte
    ``json_text.dumps(change_value(...))``: a transport writes this once per row, and
    assembling it from the parts' texts costs a fraction of serialising the envelope.

    >>> change_json("c", "null", '{"id":1}', "{}", 5, ("tx", 1, 1))
    '{"before":null,"after":{"id":1},"source":{},"op":"c","ts_ms":5,"transaction":{"id":"tx","total_order":1,"data_collection_order":1}}'
    """
    tx_id, total, in_table = transaction
    payload = (
        f'{{"before":{before},"after":{after},"source":{source},"op":{string(op)},'
        f'"ts_ms":{int(ts_ms)},"transaction":{{"id":{string(tx_id)},'
        f'"total_order":{int(total)},"data_collection_order":{int(in_table)}}}}}'
    )
    return payload if schema is None else f'{{"schema":{schema},"payload":{payload}}}'


def image_json(image: dict[str, Any] | None) -> str:
    """A row image's JSON text (``null`` for none).

    >>> image_json(None), image_json({"id": 1, "v": "é"})
    ('null', '{"id":1,"v":"é"}')
    """
    return "null" if image is None else dumps(image)


def change_envelope(
    op: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    source: dict[str, Any],
    source_text: str,
    transaction: tuple[str, int, int],
    schema: tuple[dict[str, Any], str] | None = None,
) -> tuple[dict[str, Any], str]:
    """One change's envelope (:func:`change_value`) and its text (:func:`change_json`) at
    one instant: what both readers put in a record. ``source_text`` is ``source``'s JSON
    text as the reader has it; ``schema`` the Connect schema with its text, when sent."""
    ts_ms = now_ms()
    value = change_value(op, before, after, source, transaction, schema and schema[0], ts_ms)
    text = change_json(
        op,
        image_json(before),
        image_json(after),
        source_text,
        ts_ms,
        transaction,
        schema and schema[1],
    )
    return value, text


def schema_change_value(
    source: dict[str, Any],
    database: str,
    schema: str | None,
    ddl: str | None,
    table_changes: list[dict[str, Any]],
) -> dict[str, Any]:
    """A schema-change record's value, as Debezium's schema-change topic carries it."""
    return {
        "source": source,
        "ts_ms": now_ms(),
        "databaseName": database,
        "schemaName": schema,
        "ddl": ddl,
        "tableChanges": table_changes,
    }


def record_key(
    key: Sequence[str], before: dict[str, Any] | None, after: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The message key: the primary-key columns of the newest image, or ``None`` when
    the table has no key or the image lacks a key column (a key-less before image).

    >>> record_key(("id",), {"id": 1, "v": "a"}, None), record_key(("id",), {"v": "a"}, None)
    ({'id': 1}, None)
    """
    image = after if after is not None else before
    if not key or not image:
        return None
    try:
        return {k: image[k] for k in key}
    except KeyError:
        return None
