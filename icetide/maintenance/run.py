"""Maintain one table: its base, ledger, history and dead-letter tables, in a safe order.

Order matters: rewrite data files first (applying and dropping position deletes), then
compact the deletes that remain, then expire snapshots with a cut-off computed *after*
the rewrites (so it sees the newest watermark), then remove orphans older than a safe
window (listed as the table's storage needs, :mod:`icetide.lake.orphans`), then regroup
the manifests. Every step is an Iceberg procedure that commits atomically; a step that
loses a race with a live merge is planned again, and one that meets a catalog outage is
redone after a growing pause (:func:`~icetide.spark.retry.retry_step`); the merge, if it
is the one refused, is redone by its caller the same way, so no merge commit is lost.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from icetide.errors import IcetideError, failure_line
from icetide.lake.orphans import remove_orphan_files
from icetide.lake.tables import table_exists
from icetide.maintenance import procedures
from icetide.maintenance.files import FileCounts, file_counts
from icetide.maintenance.retention import Keep, expiry_due, keep_for, keep_plain
from icetide.schema.contract.names import TableName
from icetide.spark.retry import classify, retry_step
from icetide.state.durable import write_atomically

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.pipeline import Pipeline

T = TypeVar("T")

KINDS = ("base", "ledger", "history")
"""The tables of one pipeline table that :func:`keep_for` gives a cut-off for, in its order."""


@dataclass(frozen=True)
class TableMaintenance:
    """What maintaining one Iceberg table did."""

    table: str
    """The Iceberg table's dotted name."""
    kind: str
    """base, ledger, history or dead-letter."""
    before: FileCounts
    after: FileCounts
    rewritten_data_files: int = 0
    added_data_files: int = 0
    removed_delete_files: int = 0
    expired_snapshots: int = 0
    orphans_removed: int = 0
    expired_before: str | None = None
    conflicts_retried: int = 0


@dataclass
class MaintenanceResult:
    """Maintaining one pipeline table (its base, ledger and dead-letter tables)."""

    table: str
    started_at: str
    seconds: float = 0.0
    outcome: str = "ok"
    error: str | None = None
    tables: list[TableMaintenance] = field(default_factory=list)

    def part(self, kind: str) -> TableMaintenance | None:
        """The part for ``base``, ``ledger``, ``history`` or ``dead-letter``."""
        return next((t for t in self.tables if t.kind == kind), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    def render(self) -> str:
        """Lines for people."""
        lines = [f"maintain {self.table}: {self.outcome} in {self.seconds:.1f}s"]
        if self.error:
            lines.append(f"  error: {self.error}")
        for t in self.tables:
            lines.append(
                f"  {t.kind:<12}data files {t.before.data_files:>5} → {t.after.data_files:<5}"
                f"delete files {t.before.delete_files:>5} → {t.after.delete_files:<5}"
                f"snapshots {t.before.snapshots:>5} → {t.after.snapshots:<5}"
                f"orphans removed {t.orphans_removed}"
            )
        return "\n".join(lines)


def _keep_of(keeps: Callable[[], dict[str, Keep]], kind: str) -> Keep:
    return keeps()[kind]


def _first(rows: list[Any], column: str) -> int:
    if not rows:
        return 0
    row = rows[0].asDict()
    return int(row.get(column) or 0)


class _Maintainer:
    def __init__(
        self,
        spark: SparkSession,
        pipeline: Pipeline,
        name: str,
        orphans_older_than: datetime | None = None,
    ) -> None:
        self.spark = spark
        self.orphans_older_than = orphans_older_than
        self.pipeline = pipeline
        self.config = pipeline.config
        self.name = name
        self.conflicts = 0

    def call(self, sql: str, action: str) -> list[Any]:
        return self.step(lambda: self.spark.sql(sql).collect(), action)

    def step(self, body: Callable[[], T], action: str) -> T:
        """``body`` with JVM errors translated, planned again when it lost a commit race."""

        def retried(attempt: int, exc: IcetideError, seconds: float) -> None:
            if classify(exc) == "conflict":
                self.conflicts += 1
                self.pipeline.report(
                    "maintain",
                    f"maintain {self.name}: {action} lost a commit race (attempt {attempt}), "
                    "planning it again",
                    table=self.name,
                    conflict=action,
                )
                return
            self.pipeline.report(
                "maintain",
                f"maintain {self.name}: {action}: {failure_line(exc)}; retry {attempt} in "
                f"{seconds:.0f}s",
                table=self.name,
                outage=action,
                retry_in=seconds,
            )

        return retry_step(f"maintenance of {self.name}: {action}", body, on_retry=retried)

    def one(self, table: TableName, kind: str, keep_of: Callable[[], Keep]) -> TableMaintenance:
        maintenance = self.config.maintenance
        before = file_counts(self.spark, table)
        self.conflicts = 0
        rewrite = self.call(
            procedures.rewrite_data_files(table, target_file_size=maintenance.target_file_size),
            "rewrite_data_files",
        )
        removed_deletes = _first(rewrite, "removed_delete_files_count")
        if kind == "base" and file_counts(self.spark, table).delete_files:
            deletes = self.call(
                procedures.rewrite_position_delete_files(table), "rewrite_position_delete_files"
            )
            removed_deletes += _first(deletes, "rewritten_delete_files_count")
        expired, cut_off = 0, None
        keep = keep_of()  # after the rewrite: it sees the newest watermark
        keep_last = maintenance.snapshots.keep_last
        cut_off = keep.older_than
        if cut_off is not None and expiry_due(self.spark, table, cut_off, keep_last):
            expiry = self.call(
                procedures.expire_snapshots(table, older_than=cut_off, retain_last=keep_last),
                "expire_snapshots",
            )
            expired = _first(expiry, "deleted_manifest_lists_count")
        orphans_before = self.orphans_older_than or datetime.now(UTC) - maintenance.orphan_age
        orphans = self.step(
            lambda: remove_orphan_files(self.spark, table, orphans_before), "remove_orphan_files"
        )
        self.call(procedures.rewrite_manifests(table), "rewrite_manifests")
        return TableMaintenance(
            table=table.dotted,
            kind=kind,
            before=before,
            after=file_counts(self.spark, table),
            rewritten_data_files=_first(rewrite, "rewritten_data_files_count"),
            added_data_files=_first(rewrite, "added_data_files_count"),
            removed_delete_files=removed_deletes,
            expired_snapshots=expired,
            orphans_removed=len(orphans),
            expired_before=cut_off.isoformat() if cut_off else None,
            conflicts_retried=self.conflicts,
        )


def maintain_table(
    spark: SparkSession,
    pipeline: Pipeline,
    table: str,
    *,
    orphans_older_than: datetime | None = None,
) -> MaintenanceResult:
    """Maintain one pipeline table's base, ledger, history (``history: scd2``) and
    dead-letter tables.

    Orphan files are removed when last modified before ``orphans_older_than``, by
    default now minus ``maintenance.orphan_age`` (at least 24h, as the config checks). A
    later moment is for a caller that knows no commit to these tables is in flight: a
    file a commit has written but not yet committed is an orphan until it commits.

    Raises :class:`~icetide.errors.IcetideError` when a step fails for good; the result
    is reported (``maintain`` progress records) and remembered in the state folder for
    ``status`` and the status page either way.
    """
    pipeline.config.table(table)  # a clear error for an unknown table
    started = time.monotonic()
    result = MaintenanceResult(table, datetime.now(UTC).isoformat(timespec="seconds"))
    refs = pipeline.refs(table)
    worker = _Maintainer(spark, pipeline, table, orphans_older_than)
    try:
        config = pipeline.config

        def keeps() -> dict[str, Keep]:
            # Computed again for each table, after its rewrite: it sees the newest
            # watermarks.
            found = keep_for(spark, config, refs.base, refs.cdc, datetime.now(UTC), refs.history)
            return {kind: k for kind, k in zip(KINDS, found, strict=True) if k is not None}

        # The history (history: scd2) takes small files every merge, as the base does.
        for table_ref, kind in zip((refs.base, refs.cdc, refs.history), KINDS, strict=True):
            if table_exists(spark, table_ref):
                result.tables.append(worker.one(table_ref, kind, partial(_keep_of, keeps, kind)))
        if table_exists(spark, refs.dead_letters):
            keep = lambda: keep_plain(config, refs.dead_letters, datetime.now(UTC))  # noqa: E731
            result.tables.append(worker.one(refs.dead_letters, "dead-letter", keep))
    except Exception as exc:
        result.outcome = "failed"
        result.error = getattr(exc, "message", None) or str(exc).splitlines()[0]
        raise
    finally:
        result.seconds = round(time.monotonic() - started, 3)
        _remember(pipeline, result)
        _report(pipeline, result)
    return result


def _report(pipeline: Pipeline, result: MaintenanceResult) -> None:
    base = result.part("base")
    figures: dict[str, Any] = {"outcome": result.outcome, "seconds": result.seconds}
    for part in result.tables:
        prefix = part.kind.replace("-", "_")
        figures[f"{prefix}_data_files"] = part.after.data_files
        figures[f"{prefix}_delete_files"] = part.after.delete_files
        figures[f"{prefix}_snapshots"] = part.after.snapshots
    if base is not None:
        figures["data_files_before"] = base.before.data_files
        figures["delete_files_before"] = base.before.delete_files
    pipeline.report("maintain", result.render(), table=result.table, **figures)


def state_file(pipeline: Pipeline, table: str) -> Path:
    """Where the last maintenance of ``table`` is remembered (for status)."""
    config = pipeline.config
    return config.resolved_path(config.state_dir) / "maintenance" / f"{table}.json"


def _remember(pipeline: Pipeline, result: MaintenanceResult) -> None:
    path = state_file(pipeline, result.table)
    write_atomically(path, json.dumps(result.to_dict(), default=str).encode())


def last_maintenance(pipeline: Pipeline, table: str) -> dict[str, Any] | None:
    """The last remembered maintenance of ``table``, or None."""
    path = state_file(pipeline, table)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
