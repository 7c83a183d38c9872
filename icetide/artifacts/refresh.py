"""Event-driven refresh: a table or view changed; publish it, then everything above it.

Two events, small on purpose so any producer can send them:

* :class:`TableChanged` ``(table, version)``: the table's schema now is ``version`` of its
  history (the evolution path sends it after it records an applied schema version);
* :class:`ViewChanged` ``(name, sql)``: a view was created or altered (``sql``), or should
  be derived again (``sql=None``).

:meth:`Refresher.refresh` is **order-independent**: a table only moves forward (an event
for a version older than the one known changes nothing); a view whose inputs are not all
known is recorded as ``pending`` with what it misses, and is derived as soon as they
appear; and refreshing anything re-derives everything that depends on it, transitively,
in dependency order. So events can arrive in any order and the end state is the same: each
view derived from the newest version of everything below it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from icetide.artifacts.errors import ArtifactError, ViewError
from icetide.artifacts.publish import Outcome, Publisher, write_avsc
from icetide.artifacts.shape import Naming, Shape
from icetide.artifacts.versioning import column_history_versions, table_history_versions
from icetide.artifacts.views.derive import dependencies, derive
from icetide.artifacts.views.ids import assign_ids
from icetide.artifacts.views.registry import ViewRecord, ViewRegistry, check_view_name
from icetide.schema.history import SchemaHistory
from icetide.schema.types import Column


@dataclass(frozen=True)
class TableChanged:
    """Table ``table`` is now at schema ``version`` (created, or altered)."""

    table: str
    version: int


@dataclass(frozen=True)
class ViewChanged:
    """View ``name`` was created or altered to ``sql`` (``None``: derive it again)."""

    name: str
    sql: str | None = None


Event = TableChanged | ViewChanged


@dataclass
class RefreshReport:
    """What one refresh did."""

    tables: list[str] = field(default_factory=list)
    """Tables whose known version moved."""
    views: list[str] = field(default_factory=list)
    """Views derived again (in order), whether or not their columns changed."""
    changed: list[str] = field(default_factory=list)
    """Views that got a new schema version."""
    pending: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """View → why it could not be derived (its older versions stay published)."""
    published: list[Outcome] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "tables": self.tables,
            "views": self.views,
            "changed": self.changed,
            "pending": self.pending,
            "failed": self.failed,
            "published": [o.to_dict() for o in self.published if o.action == "published"],
        }


Histories = Callable[[str], SchemaHistory | None]
"""Table name → its schema history (None: no such table)."""


class Refresher:
    """Applies events to the view registry, deriving views and publishing artifacts.

    ``publisher`` (optional) publishes each refreshed table and view version;
    ``avsc_path`` (optional) says where a table's ``.avsc`` file goes (beside its schema
    file) and it is rewritten when the table moves.
    """

    def __init__(
        self,
        registry: ViewRegistry,
        histories: Histories,
        naming: Naming,
        *,
        publisher: Publisher | None = None,
        avsc_path: Callable[[str], Path | None] | None = None,
    ) -> None:
        self.registry = registry
        self.histories = histories
        self.naming = naming
        self.publisher = publisher
        self.avsc_path = avsc_path

    def refresh(self, event: Event) -> RefreshReport:
        """Apply one event (see module doc); holds the registry lock throughout."""
        report = RefreshReport()
        with self.registry.lock():
            if isinstance(event, TableChanged):
                self._table(event, report)
                self._cascade({event.table}, report)
            else:
                self._view(event, report)
                self._cascade({event.name}, report, include_start=True)
        return report

    def snapshot(self, tables: list[str]) -> RefreshReport:
        """Snapshot-driven refresh: every table at its history's newest version (whatever
        was known before), then every view derived again; each published where its
        content changed. Idempotent; concurrent runs queue on the registry lock."""
        report = RefreshReport()
        with self.registry.lock():
            known = self.registry.tables()
            histories = [self._history(table) for table in tables]
            for history in histories:
                if known.get(history.table) != history.current.version:
                    known[history.table] = history.current.version
                    report.tables.append(history.table)
            if report.tables:
                self.registry.set_tables(known)
            for history in histories:
                self.publish_table(history, history.current.version, report)
            records = self.registry.all()
            self._cascade({v.name for v in records}, report, include_start=True, records=records)
        return report

    def adopt_tables(self, tables: list[str]) -> list[str]:
        """Know each table at its history's newest version without publishing it (views
        are derived from what is known); returns the tables whose version moved."""
        moved = []
        with self.registry.lock():
            known = self.registry.tables()
            for table in tables:
                version = self._history(table).current.version
                if known.get(table) != version:
                    known[table] = version
                    moved.append(table)
            self.registry.set_tables(known)
        return moved

    # -- tables ---------------------------------------------------------------------------
    def _history(self, table: str) -> SchemaHistory:
        history = self.histories(table)
        if history is None:
            raise ArtifactError(
                f"table {table}: no schema history",
                hint="the table must be in the pipeline config with its schema file",
            )
        return history

    def _table(self, event: TableChanged, report: RefreshReport) -> None:
        history = self._history(event.table)
        history.get(event.version)  # a clear error when the history lacks it
        known = self.registry.tables()
        if known.get(event.table, 0) >= event.version:
            return
        # Published first, recorded second: a publish that fails (no `build` installed,
        # a full disk) leaves the table at its old version, so the next event retries it.
        self.publish_table(history, event.version, report)
        known[event.table] = event.version
        self.registry.set_tables(known)
        report.tables.append(event.table)

    def publish_table(self, history: SchemaHistory, upto: int, report: RefreshReport) -> None:
        """Publish every version of ``history`` up to ``upto`` (unchanged ones cost a
        hash) and write the newest one's ``.avsc``."""
        schemas = [s for s in history.versions if s.version <= upto]
        shapes = [self.naming.table(s) for s in schemas]
        if self.avsc_path is not None:
            path = self.avsc_path(history.table)
            if path is not None:
                write_avsc(path, shapes[-1])
        if self.publisher is not None:
            versions = table_history_versions(schemas)
            report.published += self.publisher.publish_all(zip(shapes, versions, strict=True))

    # -- views ----------------------------------------------------------------------------
    def _view(self, event: ViewChanged, report: RefreshReport) -> None:
        check_view_name(event.name)
        record = self.registry.get(event.name)
        if event.sql is None:
            if record is None:
                raise ViewError(
                    f"no view called {event.name}",
                    hint="add it: icetide views add NAME --sql ...",
                )
            return
        if self.histories(event.name) is not None or event.name in self.registry.tables():
            raise ViewError(f"view {event.name}: a table has that name", hint="pick another")
        deps = dependencies(event.name, event.sql)
        if event.name.casefold() in {d.casefold() for d in deps}:
            raise ViewError(f"view {event.name} reads itself")
        name = record.name if record is not None else event.name
        self._check_cycle(name, deps)
        if record is None:
            record = ViewRecord(name, event.sql, deps)
        else:
            record = replace(record, sql=event.sql, dependencies=deps)
        views = {v.name.casefold(): v for v in self.registry.all()}
        columns, _versions, missing = self._inputs(record, views)
        if not missing:
            derive(name, event.sql, columns)  # refuse SQL that cannot work before keeping it
        self.registry.put(record)

    def _check_cycle(self, name: str, deps: tuple[str, ...]) -> None:
        """Refuse SQL that would make ``name`` read itself through other views."""
        views = {v.name.casefold(): v for v in self.registry.all()}
        trail: list[str] = []

        def reaches(key: str) -> bool:
            if key == name.casefold():
                return True
            view = views.get(key)
            if view is None or key in trail:
                return False
            trail.append(key)
            return any(reaches(d.casefold()) for d in view.dependencies)

        for dep in deps:
            if reaches(dep.casefold()):
                raise ViewError(
                    f"view {name}: views would depend on each other in a cycle "
                    f"({name} reads {dep}, which reads {name})",
                    hint="a view can read tables and other views, never itself",
                )

    def _inputs(
        self, record: ViewRecord, views: dict[str, ViewRecord]
    ) -> tuple[dict[str, tuple[Column, ...]], dict[str, int], list[str]]:
        """The columns and versions of a view's inputs, and the inputs not known yet."""
        tables = self.registry.tables()
        columns: dict[str, tuple[Column, ...]] = {}
        versions: dict[str, int] = {}
        missing = []
        folded_tables = {t.casefold(): t for t in tables}
        for dep in record.dependencies:
            key = dep.casefold()
            view = views.get(key)
            if key in folded_tables:
                table = folded_tables[key]
                schema = self._history(table).get(tables[table])
                columns[dep], versions[table] = schema.columns, schema.version
            elif view is not None and view.status == "ready" and view.current is not None:
                columns[dep], versions[view.name] = view.current.columns, view.current.version
            else:
                missing.append(dep)
        return columns, versions, missing

    def _cascade(
        self,
        start: set[str],
        report: RefreshReport,
        include_start: bool = False,
        records: list[ViewRecord] | None = None,
    ) -> None:
        """Derive again every view above ``start`` (and ``start`` itself when it is a
        view and ``include_start``), in dependency order; pending views whose inputs
        appeared are derived too. ``records``: the registry's views, when just read."""
        views = {v.name.casefold(): v for v in (records or self.registry.all())}
        dependents: dict[str, set[str]] = {}
        for view in views.values():
            for dep in view.dependencies:
                dependents.setdefault(dep.casefold(), set()).add(view.name.casefold())
        todo = {s.casefold() for s in start if include_start and s.casefold() in views}
        frontier = [s.casefold() for s in start]
        while frontier:
            for above in dependents.get(frontier.pop(), ()):
                if above not in todo:
                    todo.add(above)
                    frontier.append(above)
        for key in _in_dependency_order(todo, views):
            record = views[key]
            updated = self._derive(record, views, report)
            views[key] = updated

    def _derive(
        self, record: ViewRecord, views: dict[str, ViewRecord], report: RefreshReport
    ) -> ViewRecord:
        columns, versions, missing = self._inputs(record, views)
        report.views.append(record.name)
        current = record.current
        if (
            not missing
            and record.status == "ready"
            and current is not None
            and record.derived_sql == record.sql
            and current.inputs == versions
        ):
            updated = record  # nothing under it moved and its SQL is the same: no derive
        elif missing:
            updated = replace(record, status="pending", missing=tuple(missing), error=None)
            report.pending.append(record.name)
        else:
            try:
                derived = derive(record.name, record.sql, columns)
            except ViewError as exc:
                updated = replace(record, status="failed", missing=(), error=exc.render())
                report.failed[record.name] = exc.render()
                if updated != record:
                    self.registry.put(updated)
                return updated
            previous = record.current.columns if record.current else ()
            numbered, last = assign_ids(derived, previous, record.last_column_id)
            before = record.current.version if record.current else 0
            updated = record.with_columns(numbered, last, versions)
            if updated.current is not None and updated.current.version != before:
                report.changed.append(record.name)
        if updated != record:
            self.registry.put(updated)
        if updated.status == "ready":
            self.publish_view(updated, report, views)
        return updated

    def publish_view(
        self,
        record: ViewRecord,
        report: RefreshReport,
        views: dict[str, ViewRecord] | None = None,
    ) -> None:
        """Publish every derived version of a view (unchanged ones cost a lookup)."""
        if self.publisher is None or not record.versions:
            return
        history = [v.columns for v in record.versions]
        relations = self.relations(record, views)
        shapes = [
            self.view_shape(record, i, relations=relations) for i in range(len(record.versions))
        ]
        versions = column_history_versions(history)
        report.published += self.publisher.publish_all(zip(shapes, versions, strict=True))

    def view_shape(
        self,
        record: ViewRecord,
        index: int = -1,
        *,
        relations: tuple[tuple[str, str, str], ...] | None = None,
    ) -> Shape:
        """The shape of one of a view's versions (the newest by default)."""
        version = record.versions[index]
        if relations is None:
            relations = self.relations(record)
        return self.naming.view(
            record.name, record.sql, version.columns, version.version, relations
        )

    def relations(
        self, record: ViewRecord, views: dict[str, ViewRecord] | None = None
    ) -> tuple[tuple[str, str, str], ...]:
        """What a view reads, every level down, each input before what reads it
        (:attr:`~icetide.artifacts.shape.Shape.relations`)."""
        if views is None:
            views = {v.name.casefold(): v for v in self.registry.all()}
        tables = {t.casefold(): t for t in self.registry.tables()}
        found: list[tuple[str, str, str]] = []
        seen: set[str] = set()

        def visit(name: str) -> None:
            key = name.casefold()
            if key in seen:
                return
            seen.add(key)
            view = views.get(key)
            if view is not None:
                for dep in view.dependencies:
                    visit(dep)
                found.append((name, "view", view.sql))
            elif key in tables:
                found.append((name, "table", self.naming.base_table(tables[key])))

        for dep in record.dependencies:
            visit(dep)
        return tuple(found)


def _in_dependency_order(todo: set[str], views: dict[str, ViewRecord]) -> list[str]:
    """``todo`` sorted so each view comes after the views of ``todo`` it reads."""
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(key: str, trail: tuple[str, ...]) -> None:
        if state.get(key) == 2:
            return
        if state.get(key) == 1:
            cycle = " → ".join(views[k].name for k in (*trail, key))
            raise ViewError(f"views depend on each other in a cycle: {cycle}")
        state[key] = 1
        for dep in views[key].dependencies:
            if dep.casefold() in todo:
                visit(dep.casefold(), (*trail, key))
        state[key] = 2
        order.append(key)

    for key in sorted(todo):
        visit(key, ())
    return order
