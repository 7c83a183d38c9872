"""The columns a table as of a position has: the ones its source had then."""

from __future__ import annotations

from decimal import Decimal

from icetide.merge.asof_shape import shape_at, version_at
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, DecimalType, IntType, LongType, StringType

V1 = TableSchema(
    "t",
    (
        Column(1, "id", IntType(), False),
        Column(2, "x", IntType()),
        Column(3, "y", IntType()),
        Column(4, "amount", DecimalType(10, 2)),
    ),
    ("id",),
)
# 2: x and y trade names (ids kept); 3: a column added; 4: x widened, amount's precision up.
V2 = V1.with_columns(
    (V1.columns[0], Column(2, "y", IntType()), Column(3, "x", IntType()), V1.columns[3]),
    version=2,
)
V3 = V2.with_columns((*V2.columns, Column(5, "tag", StringType())), version=3)
V4 = V3.with_columns(
    (
        V3.columns[0],
        V3.columns[1],
        Column(3, "x", LongType()),
        Column(4, "amount", DecimalType(14, 2)),
        V3.columns[4],
    ),
    version=4,
)
HISTORY = (V1, V2, V3, V4)
STARTS = {2: 200, 3: 300, 4: 400}


def test_the_version_in_effect_is_the_newest_started_at_or_before_the_target() -> None:
    versions = [1, 2, 3, 4]
    assert [version_at(versions, STARTS, Decimal(t)) for t in (0, 199, 200, 350, 400, 10**30)] == [
        1,
        1,
        2,
        3,
        4,
        4,
    ]


def test_a_version_not_placed_at_the_source_is_taken_as_in_effect() -> None:
    # Version 3 was made by hand: nothing says where it starts, so the walk stops there.
    assert version_at([1, 2, 3, 4], {2: 200, 4: 400}, Decimal(250)) == 3
    assert version_at([1], {}, Decimal(0)) == 1


def test_before_the_changes_the_old_names_and_types_and_no_added_column() -> None:
    shape = shape_at(HISTORY, V4, STARTS, Decimal(150))
    assert shape.version == 1
    assert shape.select == (
        "`id`",
        "`y` AS `x`",  # the column that is y now was x then
        "CAST(`x` AS INT) AS `y`",
        "CAST(`amount` AS DECIMAL(10,2)) AS `amount`",
        "_icetide_position",
        "_icetide_source_ts",
    )
    assert shape.keys == ("id",) and shape.gone == ()


def test_between_the_changes_and_after_them() -> None:
    between = shape_at(HISTORY, V4, STARTS, Decimal(300))
    assert between.version == 3
    assert between.select[:5] == (
        "`id`",
        "`y`",
        "CAST(`x` AS INT) AS `x`",
        "CAST(`amount` AS DECIMAL(10,2)) AS `amount`",
        "`tag`",
    )
    now = shape_at(HISTORY, V4, STARTS, Decimal(400))
    assert now.version == 4
    assert now.select[:5] == ("`id`", "`y`", "`x`", "`amount`", "`tag`")


def test_versions_the_rows_are_not_built_in_yet_are_left_out() -> None:
    # The merge still runs version 3: the rows have its columns, even after 4's start.
    assert shape_at(HISTORY, V3, STARTS, Decimal(500)).version == 3


def test_a_column_dropped_since_is_named_not_rebuilt() -> None:
    v5 = V4.with_columns(tuple(c for c in V4.columns if c.name != "tag"), version=5)
    shape = shape_at((*HISTORY, v5), v5, {**STARTS, 5: 500}, Decimal(450))
    assert shape.version == 4 and shape.gone == ("tag",)
    assert "`tag`" not in shape.select


def test_a_column_added_with_a_default_holds_it_on_rows_older_than_its_version() -> None:
    # tag (version 3, from position 300) was added with DEFAULT 'x': rows last changed
    # before 300 hold 'x' at the source, as the merge's data convergence fills them.
    fill = {5: "CAST('x' AS STRING)"}
    shape = shape_at(HISTORY, V4, STARTS, Decimal(450), fill)
    assert shape.select[4] == (
        "CASE WHEN `tag` IS NULL AND _icetide_position < CAST('300' AS DECIMAL(38,0)) "
        "THEN CAST('x' AS STRING) ELSE `tag` END AS `tag`"
    )
    # A column of the first version is never filled: its rows had it all along.
    assert shape_at(HISTORY, V4, STARTS, Decimal(450), {2: "0"}).select[1] == "`y`"
    # Nor a version with no recorded start.
    assert shape_at(HISTORY, V4, {2: 200, 4: 400}, Decimal(450), fill).select[4] == "`tag`"
