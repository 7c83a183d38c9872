"""The pipeline's state location as small named files, each replaced whole.

``state:`` in the config names where the files live that a replaced machine needs to
resume: capture's offsets, a bootstrap under way, the ledger's Kafka position. Two kinds
of location:

* a local folder (``state_dir``, the default, or a path given as ``state:``): a write is a
  temp file, ``fsync``, rename and folder ``fsync``
  (:func:`~icetide.state.durable.write_atomically`);
* ``s3://bucket/prefix`` on the catalog's object store: a write is one PUT, which S3
  makes visible whole or not at all, so a reader sees the old object or the new one.

The files are small (a few hundred bytes) and written at checkpoints, so each write goes
straight to the store; nothing is kept locally that the store does not also hold.

>>> import tempfile
>>> store = LocalStore(Path(tempfile.mkdtemp()))
>>> f = store.file("capture/shop.offset.json")
>>> f.read() is None
True
>>> f.write(b"{}")
>>> f.read(), f.where.endswith("capture/shop.offset.json")
(b'{}', True)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from icetide.errors import IcetideError, Transient
from icetide.faults import crash_point
from icetide.state.durable import fsync_directory, write_atomically
from icetide.state.s3 import s3_filesystem, split_s3_uri

if TYPE_CHECKING:
    from pyarrow.fs import S3FileSystem

    from icetide.config.model import Config

SETTING = "state"
"""The YAML path of the state location, for messages."""
TIMEOUT = 10.0
"""Seconds an object-store request may take before it is tried again."""
ATTEMPTS = 3
"""Tries per object-store request: a store that restarts for a second is waited for."""


class StateStoreError(IcetideError, Transient):
    """The state location could not be read or written; ``where`` names the file.

    Transient: the stage that met it stops and is started again (capture from its last
    saved offset), so a store that is back later loses nothing."""

    def __init__(self, message: str, *, where: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.where = where


class StateFile(ABC):
    """One named file of the state location."""

    where: str
    """The file's path or URI, for messages."""

    @abstractmethod
    def read(self) -> bytes | None:
        """The file's bytes; None when it does not exist."""

    @abstractmethod
    def write(self, data: bytes, *, fault: str | None = None) -> None:
        """Replace the file with ``data``: a reader sees the old bytes or the new ones.

        ``fault`` names a crash point (:mod:`icetide.faults`) just before the new bytes
        become visible."""

    @abstractmethod
    def delete(self) -> None:
        """Remove the file (nothing when it is absent)."""

    def __str__(self) -> str:
        return self.where


class StateStore(ABC):
    """A state location: files by name (``capture/shop.offset.json``)."""

    where: str
    """The location's folder or URI, for messages."""

    @abstractmethod
    def file(self, name: str) -> StateFile:
        """The file ``name`` (``/``-separated, relative) of this location."""

    @property
    def shared(self) -> bool:
        """Whether the location outlives this machine (an object store)."""
        return False


class LocalFile(StateFile):
    """A file in a local folder, replaced by rename."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    def read(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StateStoreError(
                f"cannot read {self.path}: {error.strerror}",
                where=self.where,
                hint="check the file's permissions",
            ) from error

    def write(self, data: bytes, *, fault: str | None = None) -> None:
        write_atomically(self.path, data, fault=fault)

    def delete(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            return
        fsync_directory(self.path.parent)


class LocalStore(StateStore):
    """The files under a local folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.where = str(root)

    def file(self, name: str) -> LocalFile:
        return LocalFile(self.root / name)


class S3File(StateFile):
    """An object on S3, replaced by one PUT."""

    def __init__(self, s3: S3FileSystem, bucket: str, key: str) -> None:
        self.s3 = s3
        self.path = f"{bucket}/{key}"
        self.where = f"s3://{self.path}"

    def read(self) -> bytes | None:
        try:
            with self.s3.open_input_stream(self.path) as stream:
                return bytes(stream.read())
        except FileNotFoundError:
            return None
        except OSError as error:
            raise self._failed("read", error) from None

    def write(self, data: bytes, *, fault: str | None = None) -> None:
        if fault:
            crash_point(fault)
        try:
            # PyArrow sends a body this small as one PutObject when the stream closes:
            # the object appears whole, or the old one stays.
            with self.s3.open_output_stream(self.path, metadata={}) as out:
                out.write(data)
        except OSError as error:
            raise self._failed("write", error) from None

    def delete(self) -> None:
        try:
            self.s3.delete_file(self.path)
        except FileNotFoundError:
            return
        except OSError as error:
            raise self._failed("delete", error) from None

    def _failed(self, doing: str, error: OSError) -> StateStoreError:
        _, found, detail = str(error).partition(" operation: ")
        return StateStoreError(
            f"cannot {doing} the state file {self.where}: {(detail if found else str(error))}",
            where=self.where,
            hint=f"the object store of `{SETTING}:` must be reachable with the catalog's "
            "s3.* properties (or the environment's AWS credentials); the stage is "
            "started again from its last saved state",
        )


class S3Store(StateStore):
    """The objects under ``s3://bucket/prefix``."""

    def __init__(self, s3: S3FileSystem, bucket: str, prefix: str) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.where = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"

    def file(self, name: str) -> S3File:
        key = f"{self.prefix}/{name}" if self.prefix else name
        return S3File(self.s3, self.bucket, key)

    @property
    def shared(self) -> bool:
        return True


def state_store(config: Config) -> StateStore:
    """The pipeline's state location: ``state:`` when set, else the ``state_dir`` folder.

    An ``s3://`` location is reached with the catalog's ``s3.*`` properties, the keys the
    lake's tables are written with."""
    location = config.state
    if location is None:
        return LocalStore(config.resolved_path(config.state_dir))
    split = split_s3_uri(location)
    if split is None:
        return LocalStore(Path(location.removeprefix("file:")))
    s3 = s3_filesystem(config.catalog.properties_plain(), timeout=TIMEOUT, attempts=ATTEMPTS)
    return S3Store(s3, *split)
