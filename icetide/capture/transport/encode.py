"""The bytes capture writes for one record: JSON text, or a registry-tagged Avro frame.

``transport.format`` picks the form (docs/registry.md):

* ``json`` (default): the envelope as JSON text, what Debezium's ``JsonConverter`` writes;
* ``avro``: what Debezium's ``AvroConverter`` writes: the envelope's Connect schema (the
  readers include it when the format is not ``json``) converted to Avro
  (:func:`~icetide.schema.convert.connect.connect_to_avro`), registered under the
  subject ``<topic>-value`` (TopicNameStrategy) with the transport's registry, and each
  value written as the Confluent wire format: magic byte, schema id, Avro binary.

Values keep the JSON converter's forms (epoch days, milliseconds, decimal text), so the
ledger decodes an Avro record to the same row as the JSON one. A schema is registered
once per subject and Connect schema (a source ALTER gives a new Connect schema, hence
the subject's next version). Schema-change records stay JSON, as on Debezium's
schema-change topic.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Mapping
from typing import Any

from icetide.capture.errors import CaptureError
from icetide.capture.record import CaptureRecord
from icetide.events.wire import frame
from icetide.schema.convert.connect import connect_to_avro

JSON, AVRO = "json", "avro"


class ValueEncoder:
    """Encodes records in one ``transport.format``; ``registry_url`` for the non-JSON."""

    def __init__(self, format: str = JSON, registry_url: str | None = None) -> None:
        if format != JSON and registry_url is None:
            raise CaptureError(
                f"transport.format {format} needs a schema registry",
                hint="set transport.registry.url, or transport.format: json",
            )
        self.format = format
        self.registry_url = registry_url
        self._schemas: dict[tuple[str, str], tuple[int, Any]] = {}

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
        schema_id, parsed = self._registered(f"{topic}-value", schema)
        import fastavro

        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, parsed, _datum(payload, schema))
        except (ValueError, TypeError) as exc:
            raise CaptureError(
                f"change of {record.qualified} at {record.position.text} does not fit its "
                f"Avro schema: {exc}",
                hint="report it: the capture's Connect schema and values disagree",
            ) from exc
        return frame(schema_id, out.getvalue())

    def _registered(self, subject: str, schema: Mapping[str, Any]) -> tuple[int, Any]:
        key = (subject, json.dumps(schema, sort_keys=True))
        found = self._schemas.get(key)
        if found is not None:
            return found
        import fastavro
        from confluent_kafka.schema_registry import Schema

        from icetide.events.versions import registry_for

        avro = connect_to_avro(schema)
        assert self.registry_url is not None
        client = registry_for(self.registry_url).client
        try:
            schema_id = int(client.register_schema(subject, Schema(json.dumps(avro), "AVRO")))
        except Exception as exc:  # the registry refused or did not answer: stop capture
            raise CaptureError(
                f"cannot register the Avro schema of subject {subject!r} with "
                f"{self.registry_url}: {exc}",
                hint="check the registry (and its compatibility setting for the subject); "
                "capture resumes from its saved offset",
            ) from exc
        found = self._schemas[key] = (schema_id, fastavro.parse_schema(avro))
        return found


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
