"""``icetide init``, ``icetide config show`` and ``check``: start a pipeline, inspect its config."""

from __future__ import annotations

import argparse
from pathlib import Path

from icetide.cli import context
from icetide.cli.context import command_parser, log, with_config


def cmd_init(args: argparse.Namespace) -> int:
    """Write a commented example config and schema file."""
    from icetide.config import write_example

    for path in write_example(Path(args.directory), force=args.force):
        log(f"wrote {path}")
    log("next: edit icetide.yaml and schemas/, then `icetide run`")
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    """Print the effective config (defaults filled in, secrets as ***)."""
    import yaml

    config = context.load_pipeline(args).config
    print(yaml.safe_dump(config.redacted(), sort_keys=False), end="")
    return 0


def cmd_config_check(args: argparse.Namespace) -> int:
    """Check that the catalog and its object store answer, before anything runs."""
    from icetide.lake.preflight import check_lake, literal_credentials

    config = context.load_pipeline(args).config
    for setting in literal_credentials(config):
        log(
            f"check: warning: {setting} is written in the file: write it as ${{VAR}} and "
            "set VAR where icetide runs"
        )
    check_lake(config, log=log)
    log(f"check: the {config.catalog.type} catalog {config.catalog.name!r} is ready")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``init`` and the ``config`` group."""
    p = command_parser(
        sub,
        "init",
        help="write a commented example icetide.yaml and schema file",
        example=("icetide init", "icetide init pipelines/shop --force"),
    )
    p.add_argument("directory", nargs="?", default=".", help="where to write (default: .)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("config", help="inspect the pipeline config")
    config_sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = with_config(
        command_parser(
            config_sub,
            "show",
            help="print the effective config, secrets hidden",
            example=("icetide config show -c icetide.yaml",),
        )
    )
    p.set_defaults(func=cmd_config_show)
    p = with_config(
        command_parser(
            config_sub,
            "check",
            help="check that the catalog and its object store answer and accept the keys",
            description="Reach the catalog (REST: GET /v1/config; JDBC: its database) and "
            "the S3 warehouse's bucket with the configured keys, as every command that "
            "starts Spark does first; each problem is one error naming the setting to fix.",
            example=("icetide config check -c icetide.yaml",),
        )
    )
    p.set_defaults(func=cmd_config_check)
