"""One way to walk a schema: a post-order visitor, a walk of two schemas side by side,
and the indexes built on them.

Modelled on PyIceberg's ``SchemaVisitor``: :func:`visit` walks a
:class:`~icetide.schema.model.TableSchema` (or any type) depth first and hands each
node's children's results to the visitor's method for that node, so a visitor says only
what to do with one struct, field, list, map or leaf type. Hooks called before and after
each field, list element and map key/value let a visitor keep track of where it is:
:class:`PathVisitor` keeps the path of names that way (converters name nested records
after it, :func:`field_paths` and :func:`index_by_name` index by it), and a
:class:`HookVisitor` does all its work there. :func:`visit_with_partner` walks one schema
beside another (PyIceberg's ``visit_with_partner``), handing a :class:`PartnerVisitor`
each node with its partner: the diff, the evolution plan's merge and the candidate
schema's ids are such walks.

Converters, indexes and comparisons of the model walk it here; what walks something else
beside a type stays with it: foreign type trees read into the model (sqlglot, Arrow,
Avro and Connect schemas), values converted row by row (``arrow_value`` runs per message,
``avro_datum`` per row), Spark's own types (``lake/``).

List elements and map keys and values have ids but no :class:`Column` of their own; the
walk gives them one (:func:`element_field`, :func:`key_field`, :func:`value_field`), named
``element``, ``key`` and ``value`` as in Iceberg, so every id indexes to a ``Column``.

This module imports the model, never the other way round; the model's own helpers
(``all_fields``, ``column_ids``, ``schema_problems``) stay small loops because the model
sits below this.
"""

from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from icetide.errors import SchemaError
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, IcetideType, ListType, MapType, StructType

T = TypeVar("T")


def element_field(list_type: ListType) -> Column:
    """The list's element as a field: id ``element_id``, named ``element``."""
    return Column(list_type.element_id, "element", list_type.element, list_type.element_nullable)


def key_field(map_type: MapType) -> Column:
    """The map's key as a field: id ``key_id``, named ``key``, never null."""
    return Column(map_type.key_id, "key", map_type.key, nullable=False)


def value_field(map_type: MapType) -> Column:
    """The map's value as a field: id ``value_id``, named ``value``."""
    return Column(map_type.value_id, "value", map_type.value, map_type.value_nullable)


_HOOKS = tuple(
    f"{when}_{what}"
    for when in ("before", "after")
    for what in ("field", "list_element", "map_key", "map_value")
)


class SchemaVisitor(Generic[T], ABC):
    """Say what one node of a schema becomes, given what its children became.

    The ``before_*``/``after_*`` hooks run around each child and do nothing unless
    overridden. ``primitive`` covers every leaf type: the primitives, ``decimal`` and
    ``enum``.
    """

    _hooked: bool = False
    """Whether this visitor overrides a hook; set for each subclass. A walk with none
    skips them, and the stand-in fields of list elements and map keys and values."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._hooked = any(getattr(cls, hook) is not getattr(SchemaVisitor, hook) for hook in _HOOKS)

    def before_field(self, field: Column) -> None:
        """Called before a column or struct field is visited."""

    def after_field(self, field: Column) -> None:
        """Called after a column or struct field is visited."""

    def before_list_element(self, field: Column) -> None:
        """Called before a list's element is visited (see :func:`element_field`)."""

    def after_list_element(self, field: Column) -> None:
        """Called after a list's element is visited."""

    def before_map_key(self, field: Column) -> None:
        """Called before a map's key is visited (see :func:`key_field`)."""

    def after_map_key(self, field: Column) -> None:
        """Called after a map's key is visited."""

    def before_map_value(self, field: Column) -> None:
        """Called before a map's value is visited (see :func:`value_field`)."""

    def after_map_value(self, field: Column) -> None:
        """Called after a map's value is visited."""

    @abstractmethod
    def schema(self, schema: TableSchema, struct_result: T) -> T:
        """The whole schema; ``struct_result`` is what its columns (as a struct) became."""

    @abstractmethod
    def struct(self, struct: StructType, field_results: Sequence[T]) -> T:
        """A struct (the table's columns are one too), given each field's result."""

    @abstractmethod
    def field(self, field: Column, field_result: T) -> T:
        """A column or struct field, given its type's result."""

    @abstractmethod
    def list(self, list_type: ListType, element_result: T) -> T:
        """A list, given its element type's result."""

    @abstractmethod
    def map(self, map_type: MapType, key_result: T, value_result: T) -> T:
        """A map, given its key and value types' results."""

    @abstractmethod
    def primitive(self, primitive: IcetideType) -> T:
        """A leaf type: a primitive, ``decimal`` or ``enum``."""


class PathVisitor(SchemaVisitor[T], ABC):
    """A visitor that knows where it is: :attr:`path` holds the names from the root down
    to the field being visited (``element``, ``key`` and ``value`` inside lists and maps).

    Converters that name what they make after where it sits (Avro records, generated
    classes) and collectors keyed by path take this instead of passing a path down by
    hand. :meth:`enter` and :meth:`leave` run around every field, element, key and value;
    a subclass that needs more there overrides them and calls ``super()``.
    """

    def __init__(self, root: Sequence[str] = ()) -> None:
        self.path: list[str] = list(root)

    def enter(self, field: Column) -> None:
        """Called before any field, list element, map key or value is visited."""
        self.path.append(field.name)

    def leave(self, field: Column) -> None:
        """Called after any field, list element, map key or value is visited."""
        self.path.pop()

    def before_field(self, field: Column) -> None:
        self.enter(field)

    def after_field(self, field: Column) -> None:
        self.leave(field)

    def before_list_element(self, field: Column) -> None:
        self.enter(field)

    def after_list_element(self, field: Column) -> None:
        self.leave(field)

    def before_map_key(self, field: Column) -> None:
        self.enter(field)

    def after_map_key(self, field: Column) -> None:
        self.leave(field)

    def before_map_value(self, field: Column) -> None:
        self.enter(field)

    def after_map_value(self, field: Column) -> None:
        self.leave(field)


class HookVisitor(SchemaVisitor[None]):
    """A visitor that does all its work in the hooks, collecting as it enters and leaves
    fields; every node's result is ``None``."""

    def schema(self, schema: TableSchema, struct_result: None) -> None:
        return None

    def struct(self, struct: StructType, field_results: Sequence[None]) -> None:
        return None

    def field(self, field: Column, field_result: None) -> None:
        return None

    def list(self, list_type: ListType, element_result: None) -> None:
        return None

    def map(self, map_type: MapType, key_result: None, value_result: None) -> None:
        return None

    def primitive(self, primitive: IcetideType) -> None:
        return None


def visit(obj: Any, visitor: SchemaVisitor[T]) -> T:
    """Walk ``obj`` (a :class:`TableSchema` or a type) with ``visitor``, children first.

    >>> from icetide.schema.types import LongType
    >>> s = TableSchema("t", (Column(1, "id", LongType(), False),), ("id",))
    >>> index_by_name(s)
    {'id': 1}
    """
    # One dictionary lookup per node: a walk visits every node, and ``singledispatch``'s
    # wrapper cost as much again as the visitor's own work (Spark and Arrow schemas are
    # converted at every batch).
    walk = _WALKS.get(type(obj))
    if walk is not None:
        return walk(obj, visitor)
    if isinstance(obj, IcetideType):
        return visitor.primitive(obj)  # every type but the nested ones is a leaf
    raise SchemaError(f"cannot visit {type(obj).__name__}: not a schema or a column type")


def _schema(obj: TableSchema, visitor: SchemaVisitor[T]) -> T:
    return visitor.schema(obj, _struct(StructType(obj.columns), visitor))


def _struct(obj: StructType, visitor: SchemaVisitor[T]) -> T:
    make = visitor.field
    if not visitor._hooked:
        return visitor.struct(obj, [make(f, visit(f.type, visitor)) for f in obj.fields])
    before, after = visitor.before_field, visitor.after_field
    results = []
    for field in obj.fields:
        before(field)
        try:
            result = visit(field.type, visitor)
        finally:
            after(field)
        results.append(make(field, result))
    return visitor.struct(obj, results)


def _list(obj: ListType, visitor: SchemaVisitor[T]) -> T:
    if not visitor._hooked:
        return visitor.list(obj, visit(obj.element, visitor))
    element = element_field(obj)
    visitor.before_list_element(element)
    try:
        result = visit(obj.element, visitor)
    finally:
        visitor.after_list_element(element)
    return visitor.list(obj, result)


def _map(obj: MapType, visitor: SchemaVisitor[T]) -> T:
    if not visitor._hooked:
        return visitor.map(obj, visit(obj.key, visitor), visit(obj.value, visitor))
    key = key_field(obj)
    visitor.before_map_key(key)
    try:
        key_result = visit(obj.key, visitor)
    finally:
        visitor.after_map_key(key)
    value = value_field(obj)
    visitor.before_map_value(value)
    try:
        value_result = visit(obj.value, visitor)
    finally:
        visitor.after_map_value(value)
    return visitor.map(obj, key_result, value_result)


_WALKS: dict[type, Callable[[Any, SchemaVisitor[Any]], Any]] = {
    TableSchema: _schema,
    StructType: _struct,
    ListType: _list,
    MapType: _map,
}
"""How each node that holds others is walked, by its exact class."""


# -- two schemas side by side ------------------------------------------------------------

Partner = Column | None
"""A field's partner: the field of the other schema it is matched with, or ``None``."""


class PartnerVisitor(Generic[T], ABC):
    """Say what one node becomes given its partner, the node it is matched with in another
    schema (``None`` where that schema has none): PyIceberg's
    ``SchemaWithPartnerVisitor``, with its accessor's methods on the visitor.

    A type's partner is a type, a field's a field. By default partners are matched by
    id: a struct field with the partner struct's field of the same id, a list element or
    a map key or value with the partner list's or map's when its id is the same. A walk
    that matches otherwise (by name; raising on a changed id) overrides those methods.
    Children are visited whatever their partner, so a visitor of two nodes of different
    kinds gets its children's results and may drop them.
    """

    def field_partners(self, struct: StructType, partner: IcetideType | None) -> list[Partner]:
        """The partner of each of ``struct``'s fields, in order."""
        if not isinstance(partner, StructType):
            return [None] * len(struct.fields)
        by_id = {f.id: f for f in partner.fields}
        return [by_id.get(f.id) for f in struct.fields]

    def element_partner(self, list_type: ListType, partner: IcetideType | None) -> Partner:
        """The partner of ``list_type``'s element."""
        if isinstance(partner, ListType) and partner.element_id == list_type.element_id:
            return element_field(partner)
        return None

    def key_partner(self, map_type: MapType, partner: IcetideType | None) -> Partner:
        """The partner of ``map_type``'s key."""
        if isinstance(partner, MapType) and partner.key_id == map_type.key_id:
            return key_field(partner)
        return None

    def value_partner(self, map_type: MapType, partner: IcetideType | None) -> Partner:
        """The partner of ``map_type``'s value."""
        if isinstance(partner, MapType) and partner.value_id == map_type.value_id:
            return value_field(partner)
        return None

    def before_field(self, field: Column, partner: Partner) -> None:
        """Called before a column or struct field is visited."""

    def after_field(self, field: Column, partner: Partner) -> None:
        """Called after a column or struct field is visited."""

    def before_list_element(self, field: Column, partner: Partner) -> None:
        """Called before a list's element is visited."""

    def after_list_element(self, field: Column, partner: Partner) -> None:
        """Called after a list's element is visited."""

    def before_map_key(self, field: Column, partner: Partner) -> None:
        """Called before a map's key is visited."""

    def after_map_key(self, field: Column, partner: Partner) -> None:
        """Called after a map's key is visited."""

    def before_map_value(self, field: Column, partner: Partner) -> None:
        """Called before a map's value is visited."""

    def after_map_value(self, field: Column, partner: Partner) -> None:
        """Called after a map's value is visited."""

    @abstractmethod
    def schema(self, schema: TableSchema, partner: TableSchema | None, struct_result: T) -> T:
        """The whole schema, given what its columns (as a struct) became."""

    @abstractmethod
    def struct(
        self, struct: StructType, partner: IcetideType | None, field_results: Sequence[T]
    ) -> T:
        """A struct, given each field's result."""

    @abstractmethod
    def field(self, field: Column, partner: Partner, field_result: T) -> T:
        """A column or struct field, given its type's result."""

    @abstractmethod
    def list(self, list_type: ListType, partner: IcetideType | None, element_result: T) -> T:
        """A list, given its element type's result."""

    @abstractmethod
    def map(
        self, map_type: MapType, partner: IcetideType | None, key_result: T, value_result: T
    ) -> T:
        """A map, given its key and value types' results."""

    @abstractmethod
    def primitive(self, primitive: IcetideType, partner: IcetideType | None) -> T:
        """A leaf type."""


def visit_with_partner(
    obj: TableSchema | IcetideType,
    partner: TableSchema | IcetideType | None,
    visitor: PartnerVisitor[T],
) -> T:
    """Walk ``obj`` with ``visitor``, children first, beside ``partner`` (the same place in
    another schema: a schema beside a schema, a type beside a type).
    """
    if isinstance(obj, TableSchema):
        holder = partner if isinstance(partner, TableSchema) else None
        columns = StructType(holder.columns) if holder is not None else None
        struct = _partner_walk(StructType(obj.columns), columns, visitor)
        return visitor.schema(obj, holder, struct)
    if isinstance(partner, TableSchema):
        raise SchemaError("a type's partner is a type, not a schema")
    return _partner_walk(obj, partner, visitor)


def _partner_walk(obj: IcetideType, partner: IcetideType | None, visitor: PartnerVisitor[T]) -> T:
    if isinstance(obj, StructType):
        results = []
        for field, other in zip(obj.fields, visitor.field_partners(obj, partner), strict=True):
            visitor.before_field(field, other)
            try:
                result = _partner_walk(field.type, _type_of(other), visitor)
            finally:
                visitor.after_field(field, other)
            results.append(visitor.field(field, other, result))
        return visitor.struct(obj, partner, results)
    if isinstance(obj, ListType):
        element, other = element_field(obj), visitor.element_partner(obj, partner)
        visitor.before_list_element(element, other)
        try:
            result = _partner_walk(obj.element, _type_of(other), visitor)
        finally:
            visitor.after_list_element(element, other)
        return visitor.list(obj, partner, result)
    if isinstance(obj, MapType):
        key, other = key_field(obj), visitor.key_partner(obj, partner)
        visitor.before_map_key(key, other)
        try:
            key_result = _partner_walk(obj.key, _type_of(other), visitor)
        finally:
            visitor.after_map_key(key, other)
        value, other = value_field(obj), visitor.value_partner(obj, partner)
        visitor.before_map_value(value, other)
        try:
            value_result = _partner_walk(obj.value, _type_of(other), visitor)
        finally:
            visitor.after_map_value(value, other)
        return visitor.map(obj, partner, key_result, value_result)
    return visitor.primitive(obj, partner)


def _type_of(field: Partner) -> IcetideType | None:
    return field.type if field is not None else None


# -- indexes ------------------------------------------------------------------------------


class _IndexById(SchemaVisitor[dict[int, Column]]):
    """Every field by id; list elements and map keys/values as their stand-in fields."""

    def schema(self, schema: TableSchema, struct_result: dict[int, Column]) -> dict[int, Column]:
        return struct_result

    def struct(
        self, struct: StructType, field_results: Sequence[dict[int, Column]]
    ) -> dict[int, Column]:
        index: dict[int, Column] = {}
        for result in field_results:
            index.update(result)
        return index

    def field(self, field: Column, field_result: dict[int, Column]) -> dict[int, Column]:
        return {field.id: field, **field_result}

    def list(self, list_type: ListType, element_result: dict[int, Column]) -> dict[int, Column]:
        return {list_type.element_id: element_field(list_type), **element_result}

    def map(
        self, map_type: MapType, key_result: dict[int, Column], value_result: dict[int, Column]
    ) -> dict[int, Column]:
        return {
            map_type.key_id: key_field(map_type),
            **key_result,
            map_type.value_id: value_field(map_type),
            **value_result,
        }

    def primitive(self, primitive: IcetideType) -> dict[int, Column]:
        return {}


def index_by_id(schema: TableSchema | IcetideType) -> dict[int, Column]:
    """Every id in ``schema`` → its field, depth first in schema order.

    Unlike :meth:`TableSchema.find`, this reaches list elements and map keys and values
    too, as fields named ``element``, ``key`` and ``value``.

    >>> from icetide.schema.types import LongType, StringType
    >>> tags = Column(2, "tags", ListType(3, StringType()))
    >>> s = TableSchema("t", (Column(1, "id", LongType(), False), tags), ("id",))
    >>> index_by_id(s)[3]
    Column(id=3, name='element', type=StringType(), nullable=True, doc=None)
    """
    return visit(schema, _IndexById())


Path = tuple[str, ...]
"""A field's names from the root: ``("address", "city")``, ``("tags", "element")``."""


class _FieldPaths(PathVisitor[None], HookVisitor):
    """``(path, id)`` of every field as the walk enters it."""

    def __init__(self, root: Sequence[str]) -> None:
        super().__init__(root)
        self.found: list[tuple[Path, int]] = []

    def enter(self, field: Column) -> None:
        super().enter(field)
        self.found.append((tuple(self.path), field.id))


def field_paths(
    schema: TableSchema | IcetideType, root: Sequence[str] = ()
) -> list[tuple[Path, int]]:
    """``(path, id)`` of every field in ``schema``, depth first, each before what it holds;
    paths start with ``root``. List elements and map keys and values are named
    ``element``, ``key`` and ``value`` (see :func:`index_by_name` for the dotted form).

    >>> from icetide.schema.types import LongType, StringType
    >>> field_paths(StructType((Column(2, "tags", ListType(3, StringType())),)), ("t",))
    [(('t', 'tags'), 2), (('t', 'tags', 'element'), 3)]
    """
    paths = _FieldPaths(root)
    visit(schema, paths)
    return paths.found


def index_by_name(schema: TableSchema | IcetideType) -> dict[str, int]:
    """Every field's full dotted name → its id, as Iceberg names them.

    A struct field is ``address.city``, a list element ``tags.element``, a map's key and
    value ``attrs.key`` and ``attrs.value``; they chain (``orders.element.sku``). Two
    fields whose full names coincide (a column literally named ``address.city`` beside a
    struct ``address`` with a field ``city``) are a :class:`SchemaError`.

    >>> from icetide.schema.types import LongType, StringType
    >>> attrs = Column(2, "attrs", MapType(3, StringType(), 4, LongType()))
    >>> s = TableSchema("t", (Column(1, "id", LongType(), False), attrs), ("id",))
    >>> index_by_name(s)
    {'id': 1, 'attrs': 2, 'attrs.key': 3, 'attrs.value': 4}
    """
    index: dict[str, int] = {}
    for path, field_id in field_paths(schema):
        name = ".".join(path)
        if name in index:
            raise SchemaError(
                f"two fields are named {name!r} (ids {index[name]} and {field_id})",
                hint="a dot in a column name reads as a path here; rename one of them",
            )
        index[name] = field_id
    return index


def find_by_name(schema: TableSchema, name: str, *, case_sensitive: bool = True) -> Column:
    """The field with full dotted ``name`` (see :func:`index_by_name`).

    ``case_sensitive=False`` matches the way Spark resolves names; names in one struct
    differ by more than case, so the match is unique.

    >>> from icetide.schema.types import LongType, StringType
    >>> tags = Column(2, "tags", ListType(3, StringType()))
    >>> s = TableSchema("t", (Column(1, "id", LongType(), False), tags), ("id",))
    >>> find_by_name(s, "Tags.Element", case_sensitive=False).id
    3
    """
    names = index_by_name(schema)
    field_id = names.get(name)
    if field_id is None and not case_sensitive:
        folded = {n.casefold(): i for n, i in names.items()}
        field_id = folded.get(name.casefold())
    if field_id is None:
        same = [n for n in names if n.casefold() == name.casefold()]
        close = same or difflib.get_close_matches(name, list(names), n=1)
        raise SchemaError(
            f"table {schema.table}: no field named {name!r}"
            + (f"; did you mean {close[0]!r}?" if close else ""),
            hint="nested fields are written with dots: address.city, tags.element, "
            "attrs.key, attrs.value",
        )
    return index_by_id(schema)[field_id]
