"""The sink config in the schema file: read back as written, keyed by id, and the stages
that do not apply it yet refuse a table that has one."""

from __future__ import annotations

import pickle

import pytest

from icetide.errors import SchemaError
from icetide.schema.file import schema_from_dict, schema_to_dict
from icetide.schema.sink import refuse_sink, target_schema

DATA = {
    "table": "users",
    "primary_key": ["id"],
    "columns": [
        {"id": 1, "name": "id", "type": "int"},
        {"id": 2, "name": "email", "type": "string"},
        {"id": 3, "name": "prefs", "type": "json"},
    ],
    "sink": {
        "logical": {"email": "x"},
        "columns": {
            "id": {"name": "user_id", "type": "long"},
            "email": {"convert": {"function": "mask", "keep": 2}},
            "prefs": {
                "convert": {
                    "function": "json_text_to_struct",
                    "type": {"struct": [{"id": 9, "name": "a", "type": "long"}]},
                }
            },
        },
    },
}


def test_the_sink_block_round_trips_and_is_kept_by_column_id() -> None:
    schema = schema_from_dict(DATA)
    assert dict(schema.sink.names) == {1: "user_id"}
    assert schema.last_column_id == 9  # the struct's field ids count
    again = schema_from_dict(schema_to_dict(schema))
    assert again == schema and pickle.loads(pickle.dumps(again)) == schema
    renamed = schema.with_columns(
        (
            schema.columns[0],
            schema.columns[1].__class__(2, "mail", schema.columns[1].type),
            schema.columns[2],
        )
    )
    assert target_schema(renamed).columns[1].name == "mail"  # the conversion follows the id
    assert renamed.sink.conversions[2].function == "mask"


def test_a_renamed_stored_column_keeps_its_id_and_key() -> None:
    target = target_schema(schema_from_dict(DATA))
    assert target.primary_key == ("user_id",) and target.key_ids == (1,)
    assert [c.id for c in target.columns] == [1, 2, 3]


def test_bootstrap_and_verify_refuse_a_table_with_sink_columns() -> None:
    with pytest.raises(SchemaError, match="users: bootstrap does not apply the sink config"):
        refuse_sink(schema_from_dict(DATA), "bootstrap")
    plain = {**DATA, "sink": {"logical": {"email": "x"}}}
    refuse_sink(schema_from_dict(plain), "verify")  # logical hints alone are fine


def test_the_settings_of_a_dropped_column_are_moot() -> None:
    schema = schema_from_dict(DATA)
    dropped = schema.with_columns(schema.columns[:2])  # prefs left; its conversion stays
    assert [c.name for c in target_schema(dropped).columns] == ["user_id", "email"]
    assert "prefs" not in schema_to_dict(dropped)["sink"]["columns"]


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        (
            {"email": {"convert": "sha265"}},
            "sink.columns.email.convert: unknown function 'sha265'; did you mean 'sha256'? "
            "(functions: epoch_millis_to_timestamp,",
        ),
        (
            {"emial": {"name": "x"}},
            "sink.columns.emial: no column has this name (the keys are source column names); "
            "did you mean 'email'?",
        ),
        (
            {"id": {"type": "string"}},
            "sink.columns.id.type: the source type int cannot be stored as string",
        ),
        ({"id": {"convert": "trim"}}, "sink.columns.id.convert: a primary-key column cannot"),
        ({"id": {"convert": "lower"}}, "lower takes string, enum, not int"),
        (
            {"email": {"name": "PREFS"}},
            "sink.columns.email.name: stored as 'PREFS', the Iceberg name of column 'prefs' too",
        ),
        ({"email": {"name": "_icetide_x"}}, "names starting with _icetide are reserved"),
        ({"email": {"type": "string", "convert": "sha256"}}, "give either type or convert"),
        (
            {"email": {"convert": {"function": "mask", "keep": -1, "chars": "#"}}},
            "sink.columns.email.convert.chars: unknown argument of mask; it takes keep, char",
        ),
        (
            {"prefs": {"convert": {"function": "json_text_to_struct"}}},
            "sink.columns.prefs.convert.type: required by json_text_to_struct",
        ),
        (
            {
                "prefs": {
                    "convert": {
                        "function": "json_text_to_struct",
                        "type": {"struct": [{"id": 2, "name": "a", "type": "long"}]},
                    }
                }
            },
            "sink.columns.prefs.convert.type: field id 2 is already used",
        ),
        ({"prefs": {"convert": 7}}, "sink.columns.prefs.convert: must be a function name"),
    ],
)
def test_a_wrong_sink_config_names_its_yaml_path_and_the_fix(
    columns: dict[str, object], expected: str
) -> None:
    with pytest.raises(SchemaError) as raised:
        schema_from_dict({**DATA, "sink": {"columns": columns}}, "users.yaml")
    assert expected in str(raised.value), str(raised.value)
