"""PostgreSQL array columns in the catalog read, change detection and onboarding: a list
of the element, as deep as ``attndims`` says, element ids placed after the columns; a
column the schema file declares ``json`` (arrays before lists) keeps that declaration
unless ``--retype`` names it, and then the change is a held type change."""

from __future__ import annotations

from icetide.config.tables import TableConfig
from icetide.evolution.classify import candidate_schema, classify
from icetide.evolution.onboard import differences, refreshed
from icetide.evolution.source_schema import Catalog, CatalogColumn, schema_from_catalog
from icetide.schema.file import schema_from_dict
from icetide.schema.model import TableSchema

TABLE = TableConfig(name="labels", source="public.labels")


def catalog(*extra: CatalogColumn) -> Catalog:
    return Catalog(
        (
            CatalogColumn("id", "integer", False, True, None, "postgres"),
            CatalogColumn("tags", "text[]", True, False, None, "postgres", dims=1),
            CatalogColumn("grid", "integer[]", True, False, None, "postgres", dims=2),
            CatalogColumn("moods", '"mood"[]', True, False, None, "postgres", enum=True),
            CatalogColumn("stamps", "timestamp(3) without time zone[]", True, False, None,
                          "postgres"),
            *extra,
        ),
        ("id",),
    )  # fmt: skip


DECLARED_JSON = schema_from_dict(
    {
        "table": "labels",
        "primary_key": ["id"],
        "columns": [
            {"id": 1, "name": "id", "type": "int", "nullable": False},
            {"id": 2, "name": "tags", "type": "json"},
            {"id": 3, "name": "grid", "type": "json"},
            {"id": 4, "name": "moods", "type": "json"},
            {"id": 5, "name": "stamps", "type": "json"},
        ],
        "sink": {"logical": {"stamps": "io.debezium.time.Timestamp"}},
    }
)


def shape(schema: TableSchema) -> list[tuple[int, str, str]]:
    return [(c.id, c.name, str(c.type)) for c in schema.columns]


def test_the_catalog_reads_arrays_as_lists_with_element_ids_after_the_columns() -> None:
    schema = schema_from_catalog(TABLE, catalog())
    assert shape(schema) == [
        (1, "id", "int"),
        (2, "tags", "list<string>"),
        (3, "grid", "list<list<int>>"),
        (4, "moods", "list<string>"),
        (5, "stamps", "list<timestamp>"),
    ]
    grid = schema.by_name["grid"].type
    ids = sorted(schema.field_ids())
    assert ids == list(range(1, 11)) and schema.last_column_id == 10
    assert grid.element_id == 7 and grid.element.element_id == 8  # type: ignore[attr-defined]
    assert schema.sink.logical == {5: "io.debezium.time.Timestamp"}


def test_a_json_declaration_is_kept_until_retype_names_the_column() -> None:
    kept = schema_from_catalog(TABLE, catalog(), DECLARED_JSON)
    assert candidate_schema(DECLARED_JSON, kept) is DECLARED_JSON  # nothing changed
    fresh = schema_from_catalog(TABLE, catalog(), DECLARED_JSON, retype=["TAGS", "grid"])
    new = candidate_schema(DECLARED_JSON, fresh)
    assert [str(new.by_name[n].type) for n in ("tags", "grid", "moods")] == [
        "list<string>",
        "list<list<int>>",
        "json",
    ]
    # The list's element ids are new ones, above the old schema's.
    assert min(new.field_ids() - DECLARED_JSON.field_ids()) > DECLARED_JSON.last_column_id
    changes = {c.id: c for c in classify(DECLARED_JSON, new)}
    assert set(changes) == {"type_change:tags", "type_change:grid"}
    assert all(c.held and c.fill == "resnapshot" for c in changes.values())


def test_a_list_declared_at_another_depth_is_kept() -> None:
    """PostgreSQL does not enforce dimensions: the file's depth is the user's word."""
    declared = schema_from_catalog(TABLE, catalog())
    one_level = schema_from_dict(
        {
            "table": "labels",
            "primary_key": ["id"],
            "columns": [
                *[c for c in _columns(declared) if c["name"] != "grid"],
                {"id": 3, "name": "grid", "type": {"list": {"element_id": 20, "element": "int"}}},
            ],
        }
    )
    again = schema_from_catalog(TABLE, catalog(), one_level)
    assert str(again.by_name["grid"].type) == "list<int>"


def test_onboarding_refresh_keeps_list_ids_and_gives_new_lists_fresh_ones() -> None:
    existing = schema_from_catalog(TABLE, catalog())
    assert differences(existing, schema_from_catalog(TABLE, catalog(), existing)) == []
    wider = catalog(CatalogColumn("codes", "uuid[]", True, False, None, "postgres"))
    new = refreshed(existing, schema_from_catalog(TABLE, wider, existing))
    assert new.by_name["grid"].type == existing.by_name["grid"].type  # ids kept
    codes = new.by_name["codes"]
    assert (codes.id, str(codes.type), new.version) == (11, "list<uuid>", 2)
    assert codes.type.element_id == 12 and new.last_column_id == 12  # type: ignore[attr-defined]
    assert differences(existing, schema_from_catalog(TABLE, wider, existing)) == [
        "codes: add list<uuid>"
    ]


def _columns(schema: TableSchema) -> list[dict[str, object]]:
    from icetide.schema.file import schema_to_dict

    return list(schema_to_dict(schema)["columns"])
