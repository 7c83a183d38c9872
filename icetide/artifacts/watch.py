"""Runtime refresh: publish a table's package when ``icetide run`` moves its mirror to a
new schema version.

A schema change detected at runtime converges in three phases (docs/convergence.md); the
merge stage records the last one on the base table as ``icetide.evolution.data-version``.
From then on the mirror's rows hold that version's columns, which is when the version's
package (whose ``read()`` returns them) is worth publishing. :class:`VersionWatch` reads
that property each round and sends the artifacts' :func:`~.workspace.on_table_changed`
for a version it has not seen.

It lives here, above the stages, so that the ledger, merge and evolution code never
import artifacts: they only write table properties, and this watch reads them.

On its first look at a table the watch takes the version as it finds it, and publishes
only when the artifacts already knew the table at an older version (the change happened
while nothing watched); a table nobody published yet is left to ``icetide artifacts
publish``. Every later move is published.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from icetide.artifacts.refresh import RefreshReport
from icetide.artifacts.workspace import known_versions, on_table_changed
from icetide.lake.alter import int_property, table_properties
from icetide.lake.tables import HeldTables, iceberg_table_if_exists, loaded_once
from icetide.schema.contract import phases as p

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.pipeline import Pipeline

Report = Callable[..., Any]


def data_version(
    spark: SparkSession, pipeline: Pipeline, table: str, held: HeldTables | None = None
) -> int | None:
    """The schema version whose data the base table of ``table`` holds (None: no base
    table, or no merge has run on it yet); ``held``: the base refreshed when held from
    an earlier round, not loaded again."""
    base = pipeline.refs(table).base
    with loaded_once(held):
        loaded = iceberg_table_if_exists(spark, base)  # one load, where asking first is two
    if loaded is None:
        return None
    return int_property(table_properties(spark, base, loaded), p.DATA_VERSION)


@dataclass
class VersionWatch:
    """One round per :meth:`step` (a supervised task of ``icetide run``)."""

    spark: SparkSession
    pipeline: Pipeline
    report: Report
    seen: dict[str, int] = field(default_factory=dict)
    held: HeldTables | None = None
    """The base tables, held from round to round and refreshed (made at the first)."""

    def step(self) -> list[RefreshReport]:
        """Publish every table whose mirror moved to a version not published yet."""
        known: dict[str, int] | None = None
        done = []
        if self.held is None:
            self.held = HeldTables(self.spark)
        for table in [t.name for t in self.pipeline.config.tables]:
            version = data_version(self.spark, self.pipeline, table, self.held)
            if version is None:
                continue
            last = self.seen.get(table)
            if last is None:
                if known is None:
                    known = known_versions(self.pipeline)
                behind = known.get(table)
                if behind is None or behind >= version:
                    self.seen[table] = version
                    continue
            elif version <= last:
                continue
            done.append(self.publish(table, version))
            self.seen[table] = version
        return done

    def publish(self, table: str, version: int) -> RefreshReport:
        """Publish ``table`` at ``version`` and the views above it; report what was built."""
        result = on_table_changed(self.pipeline, table, version, self.spark)
        built = [f"{o.package} {o.version}" for o in result.published if o.action == "published"]
        self.report(
            "artifacts",
            f"artifacts: {table} at schema version {version}: published "
            + (", ".join(built) or "nothing new")
            + (f"; views refreshed: {', '.join(result.views)}" if result.views else ""),
            table=table,
            version=version,
            published=built,
        )
        return result
