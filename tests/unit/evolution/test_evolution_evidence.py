"""Evidence from source DDL (sqlglot, MySQL and PostgreSQL forms) and from capture's
MySQL schema history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icetide.capture.mysql.history import DdlHistory, HistoryEntry
from icetide.errors import SchemaChangeError
from icetide.evolution.evidence import collect, from_mysql_history, parse_ddl

CASES: list[tuple[str, str, list[dict[str, Any]]]] = [
    (
        "mysql",
        "ALTER TABLE shop.t ADD COLUMN note VARCHAR(64) DEFAULT 'x' AFTER name",
        [
            {
                "kind": "add",
                "column": "note",
                "icetide_type": "string",
                "default": "x",
                "after": "name",
            }
        ],
    ),
    (
        "mysql",
        "ALTER TABLE t ADD COLUMN n INT NOT NULL DEFAULT -1 FIRST",
        [{"kind": "add", "column": "n", "nullable": False, "default": -1, "first": True}],
    ),
    (
        "mysql",
        "ALTER TABLE t CHANGE COLUMN qty quantity BIGINT NOT NULL",
        [
            {"kind": "rename", "column": "qty", "new_name": "quantity"},
            {"kind": "type", "column": "quantity", "icetide_type": "long", "nullable": False},
        ],
    ),
    (
        "mysql",
        "ALTER TABLE t CHANGE a a INT UNSIGNED",
        [{"kind": "type", "column": "a", "icetide_type": "long"}],
    ),
    (
        "mysql",
        "ALTER TABLE t MODIFY amount DECIMAL(12,2) NULL",
        [{"kind": "type", "column": "amount", "icetide_type": "decimal(12,2)", "nullable": True}],
    ),
    (
        "mysql",
        "ALTER TABLE `t` RENAME COLUMN `a` TO `b`",
        [{"kind": "rename", "column": "a", "new_name": "b"}],
    ),
    (
        "mysql",
        "ALTER TABLE t DROP a, ADD b TEXT",
        [{"kind": "drop", "column": "a"}, {"kind": "add", "column": "b", "icetide_type": "string"}],
    ),
    (
        "mysql",
        "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, email)",
        [{"kind": "key", "key": []}, {"kind": "key", "key": ["id", "email"]}],
    ),
    (
        "mysql",
        "ALTER TABLE t ADD COLUMN ts DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6)",
        [
            {
                "kind": "add",
                "column": "ts",
                "icetide_type": "timestamp",
                "default": {"sql": "CURRENT_TIMESTAMP(6)"},
            }
        ],
    ),
    (
        "postgres",
        "ALTER TABLE public.t ALTER COLUMN a TYPE bigint",
        [{"kind": "type", "column": "a", "icetide_type": "long"}],
    ),
    (
        "postgres",
        "ALTER TABLE t ALTER COLUMN a SET DATA TYPE numeric(12,2) USING a::numeric",
        [{"kind": "type", "column": "a", "icetide_type": "decimal(12,2)"}],
    ),
    (
        "postgres",
        "ALTER TABLE t RENAME COLUMN a TO b",
        [{"kind": "rename", "column": "a", "new_name": "b"}],
    ),
    (
        "postgres",
        "ALTER TABLE t RENAME a TO b",
        [{"kind": "rename", "column": "a", "new_name": "b"}],
    ),
    ("postgres", "ALTER TABLE t RENAME TO u", []),
    (
        "postgres",
        "ALTER TABLE t ADD COLUMN b int DEFAULT 5 NOT NULL",
        [{"kind": "add", "column": "b", "default": 5, "nullable": False}],
    ),
    (
        "postgres",
        "ALTER TABLE t ADD COLUMN s text DEFAULT 'new'::text",
        [{"kind": "add", "column": "s", "default": "new"}],
    ),
    (
        "postgres",
        "ALTER TABLE t ALTER COLUMN a DROP NOT NULL",
        [{"kind": "nullability", "column": "a", "nullable": True}],
    ),
    (
        "postgres",
        "ALTER TABLE t ALTER COLUMN a SET NOT NULL",
        [{"kind": "nullability", "column": "a", "nullable": False}],
    ),
    (
        "postgres",
        "ALTER TABLE t ALTER COLUMN a SET DEFAULT 'z'",
        [{"kind": "default", "column": "a", "default": "z"}],
    ),
    (
        "postgres",
        "ALTER TABLE t DROP CONSTRAINT t_pkey, ADD PRIMARY KEY (id, b)",
        [{"kind": "key", "key": []}, {"kind": "key", "key": ["id", "b"]}],
    ),
    (
        "postgres",
        "ALTER TABLE t DROP COLUMN IF EXISTS b CASCADE",
        [{"kind": "drop", "column": "b"}],
    ),
    ("postgres", "CREATE INDEX i ON t (a)", []),
]


@pytest.mark.parametrize("dialect,sql,expected", CASES, ids=[c[1][:60] for c in CASES])
def test_each_ddl_form_gives_its_evidence(
    dialect: str, sql: str, expected: list[dict[str, Any]]
) -> None:
    items = [e.to_json() for e in parse_ddl(sql, dialect)]  # type: ignore[arg-type]
    assert len(items) == len(expected)
    for item, want in zip(items, expected, strict=True):
        for key, value in want.items():
            assert item.get(key) == value, (sql, key, item)


def test_statements_on_other_tables_give_no_evidence() -> None:
    assert parse_ddl("ALTER TABLE other RENAME COLUMN a TO b", "mysql", "t") == ()
    assert len(parse_ddl("ALTER TABLE shop.T RENAME COLUMN a TO b", "mysql", "t")) == 1


def test_unreadable_ddl_is_kept_aside_not_guessed() -> None:
    ev = collect(["ALTER TABLE t ADD COLUMN (x INT, y TEXT)", "ALTER TABLE t DROP z"], "mysql", "t")
    assert [e.kind for e in ev.items] == ["drop"]
    assert ev.unparsed == ("ALTER TABLE t ADD COLUMN (x INT, y TEXT)",)
    with pytest.raises(SchemaChangeError, match="cannot parse mysql DDL"):
        parse_ddl("ALTER TABLE t ADD COLUMN (x INT, y TEXT)", "mysql")


def test_renames_follow_chains_and_ignore_a_rename_back() -> None:
    ev = collect(
        [
            "ALTER TABLE t RENAME COLUMN a TO b",
            "ALTER TABLE t CHANGE b c INT",
            "ALTER TABLE t RENAME COLUMN x TO y",
            "ALTER TABLE t RENAME COLUMN y TO x",
        ],
        "mysql",
    )
    assert ev.renames() == {"a": "c"}


def test_mysql_evidence_comes_from_capture_schema_history(tmp_path: Path) -> None:
    history = DdlHistory(tmp_path / "src.history.jsonl")

    def ddl(position: int, table: str, sql: str) -> None:
        history.record(
            HistoryEntry("ddl", "shop", table, f"bin.1:{position}:0", position, None, 0, sql)
        )

    ddl(10, "customers", "ALTER TABLE customers RENAME COLUMN email TO mail")
    ddl(20, "orders", "ALTER TABLE orders RENAME COLUMN a TO b")
    ddl(30, "customers", "ALTER TABLE shop.customers ADD COLUMN note TEXT")
    ev = from_mysql_history(tmp_path / "src.history.jsonl", "shop", "customers")
    assert [(e.kind, e.column) for e in ev.items] == [("rename", "email"), ("add", "note")]
    later = from_mysql_history(
        tmp_path / "src.history.jsonl", "shop", "customers", after_position=10
    )
    assert [e.kind for e in later.items] == ["add"]
    assert not from_mysql_history(tmp_path / "missing.jsonl", "shop", "customers")
