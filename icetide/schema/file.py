"""The schema-file format: YAML in, :class:`~icetide.schema.model.TableSchema` out.

Example schema file (``schemas/customers.yaml``)::

    table: customers
    version: 1
    primary_key: [id]
    last_column_id: 9
    columns:
      - {id: 1, name: id, type: long, nullable: false}
      - {id: 2, name: email, type: string}
      - {id: 3, name: balance, type: "decimal(12,2)"}
      - {id: 4, name: updated_at, type: timestamp}
      - {id: 5, name: status, type: {enum: [new, active, closed]}}
      - id: 6
        name: address
        type: {struct: [{id: 7, name: city, type: string}, {id: 8, name: zip, type: string}]}
      - {id: 9, name: tags, type: {list: {element_id: 10, element: string}}}
    sink:
      logical: {updated_at: io.debezium.time.MicroTimestamp}
      columns:                       # the sink config (docs/sink-config.md)
        email: {name: email_hash, convert: sha256}
        balance: {type: "decimal(14,2)"}

``sink.columns`` says how a column is stored in Iceberg, keyed by its source name:
``name`` (the Iceberg name), ``type`` (a widening override) or ``convert`` (a function of
:mod:`icetide.schema.sink_functions`, as its name or ``{function: mask, keep: 4}``).
``sink.logical`` optionally names the Debezium/Kafka Connect logical type the source uses
for a column; it is only needed to decode events that arrive without an inline schema.
Files written before it existed carried ``logical:`` on the column itself; they still
load: the value moves to ``sink.logical`` and :data:`MIGRATION_NOTE` says so.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Sequence
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
from icetide.schema.connector import decimal_hint_problem
from icetide.schema.defaults import DefaultError, default_from_data, default_to_data
from icetide.schema.model import (
    Loc,
    SinkSettings,
    TableSchema,
    column_ids,
    loc_text,
    schema_problems,
)
from icetide.schema.sink import sink_ids, sink_problems
from icetide.schema.sink_functions import FUNCTIONS, Conversion
from icetide.schema.types import (
    Column,
    DecimalType,
    EnumType,
    IcetideType,
    ListType,
    MapType,
    StructType,
    parse_type,
)
from icetide.schema.visitor import SchemaVisitor, visit

MIGRATION_NOTE = (
    "schema file {path}: per-column 'logical:' is the old form; read as sink.logical "
    "({columns}). Rewrite the file with `sink: {{logical: {{column: type}}}}` to silence this."
)


class SchemaFileMigrated(UserWarning):
    """An old-form schema file was read and migrated in memory (see module doc)."""


class SchemaFileProblems(ValueError):
    """Cross-field problems of a schema file, each with its YAML location.

    A ``ValueError`` so pydantic reports it as a validation error; the config loader
    unpacks ``problems`` into one line each, with the line number.
    """

    def __init__(self, problems: list[tuple[Loc, str]]) -> None:
        super().__init__("; ".join(f"{loc_text(loc)}: {msg}" for loc, msg in problems))
        self.problems = problems


# -- types as YAML ------------------------------------------------------------------------

_KINDS = ("enum", "struct", "list", "map")
_TYPE_HELP = "a type name such as long, string or decimal(12,2), or {enum|struct|list|map: ...}"


def type_from_data(value: Any) -> IcetideType:
    """A type as written in a schema file (text, or a one-key mapping for the types that
    hold others); every problem at once, located below the ``type:`` key.

    >>> type_from_data({"list": {"element_id": 4, "element": "long"}})
    ListType(element_id=4, element=LongType(), element_nullable=True)
    """
    problems: list[tuple[Loc, str]] = []
    parsed = _type(value, (), problems)
    if problems or parsed is None:
        raise SchemaFileProblems(problems or [((), f"must be {_TYPE_HELP}")])
    return parsed


def _type(value: Any, loc: Loc, problems: list[tuple[Loc, str]]) -> IcetideType | None:
    if isinstance(value, IcetideType):
        return value
    if isinstance(value, str):
        try:
            return parse_type(value)
        except SchemaError as exc:
            problems.append((loc, exc.message))
            return None
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in _KINDS:
        problems.append((loc, f"must be {_TYPE_HELP}"))
        return None
    kind, body = next(iter(value.items()))
    here = (*loc, kind)
    if kind == "enum":
        symbols = body if isinstance(body, list) else None
        if not symbols or not all(isinstance(s, str) and s for s in symbols):
            problems.append((here, "must be a list of symbols, e.g. [new, paid]"))
            return None
        if len(set(symbols)) != len(symbols):
            problems.append((here, "lists a symbol twice"))
        return EnumType(tuple(symbols))
    if kind == "struct":
        if not isinstance(body, list) or not body:
            problems.append(
                (here, "must be a list of fields, e.g. [{id: 7, name: city, type: string}]")
            )
            return None
        fields = [_field(entry, (*here, i), problems) for i, entry in enumerate(body)]
        if any(f is None for f in fields):
            return None
        return StructType(tuple(f for f in fields if f is not None))
    parts = ("element_id", "element") if kind == "list" else ("key_id", "key", "value_id", "value")
    allowed = {*parts, "element_nullable" if kind == "list" else "value_nullable"}
    if not isinstance(body, dict):
        problems.append((here, f"must be a mapping with {', '.join(parts)}"))
        return None
    for unknown in sorted(set(body) - allowed, key=str):
        problems.append(((*here, unknown), f"unknown key; use {', '.join(sorted(allowed))}"))
    ids: dict[str, int] = {}
    types: dict[str, IcetideType] = {}
    for name in parts:
        if name not in body:
            problems.append(((*here, name), "required"))
        elif name.endswith("_id"):
            if not isinstance(body[name], int) or isinstance(body[name], bool) or body[name] < 1:
                problems.append(((*here, name), "must be a whole number of at least 1"))
            else:
                ids[name] = body[name]
        else:
            sub = _type(body[name], (*here, name), problems)
            if sub is not None:
                types[name] = sub
    nullable_key = "element_nullable" if kind == "list" else "value_nullable"
    nullable = body.get(nullable_key, True)
    if not isinstance(nullable, bool):
        problems.append(((*here, nullable_key), "must be true or false (without quotes)"))
    if len(ids) + len(types) != len(parts):
        return None
    if kind == "list":
        return ListType(ids["element_id"], types["element"], bool(nullable))
    return MapType(ids["key_id"], types["key"], ids["value_id"], types["value"], bool(nullable))


_FIELD_KEYS = ("id", "name", "type", "nullable", "doc", "default", "tags")


def _field(entry: Any, loc: Loc, problems: list[tuple[Loc, str]]) -> Column | None:
    if not isinstance(entry, dict):
        problems.append((loc, "must be a mapping with id, name, type"))
        return None
    for unknown in sorted(set(entry) - set(_FIELD_KEYS), key=str):
        problems.append(((*loc, unknown), f"unknown key; use {', '.join(_FIELD_KEYS)}"))
    ok = True
    for key in ("id", "name", "type"):
        if key not in entry:
            problems.append(((*loc, key), "required"))
            ok = False
    fid, name = entry.get("id"), entry.get("name")
    if "id" in entry and (not isinstance(fid, int) or isinstance(fid, bool)):
        problems.append(((*loc, "id"), "must be a whole number"))
        ok = False
    if "name" in entry and (not isinstance(name, str) or not name):
        problems.append(((*loc, "name"), "must be a non-empty string"))
        ok = False
    nullable = entry.get("nullable", True)
    if not isinstance(nullable, bool):
        problems.append(((*loc, "nullable"), "must be true or false (without quotes)"))
        ok = False
    ftype = _type(entry["type"], (*loc, "type"), problems) if "type" in entry else None
    tags = _tags(entry.get("tags"), (*loc, "tags"), problems)
    if not ok or ftype is None or tags is None:
        return None
    default = _default(ftype, entry.get("default"), (*loc, "default"), problems)
    doc = entry.get("doc")
    return Column(
        int(fid),  # type: ignore[arg-type]
        str(name),
        ftype,
        nullable,
        doc if isinstance(doc, str) else None,
        default,
        tags,
    )


def _tags(value: Any, loc: Loc, problems: list[tuple[Loc, str]]) -> frozenset[str] | None:
    if value is None:
        return frozenset()
    if not isinstance(value, list | tuple) or not all(isinstance(t, str) and t for t in value):
        problems.append((loc, "must be a list of tags, e.g. [sensitive]"))
        return None
    return frozenset(value)


def _default(ctype: IcetideType, value: Any, loc: Loc, problems: list[tuple[Loc, str]]) -> Any:
    try:
        return default_from_data(ctype, value)
    except DefaultError as exc:
        problems.append((loc, f"{exc} (the column is {ctype})"))
        return None


def type_to_data(ctype: IcetideType) -> Any:
    """The schema-file form of a type (what :func:`type_from_data` reads)."""
    return visit(ctype, _TO_DATA)


def column_to_data(column: Column) -> dict[str, Any]:
    """One ``columns:`` (or struct field) entry."""
    entry: dict[str, Any] = _TO_DATA.field(column, type_to_data(column.type))
    return entry


class _ToData(SchemaVisitor[Any]):
    """A type's schema-file form from its parts': a column or field as a mapping with only
    what differs from the defaults, nested types under their kind's key."""

    def schema(self, schema: TableSchema, struct_result: Any) -> Any:
        return struct_result

    def struct(self, struct: StructType, field_results: Sequence[Any]) -> Any:
        return {"struct": list(field_results)}

    def field(self, field: Column, field_result: Any) -> Any:
        entry: dict[str, Any] = {"id": field.id, "name": field.name, "type": field_result}
        if not field.nullable:
            entry["nullable"] = False
        if field.doc:
            entry["doc"] = field.doc
        if field.default is not None:
            entry["default"] = default_to_data(field.default)
        if field.tags:
            entry["tags"] = sorted(field.tags)
        return entry

    def list(self, list_type: ListType, element_result: Any) -> Any:
        body: dict[str, Any] = {"element_id": list_type.element_id, "element": element_result}
        if not list_type.element_nullable:
            body["element_nullable"] = False
        return {"list": body}

    def map(self, map_type: MapType, key_result: Any, value_result: Any) -> Any:
        body: dict[str, Any] = {
            "key_id": map_type.key_id,
            "key": key_result,
            "value_id": map_type.value_id,
            "value": value_result,
        }
        if not map_type.value_nullable:
            body["value_nullable"] = False
        return {"map": body}

    def primitive(self, primitive: IcetideType) -> Any:
        if isinstance(primitive, EnumType):
            return {"enum": list(primitive.symbols)}
        return str(primitive) if isinstance(primitive, DecimalType) else primitive.name


_TO_DATA = _ToData()


def schema_to_dict(schema: TableSchema) -> dict[str, Any]:
    """The schema-file form of ``schema`` (what :func:`schema_from_dict` reads)."""
    data: dict[str, Any] = {
        "table": schema.table,
        "version": schema.version,
        "primary_key": list(schema.primary_key),
    }
    highest = max(schema.field_ids(), default=0)
    if schema.last_column_id != highest:
        data["last_column_id"] = schema.last_column_id
    data["columns"] = [column_to_data(c) for c in schema.columns]
    names = {c.id: c.name for c in schema.columns}
    sink: dict[str, Any] = {}
    if schema.sink.logical:
        sink["logical"] = {names[i]: v for i, v in schema.sink.logical.items()}
    columns = sink_columns_to_data(schema)
    if columns:
        sink["columns"] = columns
    if sink:
        data["sink"] = sink
    return data


def conversion_to_data(conversion: Conversion) -> Any:
    """A ``convert:`` value: the function's name, or a mapping when it has arguments."""
    if not conversion.arguments:
        return conversion.function
    body: dict[str, Any] = {"function": conversion.function}
    for key, value in conversion.arguments:
        body[key] = type_to_data(value) if isinstance(value, IcetideType) else value
    return body


def sink_columns_to_data(schema: TableSchema) -> dict[str, Any]:
    """The ``sink.columns:`` block of ``schema``, keyed by source column name."""
    sink = schema.sink
    columns: dict[str, Any] = {}
    for column in schema.columns:
        entry: dict[str, Any] = {}
        if column.id in sink.names:
            entry["name"] = sink.names[column.id]
        if column.id in sink.types:
            entry["type"] = type_to_data(sink.types[column.id])
        if column.id in sink.conversions:
            entry["convert"] = conversion_to_data(sink.conversions[column.id])
        if entry:
            columns[column.name] = entry
    return columns


# -- the file's model ---------------------------------------------------------------------


def _type_field(value: Any) -> IcetideType:
    return type_from_data(value)


def _names_list(value: Any) -> Any:
    # pydantic's own message ("must be a list") does not show how to write one.
    if isinstance(value, str):
        raise ValueError(f"must be a list of column names, e.g. [{value}]")
    return value


def _tags_list(value: Any) -> Any:
    if not isinstance(value, list | tuple):
        raise ValueError("must be a list of tags, e.g. [sensitive]")
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
    a quietly nullable column. ``logical`` is the old place of ``sink.logical``.
    """

    id: Annotated[StrictInt, Field(ge=1)]
    name: Name
    type: Annotated[IcetideType, BeforeValidator(_type_field)]
    nullable: StrictBool | None = None
    default: Any = None
    """A literal of the column's type, or ``{sql: TEXT}`` (see :mod:`icetide.schema.defaults`)."""
    tags: Annotated[tuple[Name, ...], BeforeValidator(_tags_list)] = ()
    """Labels such as ``sensitive``."""
    logical: Name | None = None
    doc: StrictStr | None = None


def _convert_field(value: Any) -> Conversion:
    """``convert:`` as written: a function name, or ``{function: name, arg: value}``."""
    if isinstance(value, str) and value:
        return Conversion(value)
    if not isinstance(value, dict) or not isinstance(value.get("function"), str):
        raise ValueError(
            "must be a function name, e.g. sha256, or a mapping such as "
            f"{{function: mask, keep: 4}} (functions: {', '.join(FUNCTIONS)})"
        )
    args = []
    problems: list[tuple[Loc, str]] = []
    for key, arg in value.items():
        if key == "function":
            continue
        if key == "type":
            parsed = _type(arg, (key,), problems)
            if parsed is not None:
                args.append((str(key), parsed))
        else:
            args.append((str(key), arg))
    if problems:
        raise SchemaFileProblems(problems)
    return Conversion(value["function"], tuple(args))


class SinkColumnEntry(_Entry):
    """One entry of ``sink.columns:``: how a source column is stored in Iceberg."""

    name: Name | None = None
    type: Annotated[IcetideType, BeforeValidator(_type_field)] | None = None
    convert: Annotated[Conversion, BeforeValidator(_convert_field)] | None = None


class SinkEntry(_Entry):
    """``sink:``: how the table's values arrive (``logical``) and how each column is
    stored (``columns``; see :class:`SinkSettings`)."""

    logical: dict[Name, Name] = Field(default_factory=dict)
    columns: dict[Name, SinkColumnEntry] = Field(default_factory=dict)

    def settings(self, ids: dict[str, int], logical: dict[int, str]) -> SinkSettings:
        """The settings by column id (names the file does not have are left out)."""
        known = {n: e for n, e in self.columns.items() if n in ids}
        return SinkSettings(
            logical,
            {ids[n]: e.name for n, e in known.items() if e.name is not None},
            {ids[n]: e.type for n, e in known.items() if e.type is not None},
            {ids[n]: e.convert for n, e in known.items() if e.convert is not None},
        )


class SchemaFile(_Entry):
    """A schema file as written: what :func:`schema_from_dict` and the config loader
    validate before building a :class:`TableSchema`."""

    table: StrictStr = ""
    version: StrictInt = Field(1, ge=1)
    primary_key: Annotated[tuple[Name, ...], BeforeValidator(_names_list)]
    last_column_id: Annotated[StrictInt, Field(ge=1)] | None = None
    columns: Annotated[tuple[ColumnEntry, ...], AfterValidator(_at_least_one)]
    sink: SinkEntry = Field(default_factory=SinkEntry)

    @model_validator(mode="after")
    def _check(self) -> SchemaFile:
        # A key column left without nullable: is not null, so only an explicit
        # nullable: true on one is reported.
        problems = schema_problems(self._built(), self.primary_key)
        for i, entry in enumerate(self.columns):
            _default(entry.type, entry.default, ("columns", i, "default"), problems)
        names = {e.name for e in self.columns}
        types = {e.name: e.type for e in self.columns}
        for name, hint in self.sink.logical.items():
            if name not in names:
                problems.append((("sink", "logical", name), "no column has this name"))
            elif (problem := decimal_hint_problem(types[name], hint)) is not None:
                problems.append((("sink", "logical", name), problem))
        for name in self.sink.columns:
            if name not in names:
                close = difflib.get_close_matches(name, sorted(names), n=1)
                problems.append(
                    (
                        ("sink", "columns", name),
                        "no column has this name (the keys are source column names)"
                        + (f"; did you mean {close[0]!r}?" if close else ""),
                    )
                )
        ids = {e.name: e.id for e in self.columns}
        key_ids = tuple(ids[k] for k in self.primary_key if k in ids)
        problems += sink_problems(self._built(), key_ids, self.sink.settings(ids, {}))
        for i, entry in enumerate(self.columns):
            if entry.logical and entry.name in self.sink.logical:
                problems.append(
                    (("columns", i, "logical"), "also given in sink.logical; keep that one")
                )
        highest = max(column_ids(self._built()), default=0)
        if self.last_column_id is not None and self.last_column_id < highest:
            problems.append(
                (
                    ("last_column_id",),
                    f"is {self.last_column_id} but id {highest} is in use; it is the "
                    "highest id the table ever used",
                )
            )
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
                doc=e.doc,
                default=_default(e.type, e.default, (), []),
                tags=frozenset(e.tags),
            )
            for e in self.columns
        )

    def migrated(self) -> list[str]:
        """Columns whose ``logical:`` is in the old per-column place."""
        return [e.name for e in self.columns if e.logical]

    def to_schema(self) -> TableSchema:
        """The validated file as a :class:`TableSchema`."""
        ids = {e.name: e.id for e in self.columns}
        logical = {ids[n]: v for n, v in self.sink.logical.items()}
        logical.update({e.id: e.logical for e in self.columns if e.logical})
        sink = self.sink.settings(ids, logical)
        last = self.last_column_id
        extra = sink_ids(sink)
        if extra:
            # Fields a conversion introduces take ids too: never reused by a new column.
            last = max(last or 0, *extra, *column_ids(self._built()))
        return TableSchema(
            self.table,
            self._built(),
            self.primary_key,
            self.version,
            last_column_id=last,
            sink=sink,
        )


def read_schema_data(data: Any, origin: str) -> TableSchema:
    """Validate parsed YAML as a schema file; an old-form file is migrated with a
    :class:`SchemaFileMigrated` warning naming ``origin``. Raises pydantic's
    ``ValidationError`` (the callers turn it into located messages)."""
    parsed = SchemaFile.model_validate(data)
    old = parsed.migrated()
    if old:
        warnings.warn(
            MIGRATION_NOTE.format(path=origin, columns=", ".join(old)),
            SchemaFileMigrated,
            stacklevel=2,
        )
    return parsed.to_schema()


def schema_from_dict(data: Any, origin: str = "schema") -> TableSchema:
    """Build a :class:`TableSchema` from parsed YAML, naming ``origin`` in errors.

    For schemas written in code and tests; files go through
    :func:`icetide.config.loader.load_schema_file`, whose errors also carry line numbers.
    """
    try:
        return read_schema_data(data, origin)
    except ValidationError as exc:
        rows = []
        for error in exc.errors():
            cause = error.get("ctx", {}).get("error")
            if isinstance(cause, SchemaFileProblems):
                rows += [
                    f"{loc_text((*tuple(error['loc']), *loc))}: {msg}"
                    for loc, msg in cause.problems
                ]
            else:
                message = str(error["msg"]).removeprefix("Value error, ")
                rows.append(f"{loc_text(tuple(error['loc'])) or '(top level)'}: {message}")
        raise SchemaError(f"{origin}: " + "; ".join(rows)) from None


def dump_schema_file(schema: TableSchema, path: Path) -> None:
    """Write ``schema`` as a schema file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(schema_to_dict(schema), sort_keys=False))
