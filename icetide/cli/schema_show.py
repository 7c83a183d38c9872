"""``icetide schema show``: a table's schema, sink config and generated SQL.

It joins the ``schema`` command group through
:func:`icetide.cli.schema_plan.register_schema_group`, so the group's commands live in
their own modules.
"""

from __future__ import annotations

import argparse
import json

from icetide.cli import context
from icetide.cli.context import command_parser, with_config, with_output
from icetide.cli.schema_plan import register_schema_group


def cmd_schema_show(args: argparse.Namespace) -> int:
    """Print one table's schema; with ``--sql`` everything generated from it."""
    from icetide.config import load_config
    from icetide.config.loader import load_schema_file
    from icetide.config.secrets import secret_values
    from icetide.evolution.show import render, schema_dict
    from icetide.lake.tables import TableRefs
    from icetide.schema.contract.builder import TableContract, TableSettings

    config = load_config(args.config)
    if context.state.scrub is not None:
        context.state.scrub.add(secret_values(config))
    table = config.table(args.table)
    schema = load_schema_file(table.schema_file, f"schema of table {table.name}")
    schema = schema if schema.table else schema.renamed(table.name)
    contract = TableContract(schema, TableSettings(table.buckets, table.mode, table.format_version))
    data = schema_dict(contract, TableRefs.of(config, table.name), args.sql)
    data["schema_file"] = str(table.schema_file)
    if args.output == "json":
        print(json.dumps(data, indent=2))
    else:
        print(f"schema file {table.schema_file}")
        print(render(data))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``schema show`` (making the ``schema`` group if no module has yet)."""
    add_show(register_schema_group(sub))


def add_show(group: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``show`` to the ``schema`` group's subcommands."""
    p = with_output(
        with_config(
            command_parser(
                group,
                "show",
                help="print a table's schema and sink config (--sql: the generated SQL)",
                description="Print a table's columns (ids, source types, nullability, key) "
                "with the Iceberg name and type each is stored as and its sink settings. "
                "With --sql also everything generated from them by the table-contract "
                "builder: the base, ledger and dead-letter DDL, the MERGE statement and "
                "the ledger projection plan. Reads only the config and the schema file.",
                example=(
                    "icetide schema show users",
                    "icetide schema show users --sql",
                    "icetide schema show users --sql --output json | jq .sql.merge",
                ),
            )
        )
    )
    p.add_argument("table", help="the table's name in the config")
    p.add_argument("--sql", action="store_true", help="also print everything generated")
    p.set_defaults(func=cmd_schema_show)
