"""Decoding helpers shared by the demo generator tests (imported by conftest and tests)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from icetide.demo.workload import Envelope, Workload
from icetide.events.envelope import decode_message
from icetide.events.model import ChangeEvent
from icetide.events.project import ProjectedEvent, project_event

SEED = 20240301
EVENTS = 1500


@dataclass(frozen=True)
class Decoded:
    """One generated message as the icetide decoder sees it on the wire."""

    envelope: Envelope
    event: ChangeEvent
    projected: ProjectedEvent

    @property
    def payload(self) -> dict[str, Any]:
        """The envelope payload, whichever form the message has."""
        message = self.envelope.message
        return message["payload"] if "schema" in message else message

    @property
    def position(self) -> int:
        """The decoded position key (the order icetide applies events in)."""
        assert self.event.position is not None
        return self.event.position.key


def decode_all(workload: Workload) -> list[Decoded]:
    """Decode every message of ``workload`` from its JSON text, in generation order."""
    schemas = {s.table: s for s in workload.schemas}
    out = []
    for envelope in workload.events:
        event = decode_message(json.dumps(envelope.message))
        assert isinstance(event, ChangeEvent), event
        out.append(Decoded(envelope, event, project_event(event, schemas[envelope.table])))
    return out


def key_of(image: dict[str, Any], primary_key: tuple[str, ...]) -> tuple[Any, ...]:
    """The primary-key tuple of a row image, in key-column order (as ``expected`` keys)."""
    return tuple(image[k] for k in primary_key)
