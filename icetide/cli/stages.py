"""``icetide stream``, ``merge`` and ``run``: the ledger and merge stages."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from icetide.cli import context
from icetide.cli.context import command_parser, log, with_config
from icetide.errors import StageError
from icetide.stopping import Stopped

if TYPE_CHECKING:
    from icetide.config import Config
    from icetide.merge.stage import MergeResult, MergeStage


def cmd_stream(args: argparse.Namespace) -> int:
    """Run the ledger stage (events → CDC tables)."""
    from icetide.ledger.stage import LedgerStage
    from icetide.spark.errors import jvm_boundary

    pipeline = context.load_pipeline(args)
    spark = context.spark_session(pipeline.config)
    with jvm_boundary("ledger stream"):
        query = LedgerStage(spark, pipeline).start(once=args.once)
    context.await_query(query, "ledger stream")
    return 0


def merge_all(stage: MergeStage, config: Config) -> list[MergeResult]:
    """Merge each table in turn, stopping between tables when asked to."""
    from icetide.spark.errors import jvm_boundary

    results = []
    for table in config.tables:
        context.state.stop.check()
        with jvm_boundary(f"merge of {table.name}"):
            results.append(stage.merge_table(table.name))
    return results


def cmd_merge(args: argparse.Namespace) -> int:
    """Run the merge stage once, or every ``schedule.merge_interval``."""
    from icetide.merge.stage import MergeStage

    pipeline = context.load_pipeline(args)
    config = pipeline.config
    spark = context.spark_session(config)
    stage = MergeStage(spark, pipeline)
    interval = config.schedule.merge_interval.total_seconds()
    while True:
        results = merge_all(stage, config)
        if args.once:
            if not any(r.events for r in results):
                log(f"merge: nothing new to merge in {len(results)} table(s)")
            return 0
        context.state.stop.wait(interval)


def cmd_run(args: argparse.Namespace) -> int:
    """Stream and merge on one machine until Ctrl-C."""
    from icetide.config.model import format_duration
    from icetide.ledger.stage import LedgerStage
    from icetide.merge.stage import MergeStage
    from icetide.spark.errors import jvm_boundary

    pipeline = context.load_pipeline(args)
    config = pipeline.config
    spark = context.spark_session(config)
    with jvm_boundary("ledger stream"):
        query = LedgerStage(spark, pipeline).start(once=False)
    merge = MergeStage(spark, pipeline)
    interval = config.schedule.merge_interval.total_seconds()
    log(
        f"running: ledger every {format_duration(config.schedule.stream_interval)}, merge "
        f"every {format_duration(config.schedule.merge_interval)}; Ctrl-C stops"
    )
    try:
        while True:
            # Merge first: what the ledger holds already need not wait for the interval.
            merge_all(merge, config)
            deadline = time.monotonic() + interval
            while (left := deadline - time.monotonic()) > 0:
                with jvm_boundary("ledger stream"):
                    active = query.isActive
                if not active:
                    context.await_query(query, "ledger stream")
                    raise StageError("the ledger stream stopped", hint="rerun `icetide run`")
                context.state.stop.wait(min(left, 0.5))
    except Stopped:
        with jvm_boundary("ledger stream"):
            context.stop_query(query)
        raise


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``stream``, ``merge`` and ``run``."""
    p = with_config(
        command_parser(
            sub,
            "stream",
            help="ledger stage: change events → CDC tables",
            example=("icetide stream", "icetide stream --once -c shop.yaml"),
        )
    )
    p.add_argument("--once", action="store_true", help="process what has arrived, then stop")
    p.set_defaults(func=cmd_stream)

    p = with_config(
        command_parser(
            sub,
            "merge",
            help="merge stage: CDC tables → base tables",
            example=("icetide merge", "icetide merge --once --progress json"),
        )
    )
    p.add_argument("--once", action="store_true", help="merge once, then stop")
    p.set_defaults(func=cmd_merge)

    p = with_config(
        command_parser(
            sub,
            "run",
            help="stream and merge on this machine until Ctrl-C",
            example=("icetide run", "icetide run -c shop.yaml --progress json"),
        )
    )
    p.set_defaults(func=cmd_run)
