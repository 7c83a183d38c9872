"""The configuration examples of docs/deploy.md, read as the tests run them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

DEPLOY_DOC = Path(__file__).resolve().parents[1] / "docs" / "deploy.md"


def documented_catalogs() -> dict[str, dict[str, Any]]:
    """The ``catalog:`` sections of docs/deploy.md's YAML examples, by catalog type."""
    blocks = re.findall(r"```yaml\n(.*?)```", DEPLOY_DOC.read_text(), flags=re.DOTALL)
    found = {}
    for block in blocks:
        doc = yaml.safe_load(block)
        if isinstance(doc, dict) and "catalog" in doc:
            found[doc["catalog"]["type"]] = doc["catalog"]
    return found
