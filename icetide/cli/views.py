"""``icetide views add|show|list|sync``: views over tables and other views, schemas
derived; ``sync`` writes them into catalogs that keep Iceberg views."""

from __future__ import annotations

import argparse
import json
from typing import Any

from icetide.cli import context
from icetide.cli.context import command_parser, with_config, with_output


def _record_dict(record: Any) -> dict[str, Any]:
    from icetide.schema.file import column_to_data

    current = record.current
    return {
        "name": record.name,
        "sql": record.sql,
        "dependencies": list(record.dependencies),
        "status": record.status,
        "missing": list(record.missing),
        "version": current.version if current else None,
        "inputs": dict(current.inputs) if current else {},
        "columns": [column_to_data(c) for c in current.columns] if current else [],
    }


def _render(record: Any) -> str:
    lines = [f"view {record.name} ({record.status}) reads {', '.join(record.dependencies)}"]
    lines.append(f"  {record.sql}")
    if record.missing:
        lines.append(f"  waiting for: {', '.join(record.missing)}")
    if record.current is not None:
        lines.append(f"  version {record.current.version}:")
        for c in record.current.columns:
            null = "null" if c.nullable else "not null"
            lines.append(f"    {c.name}: {c.type} {null}")
    return "\n".join(lines)


def cmd_add(args: argparse.Namespace) -> int:
    """Register (or alter) a view and derive its schema and its dependents'."""
    from icetide.artifacts.refresh import ViewChanged
    from icetide.artifacts.workspace import refresher

    pipeline = context.load_pipeline(args)
    r = refresher(pipeline, publish=args.publish)
    r.adopt_tables([t.name for t in pipeline.config.tables])
    report = r.refresh(ViewChanged(args.name, args.sql))
    record = r.registry.get(args.name)
    assert record is not None
    if args.output == "json":
        print(json.dumps({**_record_dict(record), "refresh": report.to_dict()}, indent=2))
    else:
        print(_render(record))
        others = [v for v in report.views if v != record.name]
        if others:
            print(f"derived again: {', '.join(others)}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Show one view: SQL, inputs, status and derived columns."""
    from icetide.artifacts.errors import ViewError
    from icetide.artifacts.views.registry import ViewRegistry
    from icetide.artifacts.workspace import views_folder

    registry = ViewRegistry(views_folder(context.load_pipeline(args).config))
    record = registry.get(args.name)
    if record is None:
        raise ViewError(
            f"no view called {args.name}",
            hint=f"views: {', '.join(registry.names()) or 'none'}",
        )
    print(json.dumps(_record_dict(record), indent=2) if args.output == "json" else _render(record))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """List the registered views."""
    from icetide.artifacts.views.registry import ViewRegistry
    from icetide.artifacts.workspace import views_folder

    records = ViewRegistry(views_folder(context.load_pipeline(args).config)).all()
    if args.output == "json":
        print(json.dumps([_record_dict(r) for r in records], indent=2))
    else:
        for r in records:
            version = f"v{r.current.version}" if r.current else "-"
            print(f"{r.name:<30} {r.status:<8} {version:<4} reads {', '.join(r.dependencies)}")
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    """Create or replace every ready view as an Iceberg view in the pipeline's catalog."""
    from icetide.artifacts.views.catalog import keeps_views
    from icetide.artifacts.workspace import sync_catalog_views

    pipeline = context.load_pipeline(args)
    catalog = pipeline.config.catalog
    if not keeps_views(catalog.type):
        written: list[str] = []
        note = (
            f"catalog {catalog.name} ({catalog.type}) keeps no Iceberg views: the views "
            "stay in icetide's registry only (read them with their packages' read(spark))"
        )
    else:
        written = sync_catalog_views(pipeline, context.spark_session(pipeline.config))
        note = f"{len(written)} view(s) in catalog {catalog.name}, namespace {catalog.namespace}"
    if args.output == "json":
        print(json.dumps({"catalog": catalog.name, "views": written}, indent=2))
    else:
        for name in written:
            print(f"view {name}: written")
        print(note)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``views add|show|list|sync``."""
    group = command_parser(
        sub,
        "views",
        help="views over tables and views, their schemas derived from the SQL",
        example=(
            'icetide views add active_users --sql "SELECT id, email FROM users '
            "WHERE status = 'active'\"",
            "icetide views show active_users --output json",
        ),
    )
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = with_output(
        with_config(
            command_parser(
                actions,
                "add",
                help="register or alter a view (Spark SQL) and derive its schema",
                description="Register a view in icetide's view registry (views/ beside the "
                "schema files; `views sync` writes it into a REST or JDBC catalog), derive "
                "its schema from the SQL and the schemas it reads, and derive again every "
                "view above it. A view reading something not known yet is kept as pending.",
                example=(
                    "icetide views add paid --sql \"SELECT * FROM orders WHERE state = 'paid'\"",
                    'icetide views add paid_users --sql "SELECT u.id, p.amount FROM users u '
                    'JOIN paid p ON p.user_id = u.id" --no-publish',
                ),
            )
        )
    )
    p.add_argument("name", help="the view's name (letters, digits, _)")
    p.add_argument("--sql", required=True, help="one SELECT in Spark SQL")
    p.add_argument(
        "--no-publish",
        dest="publish",
        action="store_false",
        help="only register and derive; publish nothing (default: publish the view's "
        "package and its dependents')",
    )
    p.set_defaults(func=cmd_add)

    p = with_output(
        with_config(
            command_parser(
                actions,
                "show",
                help="a view's SQL, inputs and columns",
                example=("icetide views show paid",),
            )
        )
    )
    p.add_argument("name")
    p.set_defaults(func=cmd_show)

    p = with_output(
        with_config(
            command_parser(
                actions, "list", help="every registered view", example=("icetide views list",)
            )
        )
    )
    p.set_defaults(func=cmd_list)

    p = with_output(
        with_config(
            command_parser(
                actions,
                "sync",
                help="write every ready view into the catalog as an Iceberg view",
                description="On a catalog that keeps Iceberg views (REST, JDBC), create or "
                "replace every ready view there, its SQL naming the tables and views it "
                "reads by their full names, so Spark SQL and other engines read it from the "
                "catalog. Runs on its own after each schema change the pipeline applies; "
                "run it after `views add`. The Hadoop catalog keeps no views: nothing to do.",
                example=("icetide views sync", "icetide views sync --output json"),
            )
        )
    )
    p.set_defaults(func=cmd_sync)
