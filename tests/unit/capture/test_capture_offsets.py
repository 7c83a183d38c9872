"""The capture offset file: atomic save, round trip, and clear errors when it is bad."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from icetide.capture.mysql.reader import BinlogOffset
from icetide.capture.offsets import FORMAT, OffsetFileError, OffsetStore
from icetide.errors import Terminal
from icetide.faults import KILLED_EXIT_CODE

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    # A folder that does not exist yet, as in a fresh state_dir.
    return tmp_path / "state" / "capture" / "shop.offset.json"


def test_missing_file_means_never_saved(path: Path) -> None:
    assert OffsetStore(path).load() is None
    assert OffsetStore(path).read() is None


def test_round_trip_with_header(path: Path) -> None:
    store = OffsetStore(path, source_type="mysql")
    offset = BinlogOffset("mysql-bin.000003", 1234, "0-1-42")
    before = datetime.now(UTC)
    store.save(offset)
    assert BinlogOffset.from_dict(OffsetStore(path).load() or {}) == offset
    document = json.loads(path.read_text())
    assert document["format"] == FORMAT
    assert (document["source"], document["type"]) == ("shop", "mysql")
    assert document["position"] == offset.text
    assert document["offset"] == {"file": "mysql-bin.000003", "pos": 1234, "gtid": "0-1-42"}
    saved_at = datetime.fromisoformat(document["saved_at"].replace("Z", "+00:00"))
    assert before - timedelta(seconds=1) <= saved_at <= datetime.now(UTC)
    assert sorted(os.listdir(path.parent)) == ["shop.offset.json"]  # no temp left


def test_save_a_dict_with_its_position_text(path: Path) -> None:
    store = OffsetStore(path)
    store.save({"lsn": "0/16B3748"}, position="0/16B3748")
    saved = store.read()
    assert saved is not None
    assert (saved.offset, saved.position, saved.source) == (
        {"lsn": "0/16B3748"},
        "0/16B3748",
        "shop",
    )


def test_a_save_replaces_the_previous_offset(path: Path) -> None:
    store = OffsetStore(path)
    for pos in (4, 120, 9000):
        store.save(BinlogOffset("b.000001", pos))
    assert store.load() == {"file": "b.000001", "pos": 9000, "gtid": None}


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "not JSON"),
        (b'{"format": "icetide.capture.offset/1", "source": "shop", "off', "not JSON"),
        (b"\xff\xfe garbage", "not JSON"),
        (b"[1, 2]", "JSON list"),
        (b'{"file": "mysql-bin.000003", "pos": 4}', "no 'format' field"),
        (b'{"format": "icetide.capture.offset/9", "source": "shop", "offset": {}}', "format"),
        (b'{"format": "icetide.capture.offset/1", "source": "shop"}', "'offset' field"),
        (b'{"format": "icetide.capture.offset/1", "offset": {}}', "'source' field"),
    ],
)
def test_a_corrupt_file_is_a_clear_error(path: Path, content: bytes, why: str) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(OffsetFileError) as info:
        OffsetStore(path).load()
    error = info.value
    assert isinstance(error, Terminal) and error.path == path
    assert str(path) in error.message and "corrupt" in error.message and why in error.message
    assert error.hint and "delete it" in error.hint and "Restore" in error.hint


def test_another_sources_file_is_refused(path: Path) -> None:
    OffsetStore(path, source="other", source_type="mysql").save({"pos": 1}, position="1")
    with pytest.raises(OffsetFileError, match="belongs to source 'other'"):
        OffsetStore(path).load()
    OffsetStore(path, source_type="mysql").save({"pos": 1})
    with pytest.raises(OffsetFileError, match=r"\(mysql\), not 'shop' \(postgres\)"):
        OffsetStore(path, source_type="postgres").load()


def test_a_crash_during_save_keeps_the_previous_offset(path: Path) -> None:
    OffsetStore(path).save(BinlogOffset("b.000001", 100))
    script = textwrap.dedent(
        """
        import sys
        from icetide.capture.mysql.reader import BinlogOffset
        from icetide.capture.offsets import OffsetStore
        OffsetStore(sys.argv[1]).save(BinlogOffset("b.000001", 200))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "ICETIDE_FAULT": "capture.offsets.before_rename"}
    child = subprocess.run([sys.executable, "-c", script, str(path)], env=env, cwd=REPO)
    assert child.returncode == KILLED_EXIT_CODE
    # The new offset was written and synced to the temp file, but the file is the old one.
    (temp,) = path.parent.glob(f".{path.name}.*.tmp")  # the killed writer's temp file
    assert json.loads(temp.read_text())["offset"]["pos"] == 200
    assert OffsetStore(path).load() == {"file": "b.000001", "pos": 100, "gtid": None}
    OffsetStore(path).save(BinlogOffset("b.000001", 300))  # a later save just works
    assert OffsetStore(path).load() == {"file": "b.000001", "pos": 300, "gtid": None}
    assert not temp.exists()  # a later writer removes what a dead one left
