"""``icetide demo``: the whole pipeline on a private database, verified at the end."""

from __future__ import annotations

import argparse
from pathlib import Path

from icetide.cli.context import command_parser, log, positive_int, positive_seconds


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the whole pipeline on a private MariaDB (or generated events) and verify it."""
    if args.synthetic:
        from icetide.demo.run import run_demo

        ok = run_demo(Path(args.workdir), events=args.events, seed=args.seed, log=log)
    else:
        from icetide.demo.live import run_live_demo

        ok = run_live_demo(Path(args.workdir), seconds=args.seconds, seed=args.seed, log=log)
    return 0 if ok else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo``."""
    p = command_parser(
        sub,
        "demo",
        help="capture a live private MariaDB into Iceberg and verify the mirror",
        description="Start a private MariaDB, write to it while icetide bootstraps, captures, "
        "streams and merges, then verify every base table against the source. "
        "--synthetic runs the generated-event demo instead (no database).",
        example=(
            "icetide demo",
            "icetide demo --seconds 20 --workdir /tmp/demo",
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
        "--synthetic", action="store_true", help="generated Debezium events, no database"
    )
    p.add_argument(
        "--events", type=positive_int, default=3000, help="--synthetic: events to generate"
    )
    p.set_defaults(func=cmd_demo)
