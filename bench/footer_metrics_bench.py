"""The cost of a committed file's Iceberg metrics in the driver, three ways: read from
its Parquet footer by Iceberg's ``ParquetUtil.fileMetrics``, by icetide's
``FooterMetrics``, and computed by the task that wrote the file (``file_metrics``, from
the footer it has just written) and parsed in the driver with the file's other facts
(``ContentFileParser``, as ``append_files`` does). The ledger commits a file per table
and task: at 1,000 tables, thousands a micro-batch.

Writes ``--files`` small Parquet files into an Iceberg table of ``--columns`` columns on
a Hadoop catalog in a temporary folder, then reads every file's metrics both ways,
``--repeat`` times in alternation, in one process. Prints the median milliseconds a file
in the driver, and the task's own cost of computing them (Python, off the driver);
checks that every way gives the same metrics. Never pass/fail on time.

    python bench/footer_metrics_bench.py --files 200 --columns 20 --repeat 5
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from icetide.config import Config
from icetide.lake.data_files import file_target
from icetide.lake.file_metrics import FooterMetrics, content_file_json, file_metrics
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

    target = file_target(table, "id", datetime.date.today())  # unpartitioned
    assert target is not None and target.metrics is not None
    sizes = {p: int(table.io().newInputFile(p).getLength()) for p in paths}
    footers_of = {p: pq.read_metadata(p.removeprefix("file:")) for p in paths}
    read_tree = jvm_class("org.apache.iceberg.util.JsonUtil").mapper().readTree
    parse = jvm_class("org.apache.iceberg.ContentFileParser").fromJson
    spec = table.spec()
    spec_id = int(spec.specId())
    computed: dict[str, str] = {}

    def task(path: str) -> object:
        computed[path] = file_metrics(footers_of[path], target.schema_json, target.metrics)
        return computed[path]

    def parsed(path: str) -> object:
        text = content_file_json(path, sizes[path], computed[path], spec_id, {})
        return parse(read_tree(text), spec)

    for path in paths:
        task(path)
    for path in paths[:3]:  # the same metrics every way
        theirs = iceberg(path)
        assert str(theirs.recordCount()) == str(ours(path).recordCount())
        assert theirs.upperBounds().equals(ours(path).upperBounds())
        data_file = parsed(path)
        assert str(theirs.recordCount()) == str(data_file.recordCount())
        for name in ("columnSizes", "valueCounts", "nullValueCounts", "lowerBounds"):
            assert getattr(theirs, name)().equals(getattr(data_file, name)()), name
        assert theirs.upperBounds().equals(data_file.upperBounds())
    ways = (("fileMetrics", iceberg), ("FooterMetrics", ours), ("parsed", parsed), ("task", task))
    times: dict[str, list[float]] = {label: [] for label, _ in ways}
    for _ in range(args.repeat):
        for label, read in ways:
            started = time.perf_counter()
            for path in paths:
                read(path)
            times[label].append((time.perf_counter() - started) / len(paths) * 1000)
    median = {label: statistics.median(times[label]) for label, _ in ways}
    print(
        f"{len(paths)} files of {args.columns + 1} columns, median of {args.repeat}, "
        f"ms a file in the driver: fileMetrics {median['fileMetrics']:.2f}, "
        f"FooterMetrics {median['FooterMetrics']:.2f}, the task's metrics parsed "
        f"{median['parsed']:.2f} ({median['FooterMetrics'] / median['parsed']:.1f}x "
        f"FooterMetrics); computing them in the task {median['task']:.2f} ms a file"
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
