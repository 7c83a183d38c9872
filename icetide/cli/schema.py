"""``icetide schema``: the schema files in use (``show``; ``plan``/``apply`` join here)."""

from __future__ import annotations

import argparse

from icetide.cli import schema_show
from icetide.cli.context import command_parser


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``schema`` group and its subcommands (each in its own module)."""
    p = command_parser(
        sub,
        "schema",
        help="inspect the tables' schemas and what is generated from them",
        example=("icetide schema show users --sql",),
    )
    group = p.add_subparsers(dest="schema_command", required=True, metavar="SUBCOMMAND")
    schema_show.register(group)
