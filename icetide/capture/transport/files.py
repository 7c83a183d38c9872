"""Capture into the landing folder: newline-delimited JSON files that appear whole.

The ledger's file source (:func:`icetide.ledger.source.file_messages`) reads every file
of the landing folder once, whole, and names each line ``<file>:<line>`` for ever. So a
file must never be seen half written, and never change or be replaced after it appears.
This transport guarantees both:

* records are written, one :meth:`CaptureRecord.to_json` text per line, into a hidden
  temp file ``.<name>.tmp`` (Spark ignores names starting with ``.`` or ``_``);
* :meth:`FilesTransport.flush` ``fsync``s it, renames it to ``<name>`` and ``fsync``s the
  folder: the file appears complete and durable in one step, or not at all;
* ``<name>`` is ``<source>-<first position key, 38 digits>-<write time><random>.json``,
  so the names of one source sort in position order, a file written later (a replay
  after a crash) sorts after an earlier one starting at the same position, and no name
  is ever reused: an existing file is never overwritten.

A crash before the rename leaves only a hidden temp file: its records were never
acknowledged, so capture replays them from the saved offset, and the next transport of
the source deletes the leftover on open. One transport per source may write to a folder
at a time (a lock file ``.<source>.lock`` guards it), so that cleanup can never delete
another process's open file.

Schema-change records go into the same files, in log order with the row changes: the
ledger's decoder skips them (``schema_change``), and anything reading the landing folder
sees DDL exactly where it happened between the rows.
"""

from __future__ import annotations

import base64
import fcntl
import os
import secrets
import time
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Self

from icetide.capture.errors import CaptureError
from icetide.capture.record import CaptureRecord
from icetide.capture.transport.base import Clock, Roll
from icetide.capture.transport.encode import ValueEncoder
from icetide.errors import Terminal, Transient
from icetide.faults import crash_point
from icetide.state.durable import fsync_directory, make_directories, temp_path

KEY_DIGITS = 38
"""A position key fits ``DECIMAL(38,0)``, so 38 digits keep every name the same width."""


class LandingWriteError(CaptureError, Transient):
    """Writing, syncing or renaming a landing file failed (disk full, I/O error)."""


class LandingFolderError(CaptureError, Terminal):
    """The landing folder cannot be used by this source (busy, unwritable, bad name)."""


def lock_landing(landing: Path, source: str) -> int:
    """Take ``source``'s lock on ``landing`` (``.<source>.lock``, an exclusive ``flock``):
    one capture per source writes there, so two never interleave their files. The open
    descriptor holds it until closed; a lock another process holds is a terminal error.
    """
    lock_path = landing / f".{source}.lock"
    try:
        make_directories(landing)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise LandingFolderError(
            f"cannot use landing folder {landing}: {error}",
            hint="check that the folder (transport.path) exists and is writable",
        ) from error
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LandingFolderError(
            f"another capture of source {source!r} is writing to {landing}",
            hint="run one `icetide capture` per source; stop the other one first",
        ) from None
    return fd


def check_landing_free(landing: Path, source: str) -> None:
    """Raise :class:`LandingFolderError` when another process captures ``source`` into
    ``landing`` now: taken and let go at once, so a command that would start a capture
    of its own can refuse before it starts anything slow."""
    os.close(lock_landing(landing, source))


def landing_name(source: str, first_key: int, suffix: str) -> str:
    """The final name of a landing file whose first record is at ``first_key``.

    >>> landing_name("shop", 42, "0001")
    'shop-00000000000000000000000000000000000042-0001.json'
    """
    return f"{source}-{first_key:0{KEY_DIGITS}d}-{suffix}.json"


def unique_suffix() -> str:
    """Write time (ns, fixed-width hex) and 32 random bits: later sorts after, never equal."""
    return f"{time.time_ns():016x}{secrets.token_hex(4)}"


class FilesTransport:
    """Capture records into hidden temp files, published to ``landing`` on flush.

    ``roll_bytes`` and ``roll_interval`` (seconds) bound a file's size and the age of its
    first record (:meth:`should_flush`).
    """

    def __init__(
        self,
        landing: Path,
        source: str,
        *,
        roll_bytes: int = 16 * 2**20,
        roll_interval: float = 5.0,
        clock: Clock = time.monotonic,
        encoder: ValueEncoder | None = None,
    ) -> None:
        if not source or source[0] in "._" or "/" in source or "\0" in source:
            raise LandingFolderError(
                f"source name {source!r} cannot prefix landing file names",
                hint="Spark ignores files whose names start with '.' or '_'; "
                "rename the source so it starts with a letter",
            )
        self.landing = Path(landing)
        self.source = source
        self._encoder = encoder or ValueEncoder()
        self._roll = Roll(max_bytes=roll_bytes, max_age=roll_interval, clock=clock)
        self._out: BinaryIO | None = None
        self._temp: Path | None = None
        self._final: Path | None = None
        self._first_key = 0
        self._failed: CaptureError | None = None
        self._closed = False
        self.files_written = 0
        self._lock = self._open_lock()
        try:
            self._remove_stale_temps()
        except OSError as error:
            os.close(self._lock)
            raise LandingFolderError(
                f"cannot remove leftover temp files of {source!r} in {self.landing}: {error}",
                hint="check that the folder (transport.path) is writable",
            ) from error

    # -- Transport ---------------------------------------------------------------------

    def _line(self, record: CaptureRecord) -> bytes:
        """One landing line: JSON text, or a registry frame in base64 (docs/registry.md);
        the subject is the Debezium topic's, ``<source>.<db>.<table>-value``."""
        value = self._encoder.encode(record, f"{self.source}.{record.db}.{record.table}")
        if self._encoder.framed and record.kind == "change":
            value = base64.b64encode(value)
        return value + b"\n"

    def send(self, record: CaptureRecord) -> None:
        """Append ``record``'s JSON text as one line of the open temp file."""
        self._check_usable()
        line = self._line(record)
        try:
            if self._out is None:
                self._open_file(record.position.key)
            assert self._out is not None
            self._out.write(line)
        except OSError as error:
            raise self._fail(f"cannot write landing file {self._temp}: {error}") from error
        self._roll.add(len(line))

    def should_flush(self) -> bool:
        """The open file reached ``roll_bytes`` or its first record ``roll_interval``."""
        return self._failed is None and self._roll.due

    def flush(self) -> None:
        """Sync the open file and rename it into view; nothing buffered, nothing written."""
        self._check_usable()
        if self._out is None or self._temp is None or self._final is None:
            return
        out, temp = self._out, self._temp
        try:
            out.flush()
            os.fsync(out.fileno())
            out.close()
            self._out = None
            crash_point("capture.files.before_rename")
            os.rename(temp, self._free_name(self._final))
            fsync_directory(self.landing)
        except OSError as error:
            raise self._fail(f"cannot publish landing file {temp}: {error}") from error
        self._temp = self._final = None
        self._roll.reset()
        self.files_written += 1

    def close(self) -> None:
        """Drop records sent after the last flush (they will be replayed) and unlock."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._out is not None:
                self._out.close()
            if self._temp is not None:
                self._temp.unlink(missing_ok=True)
        finally:
            self._out = self._temp = None
            os.close(self._lock)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------

    @property
    def pending_bytes(self) -> int:
        """Bytes written to the open temp file since the last flush."""
        return self._roll.bytes

    def _open_lock(self) -> int:
        return lock_landing(self.landing, self.source)

    def _remove_stale_temps(self) -> None:
        """Delete temp files a crashed run of this source left (never acknowledged)."""
        prefix = f".{self.source}-"
        removed = False
        for entry in os.scandir(self.landing):
            if entry.name.startswith(prefix) and entry.name.endswith(".tmp"):
                os.unlink(entry.path)
                removed = True
        if removed:
            fsync_directory(self.landing)

    def _open_file(self, first_key: int) -> None:
        self._first_key = first_key
        self._final = self.landing / landing_name(self.source, first_key, unique_suffix())
        self._temp = temp_path(self._final)
        self._out = open(self._temp, "xb")

    def _free_name(self, final: Path) -> Path:
        """``final``, or if a file has that name already, a fresh name for the same key."""
        while os.path.lexists(final):
            final = self.landing / landing_name(self.source, self._first_key, unique_suffix())
        return final

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise self._failed
        if self._closed:
            raise CaptureError(f"the landing transport of {self.source!r} is closed")

    def _fail(self, message: str) -> CaptureError:
        self._failed = LandingWriteError(
            message,
            hint="capture stops without saving its offset; fix the disk, then start "
            "capture again: it resumes from the last saved offset",
        )
        return self._failed
