"""Compatibility modes of a registry subject, checked with the ``avro`` package's checker.

A new version is checked against the history before anything is applied, with the Avro
specification's schema-resolution rules (``avro.compatibility``'s
``ReaderWriterCompatibilityChecker``; icetide does not write the rules a second time):

===================  =================================================================
mode                 the new version must…
===================  =================================================================
BACKWARD             read data written with the previous version
BACKWARD_TRANSITIVE  read data written with every earlier version (icetide's default)
FORWARD              be readable by the previous version
FORWARD_TRANSITIVE   be readable by every earlier version
FULL                 both, with the previous version
FULL_TRANSITIVE      both, with every earlier version
NONE                 nothing
===================  =================================================================

JSON Schema and Protobuf versions are checked in their Avro form (see
:mod:`icetide.schema.convert.json_schema` and :mod:`icetide.schema.convert.protobuf`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from icetide.errors import ConfigError

MODES = (
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
)
DEFAULT_MODE = "BACKWARD_TRANSITIVE"


@dataclass(frozen=True)
class Verdict:
    """Whether a version may follow the history; ``problems`` say where and why not."""

    compatible: bool
    problems: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        """One line for a dead letter or a log."""
        return "; ".join(self.problems) if self.problems else "compatible"


def _parse(schema: Mapping[str, Any] | str) -> Any:
    import avro.schema

    text = schema if isinstance(schema, str) else json.dumps(schema)
    return avro.schema.parse(text)


def field_path(schema: Any, pointer: str) -> str:
    """The field names a checker location (a JSON pointer into the reader) runs through.

    >>> field_path({"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]},
    ...            "/fields/0/type")
    'a'
    """
    names: list[str] = []
    node = schema
    parts = [p for p in pointer.split("/") if p]
    for i, part in enumerate(parts):
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            break
        if i > 0 and parts[i - 1] == "fields" and isinstance(node, dict) and "name" in node:
            names.append(str(node["name"]))
    return ".".join(names) or "(record)"


def _can_read(reader: Any, writer: Any, label: str) -> list[str]:
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

    result = ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    where = ", ".join(
        sorted({field_path(reader.to_json(), loc) for loc in result.locations if loc != "/"})
    )
    return [f"{label}: {m} (field {where or '(record)'})" for m in sorted(result.messages)]


def check(
    new: Mapping[str, Any] | str,
    history: Sequence[Mapping[str, Any] | str],
    mode: str = DEFAULT_MODE,
) -> Verdict:
    """Whether ``new`` may follow ``history`` (oldest first) under ``mode``.

    >>> v1 = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]}
    >>> v2 = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}
    >>> check(v2, [v1]).compatible, check(v1, [v2]).compatible
    (True, False)
    """
    wanted = mode.upper()
    if wanted not in MODES:
        raise ConfigError(
            f"{mode!r} is not a compatibility mode",
            path="compatibility",
            hint=f"use one of {', '.join(MODES)}",
        )
    if wanted == "NONE" or not history:
        return Verdict(True)
    parsed_new = _parse(new)
    earlier = [_parse(s) for s in history]
    against = earlier if wanted.endswith("_TRANSITIVE") else earlier[-1:]
    backward = wanted.startswith(("BACKWARD", "FULL"))
    forward = wanted.startswith(("FORWARD", "FULL"))
    problems: list[str] = []
    first = len(earlier) - len(against) + 1
    for number, old in enumerate(against, first):
        if backward:
            problems += _can_read(parsed_new, old, f"cannot read version {number}'s data")
        if forward:
            problems += _can_read(old, parsed_new, f"version {number} cannot read the new data")
    return Verdict(not problems, tuple(problems))
