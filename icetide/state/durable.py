"""Crash-safe file writes: a file is either absent, the old version, or complete.

The pattern is the classic one: write a temp file next to the target, ``fsync`` it,
``rename`` it over the target, ``fsync`` the folder so the new name itself survives a
power cut. A temp name starts with ``.`` so Spark's file source never lists it.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

from icetide.faults import crash_point


def fsync_directory(path: Path) -> None:
    """Make the entries of folder ``path`` (new names, renames, deletions) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as error:
        # Some filesystems cannot sync a folder at all; there is nothing more to do there.
        if error.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def make_directories(path: Path) -> None:
    """``mkdir -p path``, with every folder it creates made durable in its parent."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        fsync_directory(folder.parent)


def temp_path(path: Path) -> Path:
    """The hidden temp name used while writing ``path``: ``.<name>.tmp``."""
    return path.with_name(f".{path.name}.tmp")


def write_atomically(path: Path, data: bytes, *, fault: str | None = None) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new content.

    ``fault`` names the crash point (see :mod:`icetide.faults`) between the durable
    temp file and the rename.
    """
    make_directories(path.parent)
    # A temp name of this process and thread: two writers of one file (a run and
    # `icetide schema apply`, say) never write into each other's temp file; the last
    # rename wins whole.
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(temp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    if fault:
        crash_point(fault)
    os.replace(temp, path)
    _remove_orphaned_temps(path)
    fsync_directory(path.parent)


def _remove_orphaned_temps(path: Path) -> None:
    """Delete the temp files of ``path`` that writers killed before their rename left:
    those of processes no longer alive (a live writer's temp is its own business)."""
    for temp in path.parent.glob(f".{path.name}.*.tmp"):
        pid = temp.name[len(path.name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            temp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True
