"""Compact JSON text for capture's records, without paying for ``json.dumps`` per event.

Capture writes every record as ``json.dumps(value, ensure_ascii=False,
separators=(",", ":"))``. Called that way, ``json.dumps`` builds a new encoder object and
a new C encoder for every call, and serialises every field of the envelope again, though
most of them (the ``source`` block's connector, server, database, table …) are the same
for every row of a table in a transaction. :func:`dumps` keeps one C encoder for the
process; :func:`fragments` turns the fixed part of a mapping into text once, so a record's
text is that text with the few values that change per row put in between.

Every function here returns exactly the text ``json.dumps(..., ensure_ascii=False,
separators=(",", ":"))`` returns for the same value: the readers' records are read back
by the ledger, Kafka consumers and landing files already written, so the bytes may not
change (``tests/unit/capture/test_capture_output_bytes.py`` pins them).

>>> dumps({"a": [1, 2.5, None], "b": "é"})
'{"a":[1,2.5,null],"b":"é"}'
>>> head, tail = fragments({"x": 1, "row": 0, "y": "z"}, ("row",))
>>> head + "7" + tail
'{"x":1,"row":7,"y":"z"}'
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable, Mapping, Sequence
from typing import Any

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
"""``check_circular`` only decides whether a cycle raises ValueError or RecursionError;
capture's values are trees, and the text is the same either way."""

string: Callable[[str], str] = json.encoder.encode_basestring
"""A string as a JSON string literal (``'a"b'`` → ``'"a\\"b"'``): the function the
encoder itself uses for strings when ``ensure_ascii`` is off (CPython's C one)."""


def _encoder() -> Callable[[Any], str]:
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - a Python without the C accelerator
        return _ENCODER.encode
    # What JSONEncoder.iterencode hands the C encoder for this configuration (no
    # markers, the default hook, the string encoder, no indent, the compact separators,
    # unsorted keys, no skipping, NaN allowed), built once instead of per call.
    encode = make(None, _ENCODER.default, string, None, ":", ",", False, False, True)

    def dumps(value: Any) -> str:
        return "".join(encode(value, 0))

    return dumps


dumps: Callable[[Any], str] = _encoder()
"""``value`` as compact JSON text, non-ASCII characters as they are."""


def fragments(values: Mapping[str, Any], varying: Sequence[str]) -> tuple[str, ...]:
    """The text of ``values`` cut around the values of the keys in ``varying``.

    Returns one more piece than ``varying`` has names: the text up to the first varying
    value, between each two, and after the last, so that ``pieces[0] + text(v0) +
    pieces[1] + …`` is ``dumps(values)`` with those values in place. ``varying`` names
    keys of ``values`` in the mapping's order.
    """
    pieces: list[str] = []
    current = "{"
    waiting = list(varying)
    for i, (key, value) in enumerate(values.items()):
        current += ("," if i else "") + string(key) + ":"
        if waiting and key == waiting[0]:
            pieces.append(current)
            waiting.pop(0)
            current = ""
        else:
            current += dumps(value)
    if waiting:
        raise ValueError(f"keys {waiting} are not in the mapping in this order")
    pieces.append(current + "}")
    return tuple(pieces)
