"""Schema changes queued per table and applied strictly in order, one process at a time.

Changes can arrive together: two DDL statements in a row, a capture process and a person
running ``icetide schema apply``, two runtimes after a restart. Each table has

* a lock file, ``<dir>/<table>.lock`` (``flock``): whoever applies a table's change holds
  it, so two processes never apply side by side (:meth:`EvolutionQueue.lock`);
* a queue folder, ``<dir>/queue/<table>/``, one JSON file per detected change numbered in
  arrival order (:meth:`EvolutionQueue.enqueue`); :meth:`EvolutionQueue.drain` hands them
  to a callback in that order under the lock and removes each after the callback returns.

Applying is idempotent by version (:func:`icetide.evolution.apply.apply_plan` compares
the plan with the table's :class:`~icetide.schema.history.SchemaHistory`), so a crash
after applying and before removing an entry only makes the rerun a no-op.
"""

from __future__ import annotations

import fcntl
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from icetide.errors import SchemaChangeError
from icetide.state.durable import write_atomically

_HELD: dict[str, int] = {}
"""Lock files this process holds, with how deep (the lock is re-entrant per process)."""


@dataclass(frozen=True)
class QueuedChange:
    """One detected change waiting its turn: the source's new schema (a schema file's
    content, ids not yet matched), the DDL seen with it and where it came from."""

    seq: int
    table: str
    schema: dict[str, Any]
    ddl: tuple[str, ...] = ()
    dialect: str = "mysql"
    source_position: str | None = None
    enqueued_at: float = 0.0

    def to_json(self) -> str:
        """The entry's file content."""
        data = asdict(self)
        data["ddl"] = list(self.ddl)
        return json.dumps(data, sort_keys=True, default=str)

    @staticmethod
    def from_json(text: str) -> QueuedChange:
        """An entry from :meth:`to_json`'s text."""
        data = json.loads(text)
        return QueuedChange(
            seq=int(data["seq"]),
            table=data["table"],
            schema=data["schema"],
            ddl=tuple(data.get("ddl") or ()),
            dialect=data.get("dialect") or "mysql",
            source_position=data.get("source_position"),
            enqueued_at=float(data.get("enqueued_at") or 0.0),
        )


class EvolutionQueue:
    """The lock and queue of every table under ``directory`` (see module doc)."""

    def __init__(self, directory: Path, *, timeout: float = 60.0) -> None:
        self.directory = directory
        self.timeout = timeout

    @contextmanager
    def lock(self, table: str) -> Iterator[None]:
        """Hold ``table``'s lock (waiting up to ``timeout`` seconds for another holder).
        Re-entrant within a process: :meth:`drain` holds it while its callback applies."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{table}.lock"
        key = f"{path.resolve()}:{threading.get_ident()}"
        if _HELD.get(key):
            _HELD[key] += 1
            try:
                yield
            finally:
                _HELD[key] -= 1
            return
        with path.open("a+") as handle:
            deadline = time.monotonic() + self.timeout
            while True:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise SchemaChangeError(
                            f"table {table}: another process has been applying a schema "
                            f"change for over {self.timeout:.0f}s (lock {path})",
                            hint="wait for it to finish; a lock held by a dead process is "
                            "released by the operating system",
                        ) from None
                    time.sleep(0.05)
            _HELD[key] = 1
            try:
                yield
            finally:
                _HELD.pop(key, None)
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _folder(self, table: str) -> Path:
        return self.directory / "queue" / table

    def enqueue(
        self,
        table: str,
        schema: dict[str, Any],
        *,
        ddl: tuple[str, ...] = (),
        dialect: str = "mysql",
        source_position: str | None = None,
    ) -> QueuedChange:
        """Queue a detected change after every one already queued for ``table``."""
        folder = self._folder(table)
        with self.lock(table):
            folder.mkdir(parents=True, exist_ok=True)
            seq = max((int(p.stem) for p in folder.glob("*.json")), default=0) + 1
            entry = QueuedChange(
                seq, table, schema, tuple(ddl), dialect, source_position, time.time()
            )
            write_atomically(folder / f"{seq:010d}.json", entry.to_json().encode("utf-8"))
        return entry

    def pending(self, table: str) -> list[QueuedChange]:
        """``table``'s queued changes, oldest first."""
        folder = self._folder(table)
        if not folder.is_dir():
            return []
        return [
            QueuedChange.from_json(p.read_text(encoding="utf-8"))
            for p in sorted(folder.glob("*.json"))
        ]

    def drain(self, table: str, handle: Callable[[QueuedChange], None]) -> int:
        """Give ``table``'s queued changes to ``handle`` in order, under the lock; each is
        removed once ``handle`` returns (an exception stops the drain and keeps it, and
        the ones after it, queued). The number handled."""
        done = 0
        with self.lock(table):
            for entry in self.pending(table):
                handle(entry)
                (self._folder(table) / f"{entry.seq:010d}.json").unlink(missing_ok=True)
                done += 1
        return done
