"""The bytes capture writes for one record: JSON text, or a registry-tagged frame.

``transport.format`` picks the form (docs/registry.md), as Debezium's converters do:

* ``json`` (default): the envelope as JSON text, what ``JsonConverter`` writes;
* ``avro``, ``json_schema``, ``protobuf``: what ``AvroConverter``,
  ``JsonSchemaConverter`` and ``ProtobufConverter`` write. The envelope's Connect schema
  (the readers include it when the format is not ``json``) is converted to Avro
  (:func:`~icetide.schema.convert.connect.connect_to_avro`), then, for the other two, to
  a JSON Schema (:func:`~icetide.schema.convert.json_schema.avro_to_json_schema`) or a
  Protobuf file descriptor (:func:`~icetide.schema.convert.protobuf.avro_to_protobuf`,
  registered as ``.proto`` text as Confluent's Java serializer does:
  :func:`~icetide.schema.convert.proto_text.descriptor_to_proto`);
  it is registered under the subject ``<topic>-value`` (TopicNameStrategy) with the
  transport's registry, and each value is written as the Confluent wire format: magic
  byte, schema id, (Protobuf: message index 0), then Avro binary, JSON text or Protobuf
  binary.

Values keep the JSON converter's forms (epoch days, milliseconds, base64 bytes), so the
ledger decodes each form to the same row as the JSON one. A schema is registered once per
subject and Connect schema (a source ALTER gives a new Connect schema, hence the
subject's next version). Schema-change records stay JSON, as on Debezium's schema-change
topic.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Mapping
from typing import Any

from icetide.capture.errors import CaptureError
from icetide.capture.record import CaptureRecord
from icetide.events.wire import AVRO as AVRO_TYPE
from icetide.events.wire import JSON_SCHEMA as JSON_TYPE
from icetide.events.wire import PROTOBUF as PROTOBUF_TYPE
from icetide.events.wire import frame
from icetide.schema.convert.connect import connect_to_avro

JSON, AVRO, JSON_SCHEMA, PROTOBUF = "json", "avro", "json_schema", "protobuf"
FORMATS = (JSON, AVRO, JSON_SCHEMA, PROTOBUF)
_Writer = Callable[[Mapping[str, Any], Mapping[str, Any]], bytes]
"""(payload, Connect schema) → framed value bytes."""


class ValueEncoder:
    """Encodes records in one ``transport.format``; ``registry_url`` for the non-JSON."""

    def __init__(self, format: str = JSON, registry_url: str | None = None) -> None:
        if format not in FORMATS:
            raise CaptureError(
                f"transport.format {format!r} is not one capture writes",
                hint=f"use one of {', '.join(FORMATS)}",
            )
        if format != JSON and registry_url is None:
            raise CaptureError(
                f"transport.format {format} needs a schema registry",
                hint="set transport.registry.url, or transport.format: json",
            )
        self.format = format
        self.registry_url = registry_url
        self._writers: dict[tuple[str, str], _Writer] = {}

    @property
    def framed(self) -> bool:
        """Whether values are registry frames (binary), not JSON text."""
        return self.format != JSON

    def encode(self, record: CaptureRecord, topic: str) -> bytes:
        """The value bytes of ``record`` on ``topic``."""
        if self.format == JSON or record.kind != "change":
            return record.to_json().encode("utf-8")
        schema, payload = record.value.get("schema"), record.value.get("payload")
        if not isinstance(schema, Mapping) or not isinstance(payload, Mapping):
            raise CaptureError(
                f"change of {record.qualified} has no Connect schema to write as {self.format}",
                hint="the capture readers include it when transport.format is not json",
            )
        write = self._registered(f"{topic}-value", schema)
        try:
            return write(payload, schema)
        except (ValueError, TypeError, KeyError) as exc:
            raise CaptureError(
                f"change of {record.qualified} at {record.position.text} does not fit its "
                f"{self.format} schema: {type(exc).__name__}: {exc}",
                hint="report it: the capture's Connect schema and values disagree",
            ) from exc

    def _registered(self, subject: str, schema: Mapping[str, Any]) -> _Writer:
        key = (subject, json.dumps(schema, sort_keys=True))
        found = self._writers.get(key)
        if found is not None:
            return found
        avro = connect_to_avro(schema)
        kind, text, write = _FORMS[self.format](avro)
        schema_id = self._register(subject, kind, text)
        found = self._writers[key] = lambda payload, connect: frame(
            schema_id, *write(payload, connect)
        )
        return found

    def _register(self, subject: str, kind: str, text: str) -> int:
        from confluent_kafka.schema_registry import Schema

        from icetide.events.registry import registry_for

        assert self.registry_url is not None
        client = registry_for(self.registry_url).client
        try:
            return int(client.register_schema(subject, Schema(text, kind)))
        except Exception as exc:  # the registry refused or did not answer: stop capture
            raise CaptureError(
                f"cannot register the {self.format} schema of subject {subject!r} with "
                f"{self.registry_url}: {exc}",
                hint="check the registry (and its compatibility setting for the subject); "
                "capture resumes from its saved offset",
            ) from exc


_Payload = Callable[[Mapping[str, Any], Mapping[str, Any]], tuple[bytes, tuple[int, ...] | None]]


def _avro_form(avro: dict[str, Any]) -> tuple[str, str, _Payload]:
    import fastavro

    parsed = fastavro.parse_schema(avro)

    def write(payload: Mapping[str, Any], connect: Mapping[str, Any]) -> tuple[bytes, None]:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, _datum(payload, connect))
        return out.getvalue(), None

    return AVRO_TYPE, json.dumps(avro), write


def _json_schema_form(avro: dict[str, Any]) -> tuple[str, str, _Payload]:
    from icetide.schema.convert.json_schema import avro_to_json_schema

    def write(payload: Mapping[str, Any], connect: Mapping[str, Any]) -> tuple[bytes, None]:
        return json.dumps(payload, separators=(",", ":")).encode("utf-8"), None

    return JSON_TYPE, json.dumps(avro_to_json_schema(avro)), write


def _protobuf_form(avro: dict[str, Any]) -> tuple[str, str, _Payload]:
    from google.protobuf import descriptor_pool, json_format, message_factory

    from icetide.schema.convert.proto_text import descriptor_to_proto
    from icetide.schema.convert.protobuf import avro_to_protobuf

    file = avro_to_protobuf(avro)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    message = message_factory.GetMessageClass(pool.FindMessageTypeByName(file.message_type[0].name))

    def write(payload: Mapping[str, Any], connect: Mapping[str, Any]) -> tuple[bytes, tuple[int]]:
        # ParseDict reads the JSON converter's forms (base64 bytes, numbers) as they are.
        parsed = json_format.ParseDict(payload, message())
        return parsed.SerializeToString(), (0,)  # the file's first message

    # Registered as .proto text, as Confluent's Java serializers do (a registry may accept
    # nothing else); readers ask for the descriptor or compile the text back.
    return PROTOBUF_TYPE, descriptor_to_proto(file), write


_FORMS: dict[str, Callable[[dict[str, Any]], tuple[str, str, _Payload]]] = {
    AVRO: _avro_form,
    JSON_SCHEMA: _json_schema_form,
    PROTOBUF: _protobuf_form,
}


def _datum(value: Any, schema: Mapping[str, Any]) -> Any:
    """A JSON-converter value in the Python form the Avro writer takes for ``schema``:
    bytes from their base64 text, structs field by field."""
    if value is None:
        return None
    kind = schema.get("type")
    if kind == "struct":
        fields = {str(f.get("field")): f for f in schema.get("fields") or ()}
        return {name: _datum(value.get(name), item) for name, item in fields.items()}
    if kind == "array":
        items = schema.get("items") or {}
        return [_datum(v, items) for v in value]
    if kind == "map":
        values = schema.get("values") or {}
        return {str(k): _datum(v, values) for k, v in value.items()}
    if kind == "bytes" and isinstance(value, str):
        return base64.b64decode(value)
    if kind in ("int8", "int16", "int32", "int64") and not isinstance(value, int):
        return int(value)
    return value


def encoder_for(settings: Any) -> ValueEncoder:
    """The encoder of a ``transport:`` config."""
    registry = settings.registry
    return ValueEncoder(settings.format, str(registry.url) if registry is not None else None)
