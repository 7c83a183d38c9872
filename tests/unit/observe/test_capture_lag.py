"""Capture lag without a reachable server: status still reports the saved offset and
says why the lag is unknown, for MySQL and PostgreSQL sources alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from icetide.capture.runner import offset_store
from icetide.config import Config, load_config
from icetide.devservers.ports import free_port
from icetide.observe.capture_lag import (
    CaptureLag,
    binlog_lag,
    capture_lag_by_table,
    render_capture_lags,
    source_lag,
)


@pytest.fixture
def config(tmp_path: Path) -> Config:
    down = free_port()
    doc = {
        "pipeline": "lag",
        "sources": [
            {"name": "shop", "type": "mysql", "port": down, "tables": ["orders"]},
            {
                "name": "app",
                "type": "postgres",
                "port": down,
                "database": "app",
                "tables": ["docs"],
            },
        ],
        "tables": [
            {"name": "orders", "source": "shop.orders"},
            {"name": "docs", "source": "public.docs"},
            {"name": "extra", "source": "other.extra"},
        ],
    }
    (tmp_path / "icetide.yaml").write_text(yaml.safe_dump(doc))
    return load_config(tmp_path / "icetide.yaml")


def test_an_unreachable_server_gives_unknown_with_the_reason_and_the_saved_offset(
    config: Config,
) -> None:
    shop, app = config.sources
    offset_store(config, shop).save(
        {"file": "mysql-bin.000008", "pos": 339}, position="mysql-bin.000008:339"
    )
    lags = capture_lag_by_table(config)
    assert set(lags) == {"orders", "docs"}  # "extra" has no source: an external Debezium
    mysql, pg = lags["orders"], lags["docs"]
    assert (mysql.saved_offset, mysql.server_position, mysql.lag_bytes, mysql.state) == (
        "mysql-bin.000008:339",
        None,
        None,
        "unknown",
    )
    assert mysql.saved_at is not None
    assert (
        mysql.reason is not None
        and f"cannot ask the server at 127.0.0.1:{shop.port}" in mysql.reason
    )
    assert (pg.saved_offset, pg.lag_bytes, pg.state) == (None, None, "unknown")
    assert pg.reason is not None and f"127.0.0.1:{app.port}" in pg.reason


def test_a_corrupt_offset_file_is_a_reason_not_a_crash(config: Config) -> None:
    source = config.sources[0]
    path = offset_store(config, source).path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    lag = source_lag(config, source)
    assert lag.state == "unknown" and lag.reason is not None and "corrupt" in lag.reason


def test_binlog_lag_sums_the_rest_of_the_saved_file_and_every_later_one() -> None:
    logs = [("b.000006", 500), ("b.000007", 1_164_605), ("b.000008", 339)]
    # The offset a capture kept before rotations were recorded: end of the last
    # transaction in .000007, while the server is at .000008:339.
    assert binlog_lag("b.000007", 1_164_561, logs) == 44 + 339
    assert binlog_lag("b.000008", 339, logs) == 0
    assert binlog_lag("b.000006", 100, logs) == 400 + 1_164_605 + 339
    assert binlog_lag("b.000005", 4, logs) is None


def test_the_text_report_has_one_line_per_source() -> None:
    shop = CaptureLag("shop", "mysql", "b.000008:339", "t", "b.000008:339", 0)
    behind = CaptureLag("app", "postgres", "0/16B3748", "t", "0/16B5000", 6328)
    down = CaptureLag("down", "mysql", None, None, None, None, "cannot ask the server")
    lines = render_capture_lags([shop, shop, behind, down, None]).splitlines()
    assert [" ".join(line.split()) for line in lines] == [
        "source saved offset server position capture lag",
        "shop b.000008:339 b.000008:339 0 bytes (caught up)",
        "app 0/16B3748 0/16B5000 6,328 bytes (behind)",
        "down - unknown unknown (cannot ask the server)",
    ]
    # Columns line up: every row's server position starts under its header.
    column = lines[0].index("server position")
    starts = ["server", "b.000008:339", "0/16B5000", "unknown"]
    assert all(line[column:].startswith(w) for line, w in zip(lines, starts, strict=True))
    assert render_capture_lags([None]) == ""


def test_a_long_offset_widens_its_column_instead_of_running_into_the_next() -> None:
    gtid = CaptureLag(
        "shop", "mysql", "mysql-bin.000001:10518054, gtid 0-1-13816", None, None, None, "down"
    )
    header, row = render_capture_lags([gtid]).splitlines()
    column = header.index("server position")
    assert (
        row[:column].rstrip()
        == "shop" + " " * (header.index("saved offset") - 4) + gtid.saved_offset
    )
    assert row[column:].startswith("unknown")
