"""``icetide onboard``: schema files from the source catalogs, and the Iceberg tables."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from icetide.cli import context
from icetide.cli.context import command_parser, with_config, with_output

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def cmd_onboard(args: argparse.Namespace) -> int:
    """Write each table's schema file from its source catalog; create its tables."""
    from icetide.config import load_config
    from icetide.config.secrets import secret_values
    from icetide.evolution.onboard import DIFFERS, onboard, render
    from icetide.spark.errors import jvm_boundary

    config = load_config(args.config)
    if context.state.scrub is not None:
        context.state.scrub.add(secret_values(config))

    def spark() -> SparkSession:
        return context.spark_session(config)

    with jvm_boundary("onboard"):
        results = onboard(
            config,
            args.table or (),
            force=args.force,
            dry_run=args.dry_run,
            files_only=args.files_only,
            spark=spark,
        )
    if args.output == "json":
        print(json.dumps([r.to_dict() for r in results], indent=2))
    else:
        print(render(results))
    # A file that differs from its source is kept, and said so; --strict makes it fail.
    if args.strict and any(r.file == DIFFERS for r in results):
        return 3
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``onboard``."""
    p = with_output(
        with_config(
            command_parser(
                sub,
                "onboard",
                help="write schema files from the source catalogs and create the tables",
                description="For each configured table a database source captures: read "
                "its columns and primary key from the source catalog (information_schema "
                "for MySQL/MariaDB, pg_catalog for PostgreSQL), write its schema file, and "
                "create its ledger, base and dead-letter tables. An existing schema file "
                "is never overwritten silently: it is reported unchanged or differs "
                "(--force refreshes it, keeping column ids by name). Running it again "
                "changes nothing.",
                example=(
                    "icetide onboard",
                    "icetide onboard --table users --dry-run",
                    "icetide onboard --files-only   # then add sink: to the files, rerun",
                    "icetide onboard --force --output json",
                ),
            )
        )
    )
    p.add_argument("--table", action="append", help="only this table (repeatable)")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="read the catalogs and say what would be written and created; change nothing",
    )
    p.add_argument(
        "--files-only",
        action="store_true",
        help="write the schema files but create no table (add a sink: block, then run "
        "onboard again to create the tables from it)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="refresh schema files that differ from the catalog (ids kept by column name, "
        "version + 1, sink config kept)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 3 when a kept schema file differs from its source catalog",
    )
    p.set_defaults(func=cmd_onboard)
