"""Named crash points, so tests can kill a stage at the worst moments.

Setting ``ICETIDE_FAULT=<point>`` makes the process die at that point exactly like a
``kill -9`` (no cleanup, no flush). Points: ``ledger.after_first_append``,
``merge.before_commit``, ``merge.after_truncate``, ``merge.after_dead_letters``,
``merge.after_commit``,
``capture.after_flush`` (records durable, offset not yet saved),
``capture.files.before_rename``, ``capture.offsets.before_rename``,
``bootstrap.after_chunk`` and ``evolution.between_versions`` (a carried schema version
applied, the next one not yet).
"""

from __future__ import annotations

import os

KILLED_EXIT_CODE = 137


def crash_point(name: str) -> None:
    """Die here when ``ICETIDE_FAULT`` names this point."""
    if os.environ.get("ICETIDE_FAULT") == name:
        os._exit(KILLED_EXIT_CODE)
