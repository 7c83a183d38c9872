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
from typing import Any, Literal, get_args

from icetide.errors import ConfigError

CompatibilityMode = Literal[
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
]
"""A subject's compatibility mode (the table above); ``registry.compatibility`` in the
config takes one."""
MODES: tuple[CompatibilityMode, ...] = get_args(CompatibilityMode)
DEFAULT_MODE: CompatibilityMode = "BACKWARD_TRANSITIVE"


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


def _can_read(reader: Any, writer: Any, label: str, path: str = "") -> list[str]:
    """What keeps ``reader`` from reading ``writer``'s data, one problem per column.

    The checker's own report stops at the first union or record it cannot match (its
    messages say "reader union lacking writer type: RECORD" at location ``/``), which
    names neither the column nor the rule; so records, and the ``["null", record]``
    unions of the envelope's ``before``/``after``, are compared field by field here and
    the checker is asked about each field's type (``after.note`` is column ``note``)."""
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

    result = ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    mine, its = _record_branch(reader), _record_branch(writer)
    if mine is not None and its is not None and mine.fullname == its.fullname:
        problems: list[str] = []
        theirs = {f.name: f for f in its.fields}
        for field in mine.fields:
            column = f"{path}.{field.name}" if path else field.name
            other = theirs.get(field.name)
            if other is None:
                if not field.has_default:
                    problems.append(
                        f"{label}: column {_column(column)} has no default, and that data "
                        "has no value for it (a column added without one, or its default "
                        "removed)"
                    )
                continue
            problems += _can_read(field.type, other.type, label, column)
        if problems:
            return problems
    where = _column(path) if path else "(record)"
    return [f"{label}: {m} (column {where})" for m in sorted(result.messages)]


def _column(path: str) -> str:
    """A field path of the envelope as the column it is (``after.note`` → ``note``)."""
    head, _, rest = path.partition(".")
    return rest if head in ("before", "after") and rest else path


def _record_branch(schema: Any) -> Any:
    """The record a schema is, or the one record of a union (``["null", record]``)."""
    import avro.schema

    if isinstance(schema, avro.schema.RecordSchema):
        return schema
    if isinstance(schema, avro.schema.UnionSchema):
        records = [s for s in schema.schemas if isinstance(s, avro.schema.RecordSchema)]
        others = [s for s in schema.schemas if s.type != "null"]
        return records[0] if len(records) == 1 and len(others) == 1 else None
    return None


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
            label = f"under {wanted} it must read version {number}'s data"
            problems += _can_read(parsed_new, old, label)
        if forward:
            label = f"under {wanted} version {number} must read its data"
            problems += _can_read(old, parsed_new, label)
    return Verdict(not problems, tuple(dict.fromkeys(problems)))
