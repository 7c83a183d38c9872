"""What the ledger says when it sees a schema change: a snapshot's ``DROP TABLE IF EXISTS``
on Debezium's schema-change topic must not read as a dropped table when nothing acts."""

from __future__ import annotations

import json

from icetide.ledger.signals import schema_change_signal, seen_line

# What Debezium's MySQL/MariaDB connector writes on the schema-change topic as its
# snapshot starts (before it re-creates each table).
SNAPSHOT_DROP = {
    "source": {"name": "dbz", "db": "shop", "table": "items", "file": "mysql-bin.000001", "pos": 4},
    "databaseName": "shop",
    "ddl": "DROP TABLE IF EXISTS `shop`.`items`",
    "tableChanges": [],
}


def test_without_sources_a_seen_ddl_says_nothing_was_done() -> None:
    signal = schema_change_signal("items", json.dumps(SNAPSHOT_DROP))
    assert signal is not None
    line = seen_line(signal, acted_on=False)
    assert "DROP TABLE IF EXISTS `shop`.`items`" in line and "nothing done" in line
    assert "change seen" not in line


def test_with_sources_the_detector_acts_and_the_line_says_what_it_saw() -> None:
    signal = schema_change_signal("items", json.dumps(SNAPSHOT_DROP))
    assert signal is not None
    assert seen_line(signal, acted_on=True).startswith("schema items: change seen at ")
