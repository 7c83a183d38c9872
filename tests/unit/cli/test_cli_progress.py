"""``--progress json`` turns every stage's progress into one JSON line per record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icetide import cli
from icetide.cli import context
from icetide.config.example import write_example


@pytest.mark.parametrize("mode", ["text", "json"])
def test_progress_goes_to_stderr_as_text_or_json_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    write_example(tmp_path)
    args = cli.build_parser().parse_args(
        ["merge", "-c", str(tmp_path / "icetide.yaml"), "--progress", mode]
    )
    pipeline = context.load_pipeline(args)
    pipeline.report("merge", "merge customers: 2 events", table="customers", events=2)
    out, err = capsys.readouterr()
    assert out == ""
    if mode == "text":
        assert err == "merge customers: 2 events\n"
    else:
        assert json.loads(err) == {
            "stage": "merge",
            "message": "merge customers: 2 events",
            "table": "customers",
            "events": 2,
        }
