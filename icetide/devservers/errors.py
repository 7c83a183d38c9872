"""The one error of the private servers."""

from __future__ import annotations

from icetide.errors import IcetideError, Terminal


class LocalServerError(IcetideError, Terminal):
    """A private database server (tests, demo) could not be installed or started."""
