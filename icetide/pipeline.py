"""The Pipeline a stage receives: config, a schema store, table references, a reporter.

The ledger, merge, bootstrap and verify take one :class:`Pipeline` instead of a
``(Config, dict[str, TableSchema])`` pair and a log callback (capture, which needs no
schema, takes the config and the same :class:`~icetide.progress.Reporter`; status only
the config). Two things follow:

* the schema of a table is asked for at each batch boundary (:meth:`Pipeline.schema`),
  from a :class:`SchemaStore` that notices when a schema file changed, so a schema can
  change under a running stage without a restart (evolution builds on this);
* progress is reported as structured :class:`~icetide.progress.Progress` records through
  one :class:`~icetide.progress.Reporter`, which the CLI renders as text or JSON lines on
  stderr and tests collect.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icetide.config.loader import load_schema_file, load_table_schemas
from icetide.config.model import Config
from icetide.config.tables import TableConfig
from icetide.errors import ConfigError, IcetideError, SchemaError
from icetide.evolution import audit
from icetide.lake.tables import TableRefs
from icetide.progress import Reporter
from icetide.schema.connector import read_hints
from icetide.schema.contract.base import DropMode
from icetide.schema.contract.builder import TableContract, TableSettings
from icetide.schema.file import dump_schema_file
from icetide.schema.history import SchemaHistory
from icetide.schema.model import TableSchema
from icetide.state.store import LocalStore, StateFile, state_store


@dataclass
class _Entry:
    stamp: tuple[int, int, int]
    schema: TableSchema


class SchemaStore:
    """The current schema of each table, read again when its file changes.

    A changed file must still fit the config and follow from the previous version (a
    higher version, ids never reused, the same key): :class:`SchemaHistory` checks the
    step. Each table's versions are kept on the pipeline's state location
    (:func:`~icetide.state.store.state_store`: ``state:``, else ``state_dir``) as
    ``schemas/<table>.history.yaml``, replaced whole at each new version, so a machine
    that replaces this one finds the versions evolution applied here.

    Which schema counts when the schema file and the state location disagree (a new
    machine given the schema files as they were committed, while ``icetide run`` had
    applied a change since): the higher version. A state location ahead of the file
    wins: the file is written again from it (a missing file too) and the reporter says
    so, naming both; the file is then the copy to commit (and so is the audit log
    beside it, :mod:`icetide.evolution.audit`, written again from the state location's
    log when that has records the copy lacks). A file ahead of the state
    location is a person's edit: it becomes the next version, as when it changes while
    the pipeline runs.
    """

    def __init__(
        self,
        config: Config,
        schemas: Mapping[str, TableSchema] | None = None,
        reporter: Reporter | None = None,
    ) -> None:
        self.config = config
        self.state = state_store(config)
        self.reporter = reporter or Reporter()
        if schemas is None:
            for table in config.tables:
                self._restore(table)
        given = dict(schemas) if schemas is not None else load_table_schemas(config)
        self._entries: dict[str, _Entry] = {}
        self._histories: dict[str, SchemaHistory] = {}
        for table in config.tables:
            schema = given[table.name]
            self._entries[table.name] = _Entry(_stamp(table.schema_file), schema)
            self._histories[table.name] = self._remember(table.name, schema)

    def current(self, table: str) -> TableSchema:
        """The schema of ``table`` now: the file is read again if it changed on disk."""
        entry = self._entries[table]
        config = self.config.table(table)
        stamp = _stamp(config.schema_file)
        if stamp != entry.stamp and stamp != (0, 0, 0):
            schema = self._read(config)
            if schema != entry.schema:
                self._histories[table] = self._remember(table, schema)
            self._entries[table] = _Entry(stamp, schema)
        return self._entries[table].schema

    def history(self, table: str) -> SchemaHistory:
        """Every version of ``table``'s schema this pipeline has used."""
        self.current(table)
        return self._histories[table]

    def all(self) -> dict[str, TableSchema]:
        """Every table's current schema, keyed by table name."""
        return {t.name: self.current(t.name) for t in self.config.tables}

    def record(self, table: str, schema: TableSchema, *, key_change: bool = False) -> SchemaHistory:
        """Make ``schema`` the table's new version: the history first (the step checked;
        a primary-key change only with ``key_change``), then the schema file, replaced
        atomically. Recording the version the history already ends with rewrites only
        the file, so a rerun after a crash between the two completes it."""
        config = self.config.table(table)
        with _WRITES:
            history = self._stored(table) or self.history(table)
            if history.current != schema:
                history = history.add(schema, key_change=key_change)
                self._history_file(table).write(history.to_yaml().encode())
            self._write_schema_file(config, schema)
        self._histories[table] = history
        self._entries[table] = _Entry(_stamp(config.schema_file), schema)
        return history

    def _read(self, table: TableConfig) -> TableSchema:
        schema = load_schema_file(table.schema_file, f"schema of table {table.name}")
        if schema.table and schema.table.casefold() != table.name.casefold():
            raise ConfigError(
                f"{table.schema_file} now describes table {schema.table!r}, not {table.name!r}",
                hint="fix `table:` in the schema file",
            )
        return schema if schema.table else schema.renamed(table.name)

    def _history_file(self, table: str) -> StateFile:
        return self.state.file(f"schemas/{table}.history.yaml")

    def _stored(self, table: str) -> SchemaHistory | None:
        """The table's history on the state location (None: it has none yet). A history
        kept in ``state_dir`` before ``state:`` named another location is copied there
        the first time, so the versions before the move are not lost."""
        file = self._history_file(table)
        data = file.read()
        if data is None:
            local = LocalStore(self.config.resolved_path(self.config.state_dir))
            earlier = local.file(f"schemas/{table}.history.yaml")
            if earlier.where == file.where or (data := earlier.read()) is None:
                return None
            history = SchemaHistory.from_yaml(data.decode("utf-8"), earlier.where)
            file.write(data)
            return history
        return SchemaHistory.from_yaml(data.decode("utf-8"), file.where)

    def _write_schema_file(self, table: TableConfig, schema: TableSchema) -> None:
        file = self.config.resolved_path(table.schema_file)
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_name(f".{file.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        dump_schema_file(schema, tmp)
        os.replace(tmp, file)

    def _restore(self, table: TableConfig) -> None:
        """Write ``table``'s schema file from the state location's history when the file
        is missing or has an older version (see the class doc), and say so."""
        history = self._stored(table.name)
        if history is None:
            return
        newest = history.current
        file = self.config.resolved_path(table.schema_file)
        audit.restore_copy(audit.audit_file(self.state, table.name), audit.audit_path(file))
        if file.is_file():
            try:
                found = self._read(table).version
            except IcetideError:
                return  # the config loader reports what is wrong with the file
            if found >= newest.version:
                return
            why = f"its version {found} is older than version {newest.version} there"
        else:
            why = f"it was missing; version {newest.version} is the newest there"
        self._write_schema_file(table, newest)
        self.reporter.report(
            "schema",
            f"schema {table.name}: {file} written from the state location's history "
            f"({self._history_file(table.name).where}): {why}; commit the file to keep it",
            table=table.name,
            version=newest.version,
        )

    def _remember(self, table: str, schema: TableSchema) -> SchemaHistory:
        """Add ``schema`` to the table's history (on the state location) unless it is
        there."""
        with _WRITES:
            history = self._stored(table)
            if history is None:
                history = SchemaHistory(table, (schema,))
            elif history.current == schema:
                return history
            elif schema in history.versions:
                # An older version: evolution wrote the history and has yet to replace the
                # file (it completes that on its rerun); run with the file until then.
                return history
            elif history.current.version == schema.version:
                # The same version with other content: the file was edited in place; keep
                # the history as it is rather than refuse to run (evolution decides later).
                return history
            else:
                try:
                    history = history.add(schema)
                except SchemaError as exc:
                    raise SchemaError(
                        f"schema of table {table} changed in a way its history refuses: "
                        f"{exc.message}",
                        hint=exc.hint,
                    ) from None
            self._history_file(table).write(history.to_yaml().encode())
            return history


_WRITES = threading.RLock()
"""Held while a history is read and replaced: stages of one process may record side by
side (the state location's files are replaced whole, the last write wins)."""


def _stamp(path: Path) -> tuple[int, int, int]:
    """What tells a changed file: modification time (ns), size and inode."""
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0, 0)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class Pipeline:
    """What every stage receives: config, schema store, table references, reporter."""

    def __init__(
        self,
        config: Config,
        schemas: SchemaStore | Mapping[str, TableSchema] | None = None,
        reporter: Reporter | None = None,
    ) -> None:
        self.config = config
        self.reporter = reporter or Reporter()
        self.schemas = (
            schemas
            if isinstance(schemas, SchemaStore)
            else SchemaStore(config, schemas, self.reporter)
        )

    def schema(self, table: str) -> TableSchema:
        """The current schema of ``table``: ask at each batch boundary, not once."""
        return self.schemas.current(table)

    def refs(self, table: str) -> TableRefs:
        """The Iceberg names of ``table``'s base, ledger and dead-letter tables."""
        return TableRefs.of(self.config, table)

    def contract(self, table: str) -> TableContract:
        """The table contract of ``table`` from its current schema and layout settings."""
        settings = self.config.table(table)
        return TableContract(
            self.schema(table),
            TableSettings(settings.buckets, settings.mode, settings.format_version),
        )

    def read_hints(self, table: str) -> Mapping[int, str]:
        """How the values of ``table``'s schemaless messages arrive, by column id: the
        schema file's hints with the connector's settings (icetide.schema.connector)."""
        return read_hints(self.schema(table), self.config.connector(table))

    def drop_mode(self, table: str) -> DropMode:
        """What a column dropped at the source does to ``table``'s tables (its
        ``evolution.drop``: ``soft`` keeps it, no longer written)."""
        evolution = self.config.table(table).evolution
        return evolution.drop if evolution is not None else "soft"

    def report(self, stage: str, message: str, *, table: str | None = None, **figures: Any) -> None:
        """Report progress (see :class:`Reporter`)."""
        self.reporter.report(stage, message, table=table, **figures)
