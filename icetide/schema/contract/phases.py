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

import json

PROJECTION_VERSION = "icetide.ledger.projection-version"
EVOLUTION_PREFIX = "icetide.evolution."
"""Every property of the latest change and its phase times starts with this."""
CHANGE_VERSION = "icetide.evolution.version"
SOURCE_TS = "icetide.evolution.source-ts-ms"
DETECTED = "icetide.evolution.detected-ms"
CHANGE_POSITION = "icetide.evolution.position"
VERSION_POSITIONS = "icetide.schema.version-positions"
"""Ledger table property: each schema version detected at the source → the source position
it starts at (JSON). Kept for good, unlike the latest change's properties: an event is
read by the version it was written under (:class:`icetide.ledger.decode.Projection`)."""
LEDGER_ALTERED = "icetide.evolution.ledger-altered-ms"
LEDGER_SWITCHED = "icetide.evolution.ledger-switched-ms"
MERGE_VERSION = "icetide.merge.schema-version"
DATA_VERSION = "icetide.evolution.data-version"
BASE_ALTERED = "icetide.evolution.base-altered-ms"
DATA_FILLED = "icetide.evolution.data-filled-ms"
FILLED_PROPERTY = "icetide.evolution.filled-rows"
"""Snapshot summary property of a data-convergence commit: rows it filled."""


def with_version_position(text: str | None, version: int, position: int) -> str:
    """The :data:`~icetide.schema.contract.phases.VERSION_POSITIONS` property with
    ``version`` starting at ``position`` added.

    >>> with_version_position('{"2": 100}', 3, 250)
    '{"2": 100, "3": 250}'
    """
    known = read_version_positions(text)
    known[version] = position
    return json.dumps({str(v): known[v] for v in sorted(known)})


def read_version_positions(text: str | None) -> dict[int, int]:
    """Version → start position from the property's text (empty when unset or unreadable)."""
    try:
        loaded = json.loads(text) if text else {}
        return {int(v): int(p) for v, p in loaded.items()}
    except (ValueError, TypeError, AttributeError):
        return {}
