"""``icetide asof TABLE --at TIME|POSITION``: a table exactly as its source had it then.

Prints the rows, or writes them (``--to``) to an Iceberg table, a branch of the base
table, or Parquet files (:mod:`icetide.merge.asof` builds them).
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from icetide.cli import context
from icetide.cli.context import command_parser, with_config, with_output
from icetide.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from icetide.config import Config
    from icetide.lake.tables import TableRefs
    from icetide.merge.asof import AsOf
    from icetide.merge.asof_plan import Target
    from icetide.pipeline import Pipeline

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Destination:
    """Where ``--to`` writes: an Iceberg table, a branch of the base table, or Parquet."""

    kind: Literal["table", "branch", "parquet"]
    name: str


def parse_destination(text: str) -> Destination:
    """``--to``: ``parquet:PATH``, ``branch:NAME`` (of the base table) or an Iceberg table
    ``[catalog.]namespace.table``.

    >>> parse_destination("branch:incident_0301"), parse_destination("parquet:/tmp/x").kind
    (Destination(kind='branch', name='incident_0301'), 'parquet')
    >>> parse_destination("shop.customers_0900").kind
    'table'
    >>> parse_destination("branch:a-b")
    Traceback (most recent call last):
    ...
    icetide.errors.ConfigError: --to: branch name 'a-b' must be letters, digits and _
    """
    kind, sep, rest = text.partition(":")
    if sep and kind == "parquet" and rest:
        return Destination("parquet", rest)
    if sep and kind == "branch":
        if not _NAME.match(rest):
            raise ConfigError(
                f"branch name {rest!r} must be letters, digits and _",
                path="--to",
                hint="for example --to branch:incident_0301",
            )
        return Destination("branch", rest)
    parts = text.split(".")
    if sep or len(parts) not in (2, 3) or not all(_NAME.match(p) for p in parts):
        raise ConfigError(
            f"{text!r} is neither parquet:PATH, branch:NAME nor an Iceberg table "
            "[catalog.]namespace.table",
            path="--to",
            hint="for example --to parquet:/tmp/customers_0900, --to branch:incident_0301 "
            "or --to lake.shop.customers_0900",
        )
    return Destination("table", text)


def write(frame: DataFrame, to: Destination, refs: TableRefs, config: Config) -> str:
    """Write ``frame`` where ``to`` says, replacing what was there; where it went."""
    from pyspark.sql import functions as F

    from icetide.schema.contract.names import TableName

    spark = frame.sparkSession
    if to.kind == "parquet":
        frame.write.mode("overwrite").parquet(to.name)
        return to.name
    if to.kind == "branch":
        base = refs.base
        spark.sql(f"ALTER TABLE {base} CREATE OR REPLACE BRANCH `{to.name}`")
        frame.writeTo(base.branch(to.name)).overwrite(F.lit(True))
        return f"{base.dotted} branch {to.name}"
    parts = to.name.split(".")
    name = TableName(*parts) if len(parts) == 3 else TableName(config.catalog.name, *parts)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{name.catalog}`.`{name.namespace}`")
    frame.writeTo(name.sql).createOrReplace()
    return name.dotted


def cmd_asof(args: argparse.Namespace) -> int:
    """Build the table as of ``--at``; print it, or write it to ``--to``."""
    from icetide.merge.asof import table_as_of
    from icetide.merge.asof_plan import parse_target

    pipeline = context.load_pipeline(args)
    config = pipeline.config
    config.table(args.table)  # an unknown name fails before Spark starts
    target = parse_target(args.at)
    to = None if args.to is None else parse_destination(args.to)
    spark = context.spark_session(config)
    asof = table_as_of(spark, pipeline, args.table, target)
    context.log(f"asof: {asof.describe()}")
    try:
        return _emit(args, asof, pipeline, target, to)
    finally:
        asof.release()


def _emit(
    args: argparse.Namespace,
    asof: AsOf,
    pipeline: Pipeline,
    target: Target,
    to: Destination | None,
) -> int:
    """Print the as-of's rows, or write them to ``to``."""
    from icetide.schema.quoting import quote

    config = pipeline.config
    named = asof.shape.keys if asof.shape else pipeline.schema(args.table).primary_key
    keys = [quote(k) for k in named]
    frame = asof.frame.orderBy(*keys)
    if to is not None:
        where = write(frame, to, pipeline.refs(args.table), config)
        summary = {
            "table": args.table,
            "at": target.text,
            "position": str(asof.plan.target),
            "written_to": where,
        }
        if args.output == "json":
            print(json.dumps(summary))
        else:
            print(f"{asof.describe()}: written to {where}")
        return 0
    shown = frame if args.limit is None else frame.limit(args.limit)
    if args.output == "json":
        for row in shown.toJSON().toLocalIterator():  # a partition at a time
            print(row)
    else:
        shown.show(args.limit or 20, truncate=False)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``asof``."""
    p = with_output(
        with_config(
            command_parser(
                sub,
                "asof",
                help="a table exactly as its source had it at a time or source position",
                description="Rebuild TABLE as the source had it at --at: a time (ISO-8601, "
                "UTC unless it names an offset; the newest change committed at or before "
                "it) or a source position (binlog file:offset[:row], PostgreSQL LSN "
                "X/Y[:index], or the stored _position number). Exact at any position, not "
                "only at merge snapshots: the nearest base snapshot at or before it plus "
                "the ledger's events up to it, by the merge's own rules. A point older "
                "than what is kept is an error naming the earliest reachable one. "
                "See docs/history.md.",
                example=(
                    "icetide asof customers --at 2026-03-01T09:00:00",
                    "icetide asof customers --at mysql-bin.000012:4711 --output json",
                    "icetide asof customers --at 0/16B3748 --to branch:incident_0301",
                    "icetide asof customers --at 2026-03-01T09:00:00Z --to parquet:/tmp/c0900",
                ),
            )
        )
    )
    p.add_argument("table", help="the configured table to rebuild")
    p.add_argument("--at", required=True, help="a time or a source position (see above)")
    p.add_argument(
        "--to",
        default=None,
        help="write instead of printing: parquet:PATH, branch:NAME (a branch of the base "
        "table) or an Iceberg table [catalog.]namespace.table (replaced)",
    )
    p.add_argument(
        "--limit",
        type=context.positive_int,
        default=None,
        help="print at most this many rows (default: 20 as text, all as JSON)",
    )
    p.set_defaults(func=cmd_asof)
