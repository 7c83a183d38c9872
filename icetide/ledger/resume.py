"""Where the ledger's Kafka stream starts when its Spark checkpoint is gone.

Spark's checkpoint (``<state_dir>/checkpoints/ledger``) is the ledger's exact record of
what it read, and stays a local folder: Spark writes it through a Hadoop file system,
and an object store's is not in icetide's jars. So that a new machine loses nothing
with it, the stage also saves, after every micro-batch is stored, the Kafka offsets that
batch ended at (Spark wrote them to the checkpoint's ``offsets/<batch>`` before it ran
the batch) to ``ledger/kafka-offsets.json`` in the pipeline's state location
(:mod:`icetide.state.store`). A query started with no checkpoint starts there.

A machine lost after a batch's appends and before that save replays the batch once:
its events are appended again under a new query id. The merge takes such a duplicate
as nothing new: one event per key and position survives deduplication
(:func:`icetide.merge.steps.dedupe_latest`), and the version-guarded MERGE updates a
row only for a position greater than the stored one
(:meth:`icetide.schema.contract.builder.TableContract.merge_sql`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from icetide.errors import IcetideError, Terminal
from icetide.state.store import StateFile

FORMAT = "icetide.ledger.kafka-offsets/1"
FILE = "ledger/kafka-offsets.json"
"""The file's name in the state location."""
EARLIEST = -2
"""Spark's ``startingOffsets`` value for "the partition's first offset"."""

Offsets = dict[str, dict[str, int]]
"""Topic → partition (as text, Spark's JSON form) → next offset to read."""


class LedgerResumeError(IcetideError, Terminal):
    """The saved Kafka position cannot be read; ``where`` names the file."""

    def __init__(self, message: str, *, where: str) -> None:
        super().__init__(
            message,
            hint=f"delete {where} to start from transport.starting_offsets (events read "
            "again are merged once), or restore it",
        )
        self.where = where


def batch_end_offsets(checkpoint: Path, batch_id: int) -> Offsets | None:
    """The Kafka offsets micro-batch ``batch_id`` ends at, from Spark's offset log
    (``offsets/<batch>``: a version line, the batch's metadata, then one line per
    source); None when the log holds no such batch.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> (folder / "offsets").mkdir()
    >>> _ = (folder / "offsets" / "3").write_text('v1\\n{"batchWatermarkMs":0}\\n{"t":{"0":7}}')
    >>> batch_end_offsets(folder, 3), batch_end_offsets(folder, 4)
    ({'t': {'0': 7}}, None)
    """
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 3 or not lines[2].strip().startswith("{"):
        return None
    return _offsets(json.loads(lines[2]))


def starting_offsets(saved: Offsets, partitions: Mapping[str, list[int]]) -> Offsets:
    """Spark's ``startingOffsets`` for a stream resumed at ``saved``: every partition the
    subscription has now (``partitions``, topic → partition numbers), each at its saved
    offset, or at the earliest for a partition or topic that appeared since (Spark wants
    every partition named). Partitions gone since are left out.

    >>> starting_offsets({"a": {"0": 5}, "gone": {"0": 1}}, {"a": [0, 1], "new": [0]})
    {'a': {'0': 5, '1': -2}, 'new': {'0': -2}}
    """
    return {
        topic: {str(p): saved.get(topic, {}).get(str(p), EARLIEST) for p in sorted(numbers)}
        for topic, numbers in sorted(partitions.items())
    }


def save_position(file: StateFile, batch_id: int, offsets: Offsets) -> None:
    """Replace the saved position with where batch ``batch_id`` ended."""
    document = {
        "format": FORMAT,
        "batch": batch_id,
        "saved_at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "offsets": offsets,
    }
    file.write((json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def load_position(file: StateFile) -> Offsets | None:
    """The saved Kafka position; None when nothing was saved."""
    data = file.read()
    if data is None:
        return None
    try:
        document = json.loads(data)
    except ValueError as error:
        raise LedgerResumeError(
            f"the ledger's saved Kafka position {file.where} is not JSON ({error})",
            where=file.where,
        ) from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise LedgerResumeError(
            f"the ledger's saved Kafka position {file.where} is not in the {FORMAT} format",
            where=file.where,
        )
    return _offsets(document.get("offsets"))


def _offsets(value: Any) -> Offsets:
    if not isinstance(value, dict):
        return {}
    return {
        str(topic): {str(p): int(o) for p, o in parts.items()}
        for topic, parts in value.items()
        if isinstance(parts, dict)
    }
