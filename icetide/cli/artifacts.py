"""``icetide artifacts build|publish|serve|list``: typed schema packages of tables and views."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from icetide.cli import context
from icetide.cli.context import command_parser, log, with_config, with_output


def _index(args: argparse.Namespace, pipeline_config: object | None = None) -> Path:
    from icetide.artifacts.workspace import index_folder

    if args.index:
        return Path(args.index).resolve()
    assert pipeline_config is not None
    return index_folder(pipeline_config)  # type: ignore[arg-type]


def cmd_build(args: argparse.Namespace) -> int:
    """Build the wheels of the current table and view versions into a folder."""
    from icetide.artifacts.codegen import package_files
    from icetide.artifacts.errors import ArtifactError
    from icetide.artifacts.publish import write_avsc
    from icetide.artifacts.versioning import column_history_versions, table_history_versions
    from icetide.artifacts.wheel import build_wheel
    from icetide.artifacts.workspace import avsc_path, refresher

    pipeline = context.load_pipeline(args)
    config = pipeline.config
    out = (
        Path(args.out).resolve()
        if args.out
        else config.resolved_path(config.state_dir) / ("artifacts/build")
    )
    r = refresher(pipeline, publish=False)
    tables = args.table or ([] if args.view else [t.name for t in config.tables])
    built = []
    for table in tables:
        history = pipeline.schemas.history(config.table(table).name)
        shape = r.naming.table(history.current)
        major, minor = table_history_versions(history.versions)[-1]
        wheel = build_wheel(package_files(shape, f"{major}.{minor}.0"), out)
        write_avsc(avsc_path(config, shape.name), shape)
        built.append({"kind": "table", "name": shape.name, "wheel": str(wheel)})
    for name in args.view or ([] if args.table else r.registry.names()):
        record = r.registry.get(name)
        if record is None or record.current is None:
            raise ArtifactError(
                f"view {name}: {'not registered' if record is None else 'pending'}",
                hint="icetide views list shows the views and what they wait for",
            )
        major, minor = column_history_versions([v.columns for v in record.versions])[-1]
        wheel = build_wheel(package_files(r.view_shape(record), f"{major}.{minor}.0"), out)
        built.append({"kind": "view", "name": record.name, "wheel": str(wheel)})
    if args.output == "json":
        print(json.dumps(built, indent=2))
    else:
        for b in built:
            print(f"{b['kind']:<5} {b['name']:<30} {b['wheel']}")
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    """Publish every table and view (only what changed), or the given tables."""
    from icetide.artifacts.refresh import RefreshReport, TableChanged
    from icetide.artifacts.workspace import publish_all, refresher

    pipeline = context.load_pipeline(args)
    config = pipeline.config
    index = _index(args, config)
    if args.all:
        report = publish_all(pipeline, index=index)
    else:
        report = RefreshReport()
        r = refresher(pipeline, index=index)
        for table in args.table:
            name = config.table(table).name
            one = r.refresh(TableChanged(name, pipeline.schemas.history(name).current.version))
            report.published += one.published
            report.views += one.views
    if args.table_properties:
        _set_properties(pipeline, args.table or [t.name for t in config.tables])
    published = [o for o in report.published if o.action == "published"]
    if args.output == "json":
        print(json.dumps({**report.to_dict(), "index": str(index)}, indent=2))
    else:
        for o in published:
            print(f"published {o.package}=={o.version} ({o.kind} {o.name})")
        unchanged = len(report.published) - len(published)
        print(f"{len(published)} published, {unchanged} unchanged, index {index}")
        for name in report.pending:
            print(f"view {name} is pending: an input is not known yet")
    return 0


def _set_properties(pipeline: object, tables: list[str]) -> None:
    from icetide.artifacts.properties import set_avro_literal
    from icetide.artifacts.shape import Naming
    from icetide.lake.tables import TableRefs
    from icetide.pipeline import Pipeline
    from icetide.spark.errors import jvm_boundary

    assert isinstance(pipeline, Pipeline)
    config = pipeline.config
    spark = context.spark_session(config)
    naming = Naming.from_config(config)
    with jvm_boundary("set avro.schema.literal"):
        for table in tables:
            name = config.table(table).name
            shape = naming.table(pipeline.schema(name))
            if set_avro_literal(spark, TableRefs.of(config, name).base, shape):
                log(f"{name}: avro.schema.literal set (schema version {shape.version})")


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the index folder with pypiserver until stopped."""
    index = Path(args.index).resolve() if args.index else None
    if index is None:
        from icetide.artifacts.workspace import index_folder

        index = index_folder(context.load_pipeline(args).config)
    index.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pypiserver", "run", "-p", str(args.port)]
    command += ["-i", args.host, "--disable-fallback", "--backend", "simple-dir", str(index)]
    url = f"http://{args.host}:{args.port}/simple/"
    if args.output == "json":
        print(json.dumps({"url": url, "index": str(index)}), flush=True)
    log(f"serving {index} at {url} (Ctrl-C stops)")
    process = subprocess.Popen(command)
    try:
        return process.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        # However this command ends (Ctrl-C, SIGTERM, an error), the server ends with it.
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


def cmd_list(args: argparse.Namespace) -> int:
    """List the published package versions."""
    from icetide.artifacts.index import LocalIndex

    index = Path(args.index).resolve() if args.index else None
    if index is None:
        from icetide.artifacts.workspace import index_folder

        index = index_folder(context.load_pipeline(args).config)
    entries = LocalIndex(index).entries()
    if args.output == "json":
        print(json.dumps([e.to_dict() for e in entries], indent=2))
    else:
        for e in entries:
            print(f"{e.package:<40} {e.version:<10} {e.kind:<5} {e.name} v{e.schema_version}")
        print(f"{len(entries)} package versions in {index}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``artifacts build|publish|serve|list``."""
    group = command_parser(
        sub,
        "artifacts",
        help="typed schema packages (Avro, dataclasses, Spark schema) of tables and views",
        example=(
            "icetide artifacts publish --all",
            "icetide artifacts serve --port 8765",
            "pip install --index-url http://127.0.0.1:8765/simple/ \\",
            '    "icetide-schema-shop-users==1.*"',
        ),
    )
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")

    def with_index(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--index", help="index folder (default: <state_dir>/artifacts/index)")
        return p

    p = with_output(
        with_config(
            command_parser(
                actions,
                "build",
                help="build the wheels of the current table and view versions",
                example=("icetide artifacts build --table users --out dist/",),
            )
        )
    )
    p.add_argument("--table", action="append", help="only this table (repeatable)")
    p.add_argument("--view", action="append", help="only this view (repeatable)")
    p.add_argument("--out", help="where to write (default: <state_dir>/artifacts/build)")
    p.set_defaults(func=cmd_build)

    p = with_index(
        with_output(
            with_config(
                command_parser(
                    actions,
                    "publish",
                    help="publish what changed: every table and view (--all) or tables",
                    description="Publish each table's schema versions and each view's as "
                    "package versions (additive change: minor; anything else: major). Only "
                    "packages whose generated content changed are built; safe to run twice, "
                    "and at once (a lock).",
                    example=(
                        "icetide artifacts publish --all",
                        "icetide artifacts publish --table users --output json",
                        "icetide artifacts publish --all --table-properties",
                    ),
                )
            )
        )
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--all", action="store_true", help="every table and view")
    which.add_argument("--table", action="append", help="this table and its views (repeatable)")
    p.add_argument(
        "--table-properties",
        action="store_true",
        help="also set avro.schema.literal on the base tables (starts Spark)",
    )
    p.set_defaults(func=cmd_publish)

    p = with_index(
        with_output(
            with_config(
                command_parser(
                    actions,
                    "serve",
                    help="serve the index with pypiserver (pip install --index-url …/simple/)",
                    description="Serve the index folder with pypiserver until stopped; "
                    "--output json prints the URL and folder as one JSON line first.",
                    example=("icetide artifacts serve --port 8765",),
                )
            )
        )
    )
    p.add_argument("--port", type=context.positive_int, required=True)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.set_defaults(func=cmd_serve)

    p = with_index(
        with_output(
            with_config(
                command_parser(
                    actions,
                    "list",
                    help="list the published package versions",
                    example=("icetide artifacts list --output json",),
                )
            )
        )
    )
    p.set_defaults(func=cmd_list)
