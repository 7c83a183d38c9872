"""Re-snapshotting one table while capture and every other table keep flowing.

A schema version no ALTER expresses (an approved ``narrow``, ``type_change`` or
``key_change``: Iceberg cannot narrow a type, change its category or re-bucket the rows
by another key in place) is taken by rebuilding the table from the source. Nothing is
stopped for it; the steps follow the stages' usual ownership (each stage changes only the
tables it writes):

1. ``icetide schema apply --approve ID --no-ddl`` records the version, as for any held
   change;
2. the **ledger**, at its next batch boundary, finds no ALTER from its layout to the new
   version and recreates its own ``<t>_cdc`` in the new layout
   (:func:`icetide.ledger.phases.alter_ledger`); every event committed at the source
   after that moment is appended to the new ledger;
3. the **merge** finds its base in an older layout than the ledger's with no ALTER
   between them (the ALTER plan raises :class:`~icetide.errors.SchemaError`) and runs
   :func:`resnapshot_round` instead of a MERGE: a bootstrap of that one table
   (:class:`~icetide.bootstrap.run.Bootstrap`, the one chunked copier) tagged in the
   bootstrap's state file as this table's re-snapshot. Its hand-off is taken *after*
   step 2 (a MySQL low watermark read now, a new snapshot on the PostgreSQL slot capture
   already reads); the base is dropped, created at the new version and marked
   ``running``; then the copy, **one primary-key chunk per merge round**, each chunk its
   own commit, so the merge's other tables are merged between two chunks and a killed
   merge resumes at the next chunk (the chunk plan is in the state file);
4. once the last chunk committed and the base is marked ``done``, the merge reads the
   new ledger from its first snapshot and applies it with the version guard.

Why the result is exact: that is DBLog's argument, with the bootstrap's stamp as the low
watermark and the version guard instead of a high one. Every event committed after the
ledger's switch is in the new ledger with its full row image. For a key whose newest
event in the new ledger is older than the copy's stamp, nothing changed it after the
stamp, so the copy and that event agree; an event newer than the stamp beats the copied
row (PostgreSQL's copy is stamped 0: every event of the new ledger is one the snapshot
may not have seen, and the newest event of a key is its state). Events the old ledger
held are not needed: the copy was read after them.

A merge without the re-snapshot (an older icetide) would stop on the new version; the
table's own merge pauses while its base is rebuilt, the ledger never stops, and the
other tables' merges go on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icetide.bootstrap.run import Bootstrap
from icetide.bootstrap.state import RESNAPSHOT, load_state, state_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.pipeline import Pipeline

CHUNKS_PER_ROUND = 1
"""Chunks one merge round copies before it goes on with the other tables."""


class ChunkBudgetSpent(Exception):
    """Raised between two chunks when a round copied its share; the next round resumes."""


def resnapshot_under_way(pipeline: Pipeline, table: str) -> bool:
    """Whether the bootstrap state of ``table``'s source is this table's re-snapshot
    (started by a merge that was stopped, or killed, before it finished)."""
    source = pipeline.config.source_of(table)
    if source is None:
        return False
    state = load_state(state_path(pipeline.config, source))
    return state is not None and state.get(RESNAPSHOT) == table


def resnapshot_round(
    spark: SparkSession,
    pipeline: Pipeline,
    table: str,
    *,
    chunk_rows: int,
    chunks: int = CHUNKS_PER_ROUND,
) -> bool:
    """Copy up to ``chunks`` more chunks of ``table``'s re-snapshot (starting it if it is
    not under way); True once the base is rebuilt and marked done.

    Waits (False, nothing done, the reason reported) while another bootstrap of the same
    source is under way (its state file is the source's one), or when no configured
    source captures the table: the table's merge waits, the other tables' go on.
    """
    source = pipeline.config.source_of(table)
    if source is None:
        pipeline.report(
            "merge",
            f"re-snapshot {table}: waiting: no configured source captures it, so it cannot "
            "be copied again; add its database under `sources:` (listing the table in its "
            "`tables:`) and the merge copies it at its next round",
            table=table,
        )
        return False
    state = load_state(state_path(pipeline.config, source))
    if state is not None and state.get(RESNAPSHOT) != table:
        pipeline.report(
            "merge",
            f"re-snapshot {table}: waiting for bootstrap {state['id']} of source "
            f"{source.name} to finish",
            table=table,
        )
        return False
    copied = 0

    def budget() -> None:
        nonlocal copied
        if copied >= chunks:
            raise ChunkBudgetSpent
        copied += 1

    bootstrap = Bootstrap(
        spark, pipeline, source, chunk_rows=chunk_rows, between_chunks=budget, resnapshot=table
    )
    try:
        bootstrap.run([table], replace=True)
    except ChunkBudgetSpent:
        return False
    return True
