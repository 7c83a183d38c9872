"""What source DDL says about a table's change, parsed with sqlglot: the evidence that
tells a rename from a drop plus an add, and where a column was added with which default.

A schema diff alone cannot tell ``RENAME COLUMN email TO mail`` from dropping ``email``
and adding ``mail``; the DDL can. Evidence comes from the DDL text a source keeps:

* MySQL/MariaDB: capture's schema history (``<state>/capture/<source>.history.jsonl``,
  :mod:`icetide.capture.mysql.history`) records every ``ALTER TABLE`` the binlog carries,
  in log order: :func:`from_mysql_history` reads a table's statements from it.
* PostgreSQL: pgoutput sends Relation messages (the new column list), never DDL text, so
  PostgreSQL evidence exists only when DDL is given (a migration file, ``--ddl``); without
  it a PostgreSQL change has no evidence, and a drop plus an add stays ambiguous.

Each statement becomes :class:`Evidence` items, one per action: ``rename`` (``RENAME
COLUMN a TO b``, MySQL ``CHANGE a b type``, PostgreSQL ``RENAME a TO b``), ``add`` (with
its declared type, ``DEFAULT`` and ``FIRST``/``AFTER``), ``drop``, ``type`` (MySQL
``MODIFY``/``CHANGE``, PostgreSQL ``ALTER COLUMN … TYPE``), ``nullability``, ``default``
(``ALTER COLUMN … SET/DROP DEFAULT``) and ``key`` (``DROP/ADD PRIMARY KEY``). A
statement sqlglot cannot parse is kept in :attr:`TableEvidence.unparsed` so a plan can say
its evidence is incomplete.

>>> ev = collect(["ALTER TABLE shop.customers CHANGE email mail VARCHAR(64)"], "mysql")
>>> ev.renames()
{'email': 'mail'}
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from icetide.errors import SchemaChangeError
from icetide.schema.convert import mysql as mysql_types
from icetide.schema.convert import postgres as pg_types
from icetide.schema.defaults import default_from_source
from icetide.schema.types import ColumnDefault, IcetideType, StringType

Dialect = Literal["mysql", "postgres"]
EvidenceKind = Literal["rename", "add", "drop", "type", "nullability", "default", "key"]


@dataclass(frozen=True)
class Evidence:
    """One action of one DDL statement on one table.

    ``column`` is the column as named *before* the statement (for ``add``: its new name);
    ``new_name`` the name after a rename. ``source_type`` is the declared type as the
    source writes it (``bigint``, ``decimal(12,2)``), ``icetide_type`` what it maps to.
    ``first``/``after`` place an added (or MySQL ``CHANGE``/``MODIFY``d) column. ``key``
    is the primary key after a ``key`` action (``()``: dropped).
    """

    kind: EvidenceKind
    table: str
    column: str | None = None
    new_name: str | None = None
    source_type: str | None = None
    icetide_type: IcetideType | None = None
    nullable: bool | None = None
    default: ColumnDefault | None = None
    has_default: bool = False
    """Whether the statement gave a ``DEFAULT`` (``default`` is ``None`` for NULL)."""
    first: bool = False
    after: str | None = None
    key: tuple[str, ...] | None = None
    statement: str = ""
    dialect: Dialect = "mysql"

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form for plans (only what is set)."""
        from icetide.schema.defaults import default_json

        data: dict[str, Any] = {"kind": self.kind, "table": self.table}
        for name in ("column", "new_name", "source_type", "nullable", "after"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        if self.icetide_type is not None:
            data["icetide_type"] = str(self.icetide_type)
        if self.has_default:
            data["default"] = default_json(self.default)
        if self.first:
            data["first"] = True
        if self.key is not None:
            data["key"] = list(self.key)
        data["statement"] = self.statement
        return data


@dataclass(frozen=True)
class TableEvidence:
    """Every evidence item for one table, in statement order, and what could not be read."""

    table: str
    items: tuple[Evidence, ...] = ()
    unparsed: tuple[str, ...] = field(default_factory=tuple)

    def renames(self) -> dict[str, str]:
        """Old name → final name for every column renamed, following chains (a→b, b→c
        gives a→c); a column renamed back to its own name is left out.

        >>> ddl = ["ALTER TABLE t RENAME COLUMN a TO b", "ALTER TABLE t RENAME COLUMN b TO c"]
        >>> ev = collect(ddl, "postgres")
        >>> ev.renames()
        {'a': 'c'}
        """
        current: dict[str, str] = {}  # original name → current name
        for item in self.items:
            if item.kind != "rename" or item.column is None or item.new_name is None:
                continue
            origin = next(
                (o for o, now in current.items() if now.casefold() == item.column.casefold()),
                item.column,
            )
            current[origin] = item.new_name
        return {old: new for old, new in current.items() if old.casefold() != new.casefold()}

    def of(self, kind: EvidenceKind, column: str | None = None) -> tuple[Evidence, ...]:
        """The items of ``kind`` (about ``column``, by name without case, when given)."""
        return tuple(
            i
            for i in self.items
            if i.kind == kind
            and (
                column is None
                or (i.column or "").casefold() == column.casefold()
                or (i.new_name or "").casefold() == column.casefold()
            )
        )

    def key_changed(self) -> bool:
        """Whether a statement dropped or added the primary key."""
        return any(i.kind == "key" for i in self.items)

    def final_key(self) -> tuple[str, ...] | None:
        """The primary key the statements leave (``()``: dropped, none added), or None
        when no statement touched it.

        >>> collect(["ALTER TABLE t DROP PRIMARY KEY"], "mysql").final_key()
        ()
        """
        keys = [i.key for i in self.items if i.kind == "key" and i.key is not None]
        return keys[-1] if keys else None

    def __bool__(self) -> bool:
        return bool(self.items)


NO_EVIDENCE = TableEvidence("")
"""No DDL is known for a change (a PostgreSQL Relation message, a new schema file)."""


def parse_ddl(sql: str, dialect: Dialect, table: str | None = None) -> tuple[Evidence, ...]:
    """The evidence items of one DDL text (one or more statements) in ``dialect``.

    Only ``ALTER TABLE`` statements give evidence; others give none. With ``table``, only
    statements on that table (by name, ignoring case and the schema/database part) count.
    Raises :class:`~icetide.errors.SchemaChangeError` when sqlglot cannot parse the text.

    >>> [e.kind for e in parse_ddl("ALTER TABLE t ADD COLUMN n INT DEFAULT 0 AFTER id", "mysql")]
    ['add']
    """
    try:
        with _quiet_sqlglot():
            statements = sqlglot.parse(sql, read=dialect)
    except SqlglotError as exc:
        raise SchemaChangeError(
            f"cannot parse {dialect} DDL {_short(sql)!r}: {str(exc).splitlines()[0]}",
            hint="give the statement as the source ran it, one ALTER TABLE per statement",
        ) from None
    found: list[Evidence] = []
    for statement in statements:
        if statement is None:
            continue
        if isinstance(statement, exp.Command) and str(statement.this).upper() == "ALTER":
            raise SchemaChangeError(
                f"cannot parse {dialect} DDL {_short(sql)!r}: sqlglot does not read this "
                "form of ALTER TABLE",
                hint="write one column per ADD/DROP/CHANGE clause",
            )
        if not isinstance(statement, exp.Alter) or str(statement.args.get("kind")).upper() != (
            "TABLE"
        ):
            continue
        target = statement.this
        name = target.name if isinstance(target, exp.Table) else str(target)
        if table is not None and name.casefold() != _bare(table).casefold():
            continue
        text = statement.sql(dialect=dialect)
        for action in statement.args.get("actions") or ():
            found += _action(action, statement, name, text, dialect)
    return tuple(found)


def collect(statements: Iterable[str], dialect: Dialect, table: str | None = None) -> TableEvidence:
    """The evidence of DDL statements in the order they ran; unreadable ones are kept in
    :attr:`TableEvidence.unparsed` rather than failing the whole plan."""
    items: list[Evidence] = []
    unparsed: list[str] = []
    for sql in statements:
        try:
            items += parse_ddl(sql, dialect, table)
        except SchemaChangeError:
            unparsed.append(sql)
    name = table or (items[0].table if items else "")
    return TableEvidence(_bare(name), tuple(items), tuple(unparsed))


def from_mysql_history(
    path: Path, db: str, table: str, *, after_position: int | None = None
) -> TableEvidence:
    """The evidence in capture's MySQL schema history for ``db.table``: its DDL entries
    (after ``after_position``, the ordered position key, when given), in log order."""
    from icetide.capture.mysql.history import DdlHistory

    if not path.is_file():
        return TableEvidence(table)
    statements = [
        entry.ddl
        for entry in DdlHistory(path)
        if entry.kind == "ddl"
        and entry.ddl
        and entry.db.casefold() == db.casefold()
        and entry.table.casefold() == table.casefold()
        and (after_position is None or entry.position_key > after_position)
    ]
    return collect(statements, "mysql", table)


# -- one action ---------------------------------------------------------------------------


def _action(
    action: exp.Expression, alter: exp.Alter, table: str, text: str, dialect: Dialect
) -> list[Evidence]:
    base: dict[str, Any] = {"table": table, "statement": text, "dialect": dialect}
    if isinstance(action, exp.ColumnDef):
        return [_column_def("add", action, action.name, base)]
    if isinstance(action, exp.ModifyColumn):
        definition = action.this
        old = action.args.get("rename_from")
        items = []
        if old is not None and old.name.casefold() != definition.name.casefold():
            items.append(Evidence("rename", column=old.name, new_name=definition.name, **base))
        items.append(_column_def("type", definition, definition.name, base))
        return items
    if isinstance(action, exp.RenameColumn):
        return [
            Evidence("rename", column=action.this.name, new_name=action.args["to"].name, **base)
        ]
    if isinstance(action, exp.AlterRename):
        # PostgreSQL `RENAME a TO b` (without COLUMN) reads as a table rename whose target
        # sits in the statement's options; `RENAME TO u` (a table rename) has no options.
        options = [o for o in alter.args.get("options") or () if isinstance(o, exp.ToTableProperty)]
        if options:
            return [
                Evidence("rename", column=action.this.name, new_name=options[0].this.name, **base)
            ]
        return []
    if isinstance(action, exp.Drop):
        kind = str(action.args.get("kind") or "").upper()
        if kind == "COLUMN":
            return [
                Evidence("drop", column=c.name, **base) for c in action.args.get("tables") or ()
            ]
        if kind == "CONSTRAINT":
            names = [t.name for t in action.args.get("tables") or ()]
            # PostgreSQL names the key constraint <table>_pkey unless told otherwise.
            if any(n.casefold() == f"{table}_pkey".casefold() for n in names):
                return [Evidence("key", key=(), **base)]
        return []
    if isinstance(action, exp.DropPrimaryKey):
        return [Evidence("key", key=(), **base)]
    if isinstance(action, exp.AddConstraint):
        for key in action.find_all(exp.PrimaryKey):
            columns = tuple(e.name for e in key.expressions)
            return [Evidence("key", key=columns, **base)]
        return []
    if isinstance(action, exp.AlterColumn):
        return _alter_column(action, base, dialect)
    return []


def _alter_column(
    action: exp.AlterColumn, base: dict[str, Any], dialect: Dialect
) -> list[Evidence]:
    name = action.name
    dtype = action.args.get("dtype")
    if dtype is not None:
        source, mapped = _type(dtype, dialect)
        return [Evidence("type", column=name, source_type=source, icetide_type=mapped, **base)]
    if "default" in action.args and action.args.get("default") is not None:
        value = action.args["default"]
        return [
            Evidence(
                "default",
                column=name,
                default=_default(value, None, dialect),
                has_default=True,
                **base,
            )
        ]
    if action.args.get("drop") and action.args.get("allow_null") is None:
        return [Evidence("default", column=name, has_default=True, **base)]  # DROP DEFAULT
    if action.args.get("allow_null") is not None:
        return [
            Evidence("nullability", column=name, nullable=bool(action.args["allow_null"]), **base)
        ]
    return []


def _column_def(
    kind: EvidenceKind, definition: exp.ColumnDef, name: str, base: dict[str, Any]
) -> Evidence:
    dialect: Dialect = base["dialect"]
    dtype = definition.args.get("kind")
    source, mapped = _type(dtype, dialect) if dtype is not None else (None, None)
    nullable: bool | None = None
    default: ColumnDefault | None = None
    has_default = False
    for constraint in definition.args.get("constraints") or ():
        inner = constraint.args.get("kind")
        if isinstance(inner, exp.NotNullColumnConstraint):
            nullable = bool(inner.args.get("allow_null"))
        elif isinstance(inner, exp.DefaultColumnConstraint):
            has_default = True
            default = _default(inner.this, mapped, dialect)
        elif isinstance(inner, exp.PrimaryKeyColumnConstraint):
            nullable = False
    position = definition.args.get("position")
    first, after = False, None
    if position is not None:
        where = str(position.args.get("position") or "").upper()
        first = where == "FIRST"
        after = position.this.name if where == "AFTER" and position.this is not None else None
    return Evidence(
        kind,
        column=name,
        source_type=source,
        icetide_type=mapped,
        nullable=nullable,
        default=default,
        has_default=has_default,
        first=first,
        after=after,
        **base,
    )


def _type(dtype: exp.Expression, dialect: Dialect) -> tuple[str, IcetideType | None]:
    """The declared type as the source writes it, and the icetide type it maps to
    (``None`` when the converter does not know it)."""
    text = dtype.sql(dialect=dialect).lower()
    try:
        mapped = (mysql_types if dialect == "mysql" else pg_types).icetide_type(text)[0]
    except Exception:  # the converter's own error: an unknown type is no evidence of one
        mapped = None
    return text, mapped


def _default(
    value: exp.Expression, ctype: IcetideType | None, dialect: Dialect
) -> ColumnDefault | None:
    return default_from_source(ctype or StringType(), value, dialect)


@contextmanager
def _quiet_sqlglot() -> Iterator[None]:
    """sqlglot logs a warning when it falls back to a raw command; the plan reports those
    statements itself (``unparsed``), so the log line would only repeat it."""
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _bare(name: str) -> str:
    return name.rsplit(".", 1)[-1].strip('`"')


def _short(sql: str) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= 120 else text[:117] + "..."
