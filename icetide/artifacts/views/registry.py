"""icetide's own view registry, kept in a folder beside the schema files.

Iceberg 1.10's ``HadoopCatalog`` (icetide's default catalog) does not implement Iceberg's
``ViewCatalog``: ``CREATE VIEW`` on it fails, so views and their derived schemas live
here, as files under version control next to the tables' schema files:

* ``<name>.view.yaml`` per view: its SQL, the tables and views it reads, whether it is
  ``ready`` or ``pending`` (an input is not known yet, ``missing`` says which), and every
  version of its derived schema (columns with the view's own stable ids, and the input
  versions it was derived from);
* ``tables.json``: the version of each table the registry has seen (events or a
  snapshot), which is what views are derived from.

Every write is atomic (a temporary file renamed over the old one), and writers hold
:meth:`ViewRegistry.lock`.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from icetide.artifacts.errors import ViewError
from icetide.schema.file import column_to_data, type_from_data
from icetide.schema.types import Column

Status = Literal["ready", "pending", "failed"]
VIEW_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SUFFIX = ".view.yaml"
# libyaml's safe loader and dumper when present: a refresh reads every view file.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass(frozen=True)
class ViewVersion:
    """One derived schema of a view."""

    version: int
    columns: tuple[Column, ...]
    inputs: dict[str, int] = field(default_factory=dict)
    """Input name → the table schema version or view version it was derived from."""


@dataclass(frozen=True)
class ViewRecord:
    """A registered view (see module doc)."""

    name: str
    sql: str
    dependencies: tuple[str, ...]
    status: Status = "pending"
    missing: tuple[str, ...] = ()
    last_column_id: int = 0
    versions: tuple[ViewVersion, ...] = ()
    error: str | None = None
    """Why the last derivation failed (status ``failed``; older versions stay)."""
    derived_sql: str | None = None
    """The SQL the newest version was derived from: with the same inputs, deriving it
    again would give the same columns, so a refresh skips it."""

    @property
    def current(self) -> ViewVersion | None:
        """The newest derived schema, if any."""
        return self.versions[-1] if self.versions else None

    def with_columns(
        self, columns: tuple[Column, ...], last_id: int, inputs: dict[str, int]
    ) -> ViewRecord:
        """Ready, with ``columns`` as a new version unless they equal the current one."""
        current = self.current
        if current is not None and current.columns == columns:
            if current.inputs == inputs:
                return replace(self, status="ready", missing=(), error=None, derived_sql=self.sql)
            versions = (*self.versions[:-1], replace(current, inputs=inputs))
            return replace(
                self,
                status="ready",
                missing=(),
                error=None,
                versions=versions,
                derived_sql=self.sql,
            )
        number = current.version + 1 if current else 1
        return replace(
            self,
            status="ready",
            missing=(),
            error=None,
            derived_sql=self.sql,
            last_column_id=last_id,
            versions=(*self.versions, ViewVersion(number, columns, inputs)),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sql": self.sql,
            "dependencies": list(self.dependencies),
            "status": self.status,
            "missing": list(self.missing),
            "last_column_id": self.last_column_id,
            "error": self.error,
            "derived_sql": self.derived_sql,
            "versions": [
                {
                    "version": v.version,
                    "inputs": dict(v.inputs),
                    "columns": [column_to_data(c) for c in v.columns],
                }
                for v in self.versions
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ViewRecord:
        return cls(
            data["name"],
            data["sql"],
            tuple(data.get("dependencies", ())),
            data.get("status", "pending"),
            tuple(data.get("missing", ())),
            int(data.get("last_column_id", 0)),
            tuple(
                ViewVersion(
                    int(v["version"]),
                    tuple(_column(c) for c in v["columns"]),
                    {str(k): int(n) for k, n in (v.get("inputs") or {}).items()},
                )
                for v in data.get("versions", ())
            ),
            data.get("error"),
            data.get("derived_sql"),
        )


def _column(data: dict[str, Any]) -> Column:
    return Column(
        int(data["id"]),
        str(data["name"]),
        type_from_data(data["type"]),
        bool(data.get("nullable", True)),
        data.get("doc"),
    )


def check_view_name(name: str) -> None:
    """Refuse a name that cannot be a view (it names files and packages)."""
    if not VIEW_NAME.match(name):
        raise ViewError(
            f"view name {name!r}: use letters, digits and _ (not starting with a digit)",
            hint="e.g. icetide views add active_users --sql ...",
        )


class ViewRegistry:
    """The view files and ``tables.json`` in one folder (see module doc)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the registry's lock (one refresher at a time)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / ".lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _path(self, name: str) -> Path:
        return self.folder / f"{name}{SUFFIX}"

    def names(self) -> list[str]:
        """Every registered view, sorted."""
        if not self.folder.is_dir():
            return []
        return sorted(p.name[: -len(SUFFIX)] for p in self.folder.glob(f"*{SUFFIX}"))

    def get(self, name: str) -> ViewRecord | None:
        """The view called ``name`` (case-insensitive), or None."""
        for known in self.names():
            if known.casefold() == name.casefold():
                path = self._path(known)
                try:
                    text = path.read_text(encoding="utf-8")
                    return ViewRecord.from_dict(yaml.load(text, Loader=_LOADER))
                except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
                    raise ViewError(
                        f"cannot read view file {path}: {exc}",
                        hint="fix the file, or add the view again with icetide views add",
                    ) from None
        return None

    def all(self) -> list[ViewRecord]:
        """Every registered view."""
        return [v for v in (self.get(n) for n in self.names()) if v is not None]

    def put(self, record: ViewRecord) -> None:
        """Write a view's file (atomically)."""
        text = yaml.dump(record.to_dict(), Dumper=_DUMPER, sort_keys=False)
        _atomic(self._path(record.name), text)

    def tables(self) -> dict[str, int]:
        """Table → the schema version views are derived from."""
        path = self.folder / "tables.json"
        if not path.is_file():
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
        return {str(k): int(v) for k, v in data.items()}

    def set_tables(self, tables: dict[str, int]) -> None:
        """Record the table versions (atomically)."""
        _atomic(self.folder / "tables.json", json.dumps(dict(sorted(tables.items())), indent=1))


def _atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
