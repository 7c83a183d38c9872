"""Model-based: the SCD type 2 history the merge keeps (``history: scd2``) equals the
source model's intervals, after random workloads delivered badly (duplicates,
reordering, events held back across merges) and merges stopped at each commit point of
the history's maintenance; and schema changes in the middle of it, across which the
table as of a position also equals the model's table then."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, StringType, StructField, StructType

from icetide.config import load_table_schemas
from icetide.demo.run import plan_rounds
from icetide.demo.workload import Change, deliver, generate, state_at
from icetide.events.position import binlog_position
from icetide.lake.alter import set_properties, table_properties
from icetide.ledger.stage import LedgerStage
from icetide.merge import history as history_module
from icetide.merge import stage as stage_module
from icetide.merge.asof import table_as_of
from icetide.merge.asof_plan import Target
from icetide.merge.history import NAMES, inherited_names, inherited_stored, version_rows
from icetide.merge.phases import merge_version
from icetide.observe.compare import compare_rows
from icetide.schema.contract import base as b
from icetide.schema.contract import history as h
from icetide.schema.contract import phases as p
from icetide.schema.file import dump_schema_file
from icetide.schema.model import TableSchema
from tests.integration.events import mysql
from tests.integration.harness import Pipeline, assert_matches, id_keyed_schema, killed_at
from tests.integration.scd2 import history_differences, with_history


@pytest.mark.long
def test_history_equals_the_model_across_bad_delivery_and_stops_at_each_commit_point(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    pipeline = with_history(
        Pipeline.create(tmp_path, warehouse, "scd2_model", spark=spark, buckets=2)
    )
    workload = generate(41, 500, tables=["customers", "products"])
    parts = plan_rounds(workload, 3, 41, late_rate=0.1)
    # Each round's merge stops at a commit point (as a kill -9 there would: every commit
    # before it made, none after), then the merge runs again.
    stops = [
        (history_module, history_module.BEFORE_COMMIT),
        (history_module, history_module.AFTER_COMMIT),
        # The base committed, the history not; the merge after it has nothing new for
        # the base and must still catch the history up.
        (stage_module, "merge.after_commit"),
    ]
    for number, (part, stop) in enumerate(zip(parts, stops, strict=True)):
        deliver(part, pipeline.landing, seed=number, files=2, duplicate_rate=0.15)
        pipeline.stream()
        with killed_at(*stop):
            pipeline.merge()
        pipeline.merge()
    assert_matches(pipeline.compare(workload))
    assert history_differences(pipeline, workload) == []
    products = spark.table(pipeline.refs("products").history.sql)
    assert products.schema[h.INHERITED].dataType == StringType()
    inherited = [
        json.loads(r[0])
        for r in products.where(f"{h.INHERITED} IS NOT NULL").select(h.INHERITED).collect()
    ]
    assert inherited, "no unchanged TOAST value"
    assert all(names and set(names) <= set(products.columns) for names in inherited)


def test_a_history_created_with_an_array_of_inherited_names_is_kept_as_it_is(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    """A history created when ``_inherited`` was stored as ``ARRAY<STRING>`` keeps that
    type: read and written as arrays, its versions equal the model's, late events (the
    general recompute, which reads the versions' ``_inherited`` back) included."""
    pipeline = with_history(
        Pipeline.create(tmp_path, warehouse, "scd2_array", spark=spark, buckets=2)
    )
    workload = generate(45, 200, tables=["products"])
    parts = plan_rounds(workload, 2, 45, late_rate=0.1)
    history = pipeline.refs("products").history
    for number, part in enumerate(parts):
        deliver(part, pipeline.landing, seed=number, files=2, duplicate_rate=0.15)
        pipeline.stream()
        if number == 0:
            contract = merge_version(spark, pipeline.pipeline, "products").contract
            ddl = h.history_ddl(contract, history).replace(
                f"{h.INHERITED} {h.INHERITED_SQL}", f"{h.INHERITED} ARRAY<STRING>"
            )
            spark.sql(ddl)
            spark.sql(h.sort_order_sql(contract, history))
        pipeline.merge()
    assert history_differences(pipeline, workload) == []
    products = spark.table(history.sql)
    assert products.schema[h.INHERITED].dataType == ArrayType(StringType())
    assert products.where(f"size({h.INHERITED}) > 0").count() > 0, "no unchanged TOAST value"


@pytest.mark.parametrize("stored", [StringType(), ArrayType(StringType())])
def test_inherited_names_are_stored_and_read_back_as_they_were(
    spark: SparkSession, stored: DataType
) -> None:
    """``_inherited`` as a history of either type stores it (text: JSON, NULL when
    empty) and reads it back as the chain's array of names."""
    frame = spark.createDataFrame(
        [(["body"],), (["a, b", 'q"uote'],), ([],)], StructType([StructField("n", NAMES)])
    )
    kept = frame.select(inherited_stored(F.col("n"), stored).alias("s")).select(
        F.col("s"), inherited_names(F.col("s"), stored).alias("back")
    )
    rows = kept.collect()
    assert [r.back for r in rows] == [["body"], ["a, b", 'q"uote'], []]
    if isinstance(stored, StringType):
        assert [r.s for r in rows] == ['["body"]', '["a, b","q\\"uote"]', None]


def test_in_order_ranges_appended_and_late_ones_recomputed_give_the_general_history(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    """Merges of in-order ranges take the append (the open versions ended, the range's
    versions added) and a range with late events the general recompute; the history
    they make together is the one the general recompute makes of the whole ledger at
    once, row for row, and the model's."""
    workload = generate(43, 300, tables=["customers"])
    parts = plan_rounds(workload, 3, 43, late_rate=0.0)
    # Round 2 gets a few of round 1's events: late, older than rows the base holds.
    held = parts[0].events[-60::6]
    parts[0] = replace(parts[0], events=[e for e in parts[0].events if e not in held])
    parts[1] = replace(parts[1], events=held + parts[1].events)
    pipe = with_history(Pipeline.create(tmp_path, warehouse, "scd2_paths", spark=spark, buckets=2))
    appended: list[bool] = []
    for number, part in enumerate(parts):
        deliver(part, pipe.landing, seed=number, files=2, duplicate_rate=0.15)
        pipe.stream()
        before = len(pipe.logs)
        pipe.merge()
        appended.append(any("in order: appended" in line for line in pipe.logs[before:]))
    assert appended == [True, False, True]

    refs = pipe.refs("customers")
    history = spark.table(refs.history.sql)
    schema = pipe.schemas["customers"]
    general = version_rows(history.limit(0), spark.table(refs.cdc.sql), None, schema)
    got = sorted((r.asDict(recursive=True) for r in history.collect()), key=repr)
    assert len(got) > 200
    assert got == sorted((r.asDict(recursive=True) for r in general.collect()), key=repr)
    assert history_differences(pipe, workload) == []


def _schema(version: int, *columns: tuple[int, str, str], last: int = 0) -> TableSchema:
    return id_keyed_schema("t", version, *columns, last=last)


def _take(pipe: Pipeline, schema: TableSchema, starts_at: int) -> None:
    """Schema ``schema`` detected at the source, starting at binlog offset ``starts_at``
    (recorded on the ledger as the detector records it), taken by the stages at their
    batch boundaries (as `icetide run` turns)."""
    dump_schema_file(schema, pipe.config.resolved_path(pipe.config.table("t").schema_file))
    pipe.schemas = load_table_schemas(pipe.config)
    ledger = pipe.refs("t").cdc
    known = table_properties(pipe.session, ledger).get(p.VERSION_POSITIONS)
    at = p.with_version_position(known, schema.version, _at(starts_at))
    set_properties(pipe.session, ledger, {p.VERSION_POSITIONS: at})
    for _ in range(3):
        pipe.merge()
        LedgerStage(pipe.session, pipe.pipeline).tick()


def _at(offset: int, row: int = 0) -> int:
    return binlog_position("mysql-bin.000003", offset, row).key


def test_history_and_as_of_across_an_add_a_rename_a_widening_and_a_drop(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    """Between merges, version 2 adds a column, version 3 renames one, widens one and
    drops one (soft). The history keeps every version without rewriting one; the table
    as of positions before, between and after the changes is the source model's table
    then, in the shape the source had then (a column dropped since is not rebuilt)."""
    v1 = _schema(1, (2, "name", "string"), (3, "qty", "int"), (4, "extra", "string"))
    v2 = _schema(
        2, (2, "name", "string"), (3, "qty", "int"), (4, "extra", "string"), (5, "note", "string")
    )
    v3 = _schema(3, (2, "title", "string"), (3, "qty", "long"), (5, "note", "string"), last=5)
    pipe = with_history(
        Pipeline.custom(tmp_path, warehouse, "scd2_evolve", {"t": v1}, {"t": "shop.t"}, spark)
    )
    # The source as plain Python: each row in the shape the source had when it was written.
    journal: list[Change] = []

    def source(op: str, offset: int, row: dict[str, Any], ts_ms: int, n: int = 0) -> str:
        key = (row["id"],)
        journal.append(Change("t", key, None if op == "d" else row, _at(offset, n), ts_ms))
        before, after = ({"id": row["id"]}, None) if op == "d" else (None, row)
        return mysql(op, offset, before=before, after=after, row=n, table="t", ts_ms=ts_ms)

    def altered(old: TableSchema, new: TableSchema, offset: int) -> None:
        """The source's ALTER at ``offset``: every row then takes ``new``'s shape."""
        names = {col.id: col.name for col in old.columns}
        rows = state_at(sorted(journal, key=lambda ch: ch.position), "t", _at(offset) - 1)
        for key, was in rows.items():
            now = {col.name: was.get(names.get(col.id, "")) for col in new.columns}
            journal.append(Change("t", key, now, _at(offset), 0))

    row = {"id": 1, "name": "a", "qty": 1, "extra": "e1"}
    pipe.land([source("c", 10, row, 1_000), source("u", 11, {**row, "name": "b", "qty": 2}, 2_000)])
    pipe.stream()
    pipe.merge()
    history = pipe.refs("t").history
    files_before = {
        r.file_path for r in spark.sql(f"SELECT file_path FROM {history}.files").collect()
    }
    _take(pipe, v2, 12)  # ADD COLUMN note
    altered(v1, v2, 12)
    pipe.land(
        [
            source("u", 13, {"id": 1, "name": "b2", "qty": 2, "extra": "e1", "note": "m"}, 2_200),
            source("c", 13, {"id": 2, "name": "x", "qty": 7, "extra": None, "note": "y"}, 2_200, 1),
        ]
    )
    pipe.stream()
    pipe.merge()
    _take(pipe, v3, 14)  # name renamed title (same id), qty widened, extra dropped (soft)
    altered(v2, v3, 14)
    pipe.land(
        [
            source("u", 20, {"id": 1, "title": "c", "qty": 3_000_000_000, "note": "n"}, 3_000),
            source("d", 21, {"id": 2}, 3_100),
            # Late: an update from before 20 arrives after it, and splits [13, 20).
            source("u", 15, {"id": 1, "title": "late", "qty": 5, "note": None}, 2_500),
        ]
    )
    pipe.stream()
    pipe.merge()
    rows = spark.table(history.sql).where("id = 1").orderBy(h.FROM_POSITION).collect()
    got = [(r["title"], r["qty"], r["note"], r["extra"], r[h.IS_CURRENT], r[h.OP]) for r in rows]
    assert got == [
        ("a", 1, None, "e1", False, "c"),
        ("b", 2, None, "e1", False, "u"),
        ("b2", 2, "m", "e1", False, "u"),
        ("late", 5, None, None, False, "u"),
        ("c", 3_000_000_000, "n", None, True, "u"),
    ]
    fields = {f.name: f.dataType.simpleString() for f in spark.table(history.sql).schema.fields}
    assert (fields["title"], fields["qty"], fields["note"]) == ("string", "bigint", "string")
    assert "name" not in fields and "extra" in fields
    # No version was rewritten by the schema change: the files written before it are
    # all still live (the late event's split wrote new ones beside them).
    files_after = {
        r.file_path for r in spark.sql(f"SELECT file_path FROM {history}.files").collect()
    }
    assert files_before <= files_after

    # As of before the changes, between them (at a version's first position, and on a
    # late event's) and after them.
    checked = []
    for position, then in [
        (_at(11), v1),
        (_at(12), v2),
        (_at(13, 1), v2),
        (_at(14), v3),
        (_at(15), v3),
        (_at(21), v3),
    ]:
        asof = table_as_of(spark, pipe.pipeline, "t", Target("position", "", Decimal(position)))
        kept = then.with_columns([c for c in then.columns if c.id in v3.field_ids()])
        assert (asof.shape.version if asof.shape else 3) == then.version
        frame = asof.frame
        assert frame.columns == [*(c.name for c in kept.columns), b.POSITION, b.SOURCE_TS]
        assert dict(frame.dtypes)["qty"] == ("int" if then.version < 3 else "bigint")
        found = [r.asDict() for r in frame.collect()]
        want = state_at(sorted(journal, key=lambda ch: ch.position), "t", position)
        checked.append(compare_rows(kept, want, found))
        checked[-1].table = f"t at {position} ({asof.describe()})"
        asof.release()
    assert_matches(checked)
