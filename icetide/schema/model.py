"""The one typed schema model: columns with stable ids, read from a schema file.

A schema file is the source of truth for a table's columns. Column ids never change and
are never reused, so a rename keeps its id and evolution can be computed by id.

Example schema file (``schemas/customers.yaml``)::

    table: customers
    version: 1
    primary_key: [id]
    columns:
      - {id: 1, name: id, type: long, nullable: false}
      - {id: 2, name: email, type: string}
      - {id: 3, name: balance, type: "decimal(12,2)"}
      - {id: 4, name: updated_at, type: timestamp, logical: io.debezium.time.MicroTimestamp}

``logical`` optionally names the Debezium/Kafka Connect logical type the source uses for
the column; it is only needed to decode events that arrive without an inline schema.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from icetide.errors import SchemaError

PRIMITIVES = (
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "string",
    "binary",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "uuid",
    "json",
)
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


@dataclass(frozen=True)
class ColumnType:
    """A column type: one of :data:`PRIMITIVES` or ``decimal(precision, scale)``.

    ``timestamp`` is a wall-clock time without zone (MySQL DATETIME, Debezium
    ``Timestamp``); ``timestamptz`` is an instant (``ZonedTimestamp``, PostgreSQL
    ``timestamptz``). ``time`` is a time of day, ``uuid`` and ``json`` are text.
    """

    name: str
    precision: int = 0
    scale: int = 0

    def __str__(self) -> str:
        return f"decimal({self.precision},{self.scale})" if self.name == "decimal" else self.name


def parse_type(text: str) -> ColumnType:
    """Parse a type name from a schema file.

    >>> parse_type("decimal(10, 2)")
    ColumnType(name='decimal', precision=10, scale=2)
    >>> parse_type("long").name
    'long'
    """
    cleaned = text.strip().lower()
    match = _DECIMAL.match(cleaned)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        if not 1 <= precision <= 38 or scale > precision:
            raise SchemaError(
                f"type {text!r}: precision must be 1..38 and scale <= precision",
                hint="use e.g. decimal(12,2)",
            )
        return ColumnType("decimal", precision, scale)
    if cleaned in PRIMITIVES:
        return ColumnType(cleaned)
    raise SchemaError(
        f"unknown column type {text!r}",
        hint=f"use one of {', '.join(PRIMITIVES)} or decimal(p,s)",
    )


@dataclass(frozen=True)
class Column:
    """One column; ``id`` is stable for the life of the table."""

    id: int
    name: str
    type: ColumnType
    nullable: bool = True
    logical: str | None = None
    doc: str | None = None


@dataclass(frozen=True)
class TableSchema:
    """The columns of one table, in order, and its primary key."""

    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    version: int = 1
    by_name: dict[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {c.name: c for c in self.columns})
        self._validate()

    def _validate(self) -> None:
        ids = [c.id for c in self.columns]
        if len(set(ids)) != len(ids):
            raise SchemaError(f"table {self.table}: column ids must be unique, got {ids}")
        if len(self.by_name) != len(self.columns):
            raise SchemaError(f"table {self.table}: column names must be unique")
        if not self.primary_key:
            raise SchemaError(
                f"table {self.table}: no primary key",
                hint="list the key columns under primary_key: [..]",
            )
        for key in self.primary_key:
            if key not in self.by_name:
                raise SchemaError(
                    f"table {self.table}: primary key column {key!r} is not a column",
                    hint=f"columns are {', '.join(self.by_name)}",
                )
        reserved = [c.name for c in self.columns if c.name.startswith("_icetide")]
        if reserved:
            raise SchemaError(f"table {self.table}: column names {reserved} are reserved")

    @property
    def key_columns(self) -> tuple[Column, ...]:
        """The primary-key columns, in key order."""
        return tuple(self.by_name[k] for k in self.primary_key)

    @property
    def value_columns(self) -> tuple[Column, ...]:
        """The columns that are not part of the primary key."""
        return tuple(c for c in self.columns if c.name not in self.primary_key)

    def to_dict(self) -> dict[str, Any]:
        """The schema-file form of this schema (what :func:`load_schema_file` reads)."""
        columns = []
        for c in self.columns:
            entry: dict[str, Any] = {"id": c.id, "name": c.name, "type": str(c.type)}
            if not c.nullable:
                entry["nullable"] = False
            if c.logical:
                entry["logical"] = c.logical
            if c.doc:
                entry["doc"] = c.doc
            columns.append(entry)
        return {
            "table": self.table,
            "version": self.version,
            "primary_key": list(self.primary_key),
            "columns": columns,
        }


def schema_from_dict(data: Any, origin: str = "schema") -> TableSchema:
    """Build a :class:`TableSchema` from parsed YAML, naming ``origin`` in errors."""
    if not isinstance(data, dict):
        raise SchemaError(f"{origin}: expected a mapping with table, primary_key, columns")
    unknown = set(data) - {"table", "version", "primary_key", "columns"}
    if unknown:
        raise SchemaError(f"{origin}: unknown keys {sorted(unknown)}")
    columns = []
    for i, raw in enumerate(data.get("columns") or []):
        where = f"{origin}: columns[{i}]"
        if not isinstance(raw, dict) or not {"id", "name", "type"} <= set(raw):
            raise SchemaError(f"{where}: each column needs id, name and type")
        extra = set(raw) - {"id", "name", "type", "nullable", "logical", "doc"}
        if extra:
            raise SchemaError(f"{where}: unknown keys {sorted(extra)}")
        try:
            ctype = parse_type(str(raw["type"]))
        except SchemaError as exc:
            raise SchemaError(f"{where}: {exc.message}", hint=exc.hint) from None
        columns.append(
            Column(
                id=int(raw["id"]),
                name=str(raw["name"]),
                type=ctype,
                nullable=bool(raw.get("nullable", True)),
                logical=raw.get("logical"),
                doc=raw.get("doc"),
            )
        )
    if not columns:
        raise SchemaError(f"{origin}: no columns")
    return TableSchema(
        table=str(data.get("table", "")),
        columns=tuple(columns),
        primary_key=tuple(data.get("primary_key") or ()),
        version=int(data.get("version", 1)),
    )


def load_schema_file(path: Path) -> TableSchema:
    """Read a schema file; errors name the file."""
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise SchemaError(
            f"schema file {path} not found",
            hint="write it by hand or with `icetide schema infer`",
        ) from None
    except yaml.YAMLError as exc:
        raise SchemaError(f"schema file {path}: invalid YAML: {exc}") from None
    return schema_from_dict(data, origin=str(path))


def dump_schema_file(schema: TableSchema, path: Path) -> None:
    """Write ``schema`` as a schema file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(schema.to_dict(), sort_keys=False))
