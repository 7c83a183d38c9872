"""``icetide verify`` and ``icetide status``: how the mirror stands."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from icetide.cli import context, tables
from icetide.cli.bars import progress_bars
from icetide.cli.context import command_parser, log, positive_int, with_config, with_output
from icetide.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icetide.config import Config


def cmd_verify(args: argparse.Namespace) -> int:
    """Compare every base table with its source table: count, checksum, differing keys."""
    from icetide.observe.verify import exit_code, render_verdicts, run_verify, verdict_dicts
    from icetide.spark.errors import jvm_boundary

    pipeline = context.load_pipeline(args)
    config = pipeline.config
    if not config.sources:
        raise ConfigError(
            f"pipeline {config.pipeline!r} has no sources to verify against",
            hint="add a sources: section with the source database's connection",
        )
    spark = context.spark_session(config, abandon_at_once=True)
    with jvm_boundary("verify"), progress_bars(args, pipeline):
        verdicts = run_verify(pipeline, spark, args.table or None)
    context.state.stop.check()
    if args.output == "json":
        print(json.dumps(verdict_dicts(verdicts), indent=2))
    elif tables.on_terminal():
        tables.print_table("verify", tables.VERIFY_COLUMNS, verdict_dicts(verdicts))
        different = [v for v in verdicts if not v.matches]
        if different:
            print(render_verdicts(different))
    else:
        print(render_verdicts(verdicts))
    return exit_code(verdicts)


def cmd_status(args: argparse.Namespace) -> int:
    """Print per-table freshness, ledger, base, lag and dead-letter figures, worst first."""
    from icetide.observe.status import freshness_text, pipeline_status, render_status, status_dicts
    from icetide.spark.errors import jvm_boundary

    config = context.load_pipeline(args).config
    spark = context.spark_session(config)
    if args.check:
        return _check(spark, config, args)
    with jvm_boundary("status"):
        status = pipeline_status(spark, config, args.filter, args.limit)
    if args.filter and not status.tables:
        log(f"icetide: no table's name matches {args.filter!r}")
    if args.output == "json":
        print(json.dumps(status_dicts(status), indent=2))
    elif tables.on_terminal():
        rows = [
            {**row, "freshness": freshness_text(r)}
            for r, row in zip(status.tables, status_dicts(status), strict=True)
        ]
        tables.print_table("status", tables.STATUS_COLUMNS, rows)
        rest = render_status(status).split("\n")[len(status.tables) + 1 :]
        if any(rest):
            print("\n".join(rest).strip("\n"))
    else:
        print(render_status(status))
    return 0


def _check(spark: SparkSession, config: Config, args: argparse.Namespace) -> int:
    """Freshness of every table against its SLA, worst first: exit 1 when one is
    breached (among the tables ``--filter`` names; ``--limit`` shortens the list only)."""
    from icetide.observe import display
    from icetide.observe.freshness import observe_table
    from icetide.spark.errors import jvm_boundary

    now = datetime.now(UTC)
    names = [t.name for t in config.tables if display.matches(t.name, args.filter)]
    with jvm_boundary("status --check"):
        healths = [observe_table(spark, config, name, now) for name in names]
    breached = [h for h in healths if h.breached]
    shown, _ = display.select(
        healths,
        lambda h: h.table,
        lambda h: display.rank_key(h.table, h.verdict, h.freshness_seconds),
        None,
        args.limit,
    )
    if args.output == "json":
        print(json.dumps([h.to_dict() for h in shown], indent=2))
    else:
        print("\n".join(h.render() for h in shown))
    for health in breached:
        log(f"icetide: freshness SLA breached: {health.render()}")
    return 1 if breached else 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``verify`` and ``status``."""
    p = with_output(
        with_config(
            command_parser(
                sub,
                "verify",
                help="compare base tables with their source tables (exit 0 only when all match)",
                description="Per table: row count and an order-independent checksum of every "
                "column, on the source (SQL) and on the base table (Spark); on a mismatch, "
                "the first differing keys. Stop writes and let capture and merge catch up "
                "first.",
                example=("icetide verify", "icetide verify --table orders --output json"),
            )
        )
    )
    p.add_argument("--table", action="append", help="only this table (repeatable)")
    p.set_defaults(func=cmd_verify)

    p = with_output(
        with_config(
            command_parser(
                sub,
                "status",
                help="per table, worst first: freshness, events, watermark, lag, dead letters",
                example=(
                    "icetide status",
                    "icetide status --filter orders --limit 20",
                    "icetide status --output json | jq '.[0]'",
                    "icetide status --check || alert   # exit 1 on a freshness SLA breach",
                ),
            )
        )
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="report freshness against each table's freshness_sla; exit 1 on a breach",
    )
    p.add_argument(
        "--filter",
        metavar="WORDS",
        help="only the tables whose names contain every word (any case), as the page's box",
    )
    p.add_argument(
        "--limit",
        type=positive_int,
        metavar="N",
        help="only the N worst tables (failing or held, stale, then the oldest freshness)",
    )
    p.set_defaults(func=cmd_status)
