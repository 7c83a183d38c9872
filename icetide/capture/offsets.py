"""Capture's durable offset: where a source's reader restarts after a stop or a crash.

One small JSON file per source (``capture/<source>.offset.json`` in the pipeline's state
location, :mod:`icetide.state.store`: ``state_dir`` or ``s3://…``)::

    {
      "format": "icetide.capture.offset/1",
      "source": "shop",
      "type": "mysql",
      "saved_at": "2025-01-31T12:00:00.000Z",
      "position": "mysql-bin.000003:1234",
      "offset": {"file": "mysql-bin.000003", "pos": 1234, "gtid": "0-1-42"}
    }

``offset`` is what the reader's offset class writes and reads back
(``BinlogOffset.to_dict`` / ``from_dict``); the other fields are for people and for
checks. A save replaces the file atomically (locally temp file, ``fsync``, rename, folder
``fsync``; on S3 one PUT): after a crash the file holds the previous offset or the new
one, never a mix.
Capture saves only after the transport made every record before the offset durable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from icetide.capture.errors import CaptureError
from icetide.capture.record import Offset
from icetide.errors import Terminal
from icetide.state.store import LocalFile, StateFile

FORMAT = "icetide.capture.offset/1"
_SUFFIX = ".offset.json"


class OffsetFileError(CaptureError, Terminal):
    """The offset file cannot be read or belongs to another source; ``path`` names it."""

    def __init__(self, message: str, *, path: Path | str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = path


@dataclass(frozen=True)
class SavedOffset:
    """An offset file's content: the reader's offset and where it came from."""

    source: str
    type: str | None
    saved_at: str
    """UTC, ISO 8601 with milliseconds and ``Z``."""
    position: str
    """The offset for people (``mysql-bin.000003:1234``)."""
    offset: dict[str, Any]


class OffsetStore:
    """The offset file at ``path`` (a local path, or a file of the state location).

    ``source`` defaults to the file name without ``.offset.json``; with ``source_type``
    it is checked on load, so an offset saved for another source (a copied state folder,
    a source whose type changed) is refused instead of used.

    >>> import tempfile
    >>> store = OffsetStore(Path(tempfile.mkdtemp()) / "shop.offset.json", source_type="mysql")
    >>> store.load() is None
    True
    >>> _ = store.save({"file": "mysql-bin.000003", "pos": 1234}, position="mysql-bin.000003:1234")
    >>> store.load()
    {'file': 'mysql-bin.000003', 'pos': 1234}
    """

    def __init__(
        self,
        path: Path | str | StateFile,
        *,
        source: str | None = None,
        source_type: str | None = None,
    ) -> None:
        self.file = path if isinstance(path, StateFile) else LocalFile(Path(path))
        self.path: Path | str = (
            self.file.path if isinstance(self.file, LocalFile) else self.file.where
        )
        name = self.file.where.rsplit("/", 1)[-1]
        self.source = source or (name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else name)
        self.source_type = source_type

    def load(self) -> dict[str, Any] | None:
        """The saved offset as its reader's ``to_dict`` wrote it; ``None`` if never saved."""
        saved = self.read()
        return None if saved is None else saved.offset

    def read(self) -> SavedOffset | None:
        """The whole offset file; ``None`` if there is none.

        Raises :class:`OffsetFileError` when it is unreadable, corrupt, or another
        source's.
        """
        data = self.file.read()
        if data is None:
            return None
        saved = self._parse(data)
        if saved.source != self.source or (
            self.source_type and saved.type and saved.type != self.source_type
        ):
            raise OffsetFileError(
                f"capture offset file {self.path} belongs to source {saved.source!r} "
                f"({saved.type or 'unknown type'}), not {self.source!r} "
                f"({self.source_type or 'unknown type'})",
                path=self.path,
                hint="an offset only means something for the source that saved it: restore "
                "this source's own file, or delete it and run `icetide bootstrap` again",
            )
        return saved

    def save(
        self, offset: Offset | Mapping[str, Any], *, position: str | None = None
    ) -> SavedOffset:
        """Replace the saved offset with ``offset`` (an offset object or its ``to_dict``).

        ``position`` is the offset for people; an offset object's ``text`` by default.
        """
        if isinstance(offset, Mapping):
            data = dict(offset)
            text = position if position is not None else ""
        else:
            data = offset.to_dict()
            text = position if position is not None else offset.text
        saved = SavedOffset(
            source=self.source,
            type=self.source_type,
            saved_at=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            position=text,
            offset=data,
        )
        document = {
            "format": FORMAT,
            "source": saved.source,
            "type": saved.type,
            "saved_at": saved.saved_at,
            "position": saved.position,
            "offset": saved.offset,
        }
        text_out = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        self.file.write(text_out.encode("utf-8"), fault="capture.offsets.before_rename")
        return saved

    def _parse(self, data: bytes) -> SavedOffset:
        try:
            document = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise self._corrupt(f"it is not JSON ({error})") from error
        if not isinstance(document, dict):
            raise self._corrupt(f"it holds a JSON {type(document).__name__}, not an object")
        if document.get("format") != FORMAT:
            raise self._corrupt(
                f"its format is {document.get('format')!r}, not {FORMAT!r}"
                if "format" in document
                else "it has no 'format' field"
            )
        offset, source = document.get("offset"), document.get("source")
        if not isinstance(offset, dict):
            raise self._corrupt("its 'offset' field is missing or not an object")
        if not isinstance(source, str):
            raise self._corrupt("its 'source' field is missing or not a string")
        kind, saved_at, position = (document.get(k) for k in ("type", "saved_at", "position"))
        return SavedOffset(
            source=source,
            type=kind if isinstance(kind, str) else None,
            saved_at=saved_at if isinstance(saved_at, str) else "",
            position=position if isinstance(position, str) else "",
            offset=offset,
        )

    def _corrupt(self, why: str) -> OffsetFileError:
        return OffsetFileError(
            f"capture offset file {self.path} is corrupt: {why}",
            path=self.path,
            hint="capture cannot tell where to resume. Restore the file from a backup if "
            "you have one; otherwise delete it and run `icetide bootstrap` for this source, "
            "which copies the tables again and saves a new offset",
        )
