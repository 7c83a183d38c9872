"""``icetide stream`` and ``merge``: the ledger and merge stages."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from icetide.cli import context
from icetide.cli.context import command_parser, log, with_config, with_metrics
from icetide.supervisor import pause_after

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.ledger.stage import LedgerStage
    from icetide.merge.stage import MergeResult, MergeStage
    from icetide.pipeline import Pipeline


def ledger_stage(spark: SparkSession, pipeline: Pipeline) -> LedgerStage:
    """The ledger stage, acting on source schema changes when the config names the
    source databases (their catalogs are read to plan each change), and walking the
    schema versions the messages carry (registry ids, inline Debezium schemas)."""
    from icetide.evolution.carried import VersionWalker
    from icetide.evolution.detect import Detector
    from icetide.ledger.stage import LedgerStage

    detector = Detector(spark, pipeline) if pipeline.config.sources else None
    walker = VersionWalker(spark, pipeline)
    return LedgerStage(spark, pipeline, on_signals=detector, on_versions=walker)


def cmd_stream(args: argparse.Namespace) -> int:
    """Run the ledger stage (events → CDC tables)."""
    from icetide.errors import IcetideError
    from icetide.spark.errors import jvm_boundary

    pipeline = context.load_pipeline(args)
    context.serve_metrics(args, pipeline)
    spark = context.spark_session(pipeline.config)
    stage = ledger_stage(spark, pipeline)
    with jvm_boundary("ledger stream"):
        query = stage.start(once=args.once)
    try:
        context.await_query(query, "ledger stream")
    except IcetideError:
        if stage.failure is None:
            raise
        raise stage.failure from None  # as the batch raised it, not as Spark passed it on
    return 0


def merge_all(stage: MergeStage) -> list[MergeResult]:
    """Merge every table once (:meth:`~icetide.merge.stage.MergeStage.run_once`),
    merging no more tables once a stop is requested (nor waiting out a retry's pause)."""
    stop = context.state.stop
    return stage.run_once(before_each=stop.check, pause=stop.wait)


def _drop_own_branches(spark: SparkSession) -> None:
    """A ``--once`` merge removes the branches it wrote on before it ends
    (:func:`~icetide.merge.strategy.drop_process_branches`); one it cannot remove is
    said and left to the next merge's day-old clean-up, never a failed run."""
    from icetide.errors import IcetideError, failure_line
    from icetide.merge.strategy import drop_process_branches
    from icetide.spark.errors import jvm_boundary

    try:
        with jvm_boundary("removing this merge's branches"):
            dropped = drop_process_branches(spark)
    except IcetideError as exc:
        log(f"merge: {failure_line(exc)}; its branches are removed by a merge a day later")
        return
    if dropped:
        log(f"merge: removed this process's branch from {len(dropped)} table(s)")


def cmd_merge(args: argparse.Namespace) -> int:
    """Run the merge stage once, or every ``schedule.merge_interval`` (a busy round
    longer than that is followed at once, see :func:`~icetide.supervisor.pause_after`)."""
    from icetide.merge.stage import MergeStage

    pipeline = context.load_pipeline(args)
    context.serve_metrics(args, pipeline)
    config = pipeline.config
    spark = context.spark_session(config)
    stage = MergeStage(spark, pipeline)
    interval = config.schedule.merge_interval.total_seconds()
    while True:
        began = time.monotonic()
        results = merge_all(stage)
        merged = any(r.events for r in results)
        if args.once:
            if not merged:
                log(f"merge: nothing new to merge in {len(results)} table(s)")
            _drop_own_branches(spark)
            return 0
        # Scheduled like `icetide run`'s merge task: busy rounds at a fixed rate.
        context.state.stop.wait(pause_after(time.monotonic() - began, interval, merged))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``stream`` and ``merge`` (``run`` lives in :mod:`icetide.cli.run`)."""
    p = with_metrics(
        with_config(
            command_parser(
                sub,
                "stream",
                help="ledger stage: change events → CDC tables",
                example=("icetide stream", "icetide stream --once -c shop.yaml"),
            )
        )
    )
    p.add_argument("--once", action="store_true", help="process what has arrived, then stop")
    p.set_defaults(func=cmd_stream)

    p = with_metrics(
        with_config(
            command_parser(
                sub,
                "merge",
                help="merge stage: CDC tables → base tables",
                example=("icetide merge", "icetide merge --once --metrics-port 9464"),
            )
        )
    )
    p.add_argument("--once", action="store_true", help="merge once, then stop")
    p.set_defaults(func=cmd_merge)
