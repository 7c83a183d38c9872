"""A table's schema history keeps every version, never gives an id out twice, keeps the
key by id through a rename, and survives a trip through its YAML file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from icetide.errors import SchemaError
from icetide.schema.history import SchemaHistory
from icetide.schema.model import TableSchema
from icetide.schema.types import Column, ListType, LongType, StringType, StructType

ID = Column(1, "id", LongType(), nullable=False)
EMAIL = Column(2, "email", StringType())
NOTE = Column(3, "note", StringType())
V1 = TableSchema("customers", (ID, EMAIL, NOTE), ("id",))


def _history() -> SchemaHistory:
    return SchemaHistory("customers", (V1,))


def _error(history: SchemaHistory, schema: TableSchema, **kw: bool) -> SchemaError:
    with pytest.raises(SchemaError) as info:
        history.add(schema, **kw)
    return info.value


def test_every_version_is_kept_with_its_schema_id() -> None:
    v2 = V1.with_columns((ID, EMAIL), version=2)
    v3 = v2.with_columns((ID, EMAIL, Column(4, "phone", StringType())), version=3)
    history = _history().add(v2).add(v3)
    assert [s.version for s in history.versions] == [1, 2, 3]
    assert history.current is v3
    assert history.get(1) is V1 and history.get(2) is v2
    with pytest.raises(SchemaError, match="no schema version 7; the history has versions 1 to 3"):
        history.get(7)
    # add() returns a new history; the old one is unchanged.
    assert _history().current is V1


def test_an_id_is_never_reused_even_after_its_column_left() -> None:
    v2 = V1.with_columns((ID, EMAIL), version=2)
    assert v2.last_column_id == 3
    history = _history().add(v2)
    # Column 3 left in version 2; a new column may not take id 3 again.
    reuse = TableSchema(
        "customers", (ID, EMAIL, Column(3, "phone", StringType())), ("id",), version=3
    )
    error = _error(history, reuse)
    assert error.message == (
        "table customers: version 3: reuses an id: id 3 (phone) not in version 2, but ids "
        "up to its last_column_id 3 were given out already"
    )
    assert error.hint == "give a new column or nested field an id above 3"
    # The same column with a fresh id is fine.
    fresh = v2.with_columns((ID, EMAIL, Column(4, "phone", StringType())), version=3)
    assert history.add(fresh).current.last_column_id == 4


def test_a_nested_id_is_never_reused_either() -> None:
    v2 = V1.with_columns((ID, EMAIL), version=2)
    tags = Column(4, "tags", ListType(3, StringType()))  # the element takes dropped id 3
    error = _error(_history().add(v2), v2.with_columns((ID, EMAIL, tags), version=3))
    assert "reuses an id: id 3 (tags.element) not in version 2" in error.message
    address = Column(4, "address", StructType((Column(2, "city", StringType()),)))
    with pytest.raises(SchemaError, match="duplicate id 2"):
        v2.with_columns((ID, EMAIL, address), version=3)  # the model refuses this one itself


def test_last_column_id_never_goes_down() -> None:
    lower = TableSchema("customers", (ID, EMAIL), ("id",), version=2)
    assert lower.last_column_id == 2
    error = _error(_history(), lower)
    assert error.message == (
        "table customers: version 2: last_column_id goes down from 3 to 2; it is the "
        "highest id the table ever used"
    )


def test_the_key_by_id_survives_a_rename() -> None:
    renamed = V1.with_columns(
        (Column(1, "customer_id", LongType(), nullable=False), EMAIL, NOTE), version=2
    )
    history = _history().add(renamed)
    assert history.get(1).primary_key == ("id",)
    assert history.current.primary_key == ("customer_id",)
    assert history.current.key_ids == history.get(1).key_ids == (1,)


def test_a_key_change_needs_saying_so() -> None:
    by_email = TableSchema(
        "customers",
        (ID, Column(2, "email", StringType(), nullable=False), NOTE),
        ("email",),
        version=2,
    )
    error = _error(_history(), by_email)
    assert error.message == (
        "table customers: version 2: the primary key changes from id 1 (id) to id 2 (email)"
    )
    assert error.hint == "if the key is meant to change, add the version with key_change=True"
    history = _history().add(by_email, key_change=True)
    assert history.current.primary_key == ("email",)
    assert history.key_changes == {2}


def test_versions_go_up_by_one_for_the_same_table() -> None:
    skip = V1.with_columns(V1.columns, version=3)
    assert _error(_history(), skip).message == (
        "table customers: version 3: follows version 1; each version is the previous one "
        "plus 1 (expected 2)"
    )
    assert "follows version 1" in _error(_history(), V1).message
    other = V1.renamed("orders").with_columns(V1.columns, version=2)
    assert _error(_history(), other).message == (
        "table customers: version 2: the history of table customers cannot hold a schema "
        "of table orders"
    )
    with pytest.raises(SchemaError, match="cannot hold a schema of table customers"):
        SchemaHistory("orders", (V1,))
    with pytest.raises(SchemaError, match="needs a first version"):
        SchemaHistory("customers", ())


def test_the_history_round_trips_through_one_yaml_file(
    tmp_path: Path, every_type: TableSchema
) -> None:
    history = SchemaHistory(every_type.table, (every_type,))
    address = every_type.by_name["address"]
    assert isinstance(address.type, StructType)
    grown = StructType((*address.type.fields, Column(41, "country", StringType())))
    v2 = every_type.with_columns(
        [Column(c.id, c.name, grown) if c is address else c for c in every_type.columns],
        version=2,
    )
    history = history.add(v2)
    key = every_type.by_name["email"]
    v3 = v2.with_columns(
        [Column(c.id, c.name, c.type, False) if c is key else c for c in v2.columns],
        key_ids=(1, key.id),
        version=3,
    )
    history = history.add(v3, key_change=True)
    text = history.to_yaml()
    loaded = SchemaHistory.from_yaml(text)
    assert loaded == history
    assert loaded.get(2).last_column_id == 41
    assert text.startswith("table: everything\nkey_changes:\n- 3\nversions:\n- version: 1\n")
    assert text.count("table:") == 1


def test_a_loaded_history_is_checked_again(tmp_path: Path) -> None:
    history = _history().add(V1.with_columns((ID, EMAIL), version=2))
    data = history.to_dict()
    reuse = {**data["versions"][1], "version": 3}
    reuse["columns"] = [*reuse["columns"], {"id": 3, "name": "phone", "type": "string"}]
    data["versions"].append(reuse)
    path = tmp_path / "customers.yaml"
    with pytest.raises(SchemaError) as info:
        SchemaHistory.from_yaml(yaml.safe_dump(data), str(path))
    assert info.value.message.startswith(
        f"{path}: table customers: version 3: reuses an id: id 3 (phone)"
    )
    # A bad schema inside names its entry.
    data = history.to_dict()
    data["versions"][0]["columns"][1]["type"] = "strin"
    with pytest.raises(SchemaError) as info:
        SchemaHistory.from_dict(data, "h.yaml")
    assert info.value.message == (
        "h.yaml: versions[0]: columns[1].type: unknown column type 'strin'; did you mean 'string'?"
    )
    # A key change not listed in key_changes is refused on load too.
    data = (
        _history()
        .add(
            TableSchema(
                "customers", (ID, Column(2, "email", StringType(), False), NOTE), ("email",), 2
            ),
            key_change=True,
        )
        .to_dict()
    )
    data["key_changes"] = []
    with pytest.raises(SchemaError, match="h.yaml: table customers: version 2: the primary key"):
        SchemaHistory.from_dict(data, "h.yaml")
    data["key_changes"] = [2, 5]
    with pytest.raises(SchemaError, match="key_changes names version\\(s\\) 5"):
        SchemaHistory.from_dict(data, "h.yaml")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "h.yaml: must be a mapping with table, key_changes and versions"),
        ({"table": "t", "versionz": []}, "h.yaml: must be a mapping with table"),
        ({"versions": []}, "h.yaml: table: must be the table's name"),
        ({"table": "t", "versions": []}, "h.yaml: versions: must be a list of at least one"),
        (
            {"table": "t", "versions": [{"version": 1}], "key_changes": ["2"]},
            "h.yaml: key_changes: must be a list of version numbers",
        ),
        (
            {"table": "t", "versions": [{"table": "t"}]},
            "h.yaml: versions[0]: must be a schema file's content without table:",
        ),
    ],
)
def test_malformed_history_files(data: object, message: str) -> None:
    with pytest.raises(SchemaError) as info:
        SchemaHistory.from_dict(data, "h.yaml")
    assert info.value.message.startswith(message)
