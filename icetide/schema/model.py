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

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

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
    close = difflib.get_close_matches(cleaned, [*PRIMITIVES, "decimal(p,s)"], n=1)
    raise SchemaError(
        f"unknown column type {text!r}" + (f"; did you mean {close[0]!r}?" if close else ""),
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


RESERVED_PREFIX = "_icetide"
"""Column names starting with this are the pipeline's own (positions, timestamps)."""

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class TableSchema:
    """The columns of one table, in order, and its primary key.

    Construction checks what every stage relies on (unique ids and names, a key made of
    existing, non-null columns), so a schema built in code is as sound as one read from
    a file; :class:`SchemaFile` reports the same problems with their YAML locations.
    """

    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    version: int = 1
    by_name: dict[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {c.name: c for c in self.columns})
        problems = schema_problems(self.columns, self.primary_key)
        if problems:
            loc, message = problems[0]
            raise SchemaError(
                f"table {self.table}: {_loc_text(loc)}: {message}",
                hint=f"columns are {', '.join(self.by_name)}" if "primary_key" in loc else None,
            )

    @property
    def key_columns(self) -> tuple[Column, ...]:
        """The primary-key columns, in key order."""
        return tuple(self.by_name[k] for k in self.primary_key)

    @property
    def value_columns(self) -> tuple[Column, ...]:
        """The columns that are not part of the primary key."""
        return tuple(c for c in self.columns if c.name not in self.primary_key)

    def to_dict(self) -> dict[str, Any]:
        """The schema-file form of this schema (what :func:`schema_from_dict` reads)."""
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


def schema_problems(
    columns: tuple[Column, ...], primary_key: tuple[str, ...]
) -> list[tuple[Loc, str]]:
    """Everything wrong with a table's columns and key, each at its schema-file location.

    Names are compared case-insensitively because Spark resolves them that way: ``Email``
    and ``email`` would be one column there.

    >>> long, text = ColumnType("long"), ColumnType("string")
    >>> cols = (Column(1, "id", long, nullable=False), Column(1, "ID", text))
    >>> for loc, message in schema_problems(cols, ("idd",)):
    ...     print(f"{_loc_text(loc)}: {message}")
    columns[1].id: duplicate id 1 (as columns[0]); ids are unique and never reused
    columns[1].name: duplicate column name (as columns[0]; Spark ignores case)
    primary_key[0]: no column named 'idd'; did you mean 'id'?
    """
    problems: list[tuple[Loc, str]] = []
    ids: dict[int, int] = {}
    names: dict[str, int] = {}
    for i, column in enumerate(columns):
        if column.id in ids:
            problems.append(
                (
                    ("columns", i, "id"),
                    f"duplicate id {column.id} (as columns[{ids[column.id]}]); ids are unique "
                    "and never reused",
                )
            )
        ids.setdefault(column.id, i)
        if column.id < 1:
            problems.append((("columns", i, "id"), f"must be at least 1 (got {column.id})"))
        if not column.name:
            problems.append((("columns", i, "name"), "must not be empty"))
            continue
        folded = column.name.casefold()
        if folded in names:
            problems.append(
                (
                    ("columns", i, "name"),
                    f"duplicate column name (as columns[{names[folded]}]; Spark ignores case)",
                )
            )
        names.setdefault(folded, i)
        if folded.startswith(RESERVED_PREFIX):
            problems.append(
                (("columns", i, "name"), f"names starting with {RESERVED_PREFIX} are reserved")
            )
    if not primary_key:
        problems.append((("primary_key",), "needs at least one column"))
    exact = {c.name: i for i, c in enumerate(columns)}
    seen: set[str] = set()
    for k, key in enumerate(primary_key):
        if key in seen:
            problems.append((("primary_key", k), f"{key!r} is listed twice"))
        seen.add(key)
        if key not in exact:
            problems.append((("primary_key", k), _no_such_column(key, columns)))
        elif columns[exact[key]].nullable:
            problems.append(
                (
                    ("columns", exact[key], "nullable"),
                    f"primary-key column {key!r} cannot be nullable",
                )
            )
    return problems


def _no_such_column(key: str, columns: tuple[Column, ...]) -> str:
    names = [c.name for c in columns]
    same = [n for n in names if n.casefold() == key.casefold()]
    close = same or difflib.get_close_matches(key, names, n=1)
    return f"no column named {key!r}" + (f"; did you mean {close[0]!r}?" if close else "")


def _loc_text(loc: Loc) -> str:
    """``("columns", 1, "id")`` → ``columns[1].id``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# -- the schema-file format --------------------------------------------------------------


class SchemaFileProblems(ValueError):
    """Cross-field problems of a schema file, each with its YAML location.

    A ``ValueError`` so pydantic reports it as a validation error; the config loader
    unpacks ``problems`` into one line each, with the line number.
    """

    def __init__(self, problems: list[tuple[Loc, str]]) -> None:
        super().__init__("; ".join(f"{_loc_text(loc)}: {msg}" for loc, msg in problems))
        self.problems = problems


def _type(value: Any) -> ColumnType:
    if isinstance(value, ColumnType):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a type name such as long, string or decimal(12,2)")
    try:
        return parse_type(value)
    except SchemaError as exc:
        raise ValueError(exc.message) from None


def _names_list(value: Any) -> Any:
    # pydantic's own message ("must be a list") does not show how to write one.
    if isinstance(value, str):
        raise ValueError(f"must be a list of column names, e.g. [{value}]")
    return value


def _at_least_one(values: tuple[Any, ...]) -> tuple[Any, ...]:
    if not values:
        raise ValueError("needs at least one column")
    return values


Name = Annotated[StrictStr, Field(min_length=1)]


class _Entry(BaseModel):
    """Unknown keys are errors (with a did-you-mean); ``key:`` without value means the
    default."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        optional = {n for n, f in cls.model_fields.items() if not f.is_required()}
        return {k: v for k, v in data.items() if v is not None or k not in optional}


class ColumnEntry(_Entry):
    """One entry of ``columns:``.

    ``nullable`` left out means nullable, except for a primary-key column, which is never
    null; booleans must be written as YAML booleans, so ``"false"`` is an error instead of
    a quietly nullable column.
    """

    id: Annotated[StrictInt, Field(ge=1)]
    name: Name
    type: Annotated[ColumnType, BeforeValidator(_type)]
    nullable: StrictBool | None = None
    logical: Name | None = None
    doc: StrictStr | None = None


class SchemaFile(_Entry):
    """A schema file as written: what :func:`schema_from_dict` and the config loader
    validate before building a :class:`TableSchema`."""

    table: StrictStr = ""
    version: StrictInt = Field(1, ge=1)
    primary_key: Annotated[tuple[Name, ...], BeforeValidator(_names_list)]
    columns: Annotated[tuple[ColumnEntry, ...], AfterValidator(_at_least_one)]

    @model_validator(mode="after")
    def _check(self) -> SchemaFile:
        # A key column left without nullable: is not null, so only an explicit
        # nullable: true on one is reported.
        problems = schema_problems(self._built(), self.primary_key)
        if problems:
            raise SchemaFileProblems(problems)
        return self

    def _built(self) -> tuple[Column, ...]:
        key = set(self.primary_key)
        return tuple(
            Column(
                id=e.id,
                name=e.name,
                type=e.type,
                nullable=(e.name not in key) if e.nullable is None else e.nullable,
                logical=e.logical,
                doc=e.doc,
            )
            for e in self.columns
        )

    def to_schema(self) -> TableSchema:
        """The validated file as a :class:`TableSchema`."""
        return TableSchema(self.table, self._built(), self.primary_key, self.version)


def schema_from_dict(data: Any, origin: str = "schema") -> TableSchema:
    """Build a :class:`TableSchema` from parsed YAML, naming ``origin`` in errors.

    For schemas written in code and tests; files go through
    :func:`icetide.config.loader.load_schema_file`, whose errors also carry line numbers.
    """
    try:
        return SchemaFile.model_validate(data).to_schema()
    except ValidationError as exc:
        rows = []
        for error in exc.errors():
            cause = error.get("ctx", {}).get("error")
            if isinstance(cause, SchemaFileProblems):
                rows += [f"{_loc_text(loc)}: {msg}" for loc, msg in cause.problems]
            else:
                message = str(error["msg"]).removeprefix("Value error, ")
                rows.append(f"{_loc_text(tuple(error['loc'])) or '(top level)'}: {message}")
        raise SchemaError(f"{origin}: " + "; ".join(rows)) from None


def dump_schema_file(schema: TableSchema, path: Path) -> None:
    """Write ``schema`` as a schema file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(schema.to_dict(), sort_keys=False))
