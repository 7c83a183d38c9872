"""One small quoting helper: no identifier from config reaches SQL unquoted.

It lives in ``schema/`` (the bottom of the import graph) because the schema's own Spark
DDL (:mod:`icetide.schema.convert.spark`) quotes column names; every stage that builds
SQL imports it from here.
"""

from __future__ import annotations


def quote(identifier: str) -> str:
    """Quote one identifier for Spark SQL.

    >>> quote("order")
    '`order`'
    >>> quote("we`ird")
    '`we``ird`'
    """
    return "`" + identifier.replace("`", "``") + "`"


def qualified(*parts: str) -> str:
    """Quote and join a multi-part name.

    >>> qualified("lake", "cdc", "customers")
    '`lake`.`cdc`.`customers`'
    """
    return ".".join(quote(p) for p in parts)


def literal(text: str) -> str:
    """A Spark SQL string literal.

    >>> literal("it's")
    "'it\\\\'s'"
    """
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
