"""Publishing shapes as package versions: only what changed, idempotently.

Each shape (a table or view version) has a ``major.minor`` from its history
(:mod:`icetide.artifacts.versioning`). Its generated sources are hashed without the
version stamp; the index is asked whether ``major.minor.*`` already holds that hash. If
it does, nothing is built. If not, the next patch (``.0`` the first time; ``.1``… when
the generator's output changed for the same schema) is built and added. Run twice, the
second run builds nothing; run twice at once, the index lock makes the second wait and
then build nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from icetide.artifacts.codegen import avro_schema, package_files
from icetide.artifacts.index import Entry, LocalIndex
from icetide.artifacts.shape import Shape
from icetide.artifacts.wheel import build_wheel

Action = Literal["published", "unchanged"]


@dataclass(frozen=True)
class Outcome:
    """What publishing one shape did."""

    package: str
    version: str
    kind: str
    name: str
    schema_version: int
    action: Action

    def to_dict(self) -> dict[str, object]:
        return {
            "package": self.package,
            "version": self.version,
            "kind": self.kind,
            "name": self.name,
            "schema_version": self.schema_version,
            "action": self.action,
        }


def content_hash(shape: Shape) -> str:
    """The hash of a shape's generated sources, independent of the package version."""
    digest = hashlib.sha256()
    for name, text in sorted(package_files(shape, "0").items()):
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


class Publisher:
    """Publishes shapes into one :class:`LocalIndex` (:meth:`publish_all` locks it)."""

    def __init__(self, index: LocalIndex, build_dir: Path | None = None) -> None:
        self.index = index
        self.build_dir = build_dir or index.folder / ".build"
        self._entries: dict[str, list[Entry]] | None = None

    def _known(self, package: str) -> list[Entry]:
        if self._entries is None:
            self._entries = {}
            for entry in self.index.entries():
                self._entries.setdefault(entry.package, []).append(entry)
        return self._entries.setdefault(package, [])

    def publish(
        self, shape: Shape, major_minor: tuple[int, int], *, dry_run: bool = False
    ) -> Outcome:
        """Publish ``shape`` as ``major.minor.<patch>`` unless that content is there."""
        major, minor = major_minor
        digest = content_hash(shape)
        prefix = f"{major}.{minor}."
        same = [e for e in self._known(shape.package) if e.version.startswith(prefix)]
        for entry in same:
            if entry.content_hash == digest:
                return self._outcome(shape, entry.version, "unchanged")
        patch = 1 + max((int(e.version[len(prefix) :]) for e in same), default=-1)
        version = f"{prefix}{patch}"
        if not dry_run:
            wheel = build_wheel(package_files(shape, version), self.build_dir)
            entry = Entry(
                shape.package, version, digest, shape.kind, shape.name, shape.version, wheel.name
            )
            self.index.add(wheel, entry)
            wheel.unlink(missing_ok=True)
            self._known(shape.package).append(entry)
        return self._outcome(shape, version, "published")

    def publish_all(
        self, shapes: Iterable[tuple[Shape, tuple[int, int]]], *, dry_run: bool = False
    ) -> list[Outcome]:
        """:meth:`publish` each of ``shapes``, holding the index lock (what the index
        holds is read again under it, so a concurrent publisher's work counts)."""
        with self.index.lock():
            self._entries = None
            return [self.publish(s, v, dry_run=dry_run) for s, v in shapes]

    @staticmethod
    def _outcome(shape: Shape, version: str, action: Action) -> Outcome:
        return Outcome(shape.package, version, shape.kind, shape.name, shape.version, action)


def write_avsc(path: Path, shape: Shape) -> bool:
    """Write the shape's Avro schema to ``path`` unless it holds it already; True if
    written (atomically: readers never see half a file)."""
    text = json.dumps(avro_schema(shape), indent=2) + "\n"
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return True
