"""The append-only audit log of applied schema versions, on the state location and as a
copy next to the schema files.

Each table's log is ``schemas/<table>.audit.jsonl`` on the pipeline's state location
(:func:`~icetide.state.store.state_store`), where a machine that replaces this one finds
it, with a copy ``<schema file stem>.audit.jsonl`` beside its schema file
(``schemas/customers.yaml`` → ``schemas/customers.audit.jsonl``), one JSON line per
applied version: the version and the one before, the changes applied and those still
held, the phase-1 statements, when (UTC), by whom (``--by`` or ``$USER``), why
(``--reason``) and the plan's hash. The schema file, its history and this log are files
to commit, so a rollout can go through a pull request; the same facts go onto the
Iceberg tables as properties (:func:`table_properties`), so the lake says which version
it is at and who put it there.

Records are only added; a version is recorded once (:func:`append` skips a version the
log has, so a rerun after a crash does not write it twice). An object store has no
append, so the log is replaced whole with one line more (it has one line per version:
small); the copy beside the schema file is then replaced with the same text.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from icetide.errors import SchemaError
from icetide.state.durable import write_atomically
from icetide.state.store import StateFile, StateStore

VERSION_PROPERTY = "icetide.schema.version"
AUDIT_PROPERTY = "icetide.schema.audit"


@dataclass(frozen=True)
class AuditRecord:
    """One applied schema version (see module doc)."""

    table: str
    version: int
    from_version: int
    changes: tuple[dict[str, Any], ...]
    """Each applied change: ``id``, ``kind``, ``classification``, ``path``, ``field_id``
    and, when approved, ``decision``."""
    held: tuple[str, ...]
    ddl: tuple[str, ...]
    at: str
    by: str
    reason: str | None
    plan_hash: str

    def to_json(self) -> str:
        """The record as one JSON line (no newline)."""
        data = asdict(self)
        data["changes"] = list(self.changes)
        data["held"] = list(self.held)
        data["ddl"] = list(self.ddl)
        return json.dumps(data, ensure_ascii=False, sort_keys=True, default=str)

    @staticmethod
    def from_json(line: str) -> AuditRecord:
        """A record from :meth:`to_json`'s line."""
        data = json.loads(line)
        return AuditRecord(
            table=data["table"],
            version=int(data["version"]),
            from_version=int(data["from_version"]),
            changes=tuple(data.get("changes") or ()),
            held=tuple(data.get("held") or ()),
            ddl=tuple(data.get("ddl") or ()),
            at=data["at"],
            by=data["by"],
            reason=data.get("reason"),
            plan_hash=data["plan_hash"],
        )


def audit_path(schema_file: Path) -> Path:
    """The audit log beside ``schema_file``.

    >>> audit_path(Path("schemas/customers.yaml")).as_posix()
    'schemas/customers.audit.jsonl'
    """
    return schema_file.with_name(f"{schema_file.stem}.audit.jsonl")


def who(by: str | None = None) -> str:
    """Whom a record names: ``by``, else ``$USER``, else the login name."""
    if by:
        return by
    try:
        return os.environ.get("USER") or getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


def now_utc() -> str:
    """The time of a record: UTC, ISO 8601, seconds."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def parse_audit(text: str, origin: str) -> list[AuditRecord]:
    """Every record of a log's ``text``; errors name ``origin`` and the line.

    >>> parse_audit("", "log")
    []
    """
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(AuditRecord.from_json(line))
        except (ValueError, KeyError, TypeError) as exc:
            raise SchemaError(
                f"audit log {origin}:{number} is not a valid record: {exc}",
                hint="the log is append-only: restore the line from version control",
            ) from None
    return records


def read_audit(path: Path) -> list[AuditRecord]:
    """Every record of the copy at ``path`` (none when it does not exist)."""
    if not path.is_file():
        return []
    return parse_audit(path.read_text(encoding="utf-8"), str(path))


def audit_file(state: StateStore, table: str) -> StateFile:
    """``table``'s log on the state location ``state``."""
    return state.file(f"schemas/{table}.audit.jsonl")


def _text(log: StateFile, copy: Path) -> str:
    """The log's text; a state location without it yet starts from the copy (a log
    written before the log moved to the state location)."""
    data = log.read()
    if data is not None:
        return data.decode("utf-8")
    return copy.read_text(encoding="utf-8") if copy.is_file() else ""


def recorded(log: StateFile, copy: Path, version: int) -> AuditRecord | None:
    """The record of ``version`` in the log, if there is one."""
    return next((r for r in parse_audit(_text(log, copy), log.where) if r.version == version), None)


def append(log: StateFile, copy: Path, record: AuditRecord) -> bool:
    """Add ``record`` to the log unless its version is recorded already, then write the
    copy beside the schema file; whether it was added."""
    text = _text(log, copy)
    if any(r.version == record.version for r in parse_audit(text, log.where)):
        return False
    if text and not text.endswith("\n"):
        text += "\n"
    text += record.to_json() + "\n"
    log.write(text.encode("utf-8"))
    write_atomically(copy, text.encode("utf-8"))
    return True


def restore_copy(log: StateFile, copy: Path) -> bool:
    """Write the copy beside the schema file again when the log on the state location
    has records the copy lacks (a new machine given older files); whether it did."""
    data = log.read()
    if data is None:
        return False
    text = data.decode("utf-8")
    have = {r.version for r in read_audit(copy)}
    if {r.version for r in parse_audit(text, log.where)} <= have:
        return False
    write_atomically(copy, text.encode("utf-8"))
    return True


def table_properties(record: AuditRecord) -> dict[str, str]:
    """The Iceberg table properties recording ``record``: the schema version, and a
    compact JSON summary of the audit record (version, when, who, why, plan hash,
    changes by id).

    >>> at = "2026-01-01T00:00:00+00:00"
    >>> r = AuditRecord("t", 2, 1, ({"id": "add_column:note"},), (), (), at, "ana", "why", "abc")
    >>> table_properties(r)["icetide.schema.version"]
    '2'
    """
    summary = {
        "version": record.version,
        "from_version": record.from_version,
        "at": record.at,
        "by": record.by,
        "reason": record.reason,
        "plan_hash": record.plan_hash,
        "changes": [c.get("id") for c in record.changes],
    }
    return {
        VERSION_PROPERTY: str(record.version),
        AUDIT_PROPERTY: json.dumps(summary, separators=(",", ":"), sort_keys=True),
    }
