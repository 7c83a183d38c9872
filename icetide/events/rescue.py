"""Rescued data: the fields of an event that the running schema does not know, kept as
JSON text in the ledger's ``_rescued`` column (the way Spark's file readers keep
``_rescued_data``), so that no value is lost while the code lags a source schema change.

The text is ``{"after": {field: value}, "before": {field: value}}`` (an image only when
it has such fields). Values are the decoded event values written back as JSON in a form
the event coercers (:mod:`icetide.events.project`) accept again: decimals with every
digit, dates and times in ISO form, bytes as base64. So once a schema knows the field,
:func:`rescued_value` gives the value typed exactly as if it had been projected then.

>>> from decimal import Decimal
>>> text = rescue_json({"id": 1, "note": "hi", "price": Decimal("1.50")}, None, {"id"})
>>> text
'{"after":{"note":"hi","price":1.50}}'
>>> rescued_fields(text, "after")
{'note': 'hi', 'price': Decimal('1.50')}
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Collection, Mapping
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from icetide.events.project import dump_json

IMAGES = ("after", "before")


def _plain(value: Any) -> Any:
    """A decoded value as a JSON-able value the coercers read back to the same thing."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def rescue_json(
    after: Mapping[str, Any] | None,
    before: Mapping[str, Any] | None,
    known: Collection[str],
) -> str | None:
    """The ``_rescued`` text of an event's images: the fields not in ``known``, or None."""
    doc: dict[str, Any] = {}
    for name, image in zip(IMAGES, (after, before), strict=True):
        if image:
            unknown = {k: _plain(v) for k, v in image.items() if k not in known}
            if unknown:
                doc[name] = unknown
    return dump_json(doc) if doc else None


def rescued_fields(text: str | None, image: str = "after") -> dict[str, Any]:
    """The rescued fields of one image (``after`` or ``before``) of a ``_rescued`` text."""
    if not text:
        return {}
    doc = json.loads(text, parse_float=Decimal)
    fields = doc.get(image) if isinstance(doc, dict) else None
    return fields if isinstance(fields, dict) else {}
