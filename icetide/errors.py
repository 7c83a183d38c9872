"""One error tree for the whole project.

Every error a user can see derives from :class:`IcetideError`. The marker mixins
:class:`Transient` and :class:`Terminal` decide what the stages do with it: a transient
error is retried, a terminal one stops the stage with a clear message, and an error about
one event (a :class:`DecodeError`) sends that event to the dead-letter table.
"""

from __future__ import annotations


class IcetideError(Exception):
    """Root of every icetide error; ``hint`` tells the user what to do next."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        """The message and, when known, the next step, as printed by the CLI."""
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


def failure_line(exc: BaseException) -> str:
    """A one-line reason for a failure (a stage's restart, a table's failed merge).

    >>> failure_line(IcetideError("no such table\\nmore")), failure_line(KeyError("k"))
    ('no such table', "KeyError: 'k'")
    """
    if isinstance(exc, IcetideError):
        return exc.message.splitlines()[0]
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class Transient:
    """Marker: retrying the same work later may succeed (network, busy catalog)."""


class Terminal:
    """Marker: retrying will not help; stop and tell the user."""


class ConfigError(IcetideError, Terminal):
    """The YAML config is wrong; ``path`` is the dotted YAML path of the bad field."""

    def __init__(self, message: str, *, path: str = "", hint: str | None = None) -> None:
        super().__init__(f"{path}: {message}" if path else message, hint=hint)
        self.path = path


class SchemaError(IcetideError, Terminal):
    """A schema file is malformed or inconsistent."""


class SchemaChangeError(SchemaError):
    """A change from one schema (or type) to another is not allowed.

    ``from_type`` and ``to_type`` are the types as written (``int``, ``decimal(12,2)``)
    when the refusal is about a type; ``column`` names the column when the caller knows it.
    """

    def __init__(
        self,
        message: str,
        *,
        from_type: str | None = None,
        to_type: str | None = None,
        column: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.from_type = from_type
        self.to_type = to_type
        self.column = column


class DecodeError(IcetideError):
    """One change event cannot be decoded or mapped; it goes to the dead-letter table.

    ``reason`` is a short stable code (``malformed_json``, ``missing_op`` …) used to group
    dead letters; ``column`` names the offending column when there is one.
    """

    def __init__(self, reason: str, message: str, *, column: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.column = column


class CatalogError(IcetideError, Terminal):
    """The Iceberg catalog cannot be reached or refuses access."""


class CatalogUnavailableError(IcetideError, Transient):
    """The catalog or its storage did not answer a step (connection refused, a timeout,
    a 5xx, a commit whose outcome the server never confirmed).

    Transient, unlike :class:`CatalogError`: a catalog restarted or back on the network
    answers the same step, and a step that commits atomically is safe to redo (a commit
    that did land is found by reading the progress again)."""


class StageError(IcetideError, Terminal):
    """A stage (ledger, merge) failed in a way that needs the user's attention."""


class GaveUp(StageError):
    """A failure that will not go away by itself (a configuration error, a lock another
    process holds, a Spark JVM that has exited): ``icetide run``'s supervisor says so
    once and stops the whole run instead of restarting the stage."""


class CommitConflictError(IcetideError, Transient):
    """Another writer committed first and Iceberg refused our commit (a maintenance
    rewrite racing a merge): nothing of ours was committed, so redoing the step is safe."""
