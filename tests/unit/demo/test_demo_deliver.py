"""deliver(): atomic NDJSON files, duplicates, shuffling, redelivery, noise, numbering."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from icetide.demo import workload as workload_module
from icetide.demo.workload import Workload, deliver, generate, next_index
from icetide.events.envelope import decode_message
from icetide.events.model import ChangeEvent, Skipped

NAME = re.compile(r"^events-\d{6}\.json$")


def lines_of(paths: list[Path]) -> list[str]:
    return [line for p in paths for line in p.read_text(encoding="utf-8").splitlines()]


def event_lines(workload: Workload) -> list[str]:
    """Each event's line as deliver() writes it (compact JSON)."""
    return [json.dumps(e.message, separators=(",", ":")) for e in workload.events]


@pytest.fixture(scope="module")
def small() -> Workload:
    return generate(17, 400)


def test_files_appear_only_under_final_names(
    small: Workload, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    renames: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: Any, dst: Any) -> None:
        assert Path(src).exists() and not Path(dst).exists()
        renames.append((Path(src).name, Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(workload_module.os, "replace", spy)
    paths = deliver(small, tmp_path, seed=1, files=4)
    assert [p.name for p in paths] == [f"events-{i:06d}.json" for i in range(1, 5)]
    assert renames == [(f".{p.name}.tmp", p.name) for p in paths]  # written hidden, renamed
    assert sorted(p.name for p in tmp_path.iterdir()) == [p.name for p in paths]
    assert all(NAME.match(p.name) for p in paths)
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert text.endswith("\n")
        assert all(json.loads(line) for line in text.splitlines())


def test_every_event_at_least_once_and_duplicates_at_the_rate(
    small: Workload, tmp_path: Path
) -> None:
    paths = deliver(small, tmp_path, seed=2, files=3, duplicate_rate=0.1)
    landed = Counter(lines_of(paths))
    wanted = Counter(event_lines(small))
    assert set(landed) == set(wanted)
    extra = sum(landed.values()) - sum(wanted.values())
    assert extra == round(len(small.events) * 0.1)
    assert all(landed[line] - wanted[line] in (0, 1) for line in wanted)


def test_no_duplicates_and_no_shuffle_keeps_source_order(small: Workload, tmp_path: Path) -> None:
    paths = deliver(small, tmp_path, seed=3, files=3, duplicate_rate=0.0, shuffle=False)
    assert lines_of(paths) == event_lines(small)


def test_unshuffled_duplicates_land_after_their_original(small: Workload, tmp_path: Path) -> None:
    landed = lines_of(deliver(small, tmp_path, seed=4, duplicate_rate=0.3, shuffle=False))
    originals = [line for i, line in enumerate(landed) if line not in landed[:i]]
    assert originals == event_lines(small)


def test_shuffle_changes_the_order_but_not_the_lines(small: Workload, tmp_path: Path) -> None:
    ordered = lines_of(deliver(small, tmp_path / "a", seed=5, duplicate_rate=0.0, shuffle=False))
    shuffled = lines_of(deliver(small, tmp_path / "b", seed=5, duplicate_rate=0.0))
    assert shuffled != ordered and sorted(shuffled) == sorted(ordered)


def test_same_seed_same_files(small: Workload, tmp_path: Path) -> None:
    first = deliver(small, tmp_path / "a", seed=6, noise=True, redeliver_all=True)
    again = deliver(small, tmp_path / "b", seed=6, noise=True, redeliver_all=True)
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in again]
    other = deliver(small, tmp_path / "c", seed=7, noise=True, redeliver_all=True)
    assert [p.read_bytes() for p in first] != [p.read_bytes() for p in other]


def test_redeliver_all_sends_the_whole_stream_again(small: Workload, tmp_path: Path) -> None:
    paths = deliver(small, tmp_path, seed=8, files=3, duplicate_rate=0.05, redeliver_all=True)
    assert len(paths) == 6
    assert Counter(lines_of(paths[3:])) == Counter(event_lines(small))
    assert set(lines_of(paths[:3])) == set(event_lines(small))


def test_noise_is_tombstones_and_transaction_markers(small: Workload, tmp_path: Path) -> None:
    paths = deliver(small, tmp_path, seed=9, duplicate_rate=0.0, shuffle=False, noise=True)
    kinds: Counter[str] = Counter()
    forms: Counter[tuple[str, bool]] = Counter()
    statuses: Counter[str] = Counter()
    for line in lines_of(paths):
        decoded = decode_message(line)
        if isinstance(decoded, ChangeEvent):
            kinds["row"] += 1
            continue
        assert isinstance(decoded, Skipped)
        kinds[decoded.kind] += 1
        doc = json.loads(line)
        forms[decoded.kind, isinstance(doc, dict) and "schema" in doc] += 1
        if decoded.kind == "transaction":
            statuses[decoded.detail["status"]] += 1
    transactions = {e.tx_id for e in small.events if e.tx_id is not None}
    deletes = sum(e.op == "d" for e in small.events)
    assert kinds == {
        "row": len(small.events),
        "tombstone": deletes,
        "transaction": 2 * len(transactions),
    }
    assert statuses == {"BEGIN": len(transactions), "END": len(transactions)}
    assert all(
        forms[kind, wrapped] > 0
        for kind in ("tombstone", "transaction")
        for wrapped in (True, False)
    )


def test_markers_frame_their_transaction(small: Workload, tmp_path: Path) -> None:
    paths = deliver(small, tmp_path, seed=10, duplicate_rate=0.0, shuffle=False, noise=True)
    open_tx: str | None = None
    inside = 0
    for line in lines_of(paths):
        decoded = decode_message(line)
        if isinstance(decoded, ChangeEvent):
            # Snapshot reads belong to no transaction (the decoder may still name PG's txId).
            assert (None if decoded.snapshot else decoded.tx_id) == open_tx
            inside += 1
        elif decoded.kind == "transaction":
            if decoded.detail["status"] == "BEGIN":
                assert open_tx is None
                open_tx, inside = decoded.detail["id"], 0
            else:
                assert decoded.detail["id"] == open_tx
                assert decoded.detail["event_count"] == inside
                open_tx = None
    assert open_tx is None


def test_numbering_continues_and_never_overwrites(small: Workload, tmp_path: Path) -> None:
    first = deliver(small, tmp_path, seed=11, files=2)
    second = deliver(small, tmp_path, seed=12, files=3)  # default: after the highest
    assert [p.name for p in first + second] == [f"events-{i:06d}.json" for i in range(1, 6)]
    third = deliver(small, tmp_path, seed=13, files=1, start_index=9)
    assert third[0].name == "events-000009.json"
    assert next_index(tmp_path) == 10
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(FileExistsError):
        deliver(small, tmp_path, seed=14, files=4, start_index=7)  # 7, 8 free; 9 taken
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_bad_arguments(small: Workload, tmp_path: Path) -> None:
    for bad in ({"files": 0}, {"duplicate_rate": 1.5}, {"start_index": 0}):
        with pytest.raises(ValueError):
            deliver(small, tmp_path, seed=1, **bad)
