"""Table properties that carry a schema change through its three phases.

Each stage writes only the properties of the table it owns, so two processes never
race on one table's metadata: the ledger stage (and the change detection running in its
process) writes the ledger table's, the merge stage the base table's. ``icetide
status`` reads both (see docs/convergence.md).

Ledger table (``<t>_cdc``):

* :data:`~icetide.schema.contract.ledger.SCHEMA_VERSION_PROPERTY` — the schema version
  whose layout the ledger table has (phase 1 done for the ledger and dead letters);
* :data:`PROJECTION_VERSION` — the version whose columns the ledger projects values onto
  (phase 2 done: the ledger switched after the merge acknowledged the version);
* :data:`CHANGE_VERSION`, :data:`SOURCE_TS`, :data:`DETECTED`, :data:`CHANGE_POSITION`
  — the latest detected change: its version, when it happened at the source (commit time
  of the DDL or of the first event showing it, epoch ms), when it was detected, and its
  source position (rows of the mirror older than it predate the change);
* :data:`LEDGER_ALTERED`, :data:`LEDGER_SWITCHED` — when phase 1 and 2 happened there.

Base table:

* :data:`~icetide.schema.contract.ledger.SCHEMA_VERSION_PROPERTY` — the layout of the base;
* :data:`MERGE_VERSION` — the version whose MERGE the merge stage runs (its
  acknowledgement: the ledger projects new columns only once this reached them);
* :data:`DATA_VERSION` — the version whose data convergence (phase 3) is done;
* :data:`BASE_ALTERED`, :data:`DATA_FILLED` — when those happened (epoch ms).
"""

from __future__ import annotations

PROJECTION_VERSION = "icetide.ledger.projection-version"
EVOLUTION_PREFIX = "icetide.evolution."
"""Every property of the latest change and its phase times starts with this."""
CHANGE_VERSION = "icetide.evolution.version"
SOURCE_TS = "icetide.evolution.source-ts-ms"
DETECTED = "icetide.evolution.detected-ms"
CHANGE_POSITION = "icetide.evolution.position"
LEDGER_ALTERED = "icetide.evolution.ledger-altered-ms"
LEDGER_SWITCHED = "icetide.evolution.ledger-switched-ms"
MERGE_VERSION = "icetide.merge.schema-version"
DATA_VERSION = "icetide.evolution.data-version"
BASE_ALTERED = "icetide.evolution.base-altered-ms"
DATA_FILLED = "icetide.evolution.data-filled-ms"
FILLED_PROPERTY = "icetide.evolution.filled-rows"
"""Snapshot summary property of a data-convergence commit: rows it filled."""
