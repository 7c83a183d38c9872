""" "All versions of a subject up to N": one small interface, three implementations.

Applying schema changes in order needs every version between the table's latest applied
one and the one a message carries, never just the newest. Where the versions come from
differs; what the evolution layer asks does not:

- :class:`RegistryVersions`: a Confluent-compatible schema registry, through
  confluent-kafka's ``SchemaRegistryClient`` (an ``http(s)://`` URL, or ``mock://name``
  for the library's in-process registry);
- :class:`HistoryVersions`: icetide's own schema history of a table (each version as
  the Avro record :func:`~icetide.schema.convert.avro.to_avro_schema` writes);
- :class:`InlineVersions`: the inline Connect schemas of Debezium JSON events, numbered
  in the order they first appear.

Every implementation returns :class:`SubjectVersion` objects oldest first, versions
ascending, at most up to ``up_to``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from icetide.errors import DecodeError, IcetideError, Transient
from icetide.events.wire import AVRO, JSON_SCHEMA, PROTOBUF, WriterSchema
from icetide.schema.history import SchemaHistory


class RegistryUnavailable(IcetideError, Transient):
    """The schema registry did not answer: a fatal error that retries, never a dead letter."""


@dataclass(frozen=True)
class SubjectVersion:
    """One version of a subject: its number, its registry id, its writer schema."""

    subject: str
    version: int
    schema_id: int
    schema: WriterSchema


class SchemaVersions(Protocol):
    """The one question: every version of ``subject`` up to ``up_to`` (all if ``None``)."""

    def versions(self, subject: str, up_to: int | None = None) -> list[SubjectVersion]:
        """Versions of ``subject``, ascending, none above ``up_to``."""
        ...


class RegistryVersions:
    """Versions from a Confluent-compatible registry (confluent-kafka's client).

    ``url`` is the registry's base URL (for Apicurio: ``.../apis/ccompat/v7``), or
    ``mock://<name>`` for the library's in-process registry. Network failures are
    :class:`RegistryUnavailable` (the stage stops and retries); a schema id the registry
    does not know is a dead letter (``unknown_schema_id``), since retrying cannot help.
    """

    def __init__(self, url: str, **settings: Any) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.url = url
        # new_client gives the in-process registry for mock:// URLs, HTTP otherwise.
        self.client = SchemaRegistryClient.new_client({"url": url, **settings})

    def versions(self, subject: str, up_to: int | None = None) -> list[SubjectVersion]:
        """Every registered version of ``subject`` up to ``up_to``, ascending."""
        numbers = sorted(self._call(lambda: self.client.get_versions(subject), subject))
        out = []
        for number in numbers:
            if up_to is not None and number > up_to:
                break
            registered = self._call(lambda n=number: self.client.get_version(subject, n), subject)
            schema = registered.schema
            out.append(
                SubjectVersion(
                    subject,
                    int(registered.version),
                    int(registered.schema_id),
                    WriterSchema(schema.schema_type or AVRO, schema.schema_str, number),
                )
            )
        return out

    def writer_schemas(self, ids: set[int]) -> dict[int, WriterSchema]:
        """The writer schemas of ``ids`` (unknown ids are left out: their messages are dead
        letters with reason ``unknown_schema_id``)."""
        found: dict[int, WriterSchema] = {}
        for schema_id in sorted(ids):
            schema = self._call(lambda i=schema_id: self.client.get_schema(i), None)
            if schema is None:
                continue
            kind = schema.schema_type or AVRO
            if kind == PROTOBUF:
                # Decoding needs the descriptor, not .proto text: Confluent serves it
                # base64 with format=serialized; a registry that cannot answers the text.
                schema = self._call(
                    lambda i=schema_id: self.client.get_schema(i, fmt="serialized"), None
                )
                if schema is None:
                    continue
                found[schema_id] = WriterSchema(kind, descriptor_text(schema.schema_str or ""))
                continue
            found[schema_id] = WriterSchema(kind, schema.schema_str or "")
        return found

    def _call(self, action: Any, subject: str | None) -> Any:
        """``action()`` with the registry's failures mapped: a 404 is ``unknown_subject``
        naming ``subject`` (None: the call answers None), any other failure
        :class:`RegistryUnavailable` (transient: the stage retries)."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return action()
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                if subject is None:
                    return None
                raise DecodeError(
                    "unknown_subject", f"subject {subject!r} is not in the registry"
                ) from None
            raise RegistryUnavailable(
                f"schema registry {self.url}: {exc}", hint="check the registry"
            ) from exc
        except Exception as exc:
            raise RegistryUnavailable(
                f"schema registry {self.url} unreachable: {exc}",
                hint="check the registry URL and that it is running; the stage retries",
            ) from exc


def descriptor_text(text: str) -> str:
    """A Protobuf schema as the base64 ``FileDescriptorProto`` decoding reads: ``text``
    itself when it is base64 (a ``format=serialized`` answer), else ``.proto`` text
    compiled with protoc (:func:`~icetide.schema.convert.proto_text.proto_to_descriptor`).

    Text that does not compile is returned as it is, with a warning naming protoc's
    error: its messages then fail to decode and go to the dead-letter table
    (``deserialization``) instead of stalling the batch.
    """
    import base64
    import binascii

    try:
        base64.b64decode(text, validate=True)
        return text  # .proto text is never base64 (spaces, quotes, semicolons)
    except (binascii.Error, ValueError):
        pass
    from icetide.errors import SchemaError
    from icetide.schema.convert.proto_text import proto_to_descriptor

    try:
        compiled = proto_to_descriptor(text)
    except SchemaError as exc:
        logging.getLogger(__name__).warning("%s; its messages go to the dead letters", exc)
        return text
    return base64.b64encode(compiled.SerializeToString()).decode("ascii")


class HistoryVersions:
    """Versions from icetide's schema history of one table (subject = table name)."""

    def __init__(self, histories: Mapping[str, SchemaHistory], namespace: str = "icetide") -> None:
        self.histories = histories
        self.namespace = namespace

    def versions(self, subject: str, up_to: int | None = None) -> list[SubjectVersion]:
        """Each schema version of the table as an Avro record schema."""
        from icetide.schema.convert.avro import to_avro_schema

        history = self.histories.get(subject)
        if history is None:
            return []
        out = []
        for schema in history.versions:
            if up_to is not None and schema.version > up_to:
                break
            record = to_avro_schema(subject, self.namespace, schema.columns)
            text = json.dumps(record, sort_keys=True)
            out.append(
                SubjectVersion(subject, schema.version, schema.version, WriterSchema(AVRO, text))
            )
        return out


class InlineVersions:
    """Versions from the inline Connect schemas of Debezium JSON events.

    :meth:`observe` each event's ``schema`` block (the ``Envelope`` struct); a block not
    seen before becomes the subject's next version.
    """

    CONNECT = "CONNECT"
    """The format of these versions: a Kafka Connect schema as JSON text."""

    def __init__(self) -> None:
        self._seen: dict[str, list[str]] = {}

    def observe(self, subject: str, schema: Mapping[str, Any]) -> int:
        """The version number of ``schema`` for ``subject`` (a new one if unseen)."""
        text = json.dumps(schema, sort_keys=True)
        known = self._seen.setdefault(subject, [])
        if text not in known:
            known.append(text)
        return known.index(text) + 1

    def versions(self, subject: str, up_to: int | None = None) -> list[SubjectVersion]:
        """The schemas seen for ``subject`` in order of first appearance."""
        texts = self._seen.get(subject, [])
        limit = len(texts) if up_to is None else min(up_to, len(texts))
        return [
            SubjectVersion(subject, n, n, WriterSchema(self.CONNECT, texts[n - 1], n))
            for n in range(1, limit + 1)
        ]


class AvroVersions:
    """A registry's versions with JSON Schema and Protobuf ones converted to Avro (the
    form compatibility checks and the schema model read): the path StreamNative takes,
    one set of rules for every format."""

    def __init__(self, registry: RegistryVersions) -> None:
        self.registry = registry

    def versions(self, subject: str, up_to: int | None = None) -> list[SubjectVersion]:
        """The subject's versions, ascending, each as Avro."""
        return [self._avro(v) for v in self.registry.versions(subject, up_to)]

    def _avro(self, version: SubjectVersion) -> SubjectVersion:
        kind = version.schema.format
        if kind == AVRO:
            return version
        if kind == JSON_SCHEMA:
            from icetide.schema.convert.json_schema import json_schema_to_avro

            record = json_schema_to_avro(json.loads(version.schema.text))
        elif kind == PROTOBUF:
            import base64

            from google.protobuf import descriptor_pb2

            from icetide.schema.convert.protobuf import protobuf_to_avro

            text = self.registry.writer_schemas({version.schema_id})[version.schema_id].text
            record = protobuf_to_avro(
                descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text))
            )
        else:
            return version
        avro = WriterSchema(AVRO, json.dumps(record), version.version)
        return SubjectVersion(version.subject, version.version, version.schema_id, avro)


_REGISTRIES: dict[str, RegistryVersions] = {}


def registry_for(url: str) -> RegistryVersions:
    """This process's one client per registry URL (its cache is shared by every stage;
    a ``mock://`` registry exists only inside the process that made it)."""
    found = _REGISTRIES.get(url)
    if found is None:
        found = _REGISTRIES[url] = RegistryVersions(url)
    return found
