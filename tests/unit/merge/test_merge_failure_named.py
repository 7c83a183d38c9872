"""A table whose merge fails is named in a progress record before the round's failure
goes on to restart the merge task: the status page marks that table failing."""

from __future__ import annotations

from pathlib import Path

import pytest

from icetide.config.example import write_example
from icetide.config.loader import load_config
from icetide.errors import IcetideError
from icetide.merge.stage import MergeResult, MergeStage
from icetide.pipeline import Pipeline
from icetide.progress import Progress, Reporter


def test_a_failed_merge_names_its_table_and_still_fails_the_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_example(tmp_path)
    records: list[Progress] = []
    pipeline = Pipeline(load_config(tmp_path / "icetide.yaml"), reporter=Reporter(records.append))
    names = [t.name for t in pipeline.config.tables]
    broken = names[-1]

    def merge_table(self: MergeStage, name: str, turn: object = None) -> MergeResult:
        if name == broken:  # the engine's failure, without an engine: no Spark here
            raise IcetideError("the base table cannot be read\nits metadata file is gone")
        return MergeResult(name, 0, None, None, 0.0)

    monkeypatch.setattr(MergeStage, "merge_table", merge_table)
    stage = MergeStage(None, pipeline)  # type: ignore[arg-type]
    with pytest.raises(IcetideError, match="cannot be read"):
        stage.run_once()
    failed = [r for r in records if "failed" in r.figures]
    assert [(r.stage, r.table, r.figures["failed"]) for r in failed] == [
        ("merge", broken, "the base table cannot be read")
    ]
