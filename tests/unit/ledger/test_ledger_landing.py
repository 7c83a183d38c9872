"""The landing-folder watch: files changed after they were read, names the source skips."""

from __future__ import annotations

import os
from pathlib import Path

from icetide.ledger.landing import LandingWatch, Receipt, changed_files
from icetide.progress import Reporter


def receipt_of(path: Path) -> Receipt:
    stat = path.stat()
    return Receipt(path.name, stat.st_size, stat.st_mtime_ns // 1_000_000, stat.st_size)


def test_a_file_changed_after_it_was_read_is_warned_once_and_remembered(tmp_path: Path) -> None:
    landing, state = tmp_path / "landing", tmp_path / "state"
    landing.mkdir()
    done = landing / "a.json"
    done.write_text('{"a": 1}\n')
    logs: list[str] = []
    watch = LandingWatch(landing, state, Reporter(Reporter.lines(logs)))
    assert watch.record([receipt_of(done)]) == []
    assert watch.check() == [] and logs == []

    with done.open("a") as out:
        out.write('{"a": 2}\n')
    os.utime(done, ns=(0, done.stat().st_mtime_ns + 5_000_000))
    [change] = watch.check()
    assert change.file == "a.json" and change.length > change.read_length
    assert len(logs) == 1 and "a.json changed after it was read" in logs[0]
    assert watch.check() == [] and len(logs) == 1  # the same change is told once

    # A new run (new watch) remembers both what was read and what was already told.
    again = LandingWatch(landing, state, Reporter(Reporter.lines(logs)))
    assert again.check() == [] and len(logs) == 1
    assert [c.file for c in changed_files(state)] == ["a.json"]


def test_a_file_that_grew_while_it_was_read_is_a_change(tmp_path: Path) -> None:
    logs: list[str] = []
    watch = LandingWatch(tmp_path, tmp_path / "state", Reporter(Reporter.lines(logs)))
    [change] = watch.record([Receipt("b.json", 10, 1, 25)])
    assert (change.read_length, change.length) == (10, 25)
    assert watch.record([Receipt("b.json", 10, 1, 25)]) == []  # a replayed batch


def test_removed_files_are_not_changes(tmp_path: Path) -> None:
    watch = LandingWatch(tmp_path, tmp_path / "state", Reporter())
    watch.record([Receipt("gone.json", 3, 1, 3)])
    assert watch.check() == []


def test_skipped_names_are_logged_once_per_run_but_not_capture_temp_files(
    tmp_path: Path,
) -> None:
    for name in ("_part.json", ".hidden.json", ".shop-1.json.tmp", ".shop.lock", "ok.json"):
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "2024").mkdir()
    logs: list[str] = []
    watch = LandingWatch(tmp_path, tmp_path / "state", Reporter(Reporter.lines(logs)))
    assert watch.skipped() == [".hidden.json", "2024", "_part.json"]
    assert watch.skipped() == []
    assert len(logs) == 3 and any("sub-folder" in line for line in logs)
