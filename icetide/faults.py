"""Named crash points, so tests can kill a stage at the worst moments.

Setting ``ICETIDE_FAULT=<point>`` makes the process die at that point exactly like a
``kill -9`` (no cleanup, no flush). Points: ``ledger.before_append`` (an append of a
batch about to read its table's last batch and commit; again at each retry),
``ledger.after_first_append`` (committed, not yet recorded by the stage),
``merge.after_plan`` (a batch planned from the watermark read, nothing written),
``merge.before_commit``, ``merge.after_truncate``, ``merge.after_dead_letters``,
``merge.after_commit``, ``merge.history.before_commit`` (a history's versions computed,
not committed; for an in-order range, its commits on the history's branch, main not yet
moved to it), ``merge.history.after_commit``,
``capture.after_flush`` (records durable, offset not yet saved),
``capture.files.before_rename``, ``capture.offsets.before_rename``,
``bootstrap.after_chunk``, ``evolution.between_versions`` (a carried schema version
applied, the next one not yet) and ``lake.schema_update.before_commit`` (a table's schema
version staged in its Iceberg transaction, not committed).

``ICETIDE_PAUSE=<point>:<folder>`` instead holds the process at that point, once, when
a test asks: if ``<folder>/armed`` exists when the point is reached, it is removed,
``<folder>/paused`` is created, and the thread waits there until the test removes
``paused``. So a test can act (send a signal) at a moment it knows, e.g. with a merge
under way, without sleeping and hoping.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

KILLED_EXIT_CODE = 137
PAUSE_LIMIT_SECONDS = 600.0
"""A paused thread goes on by itself after this, so a broken test cannot hang a run."""


def crash_point(name: str) -> None:
    """Die here when ``ICETIDE_FAULT`` names this point; pause when ``ICETIDE_PAUSE``
    names it and the test armed it."""
    if os.environ.get("ICETIDE_FAULT") == name:
        os._exit(KILLED_EXIT_CODE)
    pause = os.environ.get("ICETIDE_PAUSE")
    if pause and pause.partition(":")[0] == name:
        _pause(Path(pause.partition(":")[2]))


def _pause(folder: Path) -> None:
    armed, paused = folder / "armed", folder / "paused"
    try:
        armed.unlink()
    except FileNotFoundError:
        return  # not armed: go on
    paused.touch()
    deadline = time.monotonic() + PAUSE_LIMIT_SECONDS
    while paused.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
