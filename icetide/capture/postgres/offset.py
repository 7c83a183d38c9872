"""Where PostgreSQL capture (re)starts: an LSN, persisted as PostgreSQL writes it.

A transaction whose commit ends before the offset is done; see the reader's module
docs for which LSN :attr:`~icetide.capture.postgres.reader.PgOutputReader.committed`
holds and when the slot may move there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from icetide.capture.errors import CaptureError
from icetide.events.position import format_lsn, parse_lsn


@dataclass(frozen=True, order=True)
class LsnOffset:
    """Where to (re)start reading: an LSN. Transactions that committed before it are done.

    >>> LsnOffset.from_dict(LsnOffset(23803720).to_dict())
    LsnOffset(lsn=23803720)
    >>> LsnOffset(23803720).text
    '0/16B3748'
    """

    lsn: int

    @property
    def text(self) -> str:
        """The LSN as PostgreSQL writes it (``0/16B3748``)."""
        return format_lsn(self.lsn)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"lsn": self.text}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LsnOffset:
        """The offset :meth:`to_dict` wrote (an integer LSN is accepted too)."""
        value = data.get("lsn")
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(value)
        if isinstance(value, str):
            try:
                return cls(parse_lsn(value))
            except ValueError:
                pass
        raise CaptureError(
            f"offset {dict(data)!r} has no usable 'lsn'",
            hint='an offset looks like {"lsn": "0/16B3748"}',
        )
