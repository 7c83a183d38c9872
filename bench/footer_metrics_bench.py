"""The cost of reading a committed file's Iceberg metrics from its Parquet footer, by
Iceberg's ``ParquetUtil.fileMetrics`` against icetide's ``FooterMetrics`` (the ledger
reads one per file it commits: at 100 tables, several hundred a micro-batch).

Writes ``--files`` small Parquet files into an Iceberg table of ``--columns`` columns on
a Hadoop catalog in a temporary folder, then reads every file's metrics both ways,
``--repeat`` times in alternation, in one process. Prints the median milliseconds a file
and the ratio; checks that both give the same metrics. Never pass/fail on time.

    python bench/footer_metrics_bench.py --files 200 --columns 20 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from icetide.config import Config
from icetide.lake.data_files import FooterMetrics
from icetide.lake.tables import iceberg_table
from icetide.schema.contract.names import TableName
from icetide.schema.file import dump_schema_file
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, parse_type
from icetide.spark.jvm import jvm_class
from icetide.spark.session import build_session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--columns", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="icetide-footers-"))
    schema = work / "unused.yaml"  # a pipeline needs a table; this one is never made
    dump_schema_file(
        TableSchema("unused", (Column(1, "id", parse_type("long"), nullable=False),), ("id",)),
        schema,
    )
    config = Config.model_validate(
        {
            "pipeline": "footers",
            "state_dir": str(work / "state"),
            "catalog": {"name": "lake", "warehouse": str(work / "warehouse"), "namespace": "b"},
            "spark": {"master": "local[2]", "shuffle_partitions": 2},
            "transport": {"type": "files", "path": str(work / "landing")},
            "tables": [{"name": "unused", "source": "b.unused", "schema": str(schema)}],
        }
    )
    spark = build_session(config)
    name = TableName("lake", "b", "footers")
    kinds = ("BIGINT", "STRING", "DOUBLE")
    columns = [
        f"CAST(id * {i} AS {kinds[i % 4]}) AS c{i}"
        if i % 4 != 3
        else f"DATE_ADD(DATE'2024-01-01', CAST(id % 365 AS INT)) AS c{i}"
        for i in range(args.columns)
    ]
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.b")
    rows = spark.range(args.files * 100).selectExpr("id", *columns)
    rows.repartition(args.files).writeTo(name.sql).using("iceberg").create()
    table = iceberg_table(spark, name)
    paths = [str(row[0]) for row in spark.sql(f"SELECT file_path FROM {name.sql}.files").collect()]
    util = jvm_class("org.apache.iceberg.parquet.ParquetUtil")
    footers = FooterMetrics(table)

    def iceberg(path: str) -> object:
        return util.fileMetrics(table.io().newInputFile(path), footers.config)

    def ours(path: str) -> object:
        return footers.read(path)

    for path in paths[:3]:  # the same metrics both ways
        assert str(iceberg(path).recordCount()) == str(ours(path).recordCount())
        assert iceberg(path).upperBounds().equals(ours(path).upperBounds())
    times: dict[str, list[float]] = {"fileMetrics": [], "FooterMetrics": []}
    for _ in range(args.repeat):
        for label, read in (("fileMetrics", iceberg), ("FooterMetrics", ours)):
            started = time.perf_counter()
            for path in paths:
                read(path)
            times[label].append((time.perf_counter() - started) / len(paths) * 1000)
    theirs, mine = (statistics.median(times[k]) for k in ("fileMetrics", "FooterMetrics"))
    print(
        f"{len(paths)} files of {args.columns + 1} columns, median of {args.repeat}: "
        f"fileMetrics {theirs:.2f} ms a file, FooterMetrics {mine:.2f} ms a file, "
        f"{theirs / mine:.1f}x"
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
