"""The named conversion functions a table's sink config may apply to a column.

A conversion turns a source column's values into the value stored in Iceberg on the way
into the ledger (so the ledger, the base table and the merge all see the converted
value). Each function declares the source types it takes and the type it produces, so the
one table-contract builder knows the Iceberg type without running anything; the code that
converts values lives in :mod:`icetide.events.sink_values` (it runs in the ledger's Arrow
workers). This module is the library's declaration, in one table, :data:`FUNCTIONS`:

==========================  ==========================  ==================  ===============
function                    takes                       gives               arguments
==========================  ==========================  ==================  ===============
epoch_millis_to_timestamp   int, long                   timestamptz         –
epoch_seconds_to_timestamp  int, long                   timestamptz         –
json_text_to_struct         string, json                the ``type``        ``type``: a
                                                                            struct, with ids
sha256                      string, json, uuid, enum,   string (64 hex      ``salt_env``:
                            binary                      digits)             a variable name
mask                        string, json, uuid, enum    string              ``keep`` (4),
                                                                            ``char`` (``*``)
lower, upper, trim          string, enum                string              –
==========================  ==========================  ==================  ===============

>>> from icetide.schema.types import LongType
>>> Conversion("epoch_millis_to_timestamp").output_type(LongType())
TimestamptzType()
>>> Conversion("mask", (("keep", 2),)).describe()
'mask(keep=2)'
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from icetide.schema.types import IcetideType, StringType, StructType, TimestamptzType


@dataclass(frozen=True)
class Param:
    """One argument of a function: its name, kind (``int``, ``char``, ``struct``, ``env``:
    the name of an environment variable), default
    (``None``: required) and what it is for."""

    name: str
    kind: str
    default: Any = None
    doc: str = ""


@dataclass(frozen=True)
class Function:
    """A library function: the source type names it takes, its output type (from its
    arguments and the source type) and its arguments."""

    name: str
    doc: str
    inputs: tuple[str, ...]
    output: Callable[[Mapping[str, Any], IcetideType], IcetideType]
    output_text: str
    params: tuple[Param, ...] = ()


_TEXT = ("string", "json", "uuid", "enum")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _string(args: Mapping[str, Any], source: IcetideType) -> IcetideType:
    return StringType()


def _instant(args: Mapping[str, Any], source: IcetideType) -> IcetideType:
    return TimestamptzType()


def _given(args: Mapping[str, Any], source: IcetideType) -> IcetideType:
    given = args["type"]
    assert isinstance(given, IcetideType)
    return given


FUNCTIONS: dict[str, Function] = {
    f.name: f
    for f in (
        Function(
            "epoch_millis_to_timestamp",
            "milliseconds since 1970-01-01 UTC → an instant",
            ("int", "long"),
            _instant,
            "timestamptz",
        ),
        Function(
            "epoch_seconds_to_timestamp",
            "seconds since 1970-01-01 UTC → an instant",
            ("int", "long"),
            _instant,
            "timestamptz",
        ),
        Function(
            "json_text_to_struct",
            "JSON object text → a struct of the given fields (unknown keys ignored)",
            ("string", "json"),
            _given,
            "the struct given as type",
            (Param("type", "struct", doc="{struct: [{id: N, name: ..., type: ...}, ...]}"),),
        ),
        Function(
            "sha256",
            "the SHA-256 of the value's UTF-8 text (or bytes), as 64 hex digits; keyed "
            "(HMAC-SHA256) by the salt in the environment variable `salt_env` when given",
            (*_TEXT, "binary"),
            _string,
            "string",
            (
                Param(
                    "salt_env",
                    "env",
                    "",
                    "the environment variable holding the salt (its value is never shown)",
                ),
            ),
        ),
        Function(
            "mask",
            "every character but the last `keep` replaced by `char`",
            _TEXT,
            _string,
            "string",
            (
                Param("keep", "int", 4, "how many trailing characters stay readable"),
                Param("char", "char", "*", "the character put in place of the others"),
            ),
        ),
        Function("lower", "lower case", ("string", "enum"), _string, "string"),
        Function("upper", "upper case", ("string", "enum"), _string, "string"),
        Function(
            "trim", "leading and trailing whitespace removed", ("string", "enum"), _string, "string"
        ),
    )
}
"""Function name → declaration: every conversion a sink config may name."""


@dataclass(frozen=True)
class Conversion:
    """One column's conversion: a :data:`FUNCTIONS` name and its arguments (defaults
    filled in by :meth:`args`)."""

    function: str
    arguments: tuple[tuple[str, Any], ...] = ()

    @property
    def declared(self) -> Function:
        """The library entry (the name is checked by :func:`conversion_problems`)."""
        return FUNCTIONS[self.function]

    def args(self) -> dict[str, Any]:
        """Every argument: the given ones over the defaults."""
        values = {p.name: p.default for p in self.declared.params}
        values.update(dict(self.arguments))
        return values

    def output_type(self, source: IcetideType) -> IcetideType:
        """The Iceberg type of the converted values of a ``source``-typed column."""
        return self.declared.output(self.args(), source)

    def describe(self) -> str:
        """The call as text, for plans and ``schema show``: ``mask(keep=2)``."""
        shown = [
            f"{k}={v}" if not isinstance(v, IcetideType) else f"{k}={v}" for k, v in self.arguments
        ]
        return f"{self.function}({', '.join(shown)})" if shown else self.function


def conversion_problems(
    conversion: Conversion, source: IcetideType
) -> list[tuple[tuple[str, ...], str]]:
    """What is wrong with applying ``conversion`` to a ``source``-typed column, each at
    its place below the ``convert:`` key (``()`` for the function itself).

    >>> from icetide.schema.types import LongType
    >>> conversion_problems(Conversion("sha265"), LongType())[0][1]
    "unknown function 'sha265'; did you mean 'sha256'? (functions: epoch_millis_to_timestamp, \
epoch_seconds_to_timestamp, json_text_to_struct, sha256, mask, lower, upper, trim)"
    >>> conversion_problems(Conversion("sha256"), LongType())[0][1]
    'sha256 takes string, json, uuid, enum, binary, not long'
    """
    function = FUNCTIONS.get(conversion.function)
    if function is None:
        close = difflib.get_close_matches(conversion.function, list(FUNCTIONS), n=3)
        guess = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return [
            (
                (),
                f"unknown function {conversion.function!r}{guess} "
                f"(functions: {', '.join(FUNCTIONS)})",
            )
        ]
    problems: list[tuple[tuple[str, ...], str]] = []
    if source.name not in function.inputs:
        problems.append(((), f"{function.name} takes {', '.join(function.inputs)}, not {source}"))
    known = {p.name: p for p in function.params}
    given = dict(conversion.arguments)
    for name in given:
        if name not in known:
            allowed = ", ".join(known) or "no arguments"
            problems.append(((name,), f"unknown argument of {function.name}; it takes {allowed}"))
    for param in function.params:
        value = given.get(param.name, param.default)
        if value is None:
            problems.append(((param.name,), f"required by {function.name}: {param.doc}"))
        elif param.kind == "int" and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            problems.append(((param.name,), "must be a whole number of at least 0"))
        elif param.kind == "char" and (not isinstance(value, str) or len(value) != 1):
            problems.append(((param.name,), "must be one character"))
        elif param.kind == "env" and (
            not isinstance(value, str) or (value and not _ENV_NAME.fullmatch(value))
        ):
            problems.append(((param.name,), "must name an environment variable, e.g. HASH_SALT"))
        elif param.kind == "struct" and not isinstance(value, StructType):
            problems.append(((param.name,), f"must be a struct type: {param.doc}"))
    return problems
