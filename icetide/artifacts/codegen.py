"""A table or view version → the source files of its Python package.

The package (``icetide_schema_<ns>_<name>``) holds:

* a frozen dataclass per record (nested structs become nested dataclasses), keyword-only
  so code that builds records by name keeps working when a minor version adds a field
  (nullable fields default to ``None``);
* a Python ``Enum`` per enum column, values the source's symbols;
* ``spark_schema()``, the Spark ``StructType`` (pyspark imported only when called);
* ``AVRO_SCHEMA``, the Avro schema (also ``schema.avsc`` inside the package);
* ``from_arrow(table)`` and ``read(...)``: typed records, converted through Arrow column
  by column (:mod:`icetide.artifacts.runtime`) — for a table ``read(warehouse)`` reads
  the base table with PyIceberg; for a view ``read(spark)`` runs the view's SQL over its
  inputs in Spark.

Generation is pure text: the same shape and version always give the same bytes, which is
what the publisher's content hash relies on.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icetide.artifacts.shape import Shape
from icetide.schema.convert.avro import to_avro_schema
from icetide.schema.convert.spark import spark_json_struct
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, EnumType, IcetideType, ListType, MapType, StructType
from icetide.schema.visitor import PathVisitor, visit

RUNTIME = Path(__file__).with_name("runtime.py")

_PY_TYPES = {
    "boolean": "bool",
    "int": "int",
    "long": "int",
    "float": "float",
    "double": "float",
    "string": "str",
    "binary": "bytes",
    "date": "datetime.date",
    "time": "datetime.time",
    "timestamp": "datetime.datetime",
    "timestamptz": "datetime.datetime",
    "uuid": "uuid.UUID",
    "json": "str",
    "decimal": "decimal.Decimal",
}
_KINDS = {"time": "time", "uuid": "uuid"}


def identifier(name: str) -> str:
    """A Python identifier for a source name (casing kept).

    >>> identifier("Email"), identifier("first name"), identifier("class"), identifier("1st")
    ('Email', 'first_name', 'class_', '_1st')
    """
    text = re.sub(r"\W", "_", name)
    if not text or text[0].isdigit():
        text = "_" + text
    return text + "_" if keyword.iskeyword(text) else text


def class_name(*parts: str) -> str:
    """A class name from path parts: ``("users", "home_address")`` → ``UsersHomeAddress``.

    >>> class_name("order_items", "Status")
    'OrderItemsStatus'
    """
    words = [w for p in parts for w in re.split(r"[^0-9A-Za-z]+", p) if w]
    text = "".join(w[:1].upper() + w[1:] for w in words) or "Record"
    return "_" + text if text[0].isdigit() else text


@dataclass
class _Module:
    """What the generated module declares, in dependency order."""

    blocks: list[str] = field(default_factory=list)
    used: set[str] = field(default_factory=set)

    def claim(self, name: str) -> str:
        """``name``, or ``name_2``… when two paths spell the same class name."""
        candidate, n = name, 1
        while candidate in self.used:
            n += 1
            candidate = f"{name}_{n}"
        self.used.add(candidate)
        return candidate


def _unique(names: list[str]) -> list[str]:
    """Python names, made unique where two source names map to the same identifier."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        base = identifier(name)
        n = seen.get(base.casefold(), 0)
        seen[base.casefold()] = n + 1
        out.append(base if n == 0 else f"{base}_{n + 1}")
    return out


_Parts = tuple[str, str]
"""``(annotation, Field(...) expression)`` of one type."""


class _Declare(PathVisitor[_Parts]):
    """The :data:`_Parts` of each type, declaring a class for each record and enum on the
    way: a dataclass after the classes of what its fields hold, named after its path.

    Class names are claimed as the walk enters a field (parents before what they hold),
    so where two paths spell the same name the one met first keeps it; each waits on a
    stack until its class is written.
    """

    def __init__(self, root: tuple[str, ...], mod: _Module) -> None:
        super().__init__(root)
        self.mod = mod
        self.names = [mod.claim(class_name(*root))]

    def enter(self, field: Column) -> None:
        super().enter(field)
        if isinstance(field.type, StructType | EnumType):
            self.names.append(self.mod.claim(class_name(*self.path)))

    def schema(self, schema: TableSchema, struct_result: _Parts) -> _Parts:
        return struct_result

    def struct(self, struct: StructType, field_results: Sequence[_Parts]) -> _Parts:
        name = self.names.pop()
        attrs = _unique([c.name for c in struct.fields])
        body, specs = [], []
        for attr, column, (annotation, spec) in zip(
            attrs, struct.fields, field_results, strict=True
        ):
            if column.nullable:
                body.append(f"    {attr}: {annotation} | None = None")
            else:
                body.append(f"    {attr}: {annotation}")
            if column.doc:
                body.append(f"    {_docstring(column.doc)}")
            specs.append(f"    Field({attr!r}, {column.name!r}, {spec}),")
        lines = [
            "@dataclass(frozen=True, kw_only=True)",
            f"class {name}:",
            f'    """A record of {".".join(self.path)}."""',
            "",
            *body,
        ]
        self.mod.blocks.append("\n".join(lines))
        self.mod.blocks.append("\n".join([f"_{name}_FIELDS: tuple[Field, ...] = (", *specs, ")"]))
        return name, f"kind='record', target={name}, fields=_{name}_FIELDS"

    def field(self, field: Column, field_result: _Parts) -> _Parts:
        return field_result

    def list(self, list_type: ListType, element_result: _Parts) -> _Parts:
        inner, spec = element_result
        inner = f"{inner} | None" if list_type.element_nullable else inner
        return f"list[{inner}]", f"kind='list', fields=(Field('element', 'element', {spec}),)"

    def map(self, map_type: MapType, key_result: _Parts, value_result: _Parts) -> _Parts:
        (key, key_spec), (value, value_spec) = key_result, value_result
        value = f"{value} | None" if map_type.value_nullable else value
        spec = f"Field('key', 'key', {key_spec}), Field('value', 'value', {value_spec})"
        return f"dict[{key}, {value}]", f"kind='map', fields=({spec})"

    def primitive(self, primitive: IcetideType) -> _Parts:
        if isinstance(primitive, EnumType):
            name = self.names.pop()
            members = _unique(list(primitive.symbols))
            lines = [
                f"class {name}(enum.Enum):",
                f'    """Symbols of {".".join(self.path)}."""',
                "",
            ]
            lines += [f"    {m} = {s!r}" for m, s in zip(members, primitive.symbols, strict=True)]
            self.mod.blocks.append("\n".join(lines))
            return name, f"kind='enum', target={name}"
        kind = _KINDS.get(primitive.name, "value")
        return _PY_TYPES[primitive.name], f"kind={kind!r}"


def _docstring(text: str) -> str:
    return '"""' + text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') + '"""'


def avro_schema(shape: Shape) -> dict[str, Any]:
    """The Avro schema of a shape, stamped with where it came from."""
    return to_avro_schema(
        shape.record,
        shape.namespace,
        shape.columns,
        doc=shape.doc,
        properties={"icetide.kind": shape.kind, "icetide.version": shape.version},
    )


def module_source(shape: Shape, package_version: str) -> str:
    """The generated ``__init__.py``."""
    mod = _Module()
    root, _ = visit(StructType(shape.columns), _Declare((shape.record,), mod))
    avro = json.dumps(avro_schema(shape), sort_keys=True)
    spark = json.dumps(spark_json_struct(shape.columns), sort_keys=True)
    head = [
        f'"""Typed schema of {shape.doc}.',
        "",
        "Generated by icetide; do not edit: a new schema version is a new package version.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import datetime",
        "import decimal",
        "import enum",
        "import uuid",
        "from dataclasses import dataclass",
        "from typing import Any",
        "",
        "from ._runtime import Field, load_json, load_table, run_view, scan_rows, table_metadata",
        "from ._runtime import from_arrow as _from_arrow",
        "",
        f"__version__ = {package_version!r}",
        f"KIND = {shape.kind!r}",
        f"NAME = {shape.name!r}",
        f"SCHEMA_VERSION = {shape.version}",
        f"NAMESPACE = {shape.namespace!r}",
        f"ICEBERG_TABLE = {shape.iceberg!r}",
        f"SQL = {shape.sql!r}",
        f"AVRO_SCHEMA: dict[str, Any] = load_json({avro!r})",
        f"_SPARK_SCHEMA = {spark!r}",
        "_ = (datetime, decimal, uuid)  # used by annotations only",
    ]
    tail = [
        f"Record = {root}",
        "",
        "",
        "def spark_schema() -> Any:",
        '    """The Spark ``StructType`` of the records (imports pyspark on call)."""',
        "    from pyspark.sql.types import StructType",
        "",
        "    return StructType.fromJson(load_json(_SPARK_SCHEMA))",
        "",
        "",
        f"def from_arrow(table: Any) -> list[{root}]:",
        '    """Typed records from an Arrow table with these columns (extra ones ignored)."""',
        f"    return _from_arrow(table, {root}, _{root}_FIELDS)",
    ]
    if shape.iceberg is not None:
        namespace, table = shape.iceberg
        tail += [
            "",
            "",
            "def read(",
            "    warehouse: str | None = None,",
            "    *,",
            "    metadata_location: str | None = None,",
            "    catalog: str | dict[str, str] | None = None,",
            "    row_filter: str | None = None,",
            f") -> list[{root}]:",
            '    """The base table\'s current rows as typed records.',
            "",
            "    ``catalog`` loads the table through an Iceberg catalog, as PyIceberg does:",
            "    a catalog name PyIceberg's configuration knows, or the catalog's properties",
            "    (``type``, ``uri``, ``s3.endpoint`` and the keys ...). Or ``warehouse``, a",
            "    Hadoop catalog's folder (the table is",
            f"    ``<warehouse>/{'/'.join(namespace.split('.'))}/{table}``);",
            "    or the table's ``metadata_location`` (a metadata JSON file).",
            "    ``row_filter`` is PyIceberg's.",
            '    """',
            "    import os",
            "",
            "    if catalog is None and metadata_location is None:",
            "        if warehouse is None:",
            "            raise ValueError('give catalog=, warehouse= or metadata_location=')",
            f"        location = os.path.join(warehouse, *{namespace.split('.')!r}, {table!r})",
            "        metadata_location = table_metadata(location)",
            f"    identifier = (*{namespace.split('.')!r}, {table!r})",
            "    iceberg = load_table(identifier, metadata_location, catalog)",
            f"    names = [f.source for f in _{root}_FIELDS]",
            "    return from_arrow(scan_rows(iceberg, names, row_filter))",
        ]
    if shape.kind == "view":
        tail += [
            "",
            "",
            f"RELATIONS: tuple[tuple[str, str, str], ...] = {shape.relations!r}",
            "",
            "",
            f"def read(spark: Any) -> list[{root}]:",
            '    """The view\'s current rows as typed records, computed by Spark.',
            "",
            "    ``spark`` is a SparkSession with the pipeline's Iceberg catalog configured",
            "    under the same name. The view's inputs (``RELATIONS``: base tables, and the",
            "    views between, by their SQL) become temporary views of a new session, so the",
            "    caller's temporary views are neither used nor touched; ``SQL`` runs there",
            "    and its result comes back through Arrow.",
            '    """',
            "    return from_arrow(run_view(spark, RELATIONS, SQL or ''))",
        ]
    return (
        "\n".join(head) + "\n\n\n" + "\n\n\n".join(mod.blocks) + "\n\n\n" + "\n".join(tail) + "\n"
    )


def pyproject(shape: Shape, package_version: str) -> str:
    """The generated package's ``pyproject.toml`` (hatchling backend, builds offline)."""
    return "\n".join(
        [
            "[build-system]",
            'requires = ["hatchling"]',
            'build-backend = "hatchling.build"',
            "",
            "[project]",
            f'name = "{shape.package}"',
            f'version = "{package_version}"',
            f"description = {json.dumps('Typed schema of ' + shape.doc)}",
            'requires-python = ">=3.10"',
            'dependencies = ["pyarrow>=14"]',
            "",
            "[project.optional-dependencies]",
            'read = ["pyiceberg>=0.7"]',
            'spark = ["pyspark>=3.5"]',
            "",
            "[tool.hatch.build.targets.wheel]",
            f'packages = ["{shape.module}"]',
            "",
        ]
    )


def package_files(shape: Shape, package_version: str) -> dict[str, str]:
    """Every file of the package's source tree, path → text."""
    module = shape.module
    return {
        "pyproject.toml": pyproject(shape, package_version),
        "README.md": f"# {shape.package}\n\nTyped schema of {shape.doc}. Generated by icetide.\n",
        f"{module}/__init__.py": module_source(shape, package_version),
        f"{module}/_runtime.py": RUNTIME.read_text(encoding="utf-8"),
        f"{module}/schema.avsc": json.dumps(avro_schema(shape), indent=2, sort_keys=True) + "\n",
        f"{module}/py.typed": "",
    }
