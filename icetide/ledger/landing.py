"""Watch the landing folder for what the file source silently ignores.

Spark's file source reads each file once, whole, when it first sees it. Lines appended
to a file, or a file rewritten under the same name, after that are never read: the
contract is that a file is written elsewhere and renamed into the folder, and never
modified. This module keeps, in the ledger's state folder, what was read of each file
(its length and modification time, from the receipts the file source emits) and warns,
once per change, when a file no longer matches: a log line, and a record that
``icetide status`` counts. It also logs, once per run, the names the file source skips
(leading ``_`` or ``.``, sub-folders), so a misnamed file does not vanish unnoticed.

Files: ``<state_dir>/ledger/files-read.jsonl`` (one receipt per line, appended per batch)
and ``<state_dir>/ledger/files-changed.jsonl`` (one line per change found).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from icetide.progress import Reporter

READ_FILE = "files-read.jsonl"
CHANGED_FILE = "files-changed.jsonl"
# Our own capture's in-flight temp files and lock (capture/transport/files.py): skipped
# by design, so not worth a line each time one is seen.
_OWN_HIDDEN_SUFFIXES = (".tmp", ".lock")


@dataclass(frozen=True)
class Receipt:
    """What the ledger read of one landing file."""

    file: str
    length: int
    """The file's length when Spark listed it."""
    mtime_ms: int
    """Its modification time then, in milliseconds since the epoch."""
    read: int
    """The bytes actually read (differs from ``length`` if the file grew meanwhile)."""


@dataclass(frozen=True)
class Change:
    """A landing file found different from what was read of it."""

    file: str
    read_length: int
    read_mtime_ms: int
    length: int
    mtime_ms: int
    found_at: str

    def render(self) -> str:
        """The warning line."""
        return (
            f"WARNING landing file {self.file} changed after it was read "
            f"({self.read_length:,} bytes read, now {self.length:,} bytes): what changed "
            "will never be read; write files elsewhere and rename them into the landing "
            "folder, never modify one (docs/capture.md)"
        )


def ledger_state(state_dir: Path) -> Path:
    """The ledger's folder in the pipeline's state folder."""
    return state_dir / "ledger"


def _read_jsonl(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue  # a torn last line after a crash: the next batch writes it again
        if isinstance(doc, dict):
            out.append(doc)
    return out


def _append_jsonl(path: Path, docs: Iterable[dict[str, object]]) -> None:
    lines = "".join(json.dumps(d, sort_keys=True) + "\n" for d in docs)
    if not lines:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(lines)
        out.flush()
        os.fsync(out.fileno())


def changed_files(state_dir: Path) -> list[Change]:
    """Every change found so far, the latest per file, by file name."""
    latest: dict[str, Change] = {}
    for doc in _read_jsonl(ledger_state(state_dir) / CHANGED_FILE):
        try:
            change = Change(**doc)  # type: ignore[arg-type]
        except TypeError:
            continue
        latest[change.file] = change
    return [latest[name] for name in sorted(latest)]


def _mtime_ms(stat: os.stat_result) -> int:
    return stat.st_mtime_ns // 1_000_000


class LandingWatch:
    """Remembers what was read of each landing file; warns when one changes afterwards."""

    def __init__(self, landing: Path, state_dir: Path, reporter: Reporter) -> None:
        self.landing = landing
        self.folder = ledger_state(state_dir)
        self.reporter = reporter
        self.read: dict[str, Receipt] = {}
        for doc in _read_jsonl(self.folder / READ_FILE):
            try:
                receipt = Receipt(**doc)  # type: ignore[arg-type]
            except TypeError:
                continue
            self.read[receipt.file] = receipt
        self._warned = {(c.file, c.length, c.mtime_ms) for c in changed_files(state_dir)}
        self._skipped_logged: set[str] = set()

    def record(self, receipts: Iterable[Receipt]) -> list[Change]:
        """Remember ``receipts``; a file that grew while it was read is a change already."""
        fresh = [r for r in receipts if self.read.get(r.file) != r]
        _append_jsonl(self.folder / READ_FILE, (asdict(r) for r in fresh))
        changes = []
        for receipt in fresh:
            self.read[receipt.file] = receipt
            if receipt.read != receipt.length:
                changes.append(self._change(receipt, receipt.read, receipt.mtime_ms))
        return self._report(changes)

    def check(self) -> list[Change]:
        """Compare every file read so far with the folder now; warn about new changes."""
        changes = []
        for receipt in self.read.values():
            try:
                stat = (self.landing / receipt.file).stat()
            except OSError:
                continue  # removed after it was read: allowed (landing cleanup)
            if stat.st_size != receipt.length or _mtime_ms(stat) != receipt.mtime_ms:
                changes.append(self._change(receipt, stat.st_size, _mtime_ms(stat)))
        return self._report(changes)

    def skipped(self) -> list[str]:
        """Log, once per run, the entries of the landing folder the file source skips."""
        try:
            entries = list(os.scandir(self.landing))
        except OSError:
            return []
        new = []
        for entry in sorted(entries, key=lambda e: e.name):
            name = entry.name
            if name in self._skipped_logged:
                continue
            if entry.is_dir():
                why = "is a sub-folder (only files directly in the landing folder are read)"
            elif name.startswith((".", "_")):
                if name.startswith(".") and name.endswith(_OWN_HIDDEN_SUFFIXES):
                    continue
                why = "starts with '.' or '_' (such files are skipped as in-flight or hidden)"
            else:
                continue
            self._skipped_logged.add(name)
            new.append(name)
            self.reporter.report("ledger", f"landing: {name} {why}; skipped", file=name)
        return new

    def _change(self, receipt: Receipt, length: int, mtime_ms: int) -> Change:
        return Change(
            file=receipt.file,
            read_length=receipt.length,
            read_mtime_ms=receipt.mtime_ms,
            length=length,
            mtime_ms=mtime_ms,
            found_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )

    def _report(self, changes: list[Change]) -> list[Change]:
        new = [c for c in changes if (c.file, c.length, c.mtime_ms) not in self._warned]
        _append_jsonl(self.folder / CHANGED_FILE, (asdict(c) for c in new))
        for change in new:
            self._warned.add((change.file, change.length, change.mtime_ms))
            self.reporter.report("ledger", change.render(), file=change.file)
        return new


def parse_receipt(text: str) -> Receipt | None:
    """A receipt from the file source's JSON text; ``None`` if it is not one."""
    try:
        doc = json.loads(text)
        return Receipt(
            file=str(doc["file"]),
            length=int(doc["length"]),
            mtime_ms=int(doc["mtime_ms"]),
            read=int(doc["read"]),
        )
    except (ValueError, KeyError, TypeError):
        return None
