"""Schema versions that move names between columns, run on real Iceberg tables by the
stages: values stay with their column's id whatever its name, and one table's change
that its ledger cannot take holds only that table.

The versions are written to the schema files as the evolution layer writes them (ids
already matched: tests/unit/evolution/test_rename_chains.py covers the matching); the
ledger and merge take each at their batch boundary, as under ``icetide run``.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from icetide.config import load_table_schemas
from icetide.schema.file import dump_schema_file
from icetide.schema.model import TableSchema
from tests.integration.events import mysql
from tests.integration.harness import Pipeline, id_keyed_schema


def _publish(pipe: Pipeline, schema: TableSchema) -> None:
    """A new schema version in the table's file, where the stages pick it up."""
    dump_schema_file(schema, pipe.config.resolved_path(pipe.config.table(schema.table).schema_file))
    pipe.schemas = load_table_schemas(pipe.config)


def _round(pipe: Pipeline) -> None:
    """A ledger batch and merges until the base takes the newest version (phase 1 on the
    ledger, the merge's acknowledgement, the ledger's switch, as `icetide run` turns)."""
    from icetide.ledger.stage import LedgerStage

    pipe.stream()
    for _ in range(3):
        pipe.merge()
        LedgerStage(pipe.session, pipe.pipeline).tick()
    pipe.stream()
    pipe.merge()


def test_swapped_columns_keep_their_values_and_a_readded_name_is_a_new_column(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    v1 = id_keyed_schema("t", 1, (2, "x", "int"), (3, "y", "int"), (4, "z", "int"))
    other = id_keyed_schema("u", 1, (2, "v", "string"))
    pipe = Pipeline.custom(
        tmp_path,
        warehouse,
        "names_by_id",
        {"t": v1, "u": other},
        {"t": "shop.t", "u": "shop.u"},
        spark,
    )
    pipe.land([mysql("c", 10, after={"id": 1, "x": 1, "y": 2, "z": 3}, table="t")])
    pipe.stream()
    pipe.merge()
    # The source swaps x and y (the ids swap names) and drops z: version 2.
    _publish(pipe, id_keyed_schema("t", 2, (3, "x", "int"), (2, "y", "int"), last=4))
    pipe.land([mysql("c", 20, after={"id": 2, "x": 30, "y": 20}, table="t")])
    _round(pipe)
    # Then z comes back as another column (a new id) of its old type, so the tables'
    # shape cannot tell it from the kept z: version 3.
    _publish(pipe, id_keyed_schema("t", 3, (3, "x", "int"), (2, "y", "int"), (5, "z", "int")))
    pipe.land(
        [
            mysql("c", 30, after={"id": 3, "x": 300, "y": 200, "z": 400}, table="t"),
            mysql("c", 31, after={"id": 1, "v": "still flowing"}, table="u"),
        ]
    )
    _round(pipe)
    rows = {r["id"]: r for r in pipe.base("t")}
    # Row 1 was written before the swap with x=1, y=2: by id, the source's x (id 3)
    # holds 2 now, its y (id 2) holds 1. The dropped z's 3 is kept aside, not under z.
    assert (rows[1]["x"], rows[1]["y"], rows[1]["z"]) == (2, 1, None)
    assert rows[1]["z__dropped_v2"] == 3
    assert (rows[2]["x"], rows[2]["y"], rows[2]["z"]) == (30, 20, None)
    assert (rows[3]["x"], rows[3]["y"], rows[3]["z"]) == (300, 200, 400)
    assert [r["v"] for r in pipe.base("u")] == ["still flowing"]
    for table in ("t", "u"):
        assert pipe.dead_letters(pipe.refs(table).dead_letters) == [], table
    described = {
        r.col_name: r.comment
        for r in spark.sql(f"DESCRIBE TABLE {pipe.refs('t').base.sql}").collect()
    }
    assert "dropped from the schema in version 2" in (described["z__dropped_v2"] or "")
    # Each table took each version whole: the swap as two renames, the kept z's move and
    # the new z as two schema updates, each version in one commit (no ALTERs).
    phase_1 = [line for line in pipe.logs if "(phase 1," in line]
    assert len(phase_1) == 4 and all("in one commit" in line for line in phase_1), phase_1


def test_a_table_whose_ledger_cannot_take_its_change_holds_only_itself(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    a = id_keyed_schema("a", 1, (2, "v", "string"))
    b = id_keyed_schema("b", 1, (2, "v", "string"))
    pipe = Pipeline.custom(
        tmp_path, warehouse, "held_alter", {"a": a, "b": b}, {"a": "shop.a", "b": "shop.b"}, spark
    )
    pipe.land([mysql("c", 1, after={"id": 1, "v": "a1"}, table="a")])
    pipe.stream()
    # Someone took a column out of a's ledger by hand: its next version, a rename of
    # that column, cannot be applied there.
    spark.sql(f"ALTER TABLE {pipe.refs('a').cdc.sql} DROP COLUMN _after.v")
    _publish(pipe, id_keyed_schema("a", 2, (2, "w", "string")))
    pipe.land(
        [
            mysql("c", 2, after={"id": 2, "w": "a2"}, table="a"),
            mysql("c", 3, after={"id": 1, "v": "b1"}, table="b"),
        ]
    )
    pipe.stream()  # no exception: the batch is stored
    pipe.merge()
    assert [r["v"] for r in pipe.base("b")] == ["b1"]
    [held] = pipe.dead_letters(pipe.refs("a").dead_letters)
    assert held["reason"] == "schema_change_failed" and "icetide dlt replay a" in held["error"]
    assert '"a2"' in held["payload"]
