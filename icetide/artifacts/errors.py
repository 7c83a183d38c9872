"""The artifacts layer's errors."""

from __future__ import annotations

from icetide.errors import IcetideError, Terminal


class ArtifactError(IcetideError, Terminal):
    """An artifact (package, Avro literal, view schema) could not be made or published."""


class ViewError(ArtifactError):
    """A view's SQL cannot be registered or its schema cannot be derived."""
