"""Errors of the capture stage: one sub-root, :class:`CaptureError`, under ``IcetideError``."""

from __future__ import annotations

from collections.abc import Sequence

from icetide.errors import IcetideError, Terminal


class CaptureError(IcetideError):
    """Capture cannot read the source's change log."""


class ServerSettingsError(CaptureError, Terminal):
    """The source server is configured so that its change log cannot be captured.

    ``problems`` lists one line per wrong setting (what it is, what it must be);
    ``fix`` holds the configuration lines that correct them.
    """

    def __init__(
        self, message: str, *, problems: Sequence[str], fix: Sequence[str], hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.problems = tuple(problems)
        self.fix = tuple(fix)


class PositionLostError(CaptureError, Terminal):
    """The log no longer holds the position capture must resume from (purged binlog,
    dropped slot): only a new bootstrap can continue without a gap."""

    def __init__(self, message: str, *, position: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.position = position
