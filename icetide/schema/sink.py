"""The Iceberg side of a table: its schema after the sink config's mappings, type
overrides and conversions.

A schema file describes the *source* table (names and types as the source has them);
its ``sink:`` block (:class:`~icetide.schema.model.SinkSettings`) says how a column is
stored: under another name, as a wider type, or converted by a library function
(:mod:`icetide.schema.sink_functions`). :func:`target_schema` applies it and gives the
schema of the ledger and base tables: the same column ids (so evolution still matches by
id), the Iceberg names and the stored types. The table-contract builder generates every
DDL, Arrow shape and MERGE from that schema; the ledger projection converts the values.

>>> from icetide.schema.model import Column, SinkSettings, TableSchema
>>> from icetide.schema.types import IntType, LongType
>>> schema = TableSchema("t", (Column(1, "id", IntType(), False), Column(2, "n", IntType())),
...     ("id",), sink=SinkSettings(names={2: "amount"}, types={1: LongType()}))
>>> [(c.id, c.name, str(c.type)) for c in target_schema(schema).columns]
[(1, 'id', 'long'), (2, 'amount', 'int')]
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from icetide.errors import SchemaChangeError, SchemaError
from icetide.schema.model import (
    RESERVED_PREFIX,
    Loc,
    SinkSettings,
    TableSchema,
    column_ids,
    loc_text,
)
from icetide.schema.promote import promote
from icetide.schema.sink_functions import FUNCTIONS, conversion_problems
from icetide.schema.types import Column, IcetideType, StructType


def target_type(column: Column, sink: SinkSettings) -> IcetideType:
    """The type ``column``'s values are stored as: the conversion's output, the
    override, or the source type."""
    conversion = sink.conversions.get(column.id)
    if conversion is not None:
        return conversion.output_type(column.type)
    return sink.types.get(column.id, column.type)


def sink_problems(
    columns: tuple[Column, ...], key_ids: tuple[int, ...], sink: SinkSettings
) -> list[tuple[Loc, str]]:
    """Everything wrong with a sink config for these columns, each at its schema-file
    place (``sink.columns.<source name>.name|type|convert``)."""
    problems: list[tuple[Loc, str]] = []
    # Settings of an id no column has (a column dropped by evolution) are moot: the
    # schema file keys them by column name, so they are not written back.
    used = set(column_ids(columns))
    stored: dict[str, tuple[str, str]] = {}
    renamed = {c.name for c in columns if c.id in sink.names}
    # Two source columns of one name are the schema's problem; only a mapping's here.
    for column in columns:
        here: Loc = ("sink", "columns", column.name)
        name = sink.names.get(column.id, column.name)
        if column.id in sink.names:
            if not name:
                problems.append(((*here, "name"), "must not be empty"))
            elif name.casefold().startswith(RESERVED_PREFIX):
                problems.append(
                    ((*here, "name"), f"names starting with {RESERVED_PREFIX} are reserved")
                )
        folded = name.casefold()
        mapped = column.id in sink.names
        other, other_name = stored.get(folded, (None, ""))
        if other is not None and (mapped or other in renamed):
            # Reported at the mapping that makes the clash (the later one if both map).
            at, shown, clash = (
                (column.name, name, other) if mapped else (other, other_name, column.name)
            )
            problems.append(
                (
                    ("sink", "columns", at, "name"),
                    f"stored as {shown!r}, the Iceberg name of column {clash!r} too (Spark "
                    "ignores case); map one of them to another name",
                )
            )
        stored.setdefault(folded, (column.name, name))
        override = sink.types.get(column.id)
        conversion = sink.conversions.get(column.id)
        if override is not None and conversion is not None:
            problems.append(
                ((*here, "type"), "give either type or convert: a conversion sets the type")
            )
        elif override is not None:
            try:
                promote(column.type, override)
            except SchemaChangeError as exc:
                problems.append(
                    (
                        (*here, "type"),
                        f"the source type {column.type} cannot be stored as {override}: "
                        f"{exc.message.split(': ', 1)[-1]}; an override may only widen "
                        "(int→long, float→double, decimal precision up, enum→string), "
                        "other changes need a conversion",
                    )
                )
        if conversion is None:
            continue
        if column.id in key_ids:
            problems.append(
                (
                    (*here, "convert"),
                    "a primary-key column cannot be converted (the merge joins on the "
                    "source's key; a mask could make two keys one)",
                )
            )
        found = conversion_problems(conversion, column.type)
        for loc, message in found:
            problems.append(((*here, "convert", *loc), message))
        if found:
            continue
        produced = conversion.args().get("type")
        if isinstance(produced, StructType):
            for fid in column_ids(produced.fields):
                if fid in used:
                    problems.append(
                        (
                            (*here, "convert", "type"),
                            f"field id {fid} is already used; give the struct's fields ids "
                            "no column of the table has (above last_column_id)",
                        )
                    )
                used.add(fid)
    return problems


def sink_ids(sink: SinkSettings) -> set[int]:
    """The field ids the sink config itself introduces (fields of a converted struct)."""
    ids: set[int] = set()
    for conversion in sink.conversions.values():
        if conversion.function not in FUNCTIONS:
            continue
        produced = conversion.args().get("type")
        if isinstance(produced, StructType):
            ids.update(column_ids(produced.fields))
    return ids


@lru_cache(maxsize=256)
def target_schema(schema: TableSchema) -> TableSchema:
    """``schema`` as stored in Iceberg: mapped names, overridden or converted types, the
    same ids, key and version; its own sink settings are empty (nothing maps it again).
    Raises :class:`~icetide.errors.SchemaError` naming the first problem."""
    sink = schema.sink
    if not sink.maps:
        return schema
    problems = sink_problems(schema.columns, schema.key_ids, sink)
    if problems:
        loc, message = problems[0]
        raise SchemaError(
            f"table {schema.table}: {loc_text(loc)}: {message}",
            hint="fix the sink: block of the table's schema file (docs/sink-config.md)",
        )
    columns = tuple(
        replace(c, name=sink.names.get(c.id, c.name), type=target_type(c, sink))
        for c in schema.columns
    )
    return TableSchema(
        schema.table,
        columns,
        key_ids=schema.key_ids,
        version=schema.version,
        last_column_id=max(schema.last_column_id, *sink_ids(sink), 0),
    )
