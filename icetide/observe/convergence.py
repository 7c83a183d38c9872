"""Where each table's latest schema change is in its three phases, and how long each
took from the change at the source, checked against ``schedule.convergence_sla``.

Read from the ledger's and the base's table properties
(:mod:`icetide.schema.contract.phases`); nothing else keeps this state.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from icetide.lake.alter import int_property, table_properties
from icetide.lake.progress import read_bootstrap_state
from icetide.lake.tables import TableRefs, table_exists
from icetide.schema.contract import phases as p
from icetide.schema.contract.phases import PHASES, ChangeState, Phase

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.config import Config

__all__ = ["PHASES", "Convergence", "Phase", "render_convergence", "table_convergence"]


@dataclass(frozen=True)
class Convergence:
    """The latest schema change of one table."""

    table: str
    version: int
    phase: Phase
    source_ts_ms: int | None
    """When the change happened at the source (else when it was detected)."""
    seconds_to_detect: float | None
    seconds_to_schema: float | None
    seconds_to_code: float | None
    seconds_to_data: float | None
    sla_seconds: float
    breached: bool
    resnapshot: bool = False
    """The base is being re-snapshotted from the source (a change no ALTER expresses):
    phase 1 ends when the copy does."""

    def seconds(self) -> dict[str, float | None]:
        """Seconds from the source change to each step reached: ``detected``, and the
        ends of ``schema`` (1), ``code`` (2) and ``data`` (3); None while not reached."""
        return {
            "detected": self.seconds_to_detect,
            "schema": self.seconds_to_schema,
            "code": self.seconds_to_code,
            "data": self.seconds_to_data,
        }

    def render(self) -> str:
        """One line for people."""

        def took(value: float | None) -> str:
            return "-" if value is None else f"{value:.1f}s"

        state = "converged" if self.phase == "converged" else f"in phase {self.phase}"
        if self.resnapshot:
            state += " (re-snapshot from the source under way)"
        line = (
            f"{self.table}: schema version {self.version} {state}; from the source change: "
            f"detected {took(self.seconds_to_detect)}, 1 schema {took(self.seconds_to_schema)}, "
            f"2 code {took(self.seconds_to_code)}, 3 data {took(self.seconds_to_data)}"
        )
        if self.breached:
            line += f" — SLA BREACHED (convergence_sla {self.sla_seconds:.0f}s)"
        return line


def table_convergence(spark: SparkSession, config: Config, table: str) -> Convergence | None:
    """The latest schema change of ``table``; None when it never changed at runtime."""
    refs = TableRefs.of(config, table)
    if not table_exists(spark, refs.cdc):
        return None
    ledger = table_properties(spark, refs.cdc)
    version = int_property(ledger, p.CHANGE_VERSION)
    if version is None:
        return None
    base = table_properties(spark, refs.base) if table_exists(spark, refs.base) else {}
    source = int_property(ledger, p.SOURCE_TS) or int_property(ledger, p.DETECTED)
    copying = bool(base) and (read_bootstrap_state(spark, refs.base) or ("", ""))[1] == "running"
    phase: Phase = ChangeState.read(ledger, base).phase(version, copying)

    def since(stamp: int | None, reached: bool = True) -> float | None:
        if stamp is None or source is None or not reached:
            return None
        return max(stamp - source, 0) / 1000

    altered = [int_property(ledger, p.LEDGER_ALTERED), int_property(base, p.BASE_ALTERED)]
    schema_at = max(a for a in altered if a is not None) if all(altered) else None
    reached = PHASES.index(phase)
    sla = config.schedule.convergence_sla.total_seconds()
    data_s = since(int_property(base, p.DATA_FILLED), reached >= 3)
    elapsed = (
        data_s
        if data_s is not None
        else ((time.time() * 1000 - source) / 1000 if source is not None else None)
    )
    return Convergence(
        table,
        version,
        phase,
        source,
        since(int_property(ledger, p.DETECTED)),
        since(schema_at, reached >= 1),
        since(int_property(ledger, p.LEDGER_SWITCHED), reached >= 2),
        data_s,
        sla,
        elapsed is not None and elapsed > sla,
        copying,
    )


def render_convergence(rows: list[Convergence]) -> list[str]:
    """The schema-change lines of ``icetide status``."""
    return [r.render() for r in rows]
