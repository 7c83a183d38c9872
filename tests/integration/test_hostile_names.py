"""Column names that break unquoted SQL go through the whole pipeline unharmed.

One table whose every column name needs quoting — a backtick, a dot, a space, quotes, a
name that tries to close its field and inject another (``a` INT, b``), mixed case and
non-ASCII — is streamed into the ledger, merged twice (a key change, a delete, an
unchanged-TOAST value and a remembered delete included), checksummed on the Spark side
as ``icetide verify`` does, and reported by ``status``.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from icetide.observe.checksum import (
    hash_frame,
    python_row_hash,
    python_row_value,
    spark_checksum,
)
from icetide.observe.status import pipeline_status
from icetide.schema.file import schema_from_dict
from icetide.schema.quoting import quote
from tests.integration.events import TOAST, mysql
from tests.integration.harness import Pipeline

KEY = "Key.Id"
TICK = "k`ey"
INJECT = "a` INT, b"
SPACE = "with space"
QUOTE = "it's"
DOUBLE = 'say "hi"'
UNICODE = "naïve_ü"
DOT = "x.y"
HOSTILE = schema_from_dict(
    {
        "table": "hostile",
        "primary_key": [KEY],
        "columns": [
            {"id": 1, "name": KEY, "type": "long"},
            {"id": 2, "name": TICK, "type": "string"},
            {"id": 3, "name": INJECT, "type": "string"},
            {"id": 4, "name": SPACE, "type": "int"},
            {"id": 5, "name": QUOTE, "type": "string"},
            {"id": 6, "name": DOUBLE, "type": "string"},
            {"id": 7, "name": UNICODE, "type": "string"},
            {"id": 8, "name": DOT, "type": "decimal(10,2)"},
        ],
    }
)


def row(key: int, text: str, number: int) -> dict[str, Any]:
    return {
        KEY: key,
        TICK: f"{text}`",
        INJECT: f"{text} INT, b",
        SPACE: number,
        QUOTE: f"{text}'s",
        DOUBLE: f'"{text}"',
        UNICODE: f"{text}-ü",
        DOT: number + 0.25,  # a JSON number: a decimal in every decimal.handling.mode
    }


def event(op: str, pos: int, before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    return mysql(op, pos, before=before, after=after, table="hostile")


def test_hostile_column_names_survive_stream_merge_verify_and_status(
    tmp_path: Path, warehouse: Path, spark: SparkSession
) -> None:
    pipeline = Pipeline.custom(
        tmp_path,
        warehouse,
        "hostile_names",
        {"hostile": HOSTILE},
        {"hostile": "shop.hostile"},
        spark,
    )
    one, two, three = row(1, "one", 1), row(2, "two", 2), row(3, "three", 3)
    moved = {**two, KEY: 20}
    pipeline.land(
        [
            event("c", 100, None, one),
            event("c", 110, None, two),
            event("c", 120, None, three),
            event("u", 130, one, row(1, "uno", 11)),
            event("u", 140, two, moved),  # a key change: delete 2, insert 20
            event("d", 150, three, None),
        ]
    )
    pipeline.stream()
    pipeline.merge()
    # Second batch: an unchanged-TOAST value keeps the stored one; the late insert of
    # the deleted key 3 is older than its remembered delete and must not resurrect it.
    toast = {**row(20, "veinte", 21), TICK: TOAST}
    pipeline.land([event("u", 160, moved, toast), event("c", 125, None, row(3, "late", 9))])
    pipeline.stream()
    pipeline.merge()

    expected = [row(1, "uno", 11), {**row(20, "veinte", 21), TICK: "two`"}]
    base = pipeline.refs("hostile").base.sql
    # The harness's base() orders by unquoted key names; a hostile key needs a quoted one.
    ordered = spark.table(base).orderBy(quote(KEY)).collect()
    rows = [{c.name: r[c.name] for c in HOSTILE.columns} for r in ordered]
    assert rows == [{**e, DOT: Decimal(e[DOT])} for e in expected]
    assert [f.name for f in spark.table(base).schema.fields][:8] == [
        c.name for c in HOSTILE.columns
    ]
    ledger = spark.table(pipeline.refs("hostile").cdc.sql)
    assert [f.name for f in ledger.schema["_after"].dataType.fields] == [  # type: ignore[attr-defined]
        c.name for c in HOSTILE.columns
    ]
    assert pipeline.rows(pipeline.refs("hostile").dead_letters) == []

    typed = [{**e, DOT: Decimal(e[DOT])} for e in expected]
    want = sum(python_row_value(python_row_hash(r, HOSTILE.columns)) for r in typed)
    assert spark_checksum(spark.table(base), HOSTILE.columns) == (2, want)
    # verify's differing-keys report: key texts, pieces and display texts per column.
    found = hash_frame(
        spark.table(base), HOSTILE.key_columns, HOSTILE.columns, pieces=True, display=True
    ).collect()
    assert sorted(r["_k0"] for r in found) == ["1", "20"]

    [status] = pipeline_status(spark, pipeline.config).tables
    assert (status.base_rows, status.lag_events, status.dead_letters) == (2, 0, 0)
