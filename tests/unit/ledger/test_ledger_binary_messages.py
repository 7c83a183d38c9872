"""A binary message that is not JSON text is named for what it is, not as bad UTF-8."""

from __future__ import annotations

from icetide.events.raw import Wire
from icetide.ledger.decode import DEAD, Routes, classify_one


def test_another_serializers_frame_is_an_unknown_magic_byte() -> None:
    frame = b"\x01\x00\x00\x00\x07" + bytes(range(200, 256))  # not UTF-8 either
    for wire in (None, Wire({})):
        table, status, reason, error = classify_one(frame, Routes(), wire)
        assert (status, reason) == (DEAD, "unknown_magic_byte")
        assert "0x01" in error and "Confluent wire format" in error


def test_a_registry_frame_without_a_registry_says_to_configure_one() -> None:
    frame = b"\x00\x00\x00\x00\x07" + b"\x02\x06abc"
    _, status, reason, error = classify_one(frame, Routes())
    assert (status, reason) == (DEAD, "deserialization")
    assert "schema id 7" in error and "transport.registry" in error


def test_json_text_and_tombstones_are_not_binary() -> None:
    assert classify_one(b'\t{"op": "x"}', Routes())[2] != "unknown_magic_byte"
    assert classify_one(None, Routes())[1:3] == ("skip", "tombstone")
