"""The runtime every generated schema package carries (copied in verbatim as ``_runtime.py``).

It imports nothing from icetide, so an installed package needs only pyarrow (and
PyIceberg to read a table). Records are built column by column: each Arrow column is
converted once (``to_pylist`` in C, then one pass that makes enums, times, UUIDs, nested
records), and the records are zipped from the converted columns; nothing walks Spark
``Row`` objects or converts value by value through a schema walk per row.

A field is described by a :class:`Field`: its Python name, its name in the table (the
source's casing), a kind (``value``, ``enum``, ``time``, ``uuid``, ``record``, ``list``,
``map``) and what the kind needs (the enum or record class, the element/key/value field).
"""

from __future__ import annotations

import datetime
import json
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Field:
    """How one table column (or nested field) becomes a Python value."""

    attr: str
    source: str
    kind: str = "value"
    target: Any = None
    """The enum or record class (``enum``/``record``)."""
    fields: tuple[Field, ...] = ()
    """A record's fields, or ``(element,)`` of a list, or ``(key, value)`` of a map."""


def _flat(array: Any) -> Any:
    """One contiguous Arrow array from a (chunked) column."""
    return array.combine_chunks() if hasattr(array, "combine_chunks") else array


def convert(array: Any, field: Field) -> list[Any]:
    """The Python values of one Arrow column, converted as ``field`` says."""
    array = _flat(array)
    kind = field.kind
    if kind == "record":
        return _records(array, field)
    if kind == "list":
        offsets = array.offsets.to_pylist()
        values = convert(array.values, field.fields[0])
        valid = array.is_valid().to_pylist()
        return [values[offsets[i] : offsets[i + 1]] if ok else None for i, ok in enumerate(valid)]
    if kind == "map":
        offsets = array.offsets.to_pylist()
        keys = convert(array.keys, field.fields[0])
        items = convert(array.items, field.fields[1])
        valid = array.is_valid().to_pylist()
        return [
            dict(
                zip(
                    keys[offsets[i] : offsets[i + 1]],
                    items[offsets[i] : offsets[i + 1]],
                    strict=True,
                )
            )
            if ok
            else None
            for i, ok in enumerate(valid)
        ]
    values = array.to_pylist()
    make = _MAKERS.get(kind)
    if make is None:
        return values
    maker = make(field)
    return [None if v is None else maker(v) for v in values]


def _enum_maker(field: Field) -> Callable[[Any], Any]:
    members = field.target._value2member_map_

    def make(value: Any) -> Any:
        try:
            return members[value]
        except KeyError:
            raise ValueError(
                f"{field.source}: {value!r} is not a symbol of {field.target.__name__} "
                f"({', '.join(members)}); a newer schema added it: upgrade this package"
            ) from None

    return make


def _time(value: Any) -> datetime.time:
    return value if isinstance(value, datetime.time) else datetime.time.fromisoformat(value)


def _uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


_MAKERS: dict[str, Callable[[Field], Callable[[Any], Any]]] = {
    "enum": _enum_maker,
    "time": lambda _f: _time,
    "uuid": lambda _f: _uuid,
}


def _records(array: Any, field: Field) -> list[Any]:
    """Nested records from a struct array: each child converted once, then zipped."""
    names = [array.type.field(i).name for i in range(array.type.num_fields)]
    flat = array.flatten()  # children with the parent's nulls applied
    children = [
        convert(flat[names.index(f.source)], f) if f.source in names else None for f in field.fields
    ]
    return _zip(field.target, field.fields, children, len(array), array.is_valid().to_pylist())


def _zip(
    cls: Any,
    fields: Sequence[Field],
    columns: Sequence[list[Any] | None],
    length: int,
    valid: list[bool] | None,
) -> list[Any]:
    attrs = [f.attr for f in fields]
    filled = [c if c is not None else [None] * length for c in columns]
    rows = (cls(**dict(zip(attrs, values, strict=True))) for values in zip(*filled, strict=True))
    if valid is None:
        return list(rows)
    return [row if ok else None for row, ok in zip(rows, valid, strict=True)]


def from_arrow(table: Any, cls: Any, fields: Sequence[Field]) -> list[Any]:
    """Typed records from an Arrow table holding (at least) the fields' columns.

    Columns the table has beyond the fields are ignored (a newer schema added them, and
    this package's code does not know them); a nullable field the table lacks reads as
    ``None``.
    """
    names = set(table.column_names)
    columns = [convert(table.column(f.source), f) if f.source in names else None for f in fields]
    return _zip(cls, fields, columns, table.num_rows, None)


def table_metadata(location: str) -> str:
    """The newest metadata file of a Hadoop-catalog table at ``location`` (a folder)."""
    folder = os.path.join(location, "metadata")
    hint = os.path.join(folder, "version-hint.text")
    if os.path.exists(hint):
        with open(hint, encoding="utf-8") as handle:
            version = handle.read().strip()
        return os.path.join(folder, f"v{version}.metadata.json")
    found = sorted(
        (int(name[1:].split(".")[0]), name)
        for name in os.listdir(folder)
        if name.startswith("v") and name.endswith(".metadata.json")
    )
    if not found:
        raise FileNotFoundError(f"no Iceberg metadata under {folder}")
    return os.path.join(folder, found[-1][1])


def _pyiceberg(module: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(
            "reading the table needs PyIceberg: pip install 'pyiceberg>=0.7'"
        ) from exc


def load_table(
    identifier: tuple[str, ...],
    metadata_location: str | None = None,
    catalog: str | Mapping[str, str] | None = None,
) -> Any:
    """The PyIceberg table: from its metadata file (no catalog service needed), or from a
    catalog, the way PyIceberg loads one: ``catalog`` is a catalog name that PyIceberg's
    own configuration knows (``~/.pyiceberg.yaml``, ``PYICEBERG_CATALOG__<NAME>__…``),
    or the catalog's properties (``type``, ``uri``, ``warehouse``, ``s3.endpoint``, keys
    …), the same properties as the pipeline's ``catalog:`` section."""
    if metadata_location is not None:
        return _pyiceberg("pyiceberg.table").StaticTable.from_metadata(metadata_location)
    loader = _pyiceberg("pyiceberg.catalog").load_catalog
    if isinstance(catalog, str):
        found = loader(catalog)
    else:
        properties = dict(catalog or {})
        found = loader(properties.pop("name", "icetide"), **properties)
    return found.load_table(identifier)


def read_iceberg(
    metadata_location: str, columns: Sequence[str], row_filter: str | None = None
) -> Any:
    """The current rows of the table whose metadata file is ``metadata_location``, as one
    Arrow table (PyIceberg reads the metadata file, so no catalog service is needed)."""
    return scan_rows(load_table((), metadata_location), columns, row_filter)


def scan_rows(table: Any, columns: Sequence[str], row_filter: str | None = None) -> Any:
    """The current rows of PyIceberg ``table`` as one Arrow table, only ``columns`` that
    the table has (a column added by a later version is simply absent here)."""
    known = {f.name for f in table.schema().fields}
    selected = tuple(c for c in columns if c in known)
    scan = table.scan(selected_fields=selected, row_filter=row_filter or "True")
    return scan.to_arrow()


def run_view(spark: Any, relations: Sequence[tuple[str, str, str]], sql: str) -> Any:
    """A view's rows as one Arrow table: in a new Spark session (its own temporary
    views, the same catalogs), each input becomes a temporary view in order (a base
    table by its quoted name, a view by its SQL), then ``sql`` runs."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    session = spark.newSession()
    for name, kind, target in relations:
        text = f"SELECT * FROM {target}" if kind == "table" else target
        session.sql(text).createOrReplaceTempView(name)
    frame = session.sql(sql)
    if hasattr(frame, "toArrow"):  # Spark 4
        return frame.toArrow()
    batches = frame._collect_as_arrow()  # Spark 3.5: no public Arrow collect
    return pa.Table.from_batches(batches, schema=to_arrow_schema(frame.schema))


def load_json(text: str) -> Any:
    """Parse embedded JSON (the Avro schema, the Spark schema)."""
    return json.loads(text)
