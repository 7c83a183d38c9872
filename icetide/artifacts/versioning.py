"""Package versions from a schema history: an additive change is a minor version,
anything else a major one.

"Additive" is what code written against the older version survives: new fields (at any
depth) and changed docs. A rename, a drop, a widening (``int`` → ``long``), an enum that
gained or lost symbols (old code's ``Enum`` cannot hold a new one), a nullability change
or a new primary key is major. The comparison is :func:`icetide.schema.diff.diff`, by
field id, so a rename is never mistaken for a drop and an add.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from icetide.schema.diff import diff
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, LongType

Bump = Literal["minor", "major"]
ADDITIVE = frozenset({"add", "doc"})

_STAND_IN_ID = 2**31 - 1


def _as_table(columns: tuple[Column, ...]) -> TableSchema:
    """Columns as a table schema for :func:`diff` (views have no key: both sides get the
    same stand-in key column, which diff then never reports)."""
    key = Column(_STAND_IN_ID, "\u2063key", LongType(), nullable=False)
    return TableSchema("view", (*columns, key), key_ids=(_STAND_IN_ID,))


def bump(old: tuple[Column, ...], new: tuple[Column, ...]) -> Bump:
    """How much a package version moves from ``old`` columns to ``new`` ones.

    >>> from icetide.schema.types import StringType
    >>> a = (Column(1, "id", LongType(), False),)
    >>> bump(a, (*a, Column(2, "email", StringType())))
    'minor'
    >>> bump(a, (Column(1, "key", LongType(), False),))
    'major'
    """
    changes = diff(_as_table(old), _as_table(new))
    return "minor" if all(c.kind in ADDITIVE for c in changes) else "major"


def table_bump(old: TableSchema, new: TableSchema) -> Bump:
    """:func:`bump` for two table versions, where a new primary key is major too."""
    if old.key_ids != new.key_ids:
        return "major"
    return bump(old.columns, new.columns)


def versions(steps: Sequence[Bump]) -> list[tuple[int, int]]:
    """``(major, minor)`` of each version: the first is 1.0, then one per step.

    >>> versions(["minor", "major", "minor"])
    [(1, 0), (1, 1), (2, 0), (2, 1)]
    """
    out = [(1, 0)]
    for step in steps:
        major, minor = out[-1]
        out.append((major, minor + 1) if step == "minor" else (major + 1, 0))
    return out


def column_history_versions(history: Sequence[tuple[Column, ...]]) -> list[tuple[int, int]]:
    """``(major, minor)`` for each entry of a list of column versions (views)."""
    return versions([bump(a, b) for a, b in zip(history, history[1:], strict=False)])


def table_history_versions(history: Sequence[TableSchema]) -> list[tuple[int, int]]:
    """``(major, minor)`` for each version of a table's schema history."""
    return versions([table_bump(a, b) for a, b in zip(history, history[1:], strict=False)])
