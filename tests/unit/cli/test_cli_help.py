"""Every command's ``--help`` shows at least one example invocation of that command."""

from __future__ import annotations

import argparse

import pytest

from icetide.cli import build_parser


def _commands(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                path = (*prefix, name)
                nested = _commands(child, path)
                found.extend(nested or [(path, child)])
    return found


@pytest.mark.parametrize(
    ("path", "parser"),
    _commands(build_parser()),
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else "",
)
def test_every_command_help_has_an_example(
    path: tuple[str, ...], parser: argparse.ArgumentParser
) -> None:
    text = parser.format_help()
    assert "examples:" in text, f"icetide {' '.join(path)} --help has no examples"
    example_lines = text.split("examples:", 1)[1].splitlines()
    assert any(line.strip().startswith("icetide " + " ".join(path)) for line in example_lines)
