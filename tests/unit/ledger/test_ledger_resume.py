"""The ledger's saved Kafka position: written after each batch, read when the Spark
checkpoint is gone, and every partition subscribed now given a start."""

from __future__ import annotations

from pathlib import Path

import pytest

from icetide.ledger.resume import (
    EARLIEST,
    FILE,
    LedgerResumeError,
    batch_end_offsets,
    load_position,
    save_position,
    starting_offsets,
)
from icetide.state.store import LocalStore


def test_the_position_saved_is_the_one_read_back(tmp_path: Path) -> None:
    file = LocalStore(tmp_path).file(FILE)
    assert load_position(file) is None
    save_position(file, 7, {"s.db.t": {"0": 12, "1": 3}})
    save_position(file, 8, {"s.db.t": {"0": 15, "1": 3}})
    assert load_position(file) == {"s.db.t": {"0": 15, "1": 3}}
    assert [p.name for p in (tmp_path / "ledger").iterdir()] == ["kafka-offsets.json"]


def test_a_corrupt_position_names_the_file_and_what_to_do(tmp_path: Path) -> None:
    file = LocalStore(tmp_path).file(FILE)
    file.write(b"{not json")
    with pytest.raises(LedgerResumeError) as error:
        load_position(file)
    assert error.value.where == str(tmp_path / FILE)
    assert f"delete {tmp_path / FILE} to start from transport.starting_offsets" in str(
        error.value.hint
    )


def test_the_batch_end_is_the_kafka_source_line_of_sparks_offset_log(tmp_path: Path) -> None:
    log = tmp_path / "offsets"
    log.mkdir()
    (log / "0").write_text(
        'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"a":{"1":4,"0":9}}'
    )
    (log / "1").write_text("v1\n{}\n")  # a source line not written: nothing to save
    assert batch_end_offsets(tmp_path, 0) == {"a": {"1": 4, "0": 9}}
    assert batch_end_offsets(tmp_path, 1) is None


def test_every_partition_subscribed_now_gets_a_start() -> None:
    saved = {"a": {"0": 9, "1": 4}, "dropped": {"0": 2}}
    assert starting_offsets(saved, {"a": [1, 0, 2], "b": [0]}) == {
        "a": {"0": 9, "1": 4, "2": EARLIEST},
        "b": {"0": EARLIEST},
    }
