"""``icetide dlt show|replay``: dead letters by reason, and replay after a fix."""

from __future__ import annotations

import argparse
import json

from icetide.cli import context
from icetide.cli.bars import progress_bars
from icetide.cli.context import command_parser, with_config, with_output


def cmd_dlt_show(args: argparse.Namespace) -> int:
    """Counts by reason (and code), sample message ids and payload previews."""
    from icetide.lake.tables import TableRefs, table_exists
    from icetide.ledger.replay import render, show
    from icetide.spark.errors import jvm_boundary

    pipeline = context.load_pipeline(args)
    config = pipeline.config
    names = [args.table] if args.table else [t.name for t in config.tables]
    if not args.table:
        names.append(config.dead_letter.unrouted_table)
    if args.table:
        config.table(args.table)  # an unknown table is a config error naming the choices
    spark = context.spark_session(config)
    summaries = []
    with jvm_boundary("dlt show"):
        for name in names:
            dead_letters = TableRefs.of(config, name).dead_letters
            if table_exists(spark, dead_letters):
                summaries.append(show(spark, dead_letters.sql, name, args.reason, args.samples))
    if args.output == "json":
        print(json.dumps([s.to_json() for s in summaries], indent=2))
    else:
        print("\n".join(render(s) for s in summaries) or "no dead-letter tables yet")
    return 0


def cmd_dlt_replay(args: argparse.Namespace) -> int:
    """Re-run dead letters through the current decode and schema."""
    from icetide.errors import ConfigError
    from icetide.evolution.carried import VersionWalker
    from icetide.ledger.replay import refuse_unrouted, render_replay, replay, replay_unrouted
    from icetide.spark.errors import jvm_boundary

    pipeline = context.load_pipeline(args)
    config = pipeline.config
    if args.unrouted == (args.table is not None):
        raise ConfigError(
            "dlt replay: name one TABLE, or give --unrouted for the records no table took",
            hint="icetide dlt replay items | icetide dlt replay --unrouted [--to items]",
        )
    if args.to is not None and not args.unrouted:
        raise ConfigError(
            "dlt replay: --to routes unrouted records; it goes with --unrouted",
            hint=f"icetide dlt replay --unrouted --to {args.to}",
        )
    if args.table is not None:
        refuse_unrouted(config, args.table)
        config.table(args.table)
    spark = context.spark_session(config)
    walker = VersionWalker(spark, pipeline)
    with jvm_boundary("dlt replay"), progress_bars(args, pipeline):
        if args.unrouted:
            result = replay_unrouted(
                spark,
                pipeline,
                to=args.to,
                reason=args.reason,
                ids=args.ids or (),
                on_versions=walker,
            )
        else:
            result = replay(
                spark,
                pipeline,
                args.table,
                reason=args.reason,
                ids=args.ids or (),
                on_versions=walker,
            )
    if args.output == "json":
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(render_replay(result))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``dlt`` group."""
    p = sub.add_parser("dlt", help="dead letters: show them by reason, replay them after a fix")
    dlt_sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    p = with_output(
        with_config(
            command_parser(
                dlt_sub,
                "show",
                help="dead letters by reason, with sample ids and decoded payload previews",
                description="Per dead-letter table: counts by reason and by reason code "
                "(parse, deserialization, type_conversion, null_payload, "
                "schema_incompatible, unsupported_schema_change, routing), a few sample "
                "message ids with their error and a preview of the payload (text as is, "
                "registry frames as hex). See docs/dead-letters.md.",
                example=(
                    "icetide dlt show",
                    "icetide dlt show items --reason deserialization --output json",
                ),
            )
        )
    )
    p.add_argument("table", nargs="?", help="one table (default: every table and the unrouted)")
    p.add_argument("--reason", help="only this reason or reason code")
    p.add_argument("--samples", type=int, default=3, help="samples per reason (default 3)")
    p.set_defaults(func=cmd_dlt_show)

    p = with_output(
        with_config(
            command_parser(
                dlt_sub,
                "replay",
                help="re-run dead letters through the current decode and schema",
                description="Dead letters of TABLE that now decode and fit the current "
                "schema are appended to the ledger (skipping message ids it already holds) "
                "and then removed from the dead-letter table; the others stay with their "
                "new reason. Schema versions the records carry are walked first. "
                "--unrouted replays the records no table took: those that route now "
                "(after a fix of tables:) go to their table, and with --to TABLE the row "
                "events whose source names no configured table go to TABLE. Safe to kill "
                "and rerun at any point.",
                example=(
                    "icetide dlt replay items",
                    "icetide dlt replay items --reason type_conversion --ids t/0/5 t/0/9",
                    "icetide dlt replay --unrouted --to items --reason routing",
                ),
            )
        )
    )
    p.add_argument("table", nargs="?", help="the table whose dead letters to replay")
    p.add_argument(
        "--unrouted", action="store_true", help="replay the unrouted dead-letter table instead"
    )
    p.add_argument(
        "--to", metavar="TABLE", help="with --unrouted: route records naming no table here"
    )
    p.add_argument("--reason", help="only this reason or reason code")
    p.add_argument("--ids", nargs="+", help="only these message ids")
    p.set_defaults(func=cmd_dlt_replay)
