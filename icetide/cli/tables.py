"""Aligned tables for people on a terminal (Rich); the plain renderings stay for pipes.

``status`` and ``verify`` print their plain text when stdout is not a terminal (scripts,
logs, tests read it), and a Rich table when it is.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any


def on_terminal() -> bool:
    """True when stdout is a terminal (Rich tables), False for pipes and files."""
    return sys.stdout.isatty()


def print_table(
    title: str, columns: Sequence[tuple[str, str]], rows: Sequence[Mapping[str, Any]]
) -> None:
    """One Rich table: ``columns`` are (key, header); numbers right-aligned."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for key, header in columns:
        numeric = any(isinstance(r.get(key), int | float) for r in rows)
        table.add_column(header, justify="right" if numeric else "left")
    for row in rows:
        table.add_row(*(_cell(row.get(key)) for key, _ in columns))
    Console().print(table)


def _cell(value: Any) -> str:
    """``1234`` → ``1,234``; None → ``-``; booleans as yes/no.

    >>> _cell(1234), _cell(None), _cell(True), _cell("x")
    ('1,234', '-', 'yes', 'x')
    """
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


STATUS_COLUMNS = (
    ("table", "table"),
    ("freshness", "freshness"),
    ("ledger_events", "ledger"),
    ("base_rows", "base rows"),
    ("lag_events", "lag"),
    ("dead_letters", "dead"),
    ("watermark", "watermark"),
)
VERIFY_COLUMNS = (
    ("table", "table"),
    ("source", "source"),
    ("source_rows", "source rows"),
    ("base_rows", "base rows"),
    ("matches", "matches"),
    ("missing", "missing"),
    ("extra", "extra"),
    ("different", "different"),
)
