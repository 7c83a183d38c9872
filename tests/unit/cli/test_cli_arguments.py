"""Bad command lines and unwritable targets end in one error line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from icetide.cli import build_parser, main


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["demo", "--synthetic", "--events", "-5"], "--events: must be at least 1, not -5"),
        (["demo", "--synthetic", "--events", "many"], "--events: 'many' is not a whole number"),
        (["demo", "--seconds", "-1"], "--seconds: must be a number of seconds above 0"),
        (["demo", "--seconds", "nan"], "--seconds: must be a number of seconds above 0"),
        (["bootstrap", "--chunk-rows", "0"], "--chunk-rows: must be at least 1, not 0"),
    ],
)
def test_numeric_arguments_are_checked_by_the_parser(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert complaint in err and "Traceback" not in err


def test_init_into_a_file_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = tmp_path / "icetide.yaml"
    existing.write_text("pipeline: mine\n")
    assert main(["init", str(existing)]) == 2
    err = capsys.readouterr().err
    assert f"icetide: error: {existing} is a file, not a folder" in err
    assert "Traceback" not in err
    assert existing.read_text() == "pipeline: mine\n"


def test_init_into_an_unwritable_folder_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    # A folder below a file cannot be created, even by root (who ignores permissions).
    assert main(["init", str(blocker / "pipeline")]) == 2
    err = capsys.readouterr().err
    assert "icetide: error: cannot write" in err and "hint:" in err
    assert "Traceback" not in err


def test_verify_without_sources_says_so_before_starting_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", str(tmp_path)]) == 0  # the example config has no sources
    capsys.readouterr()
    assert main(["verify", "-c", str(tmp_path / "icetide.yaml")]) == 2
    err = capsys.readouterr().err
    assert "has no sources to verify against" in err
    assert "starting Spark" not in err
