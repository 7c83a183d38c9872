"""When the merge's re-snapshot of a table waits instead of copying, and how it knows a
bootstrap under way is its own (no JVM: these rounds stop before Spark is needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from icetide.bootstrap.resnapshot import resnapshot_round, resnapshot_under_way
from icetide.bootstrap.state import RESNAPSHOT, new_state, save_state, state_path
from icetide.config import Config
from icetide.events.position import lsn_position
from icetide.pipeline import Pipeline
from icetide.progress import Reporter
from icetide.schema.file import schema_from_dict

KEY = {"id": 1, "name": "id", "type": "long"}


def pipeline(tmp_path: Path, lines: list[str]) -> Pipeline:
    config = Config.model_validate(
        {
            "pipeline": "shop",
            "state_dir": "state",
            "sources": [{"name": "inv", "type": "mysql", "tables": ["orders"]}],
            "tables": [{"name": "orders", "source": "inv.orders"}, {"name": "external"}],
        },
        context={"config_dir": tmp_path},
    )
    schemas = {
        name: schema_from_dict(
            {"table": name, "version": 1, "primary_key": ["id"], "columns": [KEY]}, name
        )
        for name in ("orders", "external")
    }
    return Pipeline(config, schemas, Reporter(Reporter.text(lines.append)))


def test_a_table_no_source_captures_waits_and_says_what_to_configure(tmp_path: Path) -> None:
    lines: list[str] = []
    shop = pipeline(tmp_path, lines)
    assert not resnapshot_round(cast(Any, None), shop, "external", chunk_rows=10)
    assert not resnapshot_under_way(shop, "external")
    assert any("re-snapshot external: waiting" in x and "`sources:`" in x for x in lines), lines


def test_another_bootstrap_of_the_source_is_waited_for_and_its_own_is_resumed(
    tmp_path: Path,
) -> None:
    lines: list[str] = []
    shop = pipeline(tmp_path, lines)
    path = state_path(shop.config, shop.config.sources[0])
    other = new_state({"file": "b.000001", "pos": 4}, lsn_position(0))
    save_state(path, other)
    assert not resnapshot_under_way(shop, "orders")
    assert not resnapshot_round(cast(Any, None), shop, "orders", chunk_rows=10)
    assert any(f"waiting for bootstrap {other['id']} of source inv" in x for x in lines), lines
    save_state(path, {**other, RESNAPSHOT: "orders"})
    assert resnapshot_under_way(shop, "orders")
