"""Identifier quoting for the SQL sent to a source database, one rule per dialect.

Source names can be anything (``dot.ted``, a quote, a backtick, a reserved word): every
identifier from config or a schema file reaches source SQL through these, quoted, with
the quote character inside doubled.
"""

from __future__ import annotations


def mysql_quote(identifier: str) -> str:
    """Quote one MySQL/MariaDB identifier.

    >>> mysql_quote("order")
    '`order`'
    >>> mysql_quote("we`ird")
    '`we``ird`'
    """
    return "`" + identifier.replace("`", "``") + "`"


def postgres_quote(identifier: str) -> str:
    """Quote one PostgreSQL identifier (quoted, so its case is kept).

    >>> postgres_quote("Order")
    '"Order"'
    >>> postgres_quote('a"b')
    '"a""b"'
    """
    return '"' + identifier.replace('"', '""') + '"'


def mysql_qualified(*parts: str) -> str:
    """Quote and join a multi-part MySQL name.

    >>> mysql_qualified("shop", "orders")
    '`shop`.`orders`'
    """
    return ".".join(mysql_quote(p) for p in parts)


def postgres_qualified(*parts: str) -> str:
    """Quote and join a multi-part PostgreSQL name.

    >>> postgres_qualified("public", "order")
    '"public"."order"'
    """
    return ".".join(postgres_quote(p) for p in parts)
