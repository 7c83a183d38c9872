"""Column defaults: the source's ``DEFAULT`` as a typed literal, read from a schema file,
a source catalog or DDL, and written back.

A default is a :class:`~icetide.schema.types.ColumnDefault`: ``value``, a Python value of
the column's type (one coercer per leaf type name in :data:`COERCERS`), when the default
is a constant; ``sql``, the source's own text, when it is computed (``CURRENT_TIMESTAMP``,
``nextval('s'::regclass)``, ``uuid()``). Why the split matters: a constant is what every
old row holds after the source added the column, so it can be filled without reading the
source; a computed default cannot.

In a schema file::

    - {id: 7, name: status, type: string, default: new}
    - {id: 8, name: amount, type: "decimal(12,2)", default: "0.00"}
    - {id: 9, name: created, type: timestamp, default: {sql: CURRENT_TIMESTAMP}}

Source text (``information_schema.COLUMNS.COLUMN_DEFAULT``, PostgreSQL's
``pg_get_expr(adbin, adrelid)``, a DDL ``DEFAULT`` clause) is parsed with sqlglot: a
literal, a negated number or a literal cast to a type (``'new'::character varying``) is a
constant; anything else is ``sql``; ``NULL`` is no default.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any, Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from icetide.schema.types import ColumnDefault, DecimalType, EnumType, IcetideType

Dialect = Literal["mysql", "postgres"]


class DefaultError(ValueError):
    """A default that does not fit its column's type (the message says what would)."""


# -- one coercer per leaf type --------------------------------------------------------------


def _bool(value: Any, ctype: IcetideType) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "b'1'"):
        return value.strip().lower() in ("true", "1", "b'1'")
    raise DefaultError("must be true or false")


def _whole(bits: int) -> Callable[[Any, IcetideType], int]:
    def coerce(value: Any, ctype: IcetideType) -> int:
        if isinstance(value, bool):
            raise DefaultError("must be a whole number")
        try:
            number = int(value) if not isinstance(value, float) or value.is_integer() else None
        except (TypeError, ValueError):
            number = None
        if number is None:
            raise DefaultError("must be a whole number")
        if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
            raise DefaultError(f"{number} does not fit a {bits}-bit {ctype}")
        return number

    return coerce


def _float(value: Any, ctype: IcetideType) -> float:
    if isinstance(value, bool):
        raise DefaultError("must be a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise DefaultError("must be a number") from None


def _decimal(value: Any, ctype: IcetideType) -> Decimal:
    assert isinstance(ctype, DecimalType)
    if isinstance(value, bool):
        raise DefaultError(f'must be a number for {ctype}, e.g. "0.00"')
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise DefaultError(f'must be a number for {ctype}, e.g. "0.00"') from None
    quantum = Decimal(1).scaleb(-ctype.scale)
    fitted = number.quantize(quantum)
    if fitted != number or len(fitted.as_tuple().digits) > ctype.precision:
        raise DefaultError(f"{value} does not fit {ctype}")
    return fitted


def _text(value: Any, ctype: IcetideType) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise DefaultError("must be text")
    return str(value)


def _enum(value: Any, ctype: IcetideType) -> str:
    assert isinstance(ctype, EnumType)
    text = _text(value, ctype)
    if text not in ctype.symbols:
        raise DefaultError(f"{text!r} is not a symbol of {ctype}")
    return text


def _json(value: Any, ctype: IcetideType) -> str:
    text = _text(value, ctype)
    try:
        json.loads(text)
    except ValueError:
        raise DefaultError("must be JSON text") from None
    return text


def _binary(value: Any, ctype: IcetideType) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            pass
    raise DefaultError("must be base64 text")


def _date(value: Any, ctype: IcetideType) -> dt.date:
    if isinstance(value, dt.datetime):
        raise DefaultError("must be a date such as 2024-01-31")
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise DefaultError("must be a date such as 2024-01-31") from None


def _time(value: Any, ctype: IcetideType) -> dt.time:
    if isinstance(value, dt.time):
        return value
    try:
        return dt.time.fromisoformat(str(value))
    except ValueError:
        raise DefaultError("must be a time of day such as 08:30:00") from None


def _timestamp(aware: bool) -> Callable[[Any, IcetideType], dt.datetime]:
    example = "2024-01-31T08:30:00+00:00" if aware else "2024-01-31T08:30:00"

    def coerce(value: Any, ctype: IcetideType) -> dt.datetime:
        if isinstance(value, dt.datetime):
            stamp = value
        else:
            try:
                stamp = dt.datetime.fromisoformat(str(value))
            except ValueError:
                raise DefaultError(f"must be a timestamp such as {example}") from None
        if aware and stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.UTC)
        if not aware and stamp.tzinfo is not None:
            raise DefaultError(f"a timestamp without time zone has no offset, e.g. {example}")
        return stamp.astimezone(dt.UTC) if aware else stamp

    return coerce


def _uuid(value: Any, ctype: IcetideType) -> str:
    import uuid

    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise DefaultError("must be a UUID such as 123e4567-e89b-12d3-a456-426614174000") from None


COERCERS: Mapping[str, Callable[[Any, IcetideType], Any]] = MappingProxyType(
    {
        "boolean": _bool,
        "int": _whole(32),
        "long": _whole(64),
        "float": _float,
        "double": _float,
        "string": _text,
        "binary": _binary,
        "date": _date,
        "time": _time,
        "timestamp": _timestamp(False),
        "timestamptz": _timestamp(True),
        "uuid": _uuid,
        "json": _json,
        "decimal": _decimal,
        "enum": _enum,
    }
)
"""Leaf type name → (value, type) → the typed literal; the nested types take no default."""


def coerce_default(ctype: IcetideType, value: Any) -> Any:
    """``value`` as a literal of ``ctype``; :class:`DefaultError` saying what fits.

    >>> from icetide.schema.types import DecimalType
    >>> coerce_default(DecimalType(12, 2), "1.5")
    Decimal('1.50')
    """
    coerce = COERCERS.get(ctype.name)
    if coerce is None:
        raise DefaultError(f"a {ctype.name} column takes no default")
    return coerce(value, ctype)


# -- schema-file form -------------------------------------------------------------------------


def default_from_data(ctype: IcetideType, data: Any) -> ColumnDefault | None:
    """The ``default:`` of a schema-file entry: a scalar literal, or ``{sql: TEXT}``."""
    if data is None:
        return None
    if isinstance(data, dict):
        if set(data) != {"sql"} or not isinstance(data["sql"], str) or not data["sql"].strip():
            raise DefaultError(
                "must be a literal value, or {sql: TEXT} for a computed default "
                "such as {sql: CURRENT_TIMESTAMP}"
            )
        return ColumnDefault(sql=data["sql"].strip())
    if isinstance(data, list):
        raise DefaultError("must be one value, not a list")
    return ColumnDefault(value=coerce_default(ctype, data))


def default_to_data(default: ColumnDefault) -> Any:
    """The schema-file form of ``default`` (what :func:`default_from_data` reads back)."""
    if default.sql is not None:
        return {"sql": default.sql}
    value = default.value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dt.datetime | dt.time):
        return value.isoformat()
    return value


def default_json(default: ColumnDefault | None) -> Any:
    """A JSON-able form for plans and audit records (``None`` for no default)."""
    if default is None:
        return None
    data = default_to_data(default)
    return data.isoformat() if isinstance(data, dt.date) else data


# -- source text ------------------------------------------------------------------------------


def default_from_source(
    ctype: IcetideType, text: str | exp.Expression | None, dialect: Dialect
) -> ColumnDefault | None:
    """The default a source catalog or a DDL ``DEFAULT`` clause gives (see module doc).

    >>> from icetide.schema.types import StringType, TimestampType, IntType
    >>> default_from_source(StringType(), "'new'::character varying", "postgres")
    ColumnDefault(value='new', sql=None)
    >>> default_from_source(IntType(), "-1", "mysql")
    ColumnDefault(value=-1, sql=None)
    >>> default_from_source(TimestampType(), "current_timestamp()", "mysql")
    ColumnDefault(value=None, sql='CURRENT_TIMESTAMP()')
    >>> default_from_source(IntType(), "NULL", "mysql") is None
    True
    """
    if text is None:
        return None
    if isinstance(text, exp.Expression):
        node: exp.Expression = text
    else:
        try:
            select = sqlglot.parse_one(f"SELECT {text}", read=dialect)
        except SqlglotError:
            return ColumnDefault(sql=str(text).strip())
        if not isinstance(select, exp.Select) or len(select.expressions) != 1:
            return ColumnDefault(sql=str(text).strip())
        node = select.expressions[0]
    while isinstance(node, exp.Cast | exp.Paren):
        node = node.this
    if isinstance(node, exp.Null):
        return None
    literal = _literal(node)
    if literal is _NOT_LITERAL:
        return ColumnDefault(sql=node.sql(dialect=dialect))
    try:
        return ColumnDefault(value=coerce_default(ctype, literal))
    except DefaultError:
        # A literal the type cannot hold as such (MySQL's '0000-00-00'): keep the text.
        return ColumnDefault(sql=node.sql(dialect=dialect))


_NOT_LITERAL = object()


def _literal(node: exp.Expression) -> Any:
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg):
        inner = _literal(node.this)
        if isinstance(inner, str) and not node.this.is_string:
            return f"-{inner}"
        return _NOT_LITERAL
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else _number(node.this)
    return _NOT_LITERAL


def _number(text: str) -> Any:
    # Numbers stay text until their column's coercer reads them (a decimal keeps its digits).
    return text
