"""The package index artifacts are published to: a local folder of wheels.

The folder is flat (one ``.whl`` per package version), which is what both ``pip install
--find-links <folder>`` and ``pypiserver`` (``icetide artifacts serve``) read. Beside the
wheels, ``index.json`` remembers for each package version the content hash of its
generated sources and the schema version it describes, so a publisher can tell "already
there" from "changed" without building anything. Writers hold :meth:`LocalIndex.lock`
(an exclusive ``flock`` on ``.publish.lock``), so two publishers at once run one after
the other and the second finds the work done.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icetide.artifacts.errors import ArtifactError

STATE = "index.json"


@dataclass(frozen=True)
class Entry:
    """One published package version."""

    package: str
    version: str
    content_hash: str
    kind: str
    name: str
    schema_version: int
    wheel: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "version": self.version,
            "hash": self.content_hash,
            "kind": self.kind,
            "name": self.name,
            "schema_version": self.schema_version,
            "wheel": self.wheel,
        }


class LocalIndex:
    """A folder of wheels plus ``index.json`` (see module doc)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the index's publish lock (blocks while another publisher holds it)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / ".publish.lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def entries(self) -> list[Entry]:
        """Every published package version, by package then version order of publishing."""
        path = self.folder / STATE
        if not path.is_file():
            return []
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ArtifactError(
                f"cannot read the index state {path}: {exc}",
                hint="restore it, or remove the folder and publish --all again",
            ) from None
        return [
            Entry(
                e["package"],
                e["version"],
                e["hash"],
                e["kind"],
                e["name"],
                e["schema_version"],
                e["wheel"],
            )
            for e in data.get("packages", [])
        ]

    def versions(self, package: str) -> list[Entry]:
        """The published versions of ``package``."""
        return [e for e in self.entries() if e.package == package]

    def add(self, wheel: Path, entry: Entry) -> Entry:
        """Copy ``wheel`` into the index and record ``entry`` (call under :meth:`lock`)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.folder / wheel.name
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        shutil.copyfile(wheel, tmp)
        os.replace(tmp, target)
        entries = [
            e for e in self.entries() if (e.package, e.version) != (entry.package, entry.version)
        ]
        entries.append(entry)
        self._write(entries)
        return entry

    def _write(self, entries: list[Entry]) -> None:
        path = self.folder / STATE
        tmp = path.with_name(f".{STATE}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps({"packages": [e.to_dict() for e in entries]}, indent=1))
        os.replace(tmp, path)
