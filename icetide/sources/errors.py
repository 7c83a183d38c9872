"""Errors about a source database: one sub-root, :class:`SourceError`, under ``IcetideError``."""

from __future__ import annotations

from icetide.errors import IcetideError, Transient


class SourceError(IcetideError):
    """A source database cannot be used."""


class SourceUnavailableError(SourceError, Transient):
    """The source database cannot be reached right now; retrying later may work.

    ``where`` names the server (``source 'shop' (mysql at db:3306)``) and ``detail`` is
    the driver's own reason, for callers that word the failure themselves.
    """

    def __init__(
        self, message: str, *, where: str = "", detail: str = "", hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.where = where
        self.detail = detail
