"""The landing-files transport: whole files, names in position order, crash safety.

A "reader" here lists the landing folder the way Spark's file source does (names starting
with ``.`` or ``_`` are ignored) and numbers lines like ``file_messages`` (``file:line``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from icetide.capture.errors import CaptureError
from icetide.capture.record import CaptureRecord
from icetide.capture.transport import files as files_module
from icetide.capture.transport import open_transport
from icetide.capture.transport.files import FilesTransport, LandingFolderError
from icetide.config.model import Config
from icetide.errors import Terminal
from icetide.events.envelope import Skipped, decode_message
from icetide.events.position import Position
from icetide.faults import KILLED_EXIT_CODE

REPO = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class _Offset:
    at: int

    @property
    def text(self) -> str:
        return f"log:{self.at}"

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at}


def change(key: int, row_id: int = 1, name: str = "x") -> CaptureRecord:
    """A change record at position ``key`` for row ``row_id``."""
    value = {
        "before": None,
        "after": {"id": row_id, "name": name},
        "source": {"name": "shop", "db": "shop", "table": "customers"},
        "op": "c",
        "ts_ms": 1,
    }
    return CaptureRecord(
        "change",
        "shop",
        "customers",
        {"id": row_id},
        value,
        Position(key, "binlog", f"pos {key}"),
        _Offset(key),
    )


def visible(landing: Path) -> list[str]:
    """File names a Spark file source would list, in name order."""
    return sorted(n for n in os.listdir(landing) if not n.startswith((".", "_")))


def messages(landing: Path) -> list[tuple[str, str]]:
    """(message_id, raw) as ``file_messages`` makes them, over the visible files in name
    order."""
    out = []
    for name in visible(landing):
        text = (landing / name).read_text(encoding="utf-8")
        for number, raw in enumerate(text.split("\n"), start=1):
            if raw.strip():
                out.append((f"{name}:{number}", raw))
    return out


def hidden(landing: Path) -> list[str]:
    return sorted(n for n in os.listdir(landing) if n.endswith(".tmp"))


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    return tmp_path / "landing"


def test_lines_are_exactly_the_records_json(landing: Path) -> None:
    # Newlines, quotes, non-ASCII and U+2028 inside values must not break the lines.
    names = ["plain", 'quote " and \\ backslash', "line\nbreak\r\n", "naïve ☃ 日本", "sep\u2028x"]
    records = [change(100 + i, i, name) for i, name in enumerate(names)]
    with FilesTransport(landing, "shop") as transport:
        for record in records:
            transport.send(record)
        transport.flush()
    (name,) = visible(landing)
    assert name.startswith("shop-" + "0" * 35 + "100-") and name.endswith(".json")
    assert messages(landing) == [(f"{name}:{i}", r.to_json()) for i, r in enumerate(records, 1)]
    assert [json.loads(raw)["after"]["name"] for _, raw in messages(landing)] == names


def test_nothing_is_visible_before_flush(landing: Path) -> None:
    with FilesTransport(landing, "shop") as transport:
        transport.send(change(1))
        assert visible(landing) == []
        (temp,) = hidden(landing)
        assert temp.startswith(".shop-")
        transport.flush()
        assert len(visible(landing)) == 1 and hidden(landing) == []


def test_empty_flush_writes_nothing(landing: Path) -> None:
    with FilesTransport(landing, "shop") as transport:
        transport.flush()
        transport.send(change(1))
        transport.flush()
        transport.flush()
        assert transport.files_written == 1
    assert len(visible(landing)) == 1


def test_names_sort_in_position_order_across_many_rolls(landing: Path) -> None:
    # Keys cross digit-count boundaries: unpadded numbers would sort 10 before 9.
    keys = sorted({k * m for k in range(1, 40) for m in (1, 7, 10**5, 10**20, 10**36)})
    records = [change(k, k % 5) for k in keys]
    with FilesTransport(landing, "shop", roll_bytes=600) as transport:
        for record in records:
            transport.send(record)
            if transport.should_flush():
                transport.flush()
        transport.flush()
        rolls = transport.files_written
    assert rolls == len(visible(landing)) > 20
    assert [raw for _, raw in messages(landing)] == [r.to_json() for r in records]
    firsts = [int(name.split("-")[1]) for name in visible(landing)]
    assert firsts == sorted(firsts)
    for name in visible(landing):
        # A file closes at the first record that reaches the size: at most one line over.
        assert (landing / name).stat().st_size < 600 + len(records[-1].to_json()) + 1


def test_roll_by_age_counts_from_the_first_record(landing: Path) -> None:
    now = [100.0]
    with FilesTransport(landing, "shop", roll_interval=2.0, clock=lambda: now[0]) as transport:
        now[0] += 10  # idle time before any record does not count
        assert not transport.should_flush()
        transport.send(change(1))
        now[0] += 1.9
        transport.send(change(2))
        assert not transport.should_flush()
        now[0] += 0.1
        assert transport.should_flush()
        transport.flush()
        assert not transport.should_flush()
        now[0] += 60
        assert not transport.should_flush()


def test_roll_by_age_with_a_real_clock(landing: Path) -> None:
    import time

    with FilesTransport(landing, "shop", roll_interval=0.01) as transport:
        transport.send(change(1))
        time.sleep(0.05)
        assert transport.should_flush()


def test_an_existing_file_is_never_overwritten(
    landing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suffixes = iter(["a", "a", "b"])
    monkeypatch.setattr(files_module, "unique_suffix", lambda: next(suffixes))
    landing.mkdir()
    taken = landing / files_module.landing_name("shop", 7, "a")
    taken.write_text("earlier run\n")
    with FilesTransport(landing, "shop") as transport:
        transport.send(change(7))
        transport.flush()
    assert taken.read_text() == "earlier run\n"
    assert visible(landing) == [taken.name, files_module.landing_name("shop", 7, "b")]


def test_close_without_flush_drops_the_open_file(landing: Path) -> None:
    transport = FilesTransport(landing, "shop")
    transport.send(change(1))
    transport.close()
    assert visible(landing) == [] and hidden(landing) == []
    with pytest.raises(CaptureError, match="closed"):
        transport.send(change(2))


def test_leftover_temp_files_of_this_source_are_removed_on_open(landing: Path) -> None:
    landing.mkdir()
    for name in (".shop-1-a.json.tmp", ".shop_eu-1-a.json.tmp", ".other-1-a.json.tmp"):
        (landing / name).write_text("never acknowledged\n")
    FilesTransport(landing, "shop").close()
    assert hidden(landing) == [".other-1-a.json.tmp", ".shop_eu-1-a.json.tmp"]


def test_one_writer_per_source_and_folder(landing: Path) -> None:
    with FilesTransport(landing, "shop"), FilesTransport(landing, "other"):
        with pytest.raises(LandingFolderError, match="another capture"):
            FilesTransport(landing, "shop")
    FilesTransport(landing, "shop").close()  # released on close


def test_a_capture_running_elsewhere_is_found_without_taking_the_lock(landing: Path) -> None:
    """``icetide run`` asks before it starts anything: refused while another writer holds
    the source's lock, and the check itself leaves the lock free."""
    with FilesTransport(landing, "shop"):
        with pytest.raises(LandingFolderError, match="another capture of source 'shop'"):
            files_module.check_landing_free(landing, "shop")
        files_module.check_landing_free(landing, "other")
    files_module.check_landing_free(landing, "shop")
    FilesTransport(landing, "shop").close()  # the check kept nothing


def test_a_source_name_spark_would_hide_is_refused(landing: Path) -> None:
    with pytest.raises(LandingFolderError) as info:
        FilesTransport(landing, "_shop")
    assert isinstance(info.value, Terminal)


def test_schema_changes_go_inline_and_the_ledger_skips_them(landing: Path) -> None:
    ddl = CaptureRecord(
        "schema_change",
        "shop",
        "customers",
        None,
        {
            "source": {"name": "shop", "db": "shop", "table": "customers", "file": "b.1"},
            "databaseName": "shop",
            "schemaName": None,
            "ddl": "ALTER TABLE customers ADD c INT",
            "tableChanges": [],
        },
        Position(2, "binlog", "pos 2"),
        _Offset(2),
    )
    with FilesTransport(landing, "shop") as transport:
        for record in (change(1), ddl, change(3)):
            transport.send(record)
        transport.flush()
    raws = [raw for _, raw in messages(landing)]
    assert raws[1] == ddl.to_json()
    decoded = decode_message(raws[1])
    assert isinstance(decoded, Skipped) and decoded.kind == "schema_change"


def test_open_transport_builds_files_from_config(tmp_path: Path) -> None:
    config = Config.model_validate(
        {
            "pipeline": "p",
            "transport": {"path": "in", "roll_bytes": 1, "roll_interval": "1h"},
            "sources": [{"name": "shop", "type": "mysql"}],
            "tables": [{"name": "customers", "source": "shop.customers"}],
        },
        context={"config_dir": tmp_path},
    )
    with open_transport(config, config.sources[0]) as transport:
        assert isinstance(transport, FilesTransport)
        assert transport.landing == tmp_path / "in"
        transport.send(change(1))
        assert transport.should_flush()  # roll_bytes: 1
        transport.flush()
    assert len(visible(tmp_path / "in")) == 1


# -- crashes, in a real child process -----------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, {tests!r})
    from test_capture_transport_files import change
    from icetide.capture.transport.files import FilesTransport

    landing, mode = sys.argv[1], sys.argv[2]
    transport = FilesTransport(landing, "shop")
    for key in range(1, 4):
        transport.send(change(key))
    transport.flush()  # durable: rows 1..3
    for key in range(4, 7):
        transport.send(change(key))
    if mode == "fault":
        os.environ["ICETIDE_FAULT"] = "capture.files.before_rename"
        transport.flush()  # dies after the fsync, before the rename
    else:
        transport._out.flush()  # the bytes are in the temp file, not yet renamed
        print("ready", flush=True)
        time.sleep(60)
    """
)


def _child(landing: Path, mode: str) -> subprocess.Popen[str]:
    script = _CHILD.format(tests=str(Path(__file__).parent))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("ICETIDE_FAULT", None)
    return subprocess.Popen(
        [sys.executable, "-c", script, str(landing), mode],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


def _assert_only_the_first_flush_is_visible(landing: Path) -> None:
    assert [raw for _, raw in messages(landing)] == [change(k).to_json() for k in (1, 2, 3)]


def test_crash_between_fsync_and_rename_shows_nothing_of_the_batch(landing: Path) -> None:
    child = _child(landing, "fault")
    assert child.wait(timeout=60) == KILLED_EXIT_CODE
    _assert_only_the_first_flush_is_visible(landing)
    (temp,) = hidden(landing)
    # The batch was fully written and synced, but a reader never sees it.
    assert (landing / temp).read_text().splitlines() == [change(k).to_json() for k in (4, 5, 6)]
    FilesTransport(landing, "shop").close()  # the next run cleans up
    assert hidden(landing) == []
    _assert_only_the_first_flush_is_visible(landing)


def test_sigkill_mid_batch_leaves_only_flushed_files(landing: Path) -> None:
    child = _child(landing, "kill")
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    _assert_only_the_first_flush_is_visible(landing)
    assert len(hidden(landing)) == 1
    # The dead process's lock is gone with it: a new run can start at once.
    with FilesTransport(landing, "shop") as transport:
        assert hidden(landing) == []
        transport.send(change(4))
        transport.flush()
    assert len(visible(landing)) == 2
