"""A view's schema, derived from its SQL's logical plan with sqlglot.

The SQL is parsed in the Spark dialect, its columns qualified against the schemas of the
tables and views it reads (``qualify``: ``*`` expanded, every column tied to its source)
and its types annotated (``annotate_types``). Then each output column is traced to what
it is made of, so more than the SQL type survives:

* a plain column (``u.email``), a nested field (``u.address.city``) or an element
  (``tags[0]``, ``scores['x']``) keeps the source's type (enum included), doc and casing,
  and its nullability, made nullable when it comes from the optional side of an outer
  join (a ``LEFT`` join's right side, a ``RIGHT`` join's left side, both of a ``FULL``
  one) or through a nullable parent, index or key look-up;
* an alias renames and keeps the rest (structure included);
* ``CASE`` whose every result is a string literal is an enum of those literals, and a
  ``CASE`` whose results are all one enum column's type stays that enum;
* ``MIN``/``MAX``/``FIRST``/``LAST``/``ANY_VALUE`` keep their argument's type (enums too);
  ``COUNT`` is a non-null ``long``;
* anything else (functions, arithmetic, casts, other aggregates) takes sqlglot's inferred
  type, nullable when one of its inputs is, when it casts text to another type, when it
  divides, or when it is an aggregate without ``GROUP BY``;
* ``UNION`` takes the first branch's names and types, nullable where any branch is.

Subqueries and CTEs are traced the same way, recursively. What cannot be known fails with
the view and column named: a computed column without a name (Spark would call it
``avg(amount)``), a type sqlglot cannot infer (add a ``CAST``), an unknown table.
Column ids are not assigned here (see :func:`icetide.artifacts.views.ids.assign_ids`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, build_scope
from sqlglot.schema import MappingSchema

from icetide.artifacts.errors import ViewError
from icetide.errors import SchemaError
from icetide.schema.convert.spark import from_datatype, sql_type
from icetide.schema.types import (
    Column,
    EnumType,
    IcetideType,
    ListType,
    LongType,
    MapType,
    StructType,
)

DIALECT = "spark"
_ALIAS_META = "icetide.name"
_PASS_THROUGH_AGGREGATES = (exp.Min, exp.Max, exp.First, exp.Last, exp.AnyValue)


def parse(name: str, sql: str) -> exp.Query:
    """The view's SQL as one query; a clear error for anything else."""
    try:
        statements = sqlglot.parse(sql, dialect=DIALECT)
    except ParseError as exc:
        raise ViewError(f"view {name}: cannot parse its SQL: {exc}") from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise ViewError(
            f"view {name}: the SQL must be one SELECT (or UNION, or WITH … SELECT)",
            hint='e.g. --sql "SELECT id, email FROM users"',
        )
    return statements[0]


def dependencies(name: str, sql: str) -> tuple[str, ...]:
    """The tables and views the SQL reads, by name (CTE names excluded), sorted.

    >>> dependencies("v", "WITH t AS (SELECT * FROM a) SELECT * FROM t JOIN cdc.b USING (id)")
    ('a', 'b')
    """
    query = parse(name, sql)
    ctes = {c.alias_or_name.casefold() for c in query.find_all(exp.CTE)}
    names = {t.name for t in query.find_all(exp.Table) if t.name.casefold() not in ctes}
    return tuple(sorted(names, key=str.casefold))


@dataclass(frozen=True)
class _Out:
    """One output column while tracing: the column, and whether it needs a name."""

    column: Column
    named: bool


def derive(name: str, sql: str, inputs: Mapping[str, tuple[Column, ...]]) -> tuple[Column, ...]:
    """The columns of view ``name`` defined by ``sql`` over ``inputs`` (table or view name →
    its columns). Ids inside are the sources' and may repeat: assign ids afterwards."""
    query = parse(name, sql)
    by_fold = {k.casefold(): v for k, v in inputs.items()}
    unknown = [d for d in dependencies(name, sql) if d.casefold() not in by_fold]
    if unknown:
        raise ViewError(
            f"view {name}: reads {', '.join(unknown)}, which is neither a table nor a view",
            hint=_known(by_fold),
        )
    for table in query.find_all(exp.Table):
        # The registry knows tables and views by name: drop catalog and namespace.
        table.set("db", None)
        table.set("catalog", None)
    for alias in query.find_all(exp.Alias):
        alias.args["alias"].meta[_ALIAS_META] = alias.alias
    mapping: dict[str, object] = {
        t: {c.name: sql_type(c.type) for c in cols} for t, cols in by_fold.items() if cols
    }
    try:
        schema = MappingSchema(mapping, dialect=DIALECT)
        qualified = qualify(
            query, schema=schema, dialect=DIALECT, quote_identifiers=False, identify=False
        )
        annotated = annotate_types(qualified, schema=schema, dialect=DIALECT)
    except OptimizeError as exc:
        raise ViewError(f"view {name}: {exc}", hint=_known(by_fold)) from None
    scope = build_scope(annotated)
    if scope is None:
        raise ViewError(f"view {name}: cannot plan its SQL")
    outputs = _Tracer(name, by_fold).scope_columns(scope)
    for i, out in enumerate(outputs):
        if not out.named:
            raise ViewError(
                f"view {name}: column {i + 1} is computed and has no name",
                hint="name it with AS, e.g. SELECT avg(amount) AS avg_amount",
            )
    names = [o.column.name.casefold() for o in outputs]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise ViewError(
                f"view {name}: two columns are called {outputs[i].column.name!r}",
                hint="rename one with AS",
            )
    return tuple(o.column for o in outputs)


def _known(inputs: Mapping[str, tuple[Column, ...]]) -> str:
    return "known tables and views: " + (", ".join(sorted(inputs)) or "none")


class _Tracer:
    """Traces each output column of a scope to its sources (see module doc)."""

    def __init__(self, view: str, inputs: Mapping[str, tuple[Column, ...]]) -> None:
        self.view = view
        self.inputs = inputs
        self._cache: dict[int, list[_Out]] = {}

    def scope_columns(self, scope: Scope) -> list[_Out]:
        key = id(scope.expression)
        if key not in self._cache:
            self._cache[key] = self._columns(scope)
        return self._cache[key]

    def _columns(self, scope: Scope) -> list[_Out]:
        query = scope.expression
        if isinstance(query, exp.SetOperation):
            return self._union(scope)
        if not isinstance(query, exp.Select):
            raise ViewError(f"view {self.view}: cannot derive columns of {query.sql(DIALECT)}")
        optional = _optional_sources(query)
        grouped = query.args.get("group") is not None
        outs = []
        for projection in query.selects:
            expression = cast(exp.Expression, projection.unalias())
            column = self._expression(scope, expression, optional, grouped)
            alias = projection.args.get("alias") if isinstance(projection, exp.Alias) else None
            given = alias.meta.get(_ALIAS_META) if alias is not None else None
            if given is not None:
                outs.append(_Out(replace(column, name=given), True))
            else:
                traced = isinstance(expression, exp.Column | exp.Dot)
                outs.append(_Out(column, traced))
        return outs

    def _union(self, scope: Scope) -> list[_Out]:
        branches = [self.scope_columns(s) for s in scope.set_operation_scopes]
        first = branches[0]
        outs = []
        for i, out in enumerate(first):
            nullable = any(b[i].column.nullable for b in branches if i < len(b))
            types = {b[i].column.type for b in branches if i < len(b)}
            column = out.column if len(types) == 1 else replace(out.column, doc=None)
            outs.append(_Out(replace(column, nullable=nullable), out.named))
        return outs

    # -- one expression -----------------------------------------------------------------
    def _expression(
        self, scope: Scope, node: exp.Expression, optional: set[str], grouped: bool
    ) -> Column:
        traced = self._trace(scope, node, optional)
        if traced is not None:
            return traced
        if isinstance(node, exp.Count):
            return Column(0, node.sql(DIALECT), LongType(), nullable=False)
        if isinstance(node, _PASS_THROUGH_AGGREGATES):
            inner = self._trace(scope, node.this, optional)
            if inner is not None:
                return replace(inner, nullable=inner.nullable or not grouped, doc=None)
        if isinstance(node, exp.Case):
            case = self._case(scope, node, optional)
            if case is not None:
                return case
        return Column(
            0,
            node.sql(DIALECT),
            self._sql_type(node),
            nullable=self._nullable(scope, node, optional, grouped),
        )

    def _trace(self, scope: Scope, node: exp.Expression, optional: set[str]) -> Column | None:
        """The source column a column reference, nested field or element is, or None."""
        if isinstance(node, exp.Paren):
            return self._trace(scope, node.this, optional)
        if isinstance(node, exp.Column):
            return self._source_column(scope, node, optional)
        if isinstance(node, exp.Dot):
            parent = self._trace(scope, node.this, optional)
            if parent is None or not isinstance(parent.type, StructType):
                return None
            field = _field(parent.type.fields, node.name)
            if field is None:
                return None
            return replace(field, nullable=field.nullable or parent.nullable)
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
            parent = self._trace(scope, node.this, optional)
            if parent is None:
                return None
            if isinstance(parent.type, ListType):
                return Column(parent.type.element_id, parent.name, parent.type.element, True)
            if isinstance(parent.type, MapType):
                return Column(parent.type.value_id, parent.name, parent.type.value, True)
        return None

    def _source_column(self, scope: Scope, node: exp.Column, optional: set[str]) -> Column | None:
        table = node.table
        source = scope.sources.get(table)
        if source is None:
            return None
        if isinstance(source, Scope):
            columns = [o.column for o in self.scope_columns(source)]
        elif isinstance(source, exp.Table):
            columns = list(self.inputs.get(source.name.casefold(), ()))
        else:  # sqlglot annotates only these two; keep a stranger source harmless
            return None  # type: ignore[unreachable]
        found = _field(tuple(columns), node.name)
        if found is None:
            return None
        return replace(found, nullable=found.nullable or table in optional)

    def _case(self, scope: Scope, node: exp.Case, optional: set[str]) -> Column | None:
        results = [i.args["true"] for i in node.args.get("ifs", [])]
        default = node.args.get("default")
        nullable = default is None or isinstance(default, exp.Null)
        if default is not None and not isinstance(default, exp.Null):
            results.append(default)
        results = [r for r in results if not isinstance(r, exp.Null)]
        if not results:
            return None
        if all(isinstance(r, exp.Literal) and r.is_string for r in results):
            symbols = tuple(dict.fromkeys(r.this for r in results))
            return Column(0, node.sql(DIALECT), EnumType(symbols), nullable)
        traced = [self._trace(scope, r, optional) for r in results]
        enums = {t.type for t in traced if t is not None}
        if all(t is not None for t in traced) and len(enums) == 1:
            (enum,) = enums
            if isinstance(enum, EnumType):
                nullable = nullable or any(t is not None and t.nullable for t in traced)
                return Column(0, node.sql(DIALECT), enum, nullable)
        return None

    def _nullable(
        self, scope: Scope, node: exp.Expression, optional: set[str], grouped: bool
    ) -> bool:
        if isinstance(node, exp.Literal):
            return False
        if isinstance(node, exp.Null):
            return True
        if isinstance(node, exp.AggFunc) and not grouped:
            return True
        if any(isinstance(n, exp.Div | exp.Bracket) for n in node.walk()):
            return True
        for conversion in node.find_all(exp.Cast):
            source = conversion.this.type
            if source is not None and source.is_type(*exp.DataType.TEXT_TYPES):
                if not conversion.to.is_type(*exp.DataType.TEXT_TYPES):
                    return True
        for column in node.find_all(exp.Column):
            traced = self._source_column(scope, column, optional)
            if traced is None or traced.nullable:
                return True
        return False

    def _sql_type(self, node: exp.Expression) -> IcetideType:
        dtype = node.type
        try:
            if dtype is None:
                raise ValueError("no type")
            # Ids inside a derived type are placeholders (0): a view's schema file numbers
            # its columns when it is written.
            return from_datatype(dtype, lambda: 0)
        except (ValueError, SchemaError):
            raise ViewError(
                f"view {self.view}: cannot infer the type of {node.sql(DIALECT)}",
                hint="add a CAST(... AS <type>) around it",
            ) from None


def _optional_sources(select: exp.Select) -> set[str]:
    """The aliases whose columns an outer join can make null."""
    from_ = select.args.get("from_") or select.args.get("from")
    seen = [from_.this.alias_or_name] if from_ is not None else []
    optional: set[str] = set()
    for join in select.args.get("joins") or []:
        alias = join.this.alias_or_name
        side = (join.side or "").upper()
        if side in ("LEFT", "FULL"):
            optional.add(alias)
        if side in ("RIGHT", "FULL"):
            optional.update(seen)
        seen.append(alias)
    return optional


def _field(columns: tuple[Column, ...], name: str) -> Column | None:
    """The column called ``name`` (case-insensitive, as Spark resolves)."""
    folded = name.casefold()
    for column in columns:
        if column.name.casefold() == folded:
            return column
    return None
