"""Schema files get the config's care: every problem at once, each with its YAML path,
line and a did-you-mean, and never a traceback from the CLI."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from icetide.cli import main
from icetide.config import load_config, load_table_schemas
from icetide.config.loader import load_schema_file
from icetide.errors import ConfigError, SchemaError
from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, parse_type

CONFIG = """\
pipeline: shop
tables:
  - name: customers
  - name: orders
"""

GOOD = """\
table: {table}
primary_key: [id]
columns:
  - {{id: 1, name: id, type: long}}
  - {{id: 2, name: email, type: string}}
"""


@pytest.fixture
def config_file(folder: Path) -> Path:
    (folder / "icetide.yaml").write_text(CONFIG)
    for table in ("customers", "orders"):
        _write(folder, table, GOOD.format(table=table))
    return folder / "icetide.yaml"


def _write(folder: Path, table: str, text: str) -> Path:
    file = folder / "schemas" / f"{table}.yaml"
    file.parent.mkdir(exist_ok=True)
    file.write_text(textwrap.dedent(text))
    return file


def _fail(folder: Path, text: str) -> ConfigError:
    file = _write(folder, "schema", text)
    with pytest.raises(ConfigError) as info:
        load_schema_file(file)
    return info.value


def test_words_where_numbers_belong_are_errors_not_tracebacks(
    folder: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(
        folder,
        "customers",
        """\
        table: customers
        version: latest
        primary_key: [id]
        columns:
          - {id: one, name: id, type: long}
        """,
    )
    assert main(["config", "show", "-c", str(config_file)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"invalid schema file {folder / 'schemas' / 'customers.yaml'}" in err
    assert "(tables[0].schema of the config)" in err
    assert "  version: must be a whole number (got 'latest') (line 2)" in err
    assert "  columns[0].id: must be a whole number (got 'one') (line 5)" in err
    assert "icetide init" in err and "schema infer" not in err


def test_every_problem_of_a_file_is_named_with_path_and_line(folder: Path) -> None:
    error = _fail(
        folder,
        """\
        table: customers
        primary_key: id
        colums: []
        columns:
          - {id: 1, name: id, type: long, nullable: "false"}
          - {id: -2, name: "", type: strin}
          - {id: 3, name: email, type: string, nulable: true}
        """,
    )
    rows = error.message.splitlines()[1:]
    assert rows == [
        "  primary_key: must be a list of column names, e.g. [id] (got 'id') (line 2)",
        "  colums: unknown key; did you mean 'columns'? (line 3)",
        "  columns[0].nullable: must be true or false (without quotes) (got 'false') (line 5)",
        "  columns[1].id: must be at least 1 (got -2) (line 6)",
        "  columns[1].name: must not be empty (got '') (line 6)",
        "  columns[1].type: unknown column type 'strin'; did you mean 'string'? (line 6)",
        "  columns[2].nulable: unknown key; did you mean 'nullable'? (line 7)",
    ]
    assert error.path == "primary_key"
    assert error.hint is not None and "schema infer" not in error.hint


def test_duplicates_a_missing_key_column_and_a_nullable_key_are_errors(folder: Path) -> None:
    error = _fail(
        folder,
        """\
        primary_key: [idd, email, Email]
        columns:
          - {id: 1, name: id, type: long}
          - {id: 1, name: ID, type: string}
          - {id: 3, name: email, type: string, nullable: true}
        """,
    )
    assert error.message.splitlines()[1:] == [
        "  primary_key[0]: no column named 'idd'; did you mean 'id'? (line 1)",
        "  primary_key[2]: no column named 'Email'; did you mean 'email'? (line 1)",
        "  columns[1].id: duplicate id 1 (as columns[0]); ids are unique and never reused (line 4)",
        "  columns[1].name: duplicate column name (as columns[0]; Spark ignores case) (line 4)",
        "  columns[2].nullable: primary-key column 'email' cannot be nullable (line 5)",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "is empty"),
        ("- id\n", "must be a mapping of keys (table, primary_key, columns)"),
        ("primary_key: [id]\ncolumns: []\n", "columns: needs at least one column (line 2)"),
        ("columns:\n  - {id: 1, name: id, type: long}\n", "primary_key: required"),
        ("primary_key: [id]\ncolumns: [{id: 1, name: id}]\n", "columns[0].type: required"),
        ("primary_key: [id]\nprimary_key: [id]\ncolumns: []\n", "duplicate key"),
        ("primary_key: [id\n", "schema.yaml:2:1: invalid YAML"),
        (
            "primary_key: [_icetide_position]\n"
            "columns: [{id: 1, name: _icetide_position, type: long}]\n",
            "columns[0].name: names starting with _icetide are reserved (line 2)",
        ),
    ],
)
def test_malformed_files(folder: Path, text: str, expected: str) -> None:
    assert expected in _fail(folder, text).message


def test_a_key_column_is_not_null_without_saying_so(folder: Path, config_file: Path) -> None:
    schemas = load_table_schemas(load_config(config_file))
    assert [c.nullable for c in schemas["customers"].columns] == [False, True]


def test_problems_of_several_files_are_reported_together(
    folder: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(folder, "customers", GOOD.format(table="customers").replace("id: 2", "id: two"))
    (folder / "schemas" / "orders.yaml").unlink()
    assert main(["config", "show", "-c", str(config_file)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "columns[1].id: must be a whole number (got 'two') (line 5)" in err
    assert "tables[1].schema: schema file" in err and "orders.yaml not found" in err
    assert "schema infer" not in err and "icetide init" in err
    # The fix a missing file points to is a command that exists.
    assert "`icetide onboard` writes it from the source database's catalog" in err


def test_schemas_written_in_code_are_checked_too() -> None:
    with pytest.raises(SchemaError) as info:
        schema_from_dict(
            {"primary_key": "id", "columns": [{"id": 1, "name": "id", "type": "long"}]},
            origin="test",
        )
    assert "primary_key: must be a list of column names, e.g. [id]" in info.value.message
    with pytest.raises(
        SchemaError, match=r"columns\[0\]\.nullable: primary-key column .id. cannot"
    ):
        TableSchema("t", (Column(1, "id", parse_type("long")),), ("id",))
    with pytest.raises(SchemaError, match=r"columns\[1\]\.name: duplicate column name"):
        TableSchema(
            "t",
            (Column(1, "id", parse_type("long"), False), Column(2, "ID", parse_type("long"))),
            ("id",),
        )
    with pytest.raises(SchemaError, match="did you mean 'decimal"):
        parse_type("decimel(3,1)")
