"""``icetide demo``: the whole pipeline on a private database, verified at the end."""

from __future__ import annotations

import argparse
from pathlib import Path

from icetide.cli import context
from icetide.cli.context import command_parser, log, positive_int, positive_seconds
from icetide.errors import IcetideError


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the whole pipeline on a private MariaDB (or generated events) and verify it."""
    if args.synthetic:
        from icetide.demo.run import run_demo

        ok = run_demo(Path(args.workdir), events=args.events, seed=args.seed, log=log)
        return 0 if ok else 1
    from icetide.demo.live import run_live_demo

    if args.keep_running and not args.lakehouse:
        raise IcetideError("--keep-running keeps the lakehouse servers up", hint="add --lakehouse")
    if not args.lakehouse:
        ok = run_live_demo(Path(args.workdir), seconds=args.seconds, seed=args.seed, log=log)
        return 0 if ok else 1
    from icetide.demo.lakehouse import private_lakehouse

    with private_lakehouse(log) as lakehouse:
        # The store's key is in no line printed from here on, whoever formats it.
        if context.state.scrub is not None:
            context.state.scrub.add([lakehouse.store.access_key, lakehouse.store.secret_key])
        ok = run_live_demo(
            Path(args.workdir),
            seconds=args.seconds,
            seed=args.seed,
            log=log,
            lakehouse=lakehouse,
            secrets=context.state.scrub.add if context.state.scrub else lambda _values: None,
        )
        if args.keep_running:
            _hold(lakehouse.catalog_uri)
    log("demo: the object store and the REST catalog stopped; their data is gone")
    return 0 if ok else 1


def _hold(catalog_uri: str) -> None:
    """Keep the servers up until Ctrl-C (or SIGTERM)."""
    from icetide.stopping import Stopped

    stop = context.state.stop
    stop.defer()
    log(
        f"demo: the REST catalog at {catalog_uri} and its object store keep running; "
        "Ctrl-C stops them"
    )
    try:
        while True:
            stop.wait(3600)
    except Stopped:
        pass


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo``."""
    p = command_parser(
        sub,
        "demo",
        help="capture a live private MariaDB into Iceberg and verify the mirror",
        description="Start a private MariaDB, write to it while icetide bootstraps, captures, "
        "streams and merges, then verify every base table against the source. "
        "--lakehouse keeps the tables on a private Iceberg REST catalog and S3 object store "
        "(the production shape) instead of a folder; --synthetic runs the generated-event "
        "demo instead (no database).",
        example=(
            "icetide demo",
            "icetide demo --seconds 20 --workdir /tmp/demo",
            "icetide demo --lakehouse --keep-running",
            "icetide demo --synthetic",
        ),
    )
    p.add_argument("--workdir", default="icetide-demo", help="folder for the demo's files")
    p.add_argument(
        "--seconds",
        type=positive_seconds,
        default=45,
        help="how long the live workload writes (default 45)",
    )
    p.add_argument("--seed", type=int, default=7, help="random seed of the workload")
    p.add_argument(
        "--lakehouse",
        action="store_true",
        help="tables on a private REST catalog whose warehouse is a private S3 object store "
        "(SeaweedFS; needs `weed`, built by scripts/install.sh --tests)",
    )
    p.add_argument(
        "--keep-running",
        action="store_true",
        help="--lakehouse: keep the catalog and the store up after the demo, until Ctrl-C, "
        "to read the tables with PyIceberg or other icetide commands",
    )
    p.add_argument(
        "--synthetic", action="store_true", help="generated Debezium events, no database"
    )
    p.add_argument(
        "--events", type=positive_int, default=3000, help="--synthetic: events to generate"
    )
    p.set_defaults(func=cmd_demo)
