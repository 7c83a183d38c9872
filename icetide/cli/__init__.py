"""The ``icetide`` command: one entry point, a module per command group.

``main`` and ``build_parser`` live in :mod:`icetide.cli.main`; the shared plumbing
(stop requests, Spark start-up, argument helpers) in :mod:`icetide.cli.context`.
"""

from icetide.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
