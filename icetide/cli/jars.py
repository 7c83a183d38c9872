"""``icetide jars fetch|list``: the JVM packages Spark needs, by Maven coordinates."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from icetide.cli.context import DEFAULT_CONFIG, command_parser, log, with_output


def _packages_and_folder(args: argparse.Namespace) -> tuple[list[str], Path]:
    """The config's ``spark.packages`` and ``spark.jars_dir`` when a config is given or
    present, else the defaults (``scripts/install.sh`` runs this before any config)."""
    from icetide.spark import jars as maven

    config_path = Path(args.config) if args.config else Path(DEFAULT_CONFIG)
    if args.config or config_path.is_file():
        from icetide.config import load_config

        config = load_config(config_path)
        spark = config.spark
        io_impl = config.catalog.properties_plain().get("io-impl")
        packages = list(maven.pipeline_packages(spark.packages, io_impl))
        folder = maven.jars_folder(spark.jars_dir)
    else:
        packages, folder = list(maven.DEFAULT_PACKAGES), maven.jars_folder(None)
    if args.dir:
        folder = Path(args.dir).expanduser()
    return packages, folder


def cmd_jars_fetch(args: argparse.Namespace) -> int:
    """Resolve every package missing from the jar folder with Maven."""
    from icetide.spark import jars as maven
    from icetide.spark.local_fs import PACKAGE as LOCAL_FS_PACKAGE

    packages, folder = _packages_and_folder(args)
    if args.dev:
        packages = [*packages, *maven.DEV_PACKAGES]
    coordinates = [maven.Coordinate.parse(p) for p in packages]
    log(f"jars: resolving {len(coordinates)} package(s) into {folder} with Maven …")
    done = maven.fetch(coordinates, folder)
    for coordinate in coordinates:
        state = "fetched" if coordinate in done else "already there"
        log(f"  {coordinate}: {state}")
    # Wanted, not needed: without it sessions use Hadoop's own file system, only slower.
    local_fs = maven.Coordinate.parse(LOCAL_FS_PACKAGE)
    try:
        state = "fetched" if maven.fetch([local_fs], folder) else "already there"
    except maven.FetchError as error:
        state = f"not fetched, sessions use Hadoop's own file system (slower): {error}"
    log(f"  {local_fs}: {state}")
    if args.dev:
        # The test REST catalog's classpath names classifier jars (its test fixtures),
        # which a package coordinate cannot: it has its own Maven resolution.
        from icetide.devservers import rest_catalog

        fresh = rest_catalog.fetch_server_jars(folder)
        log(
            f"  {rest_catalog.SERVER_JARS} (Iceberg REST catalog server): "
            + ("fetched" if fresh else "already there")
        )
    return 0


def cmd_jars_list(args: argparse.Namespace) -> int:
    """Show each package, whether it is fetched, and the jars it puts on the classpath."""
    from icetide.spark import jars as maven
    from icetide.spark.local_fs import PACKAGE as LOCAL_FS_PACKAGE

    packages, folder = _packages_and_folder(args)
    provided = maven.spark_home_jars()
    rows: list[dict[str, Any]] = []
    for text in [*packages, LOCAL_FS_PACKAGE]:
        coordinate = maven.Coordinate.parse(text)
        got = maven.fetched(folder, coordinate)
        rows.append(
            {
                "package": str(coordinate),
                "fetched": got is not None,
                "jars": [str(j) for j in maven.classpath(got or [], provided)],
            }
        )
    if args.output == "json":
        print(json.dumps({"folder": str(folder), "packages": rows}, indent=2))
        return 0
    print(f"jar folder: {folder}")
    width = max(len(r["package"]) for r in rows) if rows else 0
    for row in rows:
        state = f"{len(row['jars'])} jar(s)" if row["fetched"] else "missing: icetide jars fetch"
        print(f"  {row['package']:<{width}}  {state}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``jars`` group."""
    p = sub.add_parser("jars", help="JVM packages (Maven coordinates) fetched for Spark")
    jars_sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "-c",
            "--config",
            default=os.environ.get("ICETIDE_CONFIG"),
            help="pipeline YAML whose spark.packages to use (default: ./icetide.yaml if "
            "present, else the default packages)",
        )
        p.add_argument(
            "--dir",
            help="jar folder (default: spark.jars_dir, $ICETIDE_JARS_DIR or ~/.cache/icetide/jars)",
        )
        return p

    p = common(
        command_parser(
            jars_sub,
            "fetch",
            help="resolve the configured JVM packages with Maven into the jar folder",
            description="Resolve spark.packages (Iceberg runtime, Spark's Kafka source, "
            "spark-avro, JDBC drivers by default) with Maven as this machine is set up "
            "(~/.m2/settings.xml is honoured; no repository is named by icetide), once, "
            "into the jar folder that Spark sessions read. Already fetched packages are "
            "skipped.",
            example=(
                "icetide jars fetch",
                "icetide jars fetch -c shop.yaml --dir /opt/jars",
                "icetide jars fetch --dev",
            ),
        )
    )
    p.add_argument(
        "--dev",
        action="store_true",
        help="also fetch the servers tests start (the Kafka broker, Kafka Connect, the Iceberg "
        "REST catalog), never put on Spark's path by a config",
    )
    p.set_defaults(func=cmd_jars_fetch)

    p = with_output(
        common(
            command_parser(
                jars_sub,
                "list",
                help="show each JVM package and the jars it adds to spark.jars",
                example=("icetide jars list", "icetide jars list --output json"),
            )
        )
    )
    p.set_defaults(func=cmd_jars_list)
