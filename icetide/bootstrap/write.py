"""Committing the bootstrap's chunks to a base table, and reading back which are done.

Every chunk is its own Iceberg commit tagged with the bootstrap's id and the chunk's
index (snapshot properties, :mod:`icetide.schema.contract.base`), so progress and data cannot
diverge: a killed bootstrap resumes at the first chunk not committed. An empty commit
marks the table ``running`` (the merge leaves it alone) and then ``done``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from icetide.bootstrap.postgres import SNAPSHOT_GUARD
from icetide.capture.errors import CaptureError
from icetide.faults import crash_point
from icetide.lake.commit import append_with_properties
from icetide.lake.tables import latest_snapshot_property
from icetide.schema.contract.base import BOOTSTRAP_CHUNK as CHUNK
from icetide.schema.contract.base import BOOTSTRAP_EXACT_FROM, BOOTSTRAP_ID
from icetide.schema.contract.base import BOOTSTRAP_STATE as STATE
from icetide.schema.contract.names import TableName


def chunks_done(spark: SparkSession, base: TableName, bootstrap_id: str) -> set[int]:
    """The indexes of the chunks bootstrap ``bootstrap_id`` committed to ``base``."""
    rows = spark.sql(
        f"SELECT summary['{CHUNK}'] FROM {base}.snapshots "
        f"WHERE summary['{BOOTSTRAP_ID}'] = '{bootstrap_id}' AND summary['{CHUNK}'] IS NOT NULL"
    ).collect()
    return {int(r[0]) for r in rows}


def mark(
    spark: SparkSession,
    base: TableName,
    bootstrap_id: str,
    state: str,
    exact_from: int | None = None,
) -> None:
    """Commit nothing to ``base`` but the bootstrap's ``state`` (``running``/``done``)
    and, when done, the position the copy is exact from (:data:`BOOTSTRAP_EXACT_FROM`)."""
    properties = {BOOTSTRAP_ID: bootstrap_id, STATE: state}
    if exact_from is not None:
        properties[BOOTSTRAP_EXACT_FROM] = str(exact_from)
    append_with_properties(spark.table(base.sql).limit(0), base, properties)


def write_chunk(
    spark: SparkSession,
    frame: DataFrame,
    base: TableName,
    table: str,
    bootstrap_id: str,
    index: int,
) -> int:
    """Append one chunk's rows to ``base`` as one commit; the rows it added.

    A chunk query that ran outside the PostgreSQL snapshot fails on its guard
    (:data:`~icetide.bootstrap.postgres.SNAPSHOT_GUARD`) before anything is committed;
    that is reported as the driver's fault, with the driver that works.
    """
    tags = {BOOTSTRAP_ID: bootstrap_id, CHUNK: str(index)}
    try:
        append_with_properties(frame, base, tags)
    except Exception as exc:
        if SNAPSHOT_GUARD in str(exc):
            raise CaptureError(
                f"bootstrap of {table!r}: the JDBC driver did not run the chunk "
                "query in the imported snapshot, so the copy would not match the "
                "handoff position; nothing of this chunk was committed",
                hint="use the PostgreSQL JDBC driver (org.postgresql) 42.x; it runs "
                "Spark's sessionInitStatement and the query in one transaction",
            ) from exc
        raise
    crash_point("bootstrap.after_chunk")
    # The chunk's row count is in its commit's summary: no second JDBC read.
    summary = latest_snapshot_property(spark, base, CHUNK) or {}
    return int(summary.get("added-records", 0))
