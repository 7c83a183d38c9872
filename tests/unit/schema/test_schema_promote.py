"""``promote()`` decides every type change: the whole grid of types is written out here,
then the rules within decimal, enum and the nested types, and the messages."""

from __future__ import annotations

import pytest

from icetide.errors import SchemaChangeError, SchemaError
from icetide.schema.promote import allowed_targets, promote
from icetide.schema.types import (
    PRIMITIVES,
    TYPE_NAMES,
    Column,
    DecimalType,
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

SAMPLE: dict[str, IcetideType] = {
    **{name: primitive(name) for name in PRIMITIVES},
    "decimal": DecimalType(10, 2),
    "enum": EnumType(("new", "paid")),
    "struct": StructType((Column(100, "x", IntType()),)),
    "list": ListType(101, IntType()),
    "map": MapType(102, StringType(), 103, IntType()),
}
"""One value of each type; ``SAMPLE[a] -> SAMPLE[a]`` is always allowed (same type)."""

# Rows: from; columns: to. Y = allowed, . = refused (Iceberg format version 2).
GRID = """
             bool int long flt dbl str bin date time ts tstz uuid json dec enum strc list map
boolean       Y    .   .    .   .   .   .   .    .    .   .    .    .    .   .    .    .    .
int           .    Y   Y    .   .   .   .   .    .    .   .    .    .    .   .    .    .    .
long          .    .   Y    .   .   .   .   .    .    .   .    .    .    .   .    .    .    .
float         .    .   .    Y   Y   .   .   .    .    .   .    .    .    .   .    .    .    .
double        .    .   .    .   Y   .   .   .    .    .   .    .    .    .   .    .    .    .
string        .    .   .    .   .   Y   .   .    .    .   .    .    .    .   .    .    .    .
binary        .    .   .    .   .   .   Y   .    .    .   .    .    .    .   .    .    .    .
date          .    .   .    .   .   .   .   Y    .    .   .    .    .    .   .    .    .    .
time          .    .   .    .   .   .   .   .    Y    .   .    .    .    .   .    .    .    .
timestamp     .    .   .    .   .   .   .   .    .    Y   .    .    .    .   .    .    .    .
timestamptz   .    .   .    .   .   .   .   .    .    .   Y    .    .    .   .    .    .    .
uuid          .    .   .    .   .   .   .   .    .    .   .    Y    .    .   .    .    .    .
json          .    .   .    .   .   .   .   .    .    .   .    .    Y    .   .    .    .    .
decimal       .    .   .    .   .   .   .   .    .    .   .    .    .    Y   .    .    .    .
enum          .    .   .    .   .   Y   .   .    .    .   .    .    .    .   Y    .    .    .
struct        .    .   .    .   .   .   .   .    .    .   .    .    .    .   .    Y    .    .
list          .    .   .    .   .   .   .   .    .    .   .    .    .    .   .    .    Y    .
map           .    .   .    .   .   .   .   .    .    .   .    .    .    .   .    .    .    Y
"""


def _grid() -> list[tuple[str, str, bool]]:
    header, *rows = GRID.strip().splitlines()
    assert len(header.split()) == len(TYPE_NAMES)
    cells = []
    for row in rows:
        source, *marks = row.split()
        assert len(marks) == len(TYPE_NAMES), source
        cells += [
            (source, target, mark == "Y") for target, mark in zip(TYPE_NAMES, marks, strict=True)
        ]
    assert [row.split()[0] for row in rows] == list(TYPE_NAMES)
    return cells


def _allowed(source: IcetideType, target: IcetideType, format_version: int = 2) -> bool:
    try:
        result = promote(source, target, format_version=format_version)
    except SchemaChangeError:
        return False
    assert result == target
    return True


@pytest.mark.parametrize(("source", "target", "allowed"), _grid())
def test_every_pair_of_types(source: str, target: str, allowed: bool) -> None:
    assert _allowed(SAMPLE[source], SAMPLE[target]) is allowed


def test_a_refusal_names_both_types_and_what_the_source_may_become() -> None:
    for source, target, allowed in _grid():
        if allowed:
            continue
        with pytest.raises(SchemaChangeError) as info:
            promote(SAMPLE[source], SAMPLE[target])
        error = info.value
        assert isinstance(error, SchemaError)
        assert error.message.startswith(f"cannot promote {SAMPLE[source]} to {SAMPLE[target]}: ")
        for words in allowed_targets(SAMPLE[source]):
            assert words in error.message
        assert (error.from_type, error.to_type) == (str(SAMPLE[source]), str(SAMPLE[target]))
        assert error.hint is not None and "new column" in error.hint


def test_messages_read_well() -> None:
    def message(source: IcetideType, target: IcetideType) -> str:
        with pytest.raises(SchemaChangeError) as info:
            promote(source, target)
        return info.value.message

    assert message(IntType(), StringType()) == (
        "cannot promote int to string: int may become int or long"
    )
    assert message(primitive("double"), primitive("float")) == (
        "cannot promote double to float: double may become only double"
    )
    assert message(DecimalType(10, 2), DecimalType(12, 3)) == (
        "cannot promote decimal(10,2) to decimal(12,3): the precision may only grow and the "
        "scale stays; decimal(10,2) may become only decimal(P,2) with 10 <= P <= 38"
    )
    assert message(EnumType(("new", "paid", "sent")), EnumType(("new",))) == (
        "cannot promote enum(new, paid, sent) to enum(new): symbols paid, sent would be lost; "
        "enum(new, paid, sent) may become an enum holding every symbol of "
        "enum(new, paid, sent) or string"
    )
    assert message(primitive("date"), primitive("timestamp")) == (
        "cannot promote date to timestamp: date to timestamp needs Iceberg format version 3 "
        "and the table is version 2; date may become only date"
    )


@pytest.mark.parametrize(
    ("source", "target", "allowed"),
    [
        ((10, 2), (10, 2), True),
        ((10, 2), (11, 2), True),
        ((10, 2), (38, 2), True),
        ((1, 0), (38, 0), True),
        ((10, 2), (9, 2), False),
        ((10, 2), (12, 3), False),
        ((10, 2), (10, 1), False),
        ((10, 2), (12, 1), False),
    ],
)
def test_a_decimal_may_only_gain_precision(
    source: tuple[int, int], target: tuple[int, int], allowed: bool
) -> None:
    assert _allowed(DecimalType(*source), DecimalType(*target)) is allowed


@pytest.mark.parametrize(
    ("source", "target", "allowed"),
    [
        (("new", "paid"), ("new", "paid"), True),
        (("new", "paid"), ("new", "paid", "sent"), True),
        (("new", "paid"), ("sent", "paid", "new"), True),  # order is free
        (("new", "paid"), ("paid", "new"), True),
        (("new", "paid"), ("new",), False),
        (("new", "paid"), ("new", "sent"), False),
        (("new", "paid"), ("NEW", "paid"), False),
    ],
)
def test_an_enum_may_only_gain_symbols(
    source: tuple[str, ...], target: tuple[str, ...], allowed: bool
) -> None:
    assert _allowed(EnumType(source), EnumType(target)) is allowed


def test_format_version_3_adds_date_to_timestamp_and_nothing_else() -> None:
    date = primitive("date")
    assert _allowed(date, primitive("timestamp"), format_version=3)
    assert not _allowed(date, primitive("timestamptz"), format_version=3)
    assert allowed_targets(date, 3) == ["date", "timestamp"]
    for source, target, allowed in _grid():
        if (source, target) != ("date", "timestamp"):
            assert _allowed(SAMPLE[source], SAMPLE[target], format_version=3) is allowed


def _struct(*fields: Column) -> StructType:
    return StructType(fields)


def test_a_struct_promotes_field_by_field_matched_by_id() -> None:
    before = _struct(Column(1, "a", IntType()), Column(2, "b", StringType(), nullable=False))
    # Widened, renamed, reordered and made optional: all by id.
    after = _struct(Column(2, "bee", StringType()), Column(1, "a", LongType()))
    assert promote(before, after) == after
    with pytest.raises(SchemaChangeError, match=r"field 'a' \(id 1\): long may become only long"):
        promote(after, _struct(Column(2, "bee", StringType()), Column(1, "a", IntType())))
    with pytest.raises(
        SchemaChangeError,
        match=r"field 'b' \(id 2\): may become optional, never required",
    ):
        promote(
            _struct(Column(1, "a", IntType()), Column(2, "b", StringType())),
            before,
        )
    with pytest.raises(
        SchemaChangeError,
        match=r"the fields differ by id \(only before: 2; only after: 3\); adding or dropping",
    ):
        promote(before, _struct(Column(1, "a", IntType()), Column(3, "b", StringType())))
    with pytest.raises(SchemaChangeError, match=r"only before: none; only after: 3\)"):
        promote(before, _struct(*before.fields, Column(3, "c", StringType())))


def test_a_list_keeps_its_element_id_and_its_element_promotes() -> None:
    ints = ListType(5, IntType(), element_nullable=False)
    assert _allowed(ints, ListType(5, LongType(), element_nullable=False))
    assert _allowed(ints, ListType(5, IntType(), element_nullable=True))
    assert not _allowed(ListType(5, IntType()), ListType(5, IntType(), element_nullable=False))
    assert not _allowed(ints, ListType(5, StringType(), element_nullable=False))
    with pytest.raises(
        SchemaChangeError,
        match="the element id changes from 5 to 6; a field keeps its id for life",
    ):
        promote(ints, ListType(6, IntType(), element_nullable=False))


def test_a_map_keeps_its_key_and_value_ids_and_both_promote() -> None:
    before = MapType(1, IntType(), 2, IntType(), value_nullable=False)
    assert _allowed(before, MapType(1, LongType(), 2, LongType(), value_nullable=False))
    assert _allowed(before, MapType(1, IntType(), 2, IntType(), value_nullable=True))
    assert not _allowed(MapType(1, IntType(), 2, IntType()), before)
    assert not _allowed(before, MapType(1, StringType(), 2, IntType(), value_nullable=False))
    assert not _allowed(before, MapType(1, IntType(), 2, StringType(), value_nullable=False))
    assert not _allowed(before, MapType(3, IntType(), 2, IntType(), value_nullable=False))
    with pytest.raises(SchemaChangeError, match="the value id changes from 2 to 4"):
        promote(before, MapType(1, IntType(), 4, IntType(), value_nullable=False))


def _orders(qty: IcetideType, element_id: int = 24) -> MapType:
    """A struct in a list in a map."""
    item = _struct(Column(25, "sku", StringType()), Column(26, "qty", qty))
    return MapType(22, StringType(), 23, ListType(element_id, item))


def test_a_struct_in_a_list_in_a_map_promotes_deep_down() -> None:
    assert promote(_orders(IntType()), _orders(LongType())) == _orders(LongType())
    with pytest.raises(SchemaChangeError) as info:
        promote(_orders(LongType()), _orders(IntType()))
    assert info.value.message == (
        f"cannot promote {_orders(LongType())} to {_orders(IntType())}: value (id 23): "
        "element (id 24): field 'qty' (id 26): long may become only long"
    )
    with pytest.raises(SchemaChangeError, match="value \\(id 23\\): the element id changes"):
        promote(_orders(IntType()), _orders(IntType(), element_id=27))


def test_kinds_never_change_into_one_another() -> None:
    nested = [SAMPLE["struct"], SAMPLE["list"], SAMPLE["map"]]
    for source in nested:
        for target in [*nested, StringType(), primitive("json")]:
            assert _allowed(source, target) is (source == target)
