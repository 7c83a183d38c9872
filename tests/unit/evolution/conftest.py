"""A pipeline folder with one table (config and schema file) for apply and CLI tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from icetide.config import load_config
from icetide.pipeline import SchemaStore

CONFIG = """\
pipeline: evo
tables:
  - name: customers
    evolution: {sensitive: ["ssn*"]}
"""
SCHEMA = """\
table: customers
version: 1
primary_key: [id]
columns:
  - {id: 1, name: id, type: long}
  - {id: 2, name: email, type: string}
  - {id: 3, name: amount, type: "decimal(10,2)"}
"""
NEW = """\
table: customers
primary_key: [id]
columns:
  - {id: 1, name: id, type: long}
  - {id: 2, name: mail, type: string}
  - {id: 3, name: amount, type: "decimal(12,2)"}
  - {id: 4, name: note, type: string, default: "n/a"}
  - {id: 5, name: ssn, type: string}
"""
DDL = (
    "ALTER TABLE customers RENAME COLUMN email TO mail;\n"
    "ALTER TABLE customers MODIFY amount DECIMAL(12,2);\n"
    "ALTER TABLE customers ADD COLUMN note VARCHAR(20) DEFAULT 'n/a';\n"
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "icetide.yaml").write_text(CONFIG)
    (tmp_path / "schemas" / "customers.yaml").write_text(SCHEMA)
    (tmp_path / "new.yaml").write_text(NEW)
    (tmp_path / "m.sql").write_text(DDL)
    return tmp_path


@pytest.fixture
def store(folder: Path) -> SchemaStore:
    return SchemaStore(load_config(folder / "icetide.yaml"))
