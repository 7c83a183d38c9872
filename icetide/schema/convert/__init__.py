"""Converters between icetide's one list of types and each foreign type system.

One module per system, each with a table of its mapping in its docstring and each table
keyed by the names in :data:`icetide.schema.types.TYPE_NAMES` (a unit test checks every
table covers the whole list, or says which names it cannot express):

=============  ==============================================================
module         converts
=============  ==============================================================
``mysql``      MySQL/MariaDB column type text ↔ icetide type (+ Debezium hint)
``postgres``   PostgreSQL column type text ↔ icetide type (+ Debezium hint)
``connect``    Debezium / Kafka Connect field schema ↔ icetide type + hint
``spark``      icetide type ↔ Spark SQL type text and Arrow type
``iceberg``    :class:`~icetide.schema.model.TableSchema` ↔ Iceberg schema JSON
=============  ==============================================================

A foreign system that has nested types but no field ids (Connect, Spark, Arrow) gets
them from the caller: the reverse conversions take a :data:`NextId` callback, so the
caller decides where new ids start (above ``last_column_id``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from icetide.errors import SchemaChangeError
from icetide.schema.promote import promote
from icetide.schema.types import EnumType, IcetideType

NextId = Callable[[], int]
"""Hands out the next unused field id each time it is called."""


def ids_from(first: int) -> NextId:
    """A :data:`NextId` counting up from ``first``.

    >>> next_id = ids_from(5)
    >>> next_id(), next_id()
    (5, 6)
    """
    counter = itertools.count(first)
    return lambda: next(counter)


def holds_enum(declared: IcetideType, labels: Sequence[str]) -> bool:
    """Whether ``declared`` is an enum holding every label of a source enum: the rule of
    :func:`~icetide.schema.promote.promote` (an enum may gain symbols, never lose one), so
    the source converters' :func:`accepts` and evolution agree on what an enum holds.

    >>> holds_enum(EnumType(("a", "b", "c")), ["b", "a"]), holds_enum(EnumType(("a",)), ["a", "b"])
    (True, False)
    """
    if not isinstance(declared, EnumType) or not labels:
        return False
    try:
        promote(EnumType(tuple(labels)), declared)
    except SchemaChangeError:
        return False
    return True
