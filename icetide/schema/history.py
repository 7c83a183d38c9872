"""Every schema a table has had, in order, and the rules that keep ids stable across them.

A :class:`SchemaHistory` holds one table's schema versions (``TableSchema.version`` is
the schema id). Each step from one version to the next is checked when the history is
built (and so when it is loaded): the same table, the version number one higher, no
``last_column_id`` going down, no id reused (an id the previous version did not have
must be above its ``last_column_id``: an id is never given out twice, even after its
column left) and the primary key (by id) unchanged unless that version is listed in
``key_changes``, which :meth:`SchemaHistory.add` does only when asked with
``key_change=True``.

The history is one YAML file::

    table: customers
    key_changes: []        # versions whose primary key changed on purpose
    versions:
      - {version: 1, primary_key: [id], columns: [...]}   # a schema file without table:
      - {version: 2, primary_key: [id], columns: [...]}

Each entry is exactly a schema file's content (:func:`~icetide.schema.file.schema_to_dict`)
without the ``table:`` key, which is said once at the top.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

from icetide.errors import SchemaError
from icetide.schema.file import schema_from_dict, schema_to_dict
from icetide.schema.model import TableSchema
from icetide.schema.visitor import index_by_id, index_by_name


@dataclass(frozen=True)
class SchemaHistory:
    """One table's schema versions, oldest first, each step checked (see module doc).

    >>> from icetide.schema.model import Column
    >>> from icetide.schema.types import LongType, StringType
    >>> v1 = TableSchema("t", (Column(1, "id", LongType(), False),), ("id",))
    >>> v2 = v1.with_columns((*v1.columns, Column(2, "email", StringType())), version=2)
    >>> history = SchemaHistory("t", (v1,)).add(v2)
    >>> history.current.version, [s.version for s in history.versions]
    (2, [1, 2])
    """

    table: str
    versions: tuple[TableSchema, ...]
    key_changes: frozenset[int] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        object.__setattr__(self, "versions", tuple(self.versions))
        object.__setattr__(self, "key_changes", frozenset(self.key_changes))
        if not self.versions:
            raise SchemaError(f"table {self.table}: a schema history needs a first version")
        first = self.versions[0]
        if first.table != self.table:
            raise SchemaError(_other_table(self.table, first))
        for before, after in zip(self.versions, self.versions[1:], strict=False):
            problem = _step_problem(before, after, after.version in self.key_changes)
            if problem:
                message, hint = problem
                raise SchemaError(
                    f"table {self.table}: version {after.version}: {message}", hint=hint
                )
        known = {s.version for s in self.versions}
        stray = sorted(self.key_changes - known)
        if stray:
            raise SchemaError(
                f"table {self.table}: key_changes names version(s) "
                f"{', '.join(map(str, stray))}, which the history does not have"
            )

    @property
    def current(self) -> TableSchema:
        """The newest version."""
        return self.versions[-1]

    def get(self, version: int) -> TableSchema:
        """The schema with ``version``."""
        for schema in self.versions:
            if schema.version == version:
                return schema
        raise SchemaError(
            f"table {self.table}: no schema version {version}; the history has versions "
            f"{self.versions[0].version} to {self.current.version}"
        )

    def add(self, schema: TableSchema, *, key_change: bool = False) -> SchemaHistory:
        """This history with ``schema`` as its newest version.

        ``key_change=True`` says the primary key changes on purpose; without it a
        different key (by id: a renamed key column is the same key) is refused.
        """
        changes = self.key_changes | {schema.version} if key_change else self.key_changes
        return SchemaHistory(self.table, (*self.versions, schema), changes)

    def to_dict(self) -> dict[str, Any]:
        """The history file's content (see module doc)."""
        versions = []
        for schema in self.versions:
            entry = schema_to_dict(schema)
            del entry["table"]
            versions.append(entry)
        return {"table": self.table, "key_changes": sorted(self.key_changes), "versions": versions}

    @classmethod
    def from_dict(cls, data: Any, origin: str = "schema history") -> SchemaHistory:
        """A history from :meth:`to_dict`'s form; errors name ``origin`` and the entry."""
        if not isinstance(data, dict) or set(data) - {"table", "key_changes", "versions"}:
            raise SchemaError(
                f"{origin}: must be a mapping with table, key_changes and versions",
                hint="write it with SchemaHistory.to_yaml",
            )
        table = data.get("table")
        entries = data.get("versions")
        changes = data.get("key_changes") or []
        if not isinstance(table, str) or not table:
            raise SchemaError(f"{origin}: table: must be the table's name")
        if not isinstance(entries, list) or not entries:
            raise SchemaError(f"{origin}: versions: must be a list of at least one schema")
        if not isinstance(changes, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in changes
        ):
            raise SchemaError(f"{origin}: key_changes: must be a list of version numbers")
        versions = []
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or "table" in entry:
                raise SchemaError(
                    f"{origin}: versions[{i}]: must be a schema file's content without "
                    "table: (the table is named once, at the top)"
                )
            versions.append(schema_from_dict({"table": table, **entry}, f"{origin}: versions[{i}]"))
        try:
            return cls(table, tuple(versions), frozenset(changes))
        except SchemaError as exc:
            raise SchemaError(f"{origin}: {exc.message}", hint=exc.hint) from None

    def to_yaml(self) -> str:
        """The history file's text (see module doc)."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_yaml(cls, text: str, origin: str = "schema history") -> SchemaHistory:
        """Read :meth:`to_yaml`'s text; every step is checked again, errors name ``origin``."""
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise SchemaError(f"cannot read schema history {origin}: {exc}") from None
        return cls.from_dict(data, origin)


def _other_table(table: str, schema: TableSchema) -> str:
    return f"the history of table {table} cannot hold a schema of table {schema.table}"


def _step_problem(
    before: TableSchema, after: TableSchema, key_change: bool
) -> tuple[str, str | None] | None:
    """What is wrong with ``after`` following ``before``, and a hint (``None`` when
    nothing is)."""
    if after.table != before.table:
        return _other_table(before.table, after), None
    if after.version != before.version + 1:
        return (
            f"follows version {before.version}; each version is the previous one plus 1 "
            f"(expected {before.version + 1})"
        ), None
    if after.last_column_id < before.last_column_id:
        return (
            f"last_column_id goes down from {before.last_column_id} to "
            f"{after.last_column_id}; it is the highest id the table ever used"
        ), None
    reused = sorted(i for i in after.field_ids() - before.field_ids() if i <= before.last_column_id)
    if reused:
        return (
            f"reuses an id: {_fields(after, reused)} not in version {before.version}, but "
            f"ids up to its last_column_id {before.last_column_id} were given out already"
        ), f"give a new column or nested field an id above {before.last_column_id}"
    if after.key_ids != before.key_ids and not key_change:
        return (
            f"the primary key changes from {_fields(before, before.key_ids)} to "
            f"{_fields(after, after.key_ids)}"
        ), "if the key is meant to change, add the version with key_change=True"
    return None


def _fields(schema: TableSchema, ids: Iterable[int]) -> str:
    """``id 3 (address.zip), id 4 (tags.element)``: ids with their full names."""
    names = {i: n for n, i in index_by_name(schema).items()}
    by_id = index_by_id(schema)
    return ", ".join(f"id {i} ({names.get(i, by_id[i].name)})" for i in ids)
