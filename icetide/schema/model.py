"""The one typed schema model: columns and nested fields with stable ids, the key by id.

Modelled on PyIceberg's ``Schema``/``NestedField``: a column id never changes and is
never reused, so a rename keeps its id and evolution is computed by id. The primary key
is a tuple of column *ids* (``key_ids``), so renaming a key column keeps the key, and
``last_column_id`` is the highest id the table ever used: a new column, nested field,
list element or map key/value gets an id above it.

Source-format hints (the Debezium logical type a column's values arrive in, needed only
for events without an inline schema) are not part of a column: they are per-table sink
settings, :class:`SinkSettings`. The schema-file format lives in
:mod:`icetide.schema.file`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from icetide.errors import SchemaError
from icetide.schema.sink_functions import Conversion
from icetide.schema.types import Column, IcetideType, ListType, MapType, StructType


@dataclass(frozen=True)
class SinkSettings:
    """How one table's values arrive and how they are stored, beside (not inside) its
    columns; every mapping is keyed by (top-level) column id, so a source rename keeps it.

    ``logical`` maps a column id to the Debezium/Kafka Connect logical type name the
    source uses for it (``io.debezium.time.MicroTimestamp``); it is only needed to decode
    events that arrive without an inline schema.

    The rest is the sink config (docs/sink-config.md), from which the table-contract
    builder generates the Iceberg tables, the ledger projection and the merge:
    ``names`` the Iceberg name of a column whose name differs from the source's,
    ``types`` a type override (a widening :func:`~icetide.schema.promote.promote`
    allows), ``conversions`` a function of :mod:`icetide.schema.sink_functions`.
    """

    logical: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}))
    names: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}))
    types: Mapping[int, IcetideType] = field(default_factory=lambda: MappingProxyType({}))
    conversions: Mapping[int, Conversion] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        for name in _SINK_MAPPINGS:
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def _items(self) -> tuple[tuple[tuple[int, Any], ...], ...]:
        return tuple(tuple(sorted(getattr(self, n).items())) for n in _SINK_MAPPINGS)

    def __hash__(self) -> int:
        return hash(self._items())

    def __reduce__(self) -> tuple[Any, ...]:
        # A mapping proxy does not pickle; Spark ships schemas to Python workers.
        return (SinkSettings, tuple(dict(getattr(self, n)) for n in _SINK_MAPPINGS))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SinkSettings) and self._items() == other._items()

    @property
    def maps(self) -> bool:
        """True when the sink renames, retypes or converts any column (the ledger then
        converts each projected batch; without it the source values are stored as is)."""
        return bool(self.names or self.types or self.conversions)

    def configured(self) -> frozenset[int]:
        """The ids of the columns the sink config renames, retypes or converts."""
        return frozenset(self.names) | frozenset(self.types) | frozenset(self.conversions)


_SINK_MAPPINGS = ("logical", "names", "types", "conversions")


RESERVED_PREFIX = "_icetide"
"""Column names starting with this are the pipeline's own (positions, timestamps)."""

Loc = tuple[str | int, ...]


class TableSchema:
    """The columns of one table, in order, its primary key by id, and its version.

    ``TableSchema("t", columns, ("id",))`` names the key by column names, the way a schema
    file writes it; ``key_ids=`` gives it by id. Construction checks what every stage
    relies on (unique ids and names, nested too; a key of existing, non-null, top-level
    columns; no id above ``last_column_id``), so a schema built in code is as sound as
    one read from a file.

    >>> from icetide.schema.types import LongType, StringType
    >>> key, value = Column(1, "id", LongType(), False), Column(2, "v", StringType())
    >>> s = TableSchema("t", (key, value), ("id",))
    >>> renamed = s.with_columns((Column(1, "key", LongType(), False), s.columns[1]))
    >>> renamed.primary_key, renamed.key_ids, renamed.last_column_id
    (('key',), (1,), 2)
    """

    __slots__ = (
        "table",
        "columns",
        "key_ids",
        "version",
        "last_column_id",
        "sink",
        "by_name",
        "_by_id",
    )
    table: str
    columns: tuple[Column, ...]
    key_ids: tuple[int, ...]
    version: int
    last_column_id: int
    sink: SinkSettings
    by_name: Mapping[str, Column]
    _by_id: Mapping[int, Column]

    def __init__(
        self,
        table: str,
        columns: Sequence[Column],
        primary_key: Sequence[str] = (),
        version: int = 1,
        *,
        key_ids: Sequence[int] | None = None,
        last_column_id: int | None = None,
        sink: SinkSettings | None = None,
    ) -> None:
        columns = tuple(columns)
        by_name = {c.name: c for c in columns}
        if key_ids is None:
            names = tuple(primary_key)
            problems = schema_problems(columns, names)
            key_ids = tuple(by_name[n].id for n in names if n in by_name)
        else:
            key_ids = tuple(key_ids)
            by_id = {c.id: c for c in columns}
            missing = [i for i in key_ids if i not in by_id]
            names = tuple(by_id[i].name for i in key_ids if i in by_id)
            problems = [(("primary_key",), f"no column has id {i}") for i in missing]
            problems += schema_problems(columns, names)
        ids = list(column_ids(columns))
        highest = max(ids, default=0)
        last = highest if last_column_id is None else last_column_id
        if last < highest:
            problems.append(
                (
                    ("last_column_id",),
                    f"is {last} but id {highest} is in use; ids above last_column_id are "
                    "for new columns only",
                )
            )
        if problems:
            loc, message = problems[0]
            raise SchemaError(
                f"table {table}: {loc_text(loc)}: {message}",
                hint=f"columns are {', '.join(by_name)}" if "primary_key" in loc else None,
            )
        for name, value in (
            ("table", table),
            ("columns", columns),
            ("key_ids", key_ids),
            ("version", version),
            ("last_column_id", last),
            ("sink", sink or SinkSettings()),
            ("by_name", MappingProxyType(by_name)),
            ("_by_id", MappingProxyType({f.id: f for f in all_fields(columns)})),
        ):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"TableSchema is frozen; cannot set {name}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt through the constructor (Spark ships schemas to Python workers).
        return (
            _rebuild,
            (self.table, self.columns, self.key_ids, self.version, self.last_column_id, self.sink),
        )

    def _key(self) -> tuple[Any, ...]:
        return (
            self.table,
            self.columns,
            self.key_ids,
            self.version,
            self.last_column_id,
            self.sink,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TableSchema) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"TableSchema(table={self.table!r}, columns={self.columns!r}, "
            f"key_ids={self.key_ids!r}, version={self.version}, "
            f"last_column_id={self.last_column_id})"
        )

    @property
    def primary_key(self) -> tuple[str, ...]:
        """The primary-key column names, in key order (derived from :attr:`key_ids`)."""
        return tuple(self._by_id[i].name for i in self.key_ids)

    @property
    def key_columns(self) -> tuple[Column, ...]:
        """The primary-key columns, in key order."""
        return tuple(self._by_id[i] for i in self.key_ids)

    @property
    def value_columns(self) -> tuple[Column, ...]:
        """The columns that are not part of the primary key."""
        return tuple(c for c in self.columns if c.id not in self.key_ids)

    def find(self, field_id: int) -> Column:
        """The column or nested field with ``field_id`` (list elements and map keys and
        values are reached through their parent's type)."""
        try:
            return self._by_id[field_id]
        except KeyError:
            raise SchemaError(f"table {self.table}: no field has id {field_id}") from None

    def field_ids(self) -> frozenset[int]:
        """Every id in use: columns, nested fields, list elements, map keys and values."""
        return frozenset(column_ids(self.columns))

    def renamed(self, table: str) -> TableSchema:
        """The same schema for a table called ``table``."""
        return TableSchema(
            table,
            self.columns,
            key_ids=self.key_ids,
            version=self.version,
            last_column_id=self.last_column_id,
            sink=self.sink,
        )

    def with_columns(
        self,
        columns: Sequence[Column],
        *,
        key_ids: Sequence[int] | None = None,
        version: int | None = None,
        sink: SinkSettings | None = None,
    ) -> TableSchema:
        """A copy with other columns; the key stays the same ids unless given, and
        ``last_column_id`` never goes down."""
        new = tuple(columns)
        highest = max(column_ids(new), default=0)
        return TableSchema(
            self.table,
            new,
            key_ids=self.key_ids if key_ids is None else key_ids,
            version=self.version if version is None else version,
            last_column_id=max(self.last_column_id, highest),
            sink=self.sink if sink is None else sink,
        )


def _rebuild(
    table: str,
    columns: tuple[Column, ...],
    key_ids: tuple[int, ...],
    version: int,
    last_column_id: int,
    sink: SinkSettings,
) -> TableSchema:
    return TableSchema(
        table, columns, key_ids=key_ids, version=version, last_column_id=last_column_id, sink=sink
    )


def all_fields(columns: Iterable[Column]) -> Iterable[Column]:
    """The columns and every field nested in a struct, depth first."""
    for column in columns:
        yield column
        yield from _nested_fields(column.type)


def _nested_fields(ctype: IcetideType) -> Iterable[Column]:
    if isinstance(ctype, StructType):
        yield from all_fields(ctype.fields)
    elif isinstance(ctype, ListType):
        yield from _nested_fields(ctype.element)
    elif isinstance(ctype, MapType):
        yield from _nested_fields(ctype.key)
        yield from _nested_fields(ctype.value)


def column_ids(columns: Iterable[Column]) -> Iterable[int]:
    """Every id the columns use: theirs, nested fields', list elements', map keys' and
    values'."""
    for column in columns:
        yield column.id
        yield from _type_ids(column.type)


def _type_ids(ctype: IcetideType) -> Iterable[int]:
    if isinstance(ctype, StructType):
        yield from column_ids(ctype.fields)
    elif isinstance(ctype, ListType):
        yield ctype.element_id
        yield from _type_ids(ctype.element)
    elif isinstance(ctype, MapType):
        yield ctype.key_id
        yield from _type_ids(ctype.key)
        yield ctype.value_id
        yield from _type_ids(ctype.value)


def schema_problems(
    columns: tuple[Column, ...], primary_key: tuple[str, ...]
) -> list[tuple[Loc, str]]:
    """Everything wrong with a table's columns and key, each at its schema-file location.

    Names are compared case-insensitively because Spark resolves them that way: ``Email``
    and ``email`` would be one column there.

    >>> from icetide.schema.types import LongType, StringType
    >>> cols = (Column(1, "id", LongType(), nullable=False), Column(1, "ID", StringType()))
    >>> for loc, message in schema_problems(cols, ("idd",)):
    ...     print(f"{loc_text(loc)}: {message}")
    columns[1].id: duplicate id 1 (as columns[0]); ids are unique and never reused
    columns[1].name: duplicate column name (as columns[0]; Spark ignores case)
    primary_key[0]: no column named 'idd'; did you mean 'id'?
    """
    problems: list[tuple[Loc, str]] = []
    ids: dict[int, Loc] = {}
    _field_problems(columns, ("columns",), ids, problems, top=True)
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
            continue
        column = columns[exact[key]]
        if column.nullable:
            problems.append(
                (
                    ("columns", exact[key], "nullable"),
                    f"primary-key column {key!r} cannot be nullable",
                )
            )
        if column.type.is_nested:
            problems.append(
                (("primary_key", k), f"{key!r} is a {column.type.name}; a key column is a value")
            )
    return problems


def _field_problems(
    columns: Sequence[Column],
    where: Loc,
    ids: dict[int, Loc],
    problems: list[tuple[Loc, str]],
    top: bool,
) -> None:
    """Ids unique across the whole table, names unique within each struct."""
    names: dict[str, int] = {}
    label = "columns" if top else "fields"
    for i, column in enumerate(columns):
        here = (*where, i)
        _id_problem(column.id, (*here, "id"), ids, problems)
        if not column.name:
            problems.append(((*here, "name"), "must not be empty"))
        else:
            folded = column.name.casefold()
            if folded in names:
                problems.append(
                    (
                        (*here, "name"),
                        f"duplicate {'column' if top else 'field'} name (as "
                        f"{loc_text((*where, names[folded]))}; Spark ignores case)"
                        if not top
                        else f"duplicate column name (as {label}[{names[folded]}]; "
                        "Spark ignores case)",
                    )
                )
            names.setdefault(folded, i)
            if top and folded.startswith(RESERVED_PREFIX):
                problems.append(
                    ((*here, "name"), f"names starting with {RESERVED_PREFIX} are reserved")
                )
        _type_problems(column.type, (*here, "type"), ids, problems)


def _type_problems(
    ctype: IcetideType, where: Loc, ids: dict[int, Loc], problems: list[tuple[Loc, str]]
) -> None:
    if isinstance(ctype, StructType):
        if not ctype.fields:
            problems.append((where, "a struct needs at least one field"))
        _field_problems(ctype.fields, (*where, "struct"), ids, problems, top=False)
    elif isinstance(ctype, ListType):
        _id_problem(ctype.element_id, (*where, "list", "element_id"), ids, problems)
        _type_problems(ctype.element, (*where, "list", "element"), ids, problems)
    elif isinstance(ctype, MapType):
        _id_problem(ctype.key_id, (*where, "map", "key_id"), ids, problems)
        _type_problems(ctype.key, (*where, "map", "key"), ids, problems)
        _id_problem(ctype.value_id, (*where, "map", "value_id"), ids, problems)
        _type_problems(ctype.value, (*where, "map", "value"), ids, problems)
        if ctype.key.is_nested:
            problems.append(((*where, "map", "key"), "a map key must be a value type"))


def _id_problem(
    field_id: int, loc: Loc, ids: dict[int, Loc], problems: list[tuple[Loc, str]]
) -> None:
    if field_id in ids:
        problems.append(
            (
                loc,
                f"duplicate id {field_id} (as {loc_text(ids[field_id][:-1])}); ids are "
                "unique and never reused",
            )
        )
    ids.setdefault(field_id, loc)
    if field_id < 1:
        problems.append((loc, f"must be at least 1 (got {field_id})"))


def _no_such_column(key: str, columns: tuple[Column, ...]) -> str:
    names = [c.name for c in columns]
    same = [n for n in names if n.casefold() == key.casefold()]
    close = same or difflib.get_close_matches(key, names, n=1)
    return f"no column named {key!r}" + (f"; did you mean {close[0]!r}?" if close else "")


def loc_text(loc: Loc) -> str:
    """``("columns", 1, "id")`` → ``columns[1].id``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
