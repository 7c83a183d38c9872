"""What every transport is: the :class:`Transport` protocol capture writes through, and
:class:`Roll`, the size-or-age rule that says when buffered records are flushed."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, Self

from icetide.capture.record import CaptureRecord

Clock = Callable[[], float]


class Transport(Protocol):
    """A destination for capture records that makes them durable on :meth:`flush`."""

    def send(self, record: CaptureRecord) -> None:
        """Buffer ``record``; it is durable only once :meth:`flush` returns."""
        ...

    def should_flush(self) -> bool:
        """The buffered records reached the roll size or the roll age."""
        ...

    def flush(self) -> None:
        """Make every record sent so far durable; with nothing buffered, do nothing.

        Raises :class:`~icetide.capture.errors.CaptureError` when that cannot be done.
        """
        ...

    def close(self) -> None:
        """Release the transport; records sent after the last flush are dropped."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...


class Roll:
    """When buffered records are due to be made durable: by size or by age.

    The age counts from the first record buffered since the last flush, so a quiet
    source does not flush empty batches and a trickle is durable within ``max_age``.

    >>> now = [0.0]
    >>> roll = Roll(max_bytes=100, max_age=5.0, clock=lambda: now[0])
    >>> roll.add(60); roll.due
    False
    >>> now[0] = 5.0; roll.due
    True
    >>> roll.reset(); roll.add(100); roll.due
    True
    """

    def __init__(self, *, max_bytes: int, max_age: float, clock: Clock = time.monotonic) -> None:
        if max_bytes < 1 or max_age <= 0:
            raise ValueError("max_bytes and max_age must be positive")
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.clock = clock
        self.bytes = 0
        self.records = 0
        self._first_at: float | None = None

    def add(self, size: int) -> None:
        """Count one buffered record of ``size`` bytes."""
        if self._first_at is None:
            self._first_at = self.clock()
        self.bytes += size
        self.records += 1

    @property
    def due(self) -> bool:
        """Big enough or old enough to flush."""
        if self._first_at is None:
            return False
        return self.bytes >= self.max_bytes or self.clock() - self._first_at >= self.max_age

    def reset(self) -> None:
        """Nothing is buffered any more."""
        self.bytes = 0
        self.records = 0
        self._first_at = None
