"""One sample of every type in :data:`icetide.schema.types.TYPE_NAMES`, for converter tests.

Nested samples number their ids from :data:`FIRST_ID` in the order every converter hands
out ids when it reads a foreign type back (a struct's fields first, then what each
holds; a list's element; a map's key then value), so a round trip through a system
without ids (``ids_from(FIRST_ID)``) gives back the very same value.
"""

from __future__ import annotations

from icetide.schema.types import (
    PRIMITIVES,
    Column,
    DecimalType,
    DoubleType,
    EnumType,
    IcetideType,
    IntType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    primitive,
)

FIRST_ID = 100

SAMPLES: dict[str, IcetideType] = {
    **{name: primitive(name) for name in PRIMITIVES},
    "decimal": DecimalType(12, 2),
    "enum": EnumType(("new", "paid", "shipped")),
    "struct": StructType(
        (
            Column(100, "a", IntType()),
            Column(101, "b c", ListType(103, StringType())),
            Column(102, "d", DecimalType(38, 0)),
        )
    ),
    "list": ListType(100, StructType((Column(101, "x", LongType()),))),
    "map": MapType(100, StringType(), 101, ListType(102, DoubleType())),
}
"""Type name → a value of that type (nested ones hold nested ones)."""
