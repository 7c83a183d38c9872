"""Compare a base table with an expected state, value by value, in plain Python."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, time
from typing import Any

from icetide.schema.model import TableSchema
from icetide.schema.types import IcetideType

Key = tuple[Any, ...]


def normalize(value: Any, ctype: IcetideType) -> Any:
    """One comparable form per type: instants as naive UTC, times as ISO text.

    PySpark hands back ``TIMESTAMP`` values as naive local times; ``astimezone`` reads a
    naive value as local, so both sides end up in UTC whatever the machine's zone.
    """
    if value is None:
        return None
    if ctype.name == "timestamptz" and isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None)
    if ctype.name == "time" and isinstance(value, time):
        return value.isoformat()
    if ctype.name == "binary" and isinstance(value, bytearray | memoryview):
        return bytes(value)
    return value


@dataclass
class Comparison:
    """The differences between an expected and an actual table."""

    table: str
    expected_rows: int
    actual_rows: int
    missing: list[Key] = field(default_factory=list)
    extra: list[Key] = field(default_factory=list)
    differing: list[tuple[Key, str, Any, Any]] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        """True when both sides hold exactly the same rows."""
        return not (self.missing or self.extra or self.differing)

    def render(self) -> str:
        """A one-line verdict plus the first differences."""
        verdict = "MATCH" if self.matches else "DIFFERENT"
        line = (
            f"{self.table:<16} expected {self.expected_rows:>7,} rows, base {self.actual_rows:>7,}"
            f" rows: {verdict}"
        )
        details = [f"  missing key {k}" for k in self.missing[:5]]
        details += [f"  unexpected key {k}" for k in self.extra[:5]]
        details += [
            f"  key {k} column {col}: expected {exp!r}, base has {act!r}"
            for k, col, exp, act in self.differing[:5]
        ]
        return "\n".join([line, *details])


def compare_rows(
    schema: TableSchema, expected: dict[Key, dict[str, Any]], actual: list[dict[str, Any]]
) -> Comparison:
    """Compare ``actual`` rows (dicts with every column) against ``expected`` by key."""
    keyed = {tuple(row[k] for k in schema.primary_key): row for row in actual}
    result = Comparison(schema.table, len(expected), len(actual))
    if len(keyed) != len(actual):
        result.extra.append(("duplicate keys in base",))
    result.missing = sorted(k for k in expected if k not in keyed)
    result.extra += sorted(k for k in keyed if k not in expected)
    for key, want in expected.items():
        got = keyed.get(key)
        if got is None:
            continue
        for col in schema.columns:
            a = normalize(want.get(col.name), col.type)
            b = normalize(got.get(col.name), col.type)
            if a != b:
                result.differing.append((key, col.name, a, b))
    return result
