"""Secret config values, and keeping them out of everything the CLI prints.

A :class:`Secret` hides a value from ``repr()`` and ``config show``, but a secret still
reaches output through f-strings (``starting Spark (…)``), driver errors that quote a
host or user, or a JVM message. Rather than guard every message, the CLI passes all it
prints through one :class:`Scrubber` that knows every secret value of the loaded config
and replaces each with ``***``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from pydantic import BaseModel

MASK = "***"


class Secret(str):
    """A string that must not be shown: ``repr()`` gives ``'***'``, the value is the str.

    It stays a ``str`` so the Spark session builder and py4j use it unchanged; call
    ``str(value)`` for a plain copy. Never format one into a log line yourself.

    >>> token = Secret("s3cr3t")
    >>> repr(token), token == "s3cr3t", repr({"token": token})
    ("'***'", True, "{'token': '***'}")
    """

    parts: tuple[str, ...] = ()
    """The environment values substituted into this string (``${HOST}`` in
    ``http://${HOST}:8181``): a message may quote one alone, so they are secrets too."""

    def __repr__(self) -> str:
        return "'***'"


PART_MIN = 4
"""An environment value substituted into a longer string is masked on its own only from
this length on: masking every ``1`` or ``db`` would garble the output (the whole string
is always masked)."""


def secret_values(value: Any) -> set[str]:
    """Every :class:`Secret` string inside a config (or any part of one), and the
    environment values substituted into them.

    >>> host = Secret("http://rest-host:8181")
    >>> host.parts = ("rest-host",)
    >>> sorted(secret_values({"a": Secret("pw"), "b": ["plain", Secret("tok"), host]}))
    ['http://rest-host:8181', 'pw', 'rest-host', 'tok']
    """
    found: set[str] = set()
    for secret in _walk(value):
        if secret:
            found.add(str(secret))
            found.update(part for part in secret.parts if len(part) >= PART_MIN)
    return found


def _walk(value: Any) -> Iterator[Secret]:
    if isinstance(value, Secret):
        yield value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            field = getattr(value, name)
            if name == "password" and isinstance(field, str):
                yield Secret(field)  # a password is one even when written in the file
            else:
                yield from _walk(field)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _walk(item)


class Scrubber:
    """Replaces known secret values in text with ``***``, longest first.

    >>> scrub = Scrubber()
    >>> scrub.add(["hunter2", "db.internal"])
    >>> scrub("cannot connect to db.internal as admin/hunter2")
    'cannot connect to *** as admin/***'
    """

    def __init__(self) -> None:
        self._values: list[str] = []

    def add(self, values: Iterable[str]) -> None:
        """Scrub these values too (empty ones are ignored)."""
        merged = set(self._values) | {v for v in values if v}
        # Longest first, so a secret containing another is masked whole.
        self._values = sorted(merged, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, MASK)
        return text


class ScrubbedStream:
    """A text stream that scrubs everything written to it before passing it on.

    Wraps ``sys.stdout`` and ``sys.stderr`` so output the CLI does not format itself
    (warnings, library logging, a traceback) is scrubbed as well.
    """

    def __init__(self, stream: TextIO, scrub: Scrubber) -> None:
        self._stream = stream
        self._scrub = scrub

    def write(self, text: str) -> int:
        self._stream.write(self._scrub(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
