"""The base table (mirror) contract: its own columns and the properties stages share.

Progress lives in the tables: the merge's watermark in its snapshot summaries, the
bootstrap's state in a table property, so every stage (and ``status``) reads it here
rather than from another stage's module.
"""

from __future__ import annotations

from typing import Literal, get_args

POSITION = "_icetide_position"
SOURCE_TS = "_icetide_source_ts"
WATERMARK_PROPERTY = "icetide.merge.ledger-snapshot-id"
EVENTS_PROPERTY = "icetide.merge.events"
STRATEGY_PROPERTY = "icetide.merge.strategy"
"""How the merge that made the snapshot joined the batch with the base, and why
(``bucket_join_pruned: auto: base of …``), for ``icetide status``."""
MergeStrategy = Literal["shuffle", "bucket_join", "bucket_join_pruned", "delete_insert"]
"""How a merge joins the batch with the base (:mod:`icetide.merge.strategy` runs each)."""
MERGE_STRATEGIES: tuple[MergeStrategy, ...] = get_args(MergeStrategy)
StrategySetting = Literal["auto", MergeStrategy]
"""A table's ``merge.strategy``: one of the strategies, or ``auto`` to let the merge
choose one per batch (:func:`icetide.merge.strategy.choose`)."""
BOOTSTRAP_STATE = "icetide.bootstrap.state"
"""``running`` while a bootstrap fills the base (the merge waits), then ``done``."""
BOOTSTRAP_ID = "icetide.bootstrap.id"
BOOTSTRAP_EXACT_FROM = "icetide.bootstrap.exact-from"
"""Snapshot summary property of a bootstrap's ``done`` commit: the source position (packed)
read once the copy ended. The copy and the ledger's events after it make the table
exactly at that position and after; before it, a row of the copy may be newer than the
target (MySQL's chunks are read while writes go on; PostgreSQL's rows are stamped 0)."""
BOOTSTRAP_CHUNK = "icetide.bootstrap.chunk"
DROPPED_COMMENT = "icetide: dropped from the schema in version {version}"
"""The comment a soft-dropped column keeps: it stays in the table, no longer written."""
DropMode = Literal["soft", "hard"]
"""What a column dropped at the source does to the tables: ``soft`` keeps it (with
:data:`DROPPED_COMMENT`), ``hard`` drops it; a table's ``evolution.drop``."""
WriteMode = Literal["merge-on-read", "copy-on-write"]
"""How the base takes deletes, updates and merges (Iceberg's ``write.*.mode``): delete
files beside the data, or data files rewritten; a table's ``mode`` in the config."""

DELETE_ISOLATION = "write.delete.isolation-level"
"""The Iceberg table property naming what a DELETE's commit checks against commits made
since it read: ``serializable`` (Iceberg's default) refuses any new data file its
condition could match, ``snapshot`` only deletes of the same rows and files it read
that are gone."""

COMMIT_RETRY = {"commit.retry.min-wait-ms": "5", "commit.retry.num-retries": "10"}
"""How a commit that lost a race waits before trying again: from 5 ms, doubling, up to 10
times (5.1 s of waits in all), where Iceberg's defaults wait from 100 ms, 4 times (1.5 s).

The merge's ``delete_insert`` commits its DELETE and its append to one branch at nearly
the same moment, and one of them often finds the other's metadata version already
written (``Version N already exists``); Iceberg then sleeps before it retries, and the
default first sleep was 0.1 s of a merge's ~2 s (seen in Iceberg's commit reports;
docs/merge-performance.md, "A process per file written, and a commit's retry"). A retry
re-reads the table and writes its metadata again, a few milliseconds; a writer racing
another one longer still has more time in all than with the defaults."""
