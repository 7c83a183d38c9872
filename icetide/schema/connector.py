"""The Debezium connector settings that decide how a value arrives without its schema.

A message written by JsonConverter with ``schemas.enable=true``, or through a schema
registry, names each value's Connect type, so it reads the same whatever the connector's
settings. Schemaless JSON (``schemas.enable=false``) does not: the same text means
different things under different settings, and nothing in the message tells them apart.
A DECIMAL ``-26588.24`` is ``"1234"`` under Debezium's default
``decimal.handling.mode=precise`` (base64 of the unscaled two's-complement bytes),
``"-26588.24"`` under ``string`` and ``-26588.24`` under ``double``; ``"1234"`` is valid
base64 and a valid number, so guessing per value stores wrong numbers. The encoding is
therefore declared once, as the connector was configured (``debezium:`` in the config,
pipeline-wide or per table), and turned here into the per-column *hints* the projection
reads values by (:func:`read_hints`):

==========================  ================================================================
setting                     what the columns of a schemaless message are read as
==========================  ================================================================
``decimal_handling_mode``   ``precise`` (Debezium's default): a decimal column's string is
                            base64 (:data:`~icetide.schema.convert.connect.DECIMAL`);
                            ``string``: decimal text; ``double``: a JSON number. A JSON
                            number is a number in every mode (it cannot be base64).
``time_precision_mode``     unset: the connector's default, ``adaptive_time_microseconds``
                            (MySQL, MariaDB) or ``adaptive`` (PostgreSQL): each temporal
                            column by its schema-file hint, which ``onboard`` writes from
                            the column's precision for that default;
                            ``adaptive_time_microseconds`` on PostgreSQL: every ``time``
                            in microseconds (``timestamp(0-3)`` still milliseconds);
                            ``connect``: every date, time and timestamp column in Kafka
                            Connect's units (days, milliseconds), whatever its hint;
                            ``isostring``: ISO-8601 text, which reads without a hint.
                            (``adaptive`` on MySQL sends ``TIME(0-3)`` in milliseconds,
                            which a ``time`` column's hint cannot tell: not supported.)
==========================  ================================================================

A decimal column's own hint in the schema file (``sink.logical``) wins over
``decimal_handling_mode``: ``org.apache.kafka.connect.data.Decimal`` (base64), ``string``
or ``float64``. A ``string`` column hinted ``io.debezium.data.VariableScaleDecimal`` (what
``onboard`` writes for a PostgreSQL ``numeric`` without a fixed scale) is a number kept as
its text: ``precise`` sends it as a ``{scale, value}`` struct, ``string`` as text,
``double`` as a JSON number. icetide's own capture writes decimals as text (:data:`CAPTURE`), so the
tables it captures are read that way whatever ``debezium:`` says.

A list column's hint (a PostgreSQL array's) is its element's and applies to every element,
at every depth: the rules above read the list's innermost element type. Debezium sends the
elements of a ``time(0-3)[]`` or ``timestamp(0-3)[]`` in milliseconds, as the scalar
column's; icetide's capture sends every time and timestamp array's elements in
microseconds (:attr:`ConnectorSettings.array_micros`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from icetide.schema.convert.connect import DECIMAL
from icetide.schema.model import TableSchema
from icetide.schema.types import DecimalType, IcetideType, ListType

DecimalHandlingMode = Literal["precise", "string", "double"]
"""Debezium's ``decimal.handling.mode`` values."""
TimePrecisionMode = Literal["adaptive_time_microseconds", "adaptive", "connect", "isostring"]
"""Debezium's ``time.precision.mode`` values icetide reads."""
DECIMAL_HANDLING_MODES: tuple[str, ...] = get_args(DecimalHandlingMode)
TIME_PRECISION_MODES: tuple[str, ...] = get_args(TimePrecisionMode)

DECIMAL_HINTS: dict[str, str] = {"precise": DECIMAL, "string": "string", "double": "float64"}
"""``decimal_handling_mode`` → the hint of a decimal column: the Connect logical name or
plain type its values arrive in."""
VARIABLE_SCALE = "io.debezium.data.VariableScaleDecimal"
VARIABLE_SCALE_HINTS: dict[str, str] = {
    "precise": VARIABLE_SCALE,
    "string": "string",
    "double": "float64",
}
"""``decimal_handling_mode`` → the hint of a number kept as text (an unconstrained
PostgreSQL ``numeric``)."""
MILLIS_TIME, MICROS_TIME = "io.debezium.time.Time", "io.debezium.time.MicroTime"
CONNECT_TIME_HINTS: dict[str, str] = {
    "date": "org.apache.kafka.connect.data.Date",
    "time": "org.apache.kafka.connect.data.Time",
    "timestamp": "org.apache.kafka.connect.data.Timestamp",
}
"""``time_precision_mode: connect`` → the hint of each temporal column, by icetide type."""


@dataclass(frozen=True)
class ConnectorSettings:
    """How the connector feeding a table encodes values (see the module doc)."""

    decimal_handling_mode: DecimalHandlingMode = "precise"
    time_precision_mode: TimePrecisionMode | None = None
    """None: the connector's own default (the hints as ``onboard`` writes them)."""
    array_micros: bool = False
    """Time and timestamp array elements arrive in microseconds whatever the column's
    precision (icetide's capture; Debezium converts them as the scalar column)."""


DEBEZIUM_DEFAULTS = ConnectorSettings()
"""A Debezium connector as it comes: ``precise`` decimals, its default time mode."""
CAPTURE = ConnectorSettings(decimal_handling_mode="string", array_micros=True)
"""What icetide's own capture writes (capture/mysql/types.py, sources/postgres_types.py):
decimals as exact text, the one form that reads the same with or without a schema, and
array elements of times and timestamps in microseconds."""
MICROS_TIMESTAMP = "io.debezium.time.MicroTimestamp"
_IN_MICROS = {MILLIS_TIME: MICROS_TIME, "io.debezium.time.Timestamp": MICROS_TIMESTAMP}


def _leaf(ctype: IcetideType) -> IcetideType:
    while isinstance(ctype, ListType):
        ctype = ctype.element
    return ctype


def decimal_hint_problem(ctype: IcetideType, hint: str) -> str | None:
    """Why ``hint`` cannot be a decimal column's hint, or None when it can (or the column
    is not a decimal).

    >>> from icetide.schema.types import DecimalType
    >>> decimal_hint_problem(DecimalType(10, 2), "string") is None
    True
    >>> decimal_hint_problem(DecimalType(10, 2), "precise")
    "a decimal column's hint is one of org.apache.kafka.connect.data.Decimal (base64 bytes), \
string (decimal text), float64 (a number), not 'precise'"
    """
    if not isinstance(ctype, DecimalType) or hint in DECIMAL_HINTS.values():
        return None
    return (
        f"a decimal column's hint is one of {DECIMAL} (base64 bytes), string (decimal "
        f"text), float64 (a number), not {hint!r}"
    )


def read_hints(schema: TableSchema, settings: ConnectorSettings) -> Mapping[int, str]:
    """Column id → how its values arrive in a schemaless message: the schema file's
    ``sink.logical``, completed (decimals) or overridden (``connect`` times) by the
    connector's settings.

    >>> from icetide.schema.file import schema_from_dict
    >>> t = schema_from_dict({"table": "t", "primary_key": ["id"], "columns": [
    ...     {"id": 1, "name": "id", "type": "int"},
    ...     {"id": 2, "name": "price", "type": "decimal(10,2)"},
    ...     {"id": 3, "name": "at", "type": "timestamp"}],
    ...     "sink": {"logical": {"at": "io.debezium.time.MicroTimestamp"}}})
    >>> dict(read_hints(t, ConnectorSettings()))
    {3: 'io.debezium.time.MicroTimestamp', 2: 'org.apache.kafka.connect.data.Decimal'}
    >>> dict(read_hints(t, ConnectorSettings("string", "connect")))
    {3: 'org.apache.kafka.connect.data.Timestamp', 2: 'string'}
    """
    hints = dict(schema.sink.logical)
    for column in schema.columns:
        kind = _leaf(column.type)
        if isinstance(kind, DecimalType):
            hints.setdefault(column.id, DECIMAL_HINTS[settings.decimal_handling_mode])
        elif hints.get(column.id) == VARIABLE_SCALE:
            hints[column.id] = VARIABLE_SCALE_HINTS[settings.decimal_handling_mode]
        elif settings.time_precision_mode == "connect" and kind.name in CONNECT_TIME_HINTS:
            hints[column.id] = CONNECT_TIME_HINTS[kind.name]
        elif settings.time_precision_mode == "adaptive_time_microseconds" and kind.name == ("time"):
            if hints.get(column.id) == MILLIS_TIME:
                hints[column.id] = MICROS_TIME
        if settings.array_micros and isinstance(column.type, ListType):
            hint = hints.get(column.id)
            if hint in _IN_MICROS:
                hints[column.id] = _IN_MICROS[hint]
    return hints


def typed_hints(schema: TableSchema, hints: Mapping[int, str]) -> Mapping[int, str]:
    """``hints`` for an event whose values its own schema typed (an inline Connect schema,
    a registry schema): a decimal value still a string there is decimal text (a Connect
    ``string``, or a registry decimal as its digits), never base64.

    >>> from icetide.schema.file import schema_from_dict
    >>> t = schema_from_dict({"table": "t", "primary_key": ["id"], "columns": [
    ...     {"id": 1, "name": "id", "type": "int"},
    ...     {"id": 2, "name": "price", "type": "decimal(10,2)"}]})
    >>> dict(typed_hints(t, {2: DECIMAL}))
    {2: 'string'}
    """
    out = dict(hints)
    for column in schema.columns:
        if isinstance(_leaf(column.type), DecimalType):
            out[column.id] = "string"
    return out
