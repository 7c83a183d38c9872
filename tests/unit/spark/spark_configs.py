"""A one-table pipeline config with the ``spark:`` section the test gives: what the
session factory's decisions (heap, class archive, compiler priority) are made from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from icetide.config.model import Config


def config(**spark: Any) -> Config:
    return Config.model_validate(
        {"pipeline": "p", "tables": [{"name": "t", "source": "db.t"}], "spark": spark},
        context={"config_dir": Path("/p")},
    )
