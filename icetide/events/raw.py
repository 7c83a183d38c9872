"""A raw message (a landing-file line or a Kafka record value, as bytes) → its parsed
document: one way, for both of the ledger's passes (classify, then project).

A registry-tagged message (the Confluent wire format: a 0x00 byte, a schema id, the
payload; in a landing file, one base64 line) is decoded with the writer schemas of its
batch (:class:`Wire`, fetched once on the driver); anything else is JSON text, read as
UTF-8 with a leading byte-order mark dropped. Every failure is a
:class:`~icetide.errors.DecodeError` carrying its dead-letter reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icetide.errors import DecodeError
from icetide.events.envelope import parse_json
from icetide.events.wire import WriterSchema, decode_framed, is_framed, unbase64_line

INVALID_UTF8 = "invalid_utf8"
BOM = "\ufeff"


def message_text(raw: bytes) -> str:
    """A message's bytes as text; a leading UTF-8 BOM is not part of the JSON.

    >>> message_text(b'\\xef\\xbb\\xbf{"a": 1}')
    '{"a": 1}'
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(
            INVALID_UTF8,
            f"message is not valid UTF-8: {exc.reason} at byte {exc.start} "
            f"(0x{raw[exc.start : exc.start + 4].hex()})",
        ) from None
    return text[1:] if text.startswith(BOM) else text


@dataclass(frozen=True)
class Wire:
    """What the workers need to read registry-tagged messages of one batch: the writer
    schemas by id, and whether frames arrive as base64 lines (landing files)."""

    schemas: dict[int, WriterSchema] = field(default_factory=dict)
    base64_lines: bool = False

    def framed(self, raw: bytes) -> bytes | None:
        """The frame in ``raw`` (itself, or its base64 line in a landing file), or None."""
        if is_framed(raw):
            return raw
        if self.base64_lines and raw[:1] == b"A":  # base64 of a 0x00 byte starts with "A"
            try:
                decoded = unbase64_line(raw)
            except Exception:  # not base64 after all: a JSON message
                return None
            return decoded if is_framed(decoded) else None
        return None


def read_document(raw: bytes, wire: Wire | None = None) -> Any:
    """The parsed message: a registry frame decoded (when ``wire`` reads registry
    messages), anything else parsed as JSON text.

    Raises :class:`~icetide.errors.DecodeError` with the dead-letter reason.
    """
    frame = wire.framed(raw) if wire is not None else None
    if frame is not None and wire is not None:
        return decode_framed(frame, wire.schemas)
    return parse_json(message_text(raw))
