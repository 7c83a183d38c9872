"""Messages recorded from the real Debezium connectors (data/debezium_recorded/README.md),
through the same steps the ledger takes: the inline schema walked, each message
projected by the table's schema and the connector's declared settings."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from icetide.config import Config
from icetide.evolution.carried import UNREADABLE_SCHEMA, VersionWalker, inline_candidate
from icetide.ledger.decode import (
    DEAD,
    ROW,
    Projection,
    inline_row_schema,
    project_one,
    schema_key,
)
from icetide.pipeline import Pipeline
from icetide.schema.connector import DEBEZIUM_DEFAULTS, ConnectorSettings, read_hints
from icetide.schema.contract import ledger as c
from icetide.schema.convert.mysql import icetide_type as mysql_type
from icetide.schema.convert.postgres import icetide_type as postgres_type
from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema

DATA = Path(__file__).parent / "data" / "debezium_recorded"


def _raw(name: str) -> bytes:
    return (DATA / name).read_bytes().strip()


def _schema(table: str, columns: list[tuple[str, str]], mapping: Any) -> TableSchema:
    """The schema ``onboard`` writes from these source column types (with their hints)."""
    entries, logical = [], {}
    for number, (name, source_type) in enumerate(columns, start=1):
        ctype, hint = mapping(source_type)
        entries.append({"id": number, "name": name, "type": str(ctype)})
        if hint:
            logical[name] = hint
    doc = {"table": table, "primary_key": ["id"], "columns": entries}
    return schema_from_dict({**doc, "sink": {"logical": logical}})


MARIADB = _schema(
    "scores",
    [
        ("id", "int"),
        ("score", "double"),
        ("ratio", "float"),
        ("price", "decimal(10,2)"),
        ("big", "decimal(10,2)"),
        ("note", "varchar(10)"),
    ],
    mysql_type,
)
POSTGRES = _schema(
    "scores",
    [
        ("id", "integer"),
        ("score", "double precision"),
        ("price", "numeric(10,2)"),
        ("amount", "numeric"),
        ("ts3", "timestamp(3) without time zone"),
        ("t3", "time(3) without time zone"),
        ("ts6", "timestamp without time zone"),
    ],
    postgres_type,
)


def _project(name: str, schema: TableSchema, settings: ConnectorSettings) -> dict[str, Any]:
    row = project_one(_raw(name), Projection(schema, hints=read_hints(schema, settings)))
    assert row["_status"] == ROW, row
    return dict(row[c.AFTER])


@pytest.mark.parametrize("name", ["mariadb_with_schema_r.json", "mariadb_with_schema_u.json"])
def test_jsonconverter_double_and_float_are_read(name: str) -> None:
    # JsonConverter names them "double" and "float": the schema walk must read them.
    inline = inline_row_schema(json.loads(_raw(name)))
    assert inline is not None
    kinds = {f["field"]: f["type"] for f in inline["fields"]}
    assert (kinds["score"], kinds["ratio"]) == ("double", "float")
    assert inline_candidate(MARIADB, inline) is None  # the same table: nothing to apply


def test_schemaless_precise_decimals_are_their_value_not_their_base64_text() -> None:
    for name in ("mariadb_schemaless_r.json", "mariadb_schemaless_u.json"):
        after = _project(name, MARIADB, DEBEZIUM_DEFAULTS)
        # "1234" and "1E10" are base64: read as numbers they were 1234 and a dead letter.
        assert (after["price"], after["big"]) == (Decimal("-26588.24"), Decimal("-28637.56"))
        assert after["score"] in (1.5, 2.5) and after["ratio"] == 0.25


def test_with_schema_and_schemaless_give_the_same_row() -> None:
    for source, schema in (("mariadb", MARIADB), ("postgres", POSTGRES)):
        for op in ("r", "u"):
            typed = _project(f"{source}_with_schema_{op}.json", schema, DEBEZIUM_DEFAULTS)
            plain = _project(f"{source}_schemaless_{op}.json", schema, DEBEZIUM_DEFAULTS)
            assert typed == plain, (source, op)


def test_postgres_adaptive_times_and_a_numeric_without_scale() -> None:
    after = _project("postgres_schemaless_u.json", POSTGRES, DEBEZIUM_DEFAULTS)
    assert after["price"] == Decimal("-26588.24")
    assert after["amount"] == "3.14159"  # {scale: 5, value: "BMsv"}, kept as its text
    # timestamp(3) and time(3) arrive in milliseconds, timestamp in microseconds.
    assert after["ts3"] == datetime(2024, 1, 2, 3, 4, 5, 123000)
    assert after["t3"] == "12:34:56.789000"  # Spark has no time type: its text
    assert after["ts6"] == datetime(2024, 1, 2, 3, 4, 5, 123456)


def test_a_declared_mode_the_connector_did_not_use_is_a_dead_letter_not_a_wrong_value() -> None:
    # Declared "string", sent precise: "1234" must not become 1234.00.
    settings = ConnectorSettings(decimal_handling_mode="string")
    raw = _raw("mariadb_schemaless_u.json")
    row = project_one(raw, Projection(MARIADB, hints=read_hints(MARIADB, settings)))
    assert row["_status"] == DEAD and row["_reason"] == "type_mismatch", row


def test_an_unreadable_inline_schema_refuses_its_messages_only(tmp_path: Path) -> None:
    doc = {"pipeline": "p", "tables": [{"name": "scores", "source": "shop.scores"}]}
    config = Config.model_validate(doc, context={"config_dir": tmp_path})
    walker = VersionWalker(None, Pipeline(config, {"scores": MARIADB}))  # type: ignore[arg-type]
    message = json.loads(_raw("mariadb_with_schema_u.json"))
    inline = inline_row_schema(message)
    assert inline is not None
    inline["fields"][1]["type"] = "float128"  # a type no converter writes
    raw = json.dumps(message).encode()
    key = schema_key(raw, message)
    assert key is not None
    refused = walker.take_inline("scores", key, inline)  # no exception: a refusal
    reason, text = refused[key]
    assert reason == UNREADABLE_SCHEMA
    assert "score" in text and "float128" in text and "icetide dlt replay scores" in text
    # The stage projects with the refusals: that message is a dead letter, others flow.
    row = project_one(raw, MARIADB, refused=refused)
    assert (row["_status"], row["_reason"]) == (DEAD, UNREADABLE_SCHEMA)
    other = project_one(_raw("mariadb_with_schema_u.json"), MARIADB, refused=refused)
    assert other["_status"] == ROW
