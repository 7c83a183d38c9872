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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from icetide.schema.contract.ledger import SCHEMA_VERSION_PROPERTY as LAYOUT

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
STATEMENTS_THROUGH = "icetide.schema.statements-through"
"""Ledger table property: the source position of the last DDL statement the evolution
layer took. A statement at or before it (a batch read again after a crash) is in the
schema already, and replaying it on the newer shape would rename or drop again."""
LEDGER_ALTERED = "icetide.evolution.ledger-altered-ms"
LEDGER_SWITCHED = "icetide.evolution.ledger-switched-ms"
MERGE_VERSION = "icetide.merge.schema-version"
DATA_VERSION = "icetide.evolution.data-version"
BASE_ALTERED = "icetide.evolution.base-altered-ms"
DATA_FILLED = "icetide.evolution.data-filled-ms"
FILLED_PROPERTY = "icetide.evolution.filled-rows"
"""Snapshot summary property of a data-convergence commit: rows it filled."""

Phase = Literal["schema", "code", "data", "converged"]
"""The phase a change is *in*: ``schema`` (1: tables being ALTERed), ``code`` (2: the
merge and ledger switching), ``data`` (3: filling the mirror), or ``converged``."""
PHASES: tuple[Phase, ...] = get_args(Phase)


def _int(properties: Mapping[str, str], key: str) -> int | None:
    try:
        value = properties.get(key)
        return int(value) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class ChangeState:
    """Where one table is in its schema change: the state machine of the three phases,
    read from the ledger's and the base's properties (nothing else keeps it). The two
    stages, ``icetide status`` and the status page all ask it, so they cannot disagree.

    >>> s = ChangeState.read({LAYOUT: "3", PROJECTION_VERSION: "2"},
    ...                      {LAYOUT: "3", MERGE_VERSION: "3", DATA_VERSION: "2"})
    >>> s.phase(3), s.ledger_projects(3), s.fill_due(3)
    ('code', 3, False)
    >>> ChangeState.read({LAYOUT: "3", PROJECTION_VERSION: "3"},
    ...                  {LAYOUT: "3", MERGE_VERSION: "3", DATA_VERSION: "2"}).fill_due(3)
    True
    """

    ledger_layout: int | None
    """The version whose layout the ledger has (phase 1 done there)."""
    projected: int | None
    """The version whose columns the ledger projects onto (phase 2 done there)."""
    base_layout: int | None
    """The version whose layout the base has (phase 1 done there)."""
    acked: int | None
    """The version whose MERGE the merge runs (its acknowledgement to the ledger)."""
    data: int | None
    """The version whose data convergence (phase 3) is done."""

    @classmethod
    def read(cls, ledger: Mapping[str, str], base: Mapping[str, str]) -> ChangeState:
        """The state from the two tables' properties (``base`` empty before it exists)."""
        return cls(
            _int(ledger, LAYOUT),
            _int(ledger, PROJECTION_VERSION),
            _int(base, LAYOUT),
            _int(base, MERGE_VERSION),
            _int(base, DATA_VERSION),
        )

    def phase(self, version: int, copying: bool = False) -> Phase:
        """The phase the change to ``version`` is in; ``copying``: the base is being
        re-snapshotted from the source, which phase 1 waits for."""

        def done(step: int | None) -> bool:
            return (step or 0) >= version

        if copying or not (done(self.ledger_layout) and done(self.base_layout)):
            return "schema"
        if not (done(self.acked) and done(self.projected)):
            return "code"
        return "data" if not done(self.data) else "converged"

    def merge_runs(self, current: int) -> int:
        """The version the merge runs: the ledger's layout, never past the schema file's
        ``current`` (the ledger's rows are in its layout; a base ahead of it waits)."""
        return min(self.ledger_layout, current) if self.ledger_layout is not None else current

    def projecting(self, current: int) -> int:
        """The version the ledger has projected so far (a ledger from before the
        handshake recorded none: it projected its layout's version)."""
        if self.projected is not None:
            return self.projected
        return self.ledger_layout if self.ledger_layout is not None else current

    def ledger_projects(self, current: int) -> int:
        """The version the ledger projects this batch: the newest the merge acknowledged
        (phase 2 switches only after the merge can take the columns), within ``current``
        (the schema file's), never back."""
        return min(max(self.projecting(current), self.acked or 0), current)

    def fill_due(self, version: int) -> bool:
        """Whether phase 3 for ``version`` is due now: not done yet, and the ledger
        already projects the version (so every row still holding a new column's value in
        ``_rescued`` is behind the merge's watermark once it reads the ledger)."""
        return self.data is not None and self.data < version and (self.projected or 0) >= version


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
