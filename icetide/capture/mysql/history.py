"""The persisted schema history of captured MySQL/MariaDB tables (JSON lines).

Two kinds of entries, appended in log order and fsync'ed (schema changes are rare):

* ``ddl`` — a DDL statement on a captured table, as the binlog carries it (``ALTER
  TABLE …``, ``CREATE TABLE …``, ``RENAME``, ``DROP``), with the tables it names;
* ``columns`` — the table's columns exactly as the binlog's table map describes them
  (``binlog_row_metadata=FULL``: name, SQL type, nullability, key), written the first
  time a table is seen and whenever they differ from the last recorded ones.

The columns are taken from the table map that precedes every row event, not from parsing
DDL and not from ``information_schema`` (which shows the *current* table, not the one at
that position), so :meth:`DdlHistory.columns_at` is exact for every position capture
read. Re-reading the same binlog after a restart records nothing twice.

Example line::

    {"kind": "ddl", "db": "shop", "table": "customers", "position": "mysql-bin.000003:1234:0",
     "position_key": 30000000000012340000000, "gtid": "0-1-17", "ts_ms": 1700000000000,
     "ddl": "ALTER TABLE customers ADD COLUMN note TEXT", "columns": null}
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from icetide.capture.errors import CaptureError

EntryKind = Literal["ddl", "columns"]

_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_NAME = rf"{_IDENT}(?:\s*\.\s*{_IDENT})?"
_NAME_RE = re.compile(rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?")
_COMMENTS = re.compile(r"/\*.*?\*/|--[^\n]*|#[^\n]*", re.S)
_DDL_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "create_table",
        re.compile(
            rf"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"
            rf"(?P<names>{_NAME})",
            re.I,
        ),
    ),
    (
        "alter_table",
        re.compile(
            rf"^ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?(?P<names>{_NAME})"
            rf"(?:.*?\bRENAME\s+(?!COLUMN\b|INDEX\b|KEY\b)(?:TO\s+|AS\s+)?(?P<renamed>{_NAME}))?",
            re.I | re.S,
        ),
    ),
    (
        "drop_table",
        re.compile(
            rf"^DROP\s+(?:TEMPORARY\s+)?TABLES?\s+(?:IF\s+EXISTS\s+)?"
            rf"(?P<names>{_NAME}(?:\s*,\s*{_NAME})*)",
            re.I,
        ),
    ),
    (
        "rename_table",
        re.compile(
            rf"^RENAME\s+TABLES?\s+(?P<names>{_NAME}\s+TO\s+{_NAME}"
            rf"(?:\s*,\s*{_NAME}\s+TO\s+{_NAME})*)",
            re.I,
        ),
    ),
    ("truncate", re.compile(rf"^TRUNCATE\s+(?:TABLE\s+)?(?P<names>{_NAME})", re.I)),
    (
        "index",
        re.compile(
            rf"^(?:CREATE|DROP)\s+(?:ONLINE\s+)?(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX\s+"
            rf"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?{_IDENT}\s+(?:USING\s+\w+\s+)?ON\s+(?P<names>{_NAME})",
            re.I,
        ),
    ),
)


@dataclass(frozen=True)
class DdlStatement:
    """What a DDL statement does to which tables (``(db or None, table)`` pairs)."""

    kind: str
    tables: tuple[tuple[str | None, str], ...]


def _unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def _names(text: str, default_db: str | None) -> list[tuple[str | None, str]]:
    found = []
    for match in _NAME_RE.finditer(text):
        first, second = match.group(1), match.group(2)
        if first.upper() == "TO" and not first.startswith("`") and second is None:
            continue
        if second is None:
            found.append((default_db, _unquote(first)))
        else:
            found.append((_unquote(first), _unquote(second)))
    return found


def parse_ddl(sql: str, default_db: str | None = None) -> DdlStatement | None:
    """The kind of a table DDL statement and the tables it names; ``None`` for other SQL.

    Unqualified names take ``default_db`` (the statement's current database).

    >>> parse_ddl("ALTER TABLE `shop`.orders ADD COLUMN note TEXT")
    DdlStatement(kind='alter_table', tables=(('shop', 'orders'),))
    >>> parse_ddl("RENAME TABLE a TO b, shop.c TO shop.d", "db").tables
    (('db', 'a'), ('db', 'b'), ('shop', 'c'), ('shop', 'd'))
    >>> parse_ddl("BEGIN") is None
    True
    """
    text = _COMMENTS.sub(" ", sql).strip()
    for kind, pattern in _DDL_PATTERNS:
        match = pattern.match(text)
        if not match:
            continue
        tables = _names(match.group("names"), default_db)
        renamed = match.groupdict().get("renamed")
        if renamed:
            tables += _names(renamed, default_db)
        return DdlStatement(kind, tuple(dict.fromkeys(tables)))
    return None


@dataclass(frozen=True)
class HistoryEntry:
    """One line of the schema history."""

    kind: EntryKind
    db: str
    table: str
    position: str
    """Human form ``file:offset:row`` of the binlog position."""
    position_key: int
    """The ordered position (:class:`icetide.events.position.Position` key)."""
    gtid: str | None
    ts_ms: int
    ddl: str | None = None
    columns: tuple[dict[str, Any], ...] | None = None

    def to_json(self) -> str:
        """The entry as one JSON line (no newline)."""
        data = asdict(self)
        data["columns"] = None if self.columns is None else list(self.columns)
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @staticmethod
    def from_json(line: str) -> HistoryEntry:
        """Parse a line written by :meth:`to_json`."""
        data = json.loads(line)
        columns = data.get("columns")
        return HistoryEntry(
            kind=data["kind"],
            db=data["db"],
            table=data["table"],
            position=data["position"],
            position_key=int(data["position_key"]),
            gtid=data.get("gtid"),
            ts_ms=int(data.get("ts_ms") or 0),
            ddl=data.get("ddl"),
            columns=None if columns is None else tuple(columns),
        )


class DdlHistory:
    """The history file at ``path`` (created on first write), loaded when opened."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[HistoryEntry] = []
        self._seen: set[tuple[str, str, str, int]] = set()
        self._last_columns: dict[tuple[str, str], tuple[dict[str, Any], ...]] = {}
        if path.exists():
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    self._remember(HistoryEntry.from_json(line))
                except (ValueError, KeyError, TypeError) as exc:
                    raise CaptureError(
                        f"schema history {path}:{number} is not a valid entry: {exc}",
                        hint="restore the file from a backup, or move it away to start a new "
                        "history (the next row events record the current columns again)",
                    ) from None

    def __iter__(self) -> Iterator[HistoryEntry]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def _remember(self, entry: HistoryEntry) -> None:
        self._entries.append(entry)
        self._seen.add((entry.kind, entry.db, entry.table, entry.position_key))
        if entry.kind == "columns" and entry.columns is not None:
            self._last_columns[(entry.db, entry.table)] = entry.columns

    def record(self, entry: HistoryEntry) -> bool:
        """Append ``entry`` durably unless it is already there (or, for ``columns``, the
        table's last recorded columns are the same); whether it was written."""
        if (entry.kind, entry.db, entry.table, entry.position_key) in self._seen:
            return False
        if entry.kind == "columns" and self._last_columns.get((entry.db, entry.table)) == (
            entry.columns
        ):
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(entry.to_json() + "\n")
            out.flush()
            os.fsync(out.fileno())
        self._remember(entry)
        return True

    def last_columns(self, db: str, table: str) -> tuple[dict[str, Any], ...] | None:
        """The columns last recorded for ``db.table``, in file order."""
        return self._last_columns.get((db, table))

    def columns_at(self, db: str, table: str, position_key: int) -> Sequence[dict[str, Any]] | None:
        """The columns ``db.table`` had at ``position_key`` (the latest ``columns`` entry at
        or before it), or ``None`` when the history does not know the table then."""
        best: HistoryEntry | None = None
        for entry in self._entries:
            if (
                entry.kind == "columns"
                and entry.db == db
                and entry.table == table
                and entry.position_key <= position_key
                and (best is None or entry.position_key >= best.position_key)
            ):
                best = entry
        return None if best is None else best.columns
