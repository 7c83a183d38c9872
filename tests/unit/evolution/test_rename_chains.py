"""Columns swapped, renamed in cycles, or dropped and added again under one name: the DDL
is followed by identity, so no value ever lands under another column's name."""

from __future__ import annotations

import re

import pytest

from icetide.evolution.classify import candidate_schema
from icetide.evolution.evidence import collect
from icetide.evolution.plan import build_plan
from icetide.schema.contract.alter import alter_plan
from icetide.schema.contract.builder import TableContract
from icetide.schema.contract.names import TableName
from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema

BASE, LEDGER = TableName("lake", "cdc", "t"), TableName("lake", "cdc", "t_cdc")


def table(*columns: tuple[int, str, str]) -> TableSchema:
    return schema_from_dict(
        {
            "table": "t",
            "primary_key": ["id"],
            "columns": [
                {"id": 1, "name": "id", "type": "long", "nullable": False},
                *[{"id": i, "name": n, "type": k} for i, n, k in columns],
            ],
        }
    )


OLD = table((2, "x", "int"), (3, "y", "int"), (4, "z", "int"))
SWAPPED_SOURCE = table((2, "y", "int"), (3, "x", "int"), (4, "z", "int"))  # names only


def _ids(schema: TableSchema) -> dict[str, int]:
    return {c.name: c.id for c in schema.columns}


def _runs_without_collision(statements: tuple[str, ...], names: set[str]) -> set[str]:
    """Replay RENAME/ADD statements on a set of column names; a taken name fails."""
    for sql in statements:
        rename = re.search(r"RENAME COLUMN `([^`]+)` TO `([^`]+)`", sql)
        add = re.search(r"ADD COLUMN `([^`]+)`", sql)
        if rename:
            was, now = rename.groups()
            assert was in names and now not in names, sql
            names = (names - {was}) | {now}
        elif add:
            assert add.group(1) not in names, sql
            names = names | {add.group(1)}
    return names


@pytest.mark.parametrize(
    "ddl",
    [
        [
            "ALTER TABLE t RENAME COLUMN x TO tmp",
            "ALTER TABLE t RENAME COLUMN y TO x",
            "ALTER TABLE t RENAME COLUMN tmp TO y",
        ],
        ["ALTER TABLE t RENAME COLUMN x TO tmp, RENAME COLUMN y TO x, RENAME COLUMN tmp TO y"],
        [
            "ALTER TABLE t RENAME COLUMN x TO y, RENAME COLUMN y TO x"
        ],  # MariaDB's one-statement swap
    ],
)
def test_a_swap_moves_the_ids_with_the_names(ddl: list[str]) -> None:
    new = candidate_schema(OLD, SWAPPED_SOURCE, collect(ddl, "mysql"))
    assert _ids(new) == {"id": 1, "y": 2, "x": 3, "z": 4}
    plan = build_plan(OLD, new, collect(ddl, "mysql"))
    assert not plan.held and sorted(c.kind for c in plan.applied) == ["rename", "rename"]
    assert _ids(plan.target) == {"id": 1, "y": 2, "x": 3, "z": 4}
    alters = alter_plan(TableContract(OLD), TableContract(plan.target), BASE, LEDGER)
    assert _runs_without_collision(alters.base, {"id", "x", "y", "z"}) == {"id", "x", "y", "z"}


def test_a_three_column_cycle_follows_every_rename() -> None:
    ddl = ["ALTER TABLE t RENAME COLUMN x TO y, RENAME COLUMN y TO z, RENAME COLUMN z TO x"]
    source = table((2, "y", "int"), (3, "z", "int"), (4, "x", "int"))
    new = candidate_schema(OLD, source, collect(ddl, "mysql"))
    assert _ids(new) == {"id": 1, "y": 2, "z": 3, "x": 4}
    plan = build_plan(OLD, new, collect(ddl, "mysql"))
    alters = alter_plan(TableContract(OLD), TableContract(plan.target), BASE, LEDGER)
    assert _runs_without_collision(alters.base, {"id", "x", "y", "z"}) == {"id", "x", "y", "z"}


def test_a_column_dropped_and_added_again_is_a_new_column() -> None:
    ddl = ["ALTER TABLE t DROP COLUMN z", "ALTER TABLE t ADD COLUMN z VARCHAR(20)"]
    source = table((2, "x", "int"), (3, "y", "int"), (9, "z", "string"))
    new = candidate_schema(OLD, source, collect(ddl, "mysql"))
    assert new.by_name["z"].id == 5  # a new id, never the dropped column's 4
    plan = build_plan(OLD, new, collect(ddl, "mysql"))
    assert sorted(c.kind for c in plan.applied) == ["add_column", "drop"]
    # In one version: the soft-dropped z moves out of the way before the new z arrives.
    alters = alter_plan(TableContract(OLD), TableContract(plan.target), BASE, LEDGER)
    names = _runs_without_collision(alters.base, {"id", "x", "y", "z"})
    assert names == {"id", "x", "y", "z", "z__dropped_v1"}
    assert any("COMMENT" in s and "z__dropped_v1" in s for s in alters.base)


def test_a_name_a_soft_drop_kept_in_the_tables_is_freed_for_a_later_add() -> None:
    dropped = table((2, "x", "int"), (3, "y", "int")).with_columns(
        table((2, "x", "int"), (3, "y", "int")).columns, version=2
    )
    readded = build_plan(
        dropped, table((2, "x", "int"), (3, "y", "int"), (5, "z", "string"))
    ).target
    alters = alter_plan(TableContract(dropped), TableContract(readded), BASE, LEDGER, kept={"z"})
    names = _runs_without_collision(alters.base, {"id", "x", "y", "z"})
    assert names == {"id", "x", "y", "z", "z__dropped_v2"}
    ledger = _runs_without_collision(
        tuple(s.replace("`_after`.", "") for s in alters.ledger if "`_after`" in s),
        {"id", "x", "y", "z"},
    )
    assert ledger == {"id", "x", "y", "z", "z__dropped_v2"}
