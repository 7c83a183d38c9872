"""The bootstrap's state file: what a killed bootstrap needs to resume exactly.

One JSON file per source, ``capture/<source>.bootstrap.json`` in the pipeline's state
location (:mod:`icetide.state.store`: ``state_dir``, or ``s3://…`` so that a bootstrap
resumes on another machine), replaced whole: the bootstrap's id (tagged on every chunk
it commits), capture's start offset, the position its rows are stamped with, and each
table's chunk plan. It is deleted when every table is done.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from icetide.capture.errors import CaptureError
from icetide.config.model import Config
from icetide.config.sections import SourceConfig
from icetide.events.position import Position
from icetide.state.store import StateFile, state_store

State = dict[str, Any]
"""``id``, ``offset`` (capture's start), ``position``/``position_text`` (the stamp),
``started_at``, and ``plans`` (table → chunk plan); a PostgreSQL bootstrap adds
``offset_text`` and ``snapshot`` (how the snapshot was had); a re-snapshot run by the
merge adds ``resnapshot`` (its table)."""
RESNAPSHOT = "resnapshot"


def state_path(config: Config, source: SourceConfig) -> StateFile:
    """Where the bootstrap of ``source`` keeps its state."""
    return state_store(config).file(f"capture/{source.name}.bootstrap.json")


def new_state(
    offset: dict[str, Any],
    position: Position,
    *,
    offset_text: str | None = None,
    snapshot: str | None = None,
) -> State:
    """A new bootstrap's state: a fresh id, capture's start ``offset`` and the stamp."""
    state: State = {"id": uuid.uuid4().hex[:12], "offset": offset}
    if offset_text is not None:
        state["offset_text"] = offset_text
    state["position"] = position.key
    state["position_text"] = position.text
    if snapshot is not None:
        state["snapshot"] = snapshot
    state["started_at"] = datetime.now(UTC).isoformat()
    return state


def offset_text(state: State) -> str:
    """Capture's start offset for people (MySQL states only have the watermark's text)."""
    return str(state.get("offset_text") or state["position_text"])


def load_state(path: StateFile) -> State | None:
    """The saved state, or None when no bootstrap is under way."""
    text = path.read()
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CaptureError(
            f"bootstrap state {path} is unreadable: {exc}",
            hint="delete it to start the bootstrap over",
        ) from exc
    return dict(data)


def save_state(path: StateFile, state: State) -> None:
    """Replace the saved state whole (a temporary file renamed over it; on S3 one PUT)."""
    path.write(json.dumps(state, indent=2).encode("utf-8"))
