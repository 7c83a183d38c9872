"""``icetide maintain``: compact, expire and tidy each table's Iceberg tables."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from icetide.cli import context
from icetide.cli.context import command_parser, with_config, with_output


@contextmanager
def progress_bar(what: str, total: int) -> Iterator[Callable[[str], None]]:
    """A Rich progress bar on a terminal; off a terminal nothing (the progress records
    already say what happens, line by line)."""
    if not sys.stderr.isatty():
        yield lambda _: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=total)
        yield lambda name: bar.update(task, advance=1, description=f"{what}: {name} done")


def cmd_maintain(args: argparse.Namespace) -> int:
    """Maintain the named tables (default: all), one after another."""
    from icetide.maintenance.run import maintain_table

    pipeline = context.load_pipeline(args)
    config = pipeline.config
    names = args.table or [t.name for t in config.tables]
    for name in names:
        config.table(name)  # unknown names fail before Spark starts
    spark = context.spark_session(config)
    results = []
    with progress_bar("maintain", len(names)) as advance:
        for name in names:
            context.state.stop.check()
            results.append(maintain_table(spark, pipeline, name))
            advance(name)
    if args.output == "json":
        print(json.dumps([r.to_dict() for r in results], indent=2, default=str))
    else:
        print("\n".join(r.render() for r in results))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``maintain``."""
    p = with_output(
        with_config(
            command_parser(
                sub,
                "maintain",
                help="compact data and delete files, expire snapshots, remove orphans",
                description="Per table, through Iceberg's procedures: bin-pack data files "
                "per bucket to maintenance.target_file_size (applying deletes), rewrite "
                "the position-delete files left, expire snapshots older than "
                "maintenance.snapshots (never one a stage still needs), remove orphan "
                "files older than maintenance.orphan_age, rewrite manifests. Safe beside "
                "running merges.",
                example=("icetide maintain", "icetide maintain --table orders --output json"),
            )
        )
    )
    p.add_argument("--table", action="append", help="only this table (repeatable)")
    p.set_defaults(func=cmd_maintain)
