"""The append-only audit log of applied schema versions, kept next to the schema files.

Each table's log is ``<schema file stem>.audit.jsonl`` beside its schema file
(``schemas/customers.yaml`` → ``schemas/customers.audit.jsonl``), one JSON line per
applied version: the version and the one before, the changes applied and those still
held, the phase-1 statements, when (UTC), by whom (``--by`` or ``$USER``), why
(``--reason``) and the plan's hash. The schema file, its history and this log are files
to commit, so a rollout can go through a pull request; the same facts go onto the
Iceberg tables as properties (:func:`table_properties`), so the lake says which version
it is at and who put it there.

Lines are only appended (and fsync'ed); a version is recorded once (:func:`append` skips
a version the log has, so a rerun after a crash does not write it twice).
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


def read_audit(path: Path) -> list[AuditRecord]:
    """Every record of the log at ``path`` (none when it does not exist)."""
    if not path.is_file():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(AuditRecord.from_json(line))
        except (ValueError, KeyError, TypeError) as exc:
            raise SchemaError(
                f"audit log {path}:{number} is not a valid record: {exc}",
                hint="the log is append-only: restore the line from version control",
            ) from None
    return records


def recorded(path: Path, version: int) -> AuditRecord | None:
    """The record of ``version`` in the log at ``path``, if there is one."""
    return next((r for r in read_audit(path) if r.version == version), None)


def append(path: Path, record: AuditRecord) -> bool:
    """Append ``record`` durably unless its version is recorded already; whether it was
    written."""
    if recorded(path, record.version) is not None:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(record.to_json() + "\n")
        out.flush()
        os.fsync(out.fileno())
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
